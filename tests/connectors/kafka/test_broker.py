"""The bundled Tansu broker: the Broker context manager and ``streamfair broker``."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from connectors.kafka.broker import Broker, free_port, tansu_binary
from tests.support import REPO

pytestmark = pytest.mark.kafka  # every test starts its own broker


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, not yet reaped by its parent) counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


def test_binary_is_the_bundled_tansu():
    output = subprocess.run([str(tansu_binary()), "--version"], capture_output=True, text=True, check=True).stdout
    assert output.startswith("tansu ")


def test_broker_serves_kafka_on_loopback_and_stops_by_pid():
    with Broker() as broker:
        pid = broker.pid
        host, port = broker.bootstrap.split(":")
        assert host == "127.0.0.1" and _alive(pid)
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics({"probe": {"num_partitions": 2, "replication_factor": 1}})
        assert "probe" in admin.list_topics()
        admin.close()
    assert not _alive(pid)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=0.5).close()


def test_restart_on_the_same_port_starts_empty():
    broker = Broker(port=free_port()).start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics({"kept": {"num_partitions": 1, "replication_factor": 1}})
        admin.close()
        port = broker.port
        broker.stop()
        broker.start()
        assert broker.port == port
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        assert "kept" not in admin.list_topics()  # memory storage
        admin.close()
    finally:
        broker.stop()


def test_a_taken_port_is_an_error_not_a_hang():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(RuntimeError, match=f"port {port} on 127.0.0.1 is taken"):
            Broker(port=port, ready_timeout=5).start()
        assert time.monotonic() - started < 1


def test_a_temporary_log_is_deleted_and_a_given_log_kept(tmp_path):
    broker = Broker().start()
    temporary = broker.log_path
    assert temporary.is_file()
    broker.stop()
    assert not temporary.exists() and broker.log_path is None
    given = tmp_path / "tansu.log"
    with Broker(log_path=given):
        pass
    assert given.is_file()


@pytest.mark.parametrize("port", [0, 70000, "9092"])
def test_invalid_port(port):
    with pytest.raises(ValueError, match="port"):
        Broker(port=port)


@pytest.mark.parametrize("port", ["70000", "-1", "x"])
def test_the_command_says_what_is_wrong_with_a_port_without_a_traceback(port, capsys):
    from connectors.cli.commands import main

    with pytest.raises(SystemExit) as exit_info:
        main(["broker", "--port", port])
    assert exit_info.value.code == 2
    assert f"streamfair broker: error: argument --port: must be an integer in 0..65535, got '{port}'" in (
        capsys.readouterr().err)


def test_cli_runs_until_sigterm_and_cleans_up(tmp_path):
    pid_file = tmp_path / "tansu.pid"
    process = subprocess.Popen([sys.executable, "-m", "connectors.cli", "broker", "--port", "0", "--pid-file",
                                str(pid_file)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    match = re.search(r"ready on (127\.0\.0\.1:\d+), pid (\d+)", line)
    assert match, line
    tansu_pid = int(match.group(2))
    assert int(pid_file.read_text()) == tansu_pid and _alive(tansu_pid)
    admin = KafkaAdminClient(bootstrap_servers=match.group(1))
    assert admin.list_topics() == []
    admin.close()
    process.send_signal(signal.SIGTERM)
    assert process.wait(10) == 0
    assert not _alive(tansu_pid) and not pid_file.exists()


def test_the_broker_dies_with_the_process_that_started_it(tmp_path):
    code = (
        f"from connectors.kafka.broker import Broker; import os, time; b = Broker(log_path={str(tmp_path / 'log')!r})"
        ".start(); print(b.pid, flush=True); time.sleep(60)"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=REPO, stdout=subprocess.PIPE, text=True)
    tansu_pid = int(parent.stdout.readline())
    assert _alive(tansu_pid)
    parent.kill()  # no clean-up code runs
    parent.wait()
    deadline = time.monotonic() + 5
    while _alive(tansu_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(tansu_pid)
