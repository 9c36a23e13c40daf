"""The librdkafka consumer's seek of a partition it has just been assigned (pure logic: no broker)."""

from __future__ import annotations

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException

from connectors.kafka.confluent_clients import ConfluentConsumer
from connectors.kafka.transport import TopicPartition, TransportError


class Client:
    """librdkafka's consumer as far as ``assign`` and ``seek`` go: each seek answers ``error`` (``None``: done)."""

    def __init__(self, error: int | None):
        self.error, self.assigned, self.seeks = error, [], []

    def assign(self, partitions):
        self.assigned.append([(tp.topic, tp.partition, tp.offset) for tp in partitions])

    def get_watermark_offsets(self, tp, cached):
        return -1001, -1001  # none known

    def seek(self, tp):
        self.seeks.append((tp.topic, tp.partition, tp.offset))
        if self.error is not None:
            raise KafkaException(KafkaError(self.error))


def consumer(error: int | None) -> ConfluentConsumer:
    reader = ConfluentConsumer.__new__(ConfluentConsumer)  # no librdkafka client: assign and seek only
    reader.client = Client(error)
    reader._positions, reader._fetched, reader._assigned, reader._assigned_highwater = {}, set(), {}, {}
    return reader


@pytest.mark.parametrize("error", [KafkaError._STATE, KafkaError._OUTDATED])
def test_a_seek_librdkafka_cannot_do_yet_is_an_assignment_starting_there(error):
    """A seek right after ``assign`` can be refused (the partition's fetcher has not started, or the
    assignment's own start is not applied yet): the partition is assigned again with the offset."""
    reader = consumer(error)
    changelog = [TopicPartition("changelog", 0), TopicPartition("changelog", 1)]
    reader.assign(changelog)
    reader.seek(changelog[1], 0)
    assert reader.client.assigned == [[("changelog", 0, OFFSET_INVALID), ("changelog", 1, OFFSET_INVALID)],
                                      [("changelog", 0, OFFSET_INVALID), ("changelog", 1, 0)]]
    assert reader._positions == {changelog[1]: 0}


def test_a_seek_that_librdkafka_refuses_otherwise_is_a_transport_error():
    reader = consumer(KafkaError._UNKNOWN_PARTITION)
    reader.assign([TopicPartition("changelog", 0)])
    with pytest.raises(TransportError):
        reader.seek(TopicPartition("changelog", 0), 0)
    unassigned = consumer(KafkaError._STATE)  # a partition this reader was not given by assign
    with pytest.raises(TransportError):
        unassigned.seek(TopicPartition("changelog", 3), 0)
