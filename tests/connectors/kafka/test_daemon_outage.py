"""A broker outage while the daemon runs: readiness, the lag and the broker-contact gauge show it.

On an idle stream nothing fails when the broker goes away (polls return nothing), so the daemon
dates its last round trip with the broker and, while no records come, makes one itself: after
``kafka.contact_timeout_seconds`` without one it is not ready (the reason names the brokers) and its
lag is unknown, until the broker answers again.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

from connectors.kafka.broker import Broker
from connectors.kafka.clients import ensure_topics
from connectors.kafka.config import KAFKA_CLIENTS, load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.transport import TopicPartition, TransportError
from connectors.prometheus import READY_PATH, make_observer
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import EventLog, ensure_topics_for, messages, produce_messages, settings

#: The daemon's limit in the broker test: short, so that the outage shows within seconds.
CONTACT_TIMEOUT_S = 3.0


@pytest.fixture
def broker():
    """A broker of the test's own (the session's is shared): the test stops it and starts it again."""
    with Broker() as started:
        yield started


def readiness(port: int) -> tuple[int, str]:
    """``/readyz``'s status and body."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{READY_PATH}", timeout=5) as response:
            return response.status, response.read().decode().strip()
    except urllib.error.HTTPError as error:
        with error:
            return error.code, error.read().decode().strip()


@pytest.mark.kafka
@pytest.mark.parametrize("client", KAFKA_CLIENTS)
def test_a_broker_outage_makes_the_daemon_unready_naming_the_broker_and_its_lag_unknown(broker, client):
    values = settings(broker, f"outage-ready-{client}", **{
        "kafka.client": client, "kafka.contact_timeout_seconds": CONTACT_TIMEOUT_S, "metrics.host": "127.0.0.1"})
    config = ensure_topics_for(broker, values)
    log = EventLog(f"outage-ready-{client}")
    observer = make_observer(config)  # metrics.port = 0: a free port
    port = observer.server.port
    daemon = Daemon(config, [observer], log.logger)
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    get = observer.registry.get_sample_value

    def lags() -> dict[int, float | None]:
        return {p: get("streamfair_consumer_lag_records", {"partition": str(p)}) for p in range(3)}

    def context():
        return log.events[-8:]

    try:
        produce_messages(broker, config.topics.input, messages(60, seed=70))
        wait_for(lambda: daemon.stats.consumed == 60 and readiness(port) == (200, "ready")
                 and lags() == {0: 0, 1: 0, 2: 0}, 60, "the daemon ready and caught up", context=context)
        broker.stop()
        stopped = time.monotonic()
        assert readiness(port) == (200, "ready")  # a moment without the broker is no outage yet

        # (librdkafka also drops the partitions after the session timeout: "no partition assigned" may come first)
        expected = f"not ready: no round trip with the broker ({broker.bootstrap}) for "
        status, reason = wait_for(lambda: (lambda answer: answer[1].startswith(expected) and answer)(readiness(port)),
                                  CONTACT_TIMEOUT_S + 10, "readiness to name the broker", interval=0.05,
                                  context=lambda: (readiness(port), context()))
        noticed = time.monotonic() - stopped
        assert status == 503 and CONTACT_TIMEOUT_S - 1.5 < noticed < CONTACT_TIMEOUT_S + 1.5, (noticed, reason)
        assert reason.endswith(f"(kafka.contact_timeout_seconds = {CONTACT_TIMEOUT_S:g})"), reason
        assert get("streamfair_ready", {}) == 0 and not daemon.ready
        assert get("streamfair_broker_last_contact_seconds", {}) > CONTACT_TIMEOUT_S
        # the lag is unknown, not 0 as if the consumer kept up: no series at all
        wait_for(lambda: lags() == {0: None, 1: None, 2: None}, 5, "the lag series to go", interval=0.05)
        [silent] = wait_for(lambda: log.fields("broker_silent"), 5, "the broker_silent warning")
        assert silent["brokers"] == [broker.bootstrap] and silent["limit_s"] == CONTACT_TIMEOUT_S

        broker.start()  # the same port; memory storage: the topics are created again
        ensure_topics(config)
        wait_for(lambda: readiness(port) == (200, "ready"), 60, "readiness to come back", context=context)
        assert get("streamfair_broker_last_contact_seconds", {}) < CONTACT_TIMEOUT_S
        assert get("streamfair_ready", {}) == 1 and log.fields("broker_answering")
    finally:
        daemon.stop()
        thread.join(20)
        observer.close()
    assert not thread.is_alive()


# ---------------------------------------------------------------------------- the timing rule (a fake clock)
class Restorer:
    """The daemon's changelog reader, as far as its requests to the broker go: answered or not."""

    def __init__(self):
        self.answering = True
        self.requests: list[tuple[float, list[TopicPartition], int | None]] = []
        self.clock = 0.0  # the test's time of the request

    def beginning_offsets(self, partitions, timeout_ms=None):
        self.requests.append((self.clock, list(partitions), timeout_ms))
        if not self.answering:
            raise TransportError("KafkaTimeoutError: Failed to get offsets by timestamps in 2000 ms")
        return dict.fromkeys(partitions, 0)


def daemon_at(start: float, *overrides: str) -> tuple[Daemon, Restorer, EventLog]:
    """A daemon started at ``start`` (its last round trip then), whose requests go to a :class:`Restorer`."""
    log = EventLog("contact")
    daemon = Daemon(load_config(env={}, overrides=["topics.input=orders", *overrides]), logger=log.logger)
    daemon.stats.started = daemon.stats.last_contact = start
    restorer = daemon._restorer = Restorer()
    return daemon, restorer, log


def probe_at(daemon: Daemon, restorer: Restorer, now: float) -> None:
    restorer.clock = now
    daemon.probe_broker(now)


def test_while_nothing_else_answers_the_daemon_asks_the_broker_every_third_of_the_limit():
    daemon, restorer, log = daemon_at(1000.0)  # kafka.contact_timeout_seconds = 30 (the default)
    probe_at(daemon, restorer, 1009.9)
    assert restorer.requests == []  # records or a checkpoint came less than 10 s ago
    probe_at(daemon, restorer, 1010.0)
    assert restorer.requests == [(1010.0, [TopicPartition("orders", 0)], 2000)]
    assert daemon.stats.last_contact == 1010.0  # answered: a round trip
    daemon.stats.last_contact = 1015.0  # records fetched meanwhile: no request needed
    probe_at(daemon, restorer, 1024.9)
    assert len(restorer.requests) == 1
    probe_at(daemon, restorer, 1025.0)
    assert len(restorer.requests) == 2 and daemon.stats.last_contact == 1025.0
    assert not log.events  # the broker never went silent


def test_readiness_goes_only_after_the_limit_without_an_answer_and_comes_back_with_one():
    daemon, restorer, log = daemon_at(1000.0)
    probe_at(daemon, restorer, 1010.0)  # answered: the last round trip
    restorer.answering = False  # the broker goes away
    for now in (1012.0, 1020.0, 1025.0, 1030.0, 1040.0):
        probe_at(daemon, restorer, now)
        assert daemon.stats.broker_silence(30.0, now) is None  # a slow or failed request or two: still ready
    assert [at for at, _, _ in restorer.requests] == [1010.0, 1020.0, 1030.0, 1040.0]  # no retry in a loop
    assert daemon.stats.last_contact == 1010.0 and not log.events
    probe_at(daemon, restorer, 1040.5)
    assert daemon.stats.broker_silence(30.0, 1040.5) == 30.5
    [silent] = log.fields("broker_silent")
    assert silent == {"brokers": ["127.0.0.1:9092"], "seconds": 30.5, "limit_s": 30.0,
                      "effect": "not ready, and the lag unknown, until the broker answers again"}
    probe_at(daemon, restorer, 1045.0)
    assert len(log.fields("broker_silent")) == 1  # said once
    restorer.answering = True
    probe_at(daemon, restorer, 1050.0)
    assert daemon.stats.last_contact == 1050.0 and daemon.stats.broker_silence(30.0, 1050.0) is None
    assert [event for event, _ in log.events] == ["broker_silent", "broker_answering"]


def test_the_request_waits_no_longer_than_the_interval_between_requests():
    daemon, restorer, _ = daemon_at(1000.0, "kafka.contact_timeout_seconds=1.5")
    probe_at(daemon, restorer, 1000.5)
    assert restorer.requests == [(1000.5, [TopicPartition("orders", 0)], 500)]
