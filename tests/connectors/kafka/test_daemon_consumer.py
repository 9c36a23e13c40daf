"""The daemon's group consumer, of each transport, against the bundled broker: where a partition is
read from after :meth:`~connectors.kafka.transport.Consumer.seek_to_committed`."""

from __future__ import annotations

import pytest

from connectors.kafka.transport import TopicPartition, TransportError, transport
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import ensure_topics_for, produce, settings


class Assigned:
    """A rebalance listener keeping the partitions assigned."""

    def __init__(self):
        self.partitions: list[TopicPartition] = []

    def assigned(self, partitions):
        self.partitions = list(partitions)

    def revoked(self, partitions, lost):
        self.partitions = []


def poll_until(consumer, done, what: str, timeout: float = 30.0) -> dict[int, list[int]]:
    """Poll until ``done(offsets)`` holds; ``offsets``: the offsets each partition's records were read at."""
    offsets: dict[int, list[int]] = {}

    def polled() -> bool:
        if done(offsets):
            return True
        for tp, records in consumer.poll(timeout_ms=100).items():
            offsets.setdefault(tp.partition, []).extend(record.offset for record in records)
        return False

    wait_for(polled, timeout, what, interval=0, context=lambda: offsets)
    return offsets


def seek_once_fetching(consumer, tp: TopicPartition, offset: int) -> None:
    """Seek, polling until the consumer can: librdkafka refuses it until its fetcher of ``tp`` has started
    (the daemon retries a restore that failed so)."""
    def sought() -> bool:
        try:
            consumer.seek(tp, offset)
        except TransportError:
            consumer.poll(timeout_ms=50)
            return False
        return True

    wait_for(sought, 10, f"a seek of {tp}", interval=0)


@pytest.mark.parametrize("reset", ["earliest", "latest"])
def test_a_partition_is_read_again_from_its_committed_offset_else_where_the_reset_policy_says(kafka_broker, reset):
    """Both partitions were read to their end; partition 0 has a committed offset (1), partition 1
    none: ``earliest`` reads it from its start, ``latest`` from its end (each record its own batch:
    Tansu's end offset is then right)."""
    values = settings(kafka_broker, f"seek-committed-{reset}", **{"kafka.auto_offset_reset": reset})
    config = ensure_topics_for(kafka_broker, values)
    for offset in range(3):
        for partition in (0, 1):
            produce(kafka_broker, config.topics.input, [(partition, b"k", b"%d" % offset, None)])
    p0, p1 = TopicPartition(config.topics.input, 0), TopicPartition(config.topics.input, 1)
    consumer = transport(config).consumer(config)
    try:
        listener = Assigned()
        consumer.subscribe([config.topics.input], listener)
        poll_until(consumer, lambda _: {p0, p1} <= set(listener.partitions), "the assignment")
        consumer.pause([p0, p1])
        for tp in (p0, p1):
            seek_once_fetching(consumer, tp, 3)  # read to their end
        consumer.commit({p0: 1})
        consumer.seek_to_committed([p0, p1])
        consumer.resume([p0, p1])
        expected = {0: [1, 2], 1: [0, 1, 2]} if reset == "earliest" else {0: [1, 2]}
        read = poll_until(consumer, lambda offsets: offsets == expected or len(offsets.get(1, [])) > 3, "the records")
        assert read == expected
        poll_until(consumer, lambda _: consumer.position(p1) is not None, "partition 1's position", timeout=10)
        assert consumer.position(p1) == 3
    finally:
        consumer.close()
