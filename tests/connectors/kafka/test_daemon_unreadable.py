"""A record the Kafka client cannot decode (a header key that is not UTF-8), against the real broker.

kafka-python used to spin inside its fetcher on such a record (every partition stalled, ``stop()``
ignored) and librdkafka's ``headers()`` raised out of the poll (``run()`` crashed at every start).
"""

from __future__ import annotations

import json
import threading
from collections import namedtuple
from types import SimpleNamespace

import pytest
from kafka import TopicPartition as KafkaTopicPartition
from kafka.consumer.fetcher import Fetcher
from kafka.errors import CorruptRecordError
from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

from connectors.kafka.clients import KafkaPythonConsumer, _PartitionRecords
from connectors.kafka.codec import REASONS, encode_dead_letter
from connectors.kafka.config import load_config
from connectors.kafka.confluent_clients import ConfluentConsumer
from connectors.kafka.loop import Daemon
from connectors.kafka.transport import TransportError, UnreadableRecord
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import EventLog, ensure_topics_for, messages, produce, read_topic, settings


class RawKey(str):
    """A header key whose bytes on the wire are not UTF-8 (the protocol allows any; kafka-python encodes str keys)."""

    def encode(self, *args, **kwargs):
        return b"\xff\xfe"


Polled = namedtuple("Polled", "topic partition offset timestamp key value headers")
POISON = b'{"id": "poison", "eta": 0.1, "tau": [0.5, 0.5]}'  # a valid message: only its header is unreadable


def test_a_record_whose_header_key_is_not_utf8_is_dead_lettered_and_the_daemon_goes_on(kafka_broker):
    client = kafka_broker.kafka_client
    config = ensure_topics_for(kafka_broker, settings(kafka_broker, f"unreadable-{client}"))
    stream = messages(60, seed=31)
    items = [(p, str(i).encode(), json.dumps(body).encode(), None) for p, i, body in stream]
    # in partition 0 at offset 4, between valid records of the same batch (the producer lingers)
    items.insert(12, (0, b"poison", POISON, [("trace", b"t-1"), (RawKey("x"), b"v"), ("span", b"s-1")]))
    produce(kafka_broker, config.topics.input, items)
    log = EventLog(f"unreadable-{client}")
    daemon = Daemon(config, logger=log.logger)
    result: list = []

    def run():
        try:
            result.append(daemon.run())
        except BaseException as error:  # noqa: BLE001 -- the test reports it
            result.append(error)

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        wait_for(lambda: daemon.stats.produced >= 60 and daemon.stats.dead_letters or result, 60,
                 "every valid message answered", context=lambda: (result, log.events[-5:]))
    finally:
        daemon.stop()
        runner.join(30)
    assert not runner.is_alive(), "the daemon did not stop"
    assert result == [0], result
    assert daemon.stats.consumed == 61 and dict(daemon.stats.dead_letters) == {"unreadable_record": 1}
    assert not daemon.stats.errors, dict(daemon.stats.errors)

    outputs = read_topic(kafka_broker, config.topics.output)
    assert sorted(str(json.loads(r.value)["id"]) for r in outputs) == sorted(str(i) for _, i, _ in stream)
    [dead] = read_topic(kafka_broker, config.topics.dead_letter)
    headers = dict(dead.headers)
    assert (dead.key, dead.value) == (b"poison", POISON)
    assert headers["streamfair.reason"] == b"unreadable_record"
    assert (headers["streamfair.source.topic"], headers["streamfair.source.partition"],
            headers["streamfair.source.offset"]) == (config.topics.input.encode(), b"0", b"4")
    assert b"header" in headers["streamfair.detail"]
    # kafka-python keeps the headers it can decode; librdkafka decodes all of them or none
    kept = [name for name, _ in dead.headers if not name.startswith("streamfair.")]
    assert kept == (["trace", "span"] if client == "kafka-python" else [])

    # the checkpoint covers the unreadable record: a restart neither answers nor dead-letters anything again
    assert Daemon(config).run(once=True) == 0
    assert len(read_topic(kafka_broker, config.topics.output)) == 60
    assert len(read_topic(kafka_broker, config.topics.dead_letter)) == 1


# ---------------------------------------------------------------------------- the parts, without a broker
def _fetched(n: int, bad: int) -> bytes:
    """A v2 record batch of ``n`` records; the one at offset ``bad`` has a header key that is not UTF-8."""
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for offset in range(n):
        headers = [("trace", b"t"), (RawKey("x"), b"v"), ("span", b"s")] if offset == bad else [("trace", b"t")]
        builder.append(timestamp=1700000000000 + offset, key=b"k%d" % offset, value=b"v%d" % offset, headers=headers)
    builder.close()
    return bytes(builder.buffer())


def test_kafka_python_reads_on_past_a_header_key_that_is_not_utf8():
    tp = KafkaTopicPartition("in", 0)
    records = _PartitionRecords(0, tp, MemoryRecords(_fetched(6, bad=2))).take()
    assert [r.offset for r in records] == list(range(6))
    unreadable = records[2]
    assert isinstance(unreadable, UnreadableRecord) and unreadable.timestamp == 1700000000002
    assert (unreadable.key, unreadable.value, unreadable.headers) == (b"k2", b"v2", [("trace", b"t"), ("span", b"s")])
    assert unreadable.detail == "1 header(s) dropped: their keys are not UTF-8 (b'\\xff\\xfe')"
    assert all(r.headers == [("trace", b"t")] for i, r in enumerate(records) if i != 2)
    # fetched again from beyond it (a restart after its checkpoint): read past, and left out
    after = _PartitionRecords(3, tp, MemoryRecords(_fetched(6, bad=2))).take()
    assert [r.offset for r in after] == [3, 4, 5] and not any(isinstance(r, UnreadableRecord) for r in after)


def test_kafka_python_drops_a_fetch_it_fails_on_instead_of_spinning_and_its_poll_raises_a_transport_error():
    tp = KafkaTopicPartition("in", 0)
    stock = Fetcher.PartitionRecords(0, tp, MemoryRecords(_fetched(6, bad=2)))
    assert [r.offset for r in stock.take()] == [0, 1]
    with pytest.raises(CorruptRecordError):  # kafka-python stops at the record...
        stock.take()
    assert stock and stock.take() == []  # ...and keeps the fetch next in line: its next poll looped on it for ever

    corrupt = bytearray(_fetched(6, bad=-1))
    corrupt[-2] ^= 1  # the batch fails its CRC check: no record of it can be read
    records = _PartitionRecords(0, tp, MemoryRecords(bytes(corrupt)))
    with pytest.raises(CorruptRecordError):
        records.take()
    assert not records  # dropped: the fetcher goes on, and fetches the partition again at the next poll

    class Failing:
        config: dict = {}

        def poll(self, timeout_ms):
            raise RuntimeError("StopIteration raised unpacking messageset")

    with pytest.raises(TransportError, match="RuntimeError: StopIteration"):
        KafkaPythonConsumer(Failing()).poll(100)


class Message:
    """A confluent-kafka message (``headers``: what its ``headers()`` returns, or raises)."""

    def __init__(self, offset, headers):
        self._offset, self._headers = offset, headers

    def error(self): return None
    def topic(self): return "in"
    def partition(self): return 0
    def offset(self): return self._offset
    def timestamp(self): return (1, 1700000000000 + self._offset)
    def key(self): return b"k%d" % self._offset
    def value(self): return b"v%d" % self._offset

    def headers(self):
        if isinstance(self._headers, Exception):
            raise self._headers
        return self._headers


def _confluent_consumer(consume) -> ConfluentConsumer:
    consumer = ConfluentConsumer.__new__(ConfluentConsumer)  # no librdkafka client: only poll is used
    consumer.client, consumer.max_records = SimpleNamespace(consume=consume), 10
    consumer._positions, consumer._fetched = {}, set()
    return consumer


def test_confluent_hands_out_a_message_whose_headers_it_cannot_read_as_unreadable():
    unreadable = SystemError("<method 'headers'> returned a result with an exception set")
    unreadable.__cause__ = UnicodeDecodeError("utf-8", b"\xff\xfe", 0, 1, "invalid start byte")
    messages = [Message(0, [("trace", b"t")]), Message(1, unreadable), Message(2, None)]
    [records] = _confluent_consumer(lambda n, timeout: messages if n == 10 else []).poll(100).values()
    assert [r.offset for r in records] == [0, 1, 2] and [r.headers for r in records] == [[("trace", b"t")], [], []]
    assert isinstance(records[1], UnreadableRecord) and (records[1].key, records[1].value) == (b"k1", b"v1")
    assert records[1].detail.startswith("headers dropped: confluent-kafka cannot read them (UnicodeDecodeError")


def test_a_poll_that_confluent_fails_is_a_transport_error():
    def consume(n, timeout):  # e.g. a rebalance callback that raised: they run inside consume
        raise RuntimeError("listener failed")

    with pytest.raises(TransportError, match="RuntimeError: listener failed"):
        _confluent_consumer(consume).poll(100)


def test_a_task_dead_letters_an_unreadable_record_and_goes_on_after_it():
    task = Daemon(load_config(env={}, overrides=["topics.input=in"])).partitions.new_task(0, None)
    valid = b'{"id": "a", "eta": 0.1, "tau": [0.5, 0.5]}'
    records = [Polled("in", 0, 0, 0, b"a", valid, []),
               UnreadableRecord("in", 0, 1, 0, b"b", valid, [("trace", b"t")], "1 header(s) dropped"),
               Polled("in", 0, 2, 0, b"c", valid, [])]
    result = task.process(records)
    assert [o.source.offset for o in result.outputs] == [0, 2] and task.offset == 3
    [dead] = result.dead_letters
    assert (dead.reason, dead.detail) == ("unreadable_record", "1 header(s) dropped")
    key, value, headers = encode_dead_letter(dead)
    assert (key, value, headers[0]) == (b"b", valid, ("trace", b"t"))
    assert ("streamfair.reason", b"unreadable_record") in headers and "unreadable_record" in REASONS
