"""What an operator sees: connection trouble, progress, idle members, and a clean exit on SIGTERM."""

from __future__ import annotations

import signal
import time

import pytest

from connectors.kafka.broker import Broker, free_port
from tests.support.daemon_process import DaemonProcess, wait_for
from tests.support.kafka_daemon import (
    ensure_topics_for,
    messages,
    produce,
    produce_messages,
    read_topic,
    settings,
    write_toml,
)


class Absent:
    """A bootstrap address where no broker listens."""

    bootstrap = f"127.0.0.1:{free_port()}"


@pytest.mark.kafka
def test_without_a_broker_trouble_is_logged_once_per_retry_and_sigterm_exits_0(tmp_path):
    values = settings(Absent, "absent", **{"log.level": "INFO"})
    daemon = DaemonProcess(write_toml(tmp_path / "absent.toml", values))
    started = time.monotonic()
    wait_for(lambda: daemon.named("broker_unavailable"), 8, "the first broker_unavailable line", interval=0.05)
    first = time.monotonic() - started
    time.sleep(3.0)
    stopping = time.monotonic()
    assert daemon.stop(signal.SIGTERM, timeout=15) == 0
    assert time.monotonic() - stopping < 7  # within the bootstrap wait, long before the 9.5 s watchdog
    assert first < 7  # the first line comes after one bootstrap wait (5 s), not kafka-python's 30 s
    unavailable = daemon.named("broker_unavailable")
    assert all(e["level"] == "warning" and "retry_in_s" in e for e in unavailable)
    kafka_lines = [e for e in daemon.events if str(e.get("logger", "")).startswith("kafka")]
    elapsed = time.monotonic() - started
    assert len(kafka_lines) <= 1 + elapsed / 10  # kafka-python's own errors: at most one per 10 s
    assert daemon.named("stopped") and not daemon.named("shutdown_timeout")


def test_progress_lines_report_rates_lag_and_dead_letters(kafka_broker, tmp_path):
    values = settings(kafka_broker, "progress", **{"log.level": "INFO", "log.progress_seconds": 1.0})
    config = ensure_topics_for(kafka_broker, values)
    daemon = DaemonProcess(write_toml(tmp_path / "progress.toml", values))
    daemon.wait_restored({0, 1, 2})
    produce_messages(kafka_broker, config.topics.input, messages(600, seed=60))
    produce(kafka_broker, config.topics.input, [(0, b"bad", b"{oops", None), (1, b"bad", b"[]", None)])
    wait_for(lambda: any(e["consumed"] == 602 for e in daemon.named("progress")), 20, "a progress line with all")
    assert daemon.stop(signal.SIGTERM) == 0
    lines = daemon.named("progress")
    last = [e for e in lines if e["consumed"] == 602][0]
    assert last["level"] == "info" and last["partitions"] == [0, 1, 2] and last["produced"] == 600
    assert last["dead_letters"] == {"invalid_json": 1, "not_object": 1} and last["lag"] == {"0": 0, "1": 0, "2": 0}
    assert sum(e["consumed_per_s"] * e["interval_s"] for e in lines) > 590  # rates over the intervals add up
    assert not [e for e in daemon.events if e["level"] == "debug"]  # INFO shows progress, not per-message lines


def test_a_member_without_partitions_says_so_after_the_session_timeout(kafka_broker, tmp_path):
    values = settings(kafka_broker, "idle", **{"log.level": "INFO", "topics.partitions": 1})
    ensure_topics_for(kafka_broker, values)
    path = write_toml(tmp_path / "idle.toml", values)
    first = DaemonProcess(path)
    first.wait_restored({0})
    second = DaemonProcess(path)  # one partition, two members: one of them gets nothing
    wait_for(lambda: second.named("started"), 30, "the second member's start")  # its signal handlers are set
    # The rebalance gives the only partition to either member (the assignor's choice), so either may be idle.
    idle = wait_for(lambda: first.named("no_assignment") + second.named("no_assignment"), 30,
                    "the idle member's warning")[0]
    assert idle["level"] == "warning" and idle["seconds"] >= 3.0 and "kafka.group_id" in idle["check"]
    assert idle["partitions"] == 1 and idle["group_id"] == values["kafka.group_id"]
    assert second.stop(signal.SIGTERM) == 0 and first.stop(signal.SIGTERM) == 0


@pytest.mark.kafka
def test_sigterm_after_the_broker_went_away_exits_0(tmp_path):
    with Broker() as broker:
        values = settings(broker, "gone", **{"log.level": "INFO", "processing.checkpoint_every_seconds": 600,
                                             "processing.checkpoint_every_messages": 100_000})  # all in hand
        config = ensure_topics_for(broker, values)
        daemon = DaemonProcess(write_toml(tmp_path / "gone.toml", values))
        daemon.wait_restored({0, 1, 2})
        produce_messages(broker, config.topics.input, messages(300, seed=61))
        wait_for(lambda: len(read_topic(broker, config.topics.output)) == 300, 20, "the outputs")
        broker.stop()
        time.sleep(1.0)
        stopping = time.monotonic()
        assert daemon.stop(signal.SIGTERM, timeout=15) == 0
        assert time.monotonic() - stopping < 9.5 and not daemon.named("shutdown_timeout")
        assert daemon.named("stopped")[0]["ok"] is False and daemon.named("final_checkpoint_failed")
