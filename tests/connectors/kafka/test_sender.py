"""The sender's counters count what was queued: nothing after the interval failed (a pure-logic unit test).

The producer is a stand-in that records sends and fails on demand; the daemon's tests run the
real clients against the bundled broker.
"""

from __future__ import annotations

import json
import logging

import pytest

from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.confluent_clients import ConfluentProducer
from connectors.kafka.observer import DaemonStats
from connectors.kafka.partitions import SyntheticRecord
from connectors.kafka.records import DeadLetter, Output, TaskResult
from connectors.kafka.sender import Sender
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import RecordRefused, RecordTooLarge, TransportError
from streamfair import FairRegressionPostProcessor
from tests.support.kafka_daemon import OneProducer


class RecordingProducer:
    """Queues into ``sent``; raises ``TransportError`` while ``broken``, and ``refuse[key]`` for that key."""

    def __init__(self, refuse: dict[bytes, Exception] | None = None):
        self.sent: list[tuple[str, bytes | None]] = []
        self.broken = False
        self.refuse = refuse or {}

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if self.broken:
            raise TransportError("broker away")
        if key in self.refuse:
            raise self.refuse[key]
        self.sent.append((topic, value))


def sender_with(producer: RecordingProducer) -> tuple[Sender, DaemonStats, list]:
    stats, notified = DaemonStats(), []
    sender = Sender(load_config(env={}), OneProducer(producer), stats, logging.getLogger("test.sender"),
                    lambda *event: notified.append(event))
    sender.renew()
    return sender, stats, notified


def poll(first: int) -> TaskResult:
    records = [SyntheticRecord("streamfair.input", 0, offset, -1, None, b"{}", []) for offset in (first, first + 1)]
    outputs = [Output(records[0], b"a", b'{"id":"a"}', -1, 0, None)]
    return TaskResult(outputs, [DeadLetter(records[1], "missing_id", "no 'id' field")], [])


def test_counts_what_was_queued_and_nothing_once_the_interval_failed():
    producer = RecordingProducer()
    sender, stats, notified = sender_with(producer)
    sender.deliver(poll(0))
    assert [topic for topic, _ in producer.sent] == ["streamfair.dead-letter", "streamfair.output"]
    assert (stats.produced, dict(stats.dead_letters), len(notified)) == (1, {"missing_id": 1}, 1)

    producer.broken = True  # the dead letter's send fails the interval: nothing after it is sent or counted
    sender.deliver(poll(2))
    assert isinstance(sender.failure, TransportError)
    producer.broken = False
    sender.deliver(poll(4))
    assert len(producer.sent) == 2
    assert (stats.produced, dict(stats.dead_letters), len(notified)) == (1, {"missing_id": 1}, 1)


@pytest.mark.parametrize("refusal", [ValueError("the producer refused it"), RecordTooLarge("2000000 bytes"),
                                     RecordRefused("INVALID_RECORD: Broker failed to validate record")])
def test_an_output_the_producer_refuses_is_a_dead_letter_and_the_rest_of_the_poll_goes_out(refusal):
    producer = RecordingProducer(refuse={b"m2": refusal})
    sender, stats, _ = sender_with(producer)
    task = PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2, seed=1), parser=InputParser(2, 4096))
    values = [json.dumps({"id": f"m{i}", "eta": 0.25, "tau": [0.3, 0.7]}).encode() for i in range(5)]
    sender.deliver(task.process([SyntheticRecord("in", 0, i, i, None, v, []) for i, v in enumerate(values)]))
    outputs = [json.loads(value)["id"] for topic, value in producer.sent if topic == "streamfair.output"]
    assert outputs == ["m0", "m1", "m3", "m4"] and stats.produced == 4 and sender.failure is None
    assert [(topic, value) for topic, value in producer.sent if topic != "streamfair.output"] == [
        ("streamfair.dead-letter", values[2])]
    assert stats.dead_letters == {"processing_error": 1}
    assert task.offset == 5 and task.fair.n_samples == 5  # the refused output's sample stays learned


class HeaderRefusingProducer(RecordingProducer):
    """Records headers too; refuses (``kind``) a record with the header ``refused``, or every dead letter."""

    def __init__(self, refused: str, every_dead_letter: bool = False, kind: type[Exception] = ValueError):
        super().__init__()
        self.refused, self.every_dead_letter, self.kind, self.headers = refused, every_dead_letter, kind, []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if self.every_dead_letter and topic == "streamfair.dead-letter" or self.refused in dict(headers or []):
            raise self.kind(f"the client does not take header {self.refused!r}")
        super().send(topic, key=key, value=value)
        self.headers.append(headers)


@pytest.mark.parametrize("kind", [ValueError, RecordRefused])
def test_a_dead_letter_refused_as_it_is_goes_out_with_its_reason_alone(kind):
    producer = HeaderRefusingProducer("x-odd", kind=kind)
    sender, stats, _ = sender_with(producer)
    source = SyntheticRecord("streamfair.input", 1, 7, -1, b"k", b"not json", [("x-odd", b"1"), ("tenant", b"a")])
    sender.deliver(TaskResult([], [DeadLetter(source, "invalid_json", "Expecting value")], []))
    assert producer.sent == [("streamfair.dead-letter", b"not json")] and sender.failure is None
    headers = dict(producer.headers[0])
    assert "x-odd" not in headers and "tenant" not in headers  # the source's headers dropped, the reason kept
    assert (headers["streamfair.reason"], headers["streamfair.source.offset"]) == (b"invalid_json", b"7")
    assert headers["streamfair.headers_dropped"] == f"{kind.__name__}: the client does not take header 'x-odd'".encode()
    assert stats.dead_letters == {"invalid_json": 1}


class SizeLimitedProducer(RecordingProducer):
    """Refuses a record larger than ``limit`` bytes (value, key and headers) as the producer does; records headers."""

    def __init__(self, limit: int):
        super().__init__()
        self.limit, self.records = limit, []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        size = len(value or b"") + len(key or b"") + sum(len(name) + len(data) for name, data in headers or [])
        if size > self.limit:
            raise RecordTooLarge(f"{size} bytes")
        super().send(topic, key=key, value=value)
        self.records.append((key, dict(headers or [])))


@pytest.mark.parametrize("key, headers", [(b"k", [("trace", b"x" * 5000)]), (b"k" * 5000, [])])
def test_a_dead_letter_too_large_for_its_key_or_headers_goes_out_with_its_reason_and_position_alone(key, headers):
    """Without its bytes it was still too large, and it was counted as refused: the message was lost."""
    producer = SizeLimitedProducer(limit=2000)
    sender, stats, _ = sender_with(producer)
    source = SyntheticRecord("streamfair.input", 1, 7, -1, key, b"not json", headers)
    sender.deliver(TaskResult([], [DeadLetter(source, "invalid_json", "Expecting value")], []))
    assert producer.sent == [("streamfair.dead-letter", None)] and stats.dead_letters == {"invalid_json": 1}
    sent_key, sent_headers = producer.records[0]
    assert sent_key == b"" and "trace" not in sent_headers
    assert (sent_headers["streamfair.reason"], sent_headers["streamfair.source.offset"]) == (b"invalid_json", b"7")
    assert sent_headers["streamfair.value_dropped"] == b"too large for the producer; the key and headers too"


def test_a_dead_letter_refused_even_so_is_counted_and_the_poll_goes_on():
    """Failing the interval instead would replay the message, be refused again, and stall the partition."""
    producer = HeaderRefusingProducer("x-odd", every_dead_letter=True)
    sender, stats, _ = sender_with(producer)
    sender.deliver(poll(0))
    assert producer.sent == [("streamfair.output", b'{"id":"a"}')] and sender.failure is None
    assert stats.errors == {"dead_letter_refused": 1} and not stats.dead_letters and stats.produced == 1


def test_librdkafka_reports_a_record_it_could_not_deliver_although_only_failures_call_back():
    """``delivery.report.only.error``: no Python call per delivered record, every failed one reaches ``on_error``."""
    config = load_config(env={}, overrides=["kafka.client=confluent", "kafka.bootstrap_servers=127.0.0.1:1",
                                            "kafka.delivery_timeout_ms=1500", "kafka.request_timeout_ms=1000"])
    producer = ConfluentProducer(config)  # no broker there: every record times out
    assert producer.settings["delivery.report.only.error"]
    errors: list[TransportError] = []
    for i in range(3):
        producer.send("outputs", key=b"k%d" % i, value=b"v", partition=0, on_error=errors.append)
    producer.flush(10.0)
    assert len(errors) == 3 and all("timed out" in str(error) for error in errors)


def test_a_failed_record_reaches_the_on_error_it_was_sent_with_through_one_callback_per_on_error():
    """kafka-python: the futures' errbacks report to the right ``on_error``, one errback shared by its records."""
    from kafka.errors import KafkaTimeoutError
    from kafka.future import Future

    from connectors.kafka.clients import KafkaPythonProducer

    class FutureClient:  # a KafkaProducer's send: one future per record, failed below
        config: dict = {"max_request_size": 1_048_576}
        _transaction_manager = None

        def __init__(self):
            self.futures: list[Future] = []

        def send(self, topic, **record):
            self.futures.append(Future())
            return self.futures[-1]

    client = FutureClient()
    producer = KafkaPythonProducer(client)
    outputs: list[TransportError] = []
    checkpoints: list[TransportError] = []
    report_output = outputs.append
    for on_error in (report_output, report_output, checkpoints.append, report_output):
        producer.send("topic", key=b"k", value=b"v", on_error=on_error)
    errbacks = [future._errbacks for future in client.futures]
    assert errbacks[0] == errbacks[1] != errbacks[2]  # made once for a run of records, not once per record
    for i, future in enumerate(client.futures):
        future.failure(KafkaTimeoutError(f"record {i}"))
    assert [str(error).split(": ")[-1] for error in outputs] == ["record 0", "record 1", "record 3"]
    assert [str(error).split(": ")[-1] for error in checkpoints] == ["record 2"]
    assert all(isinstance(error, TransportError) for error in outputs + checkpoints)
