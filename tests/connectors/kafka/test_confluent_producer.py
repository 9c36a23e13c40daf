"""The librdkafka transport against the bundled broker: what its producer sends reads back as given
(key, value, partition or the partitioner's choice, timestamp or the producer's clock, headers),
and its consumer's poll hands each partition its own records in order."""

from __future__ import annotations

import time

from connectors.kafka.confluent_clients import ConfluentConsumer, ConfluentProducer
from connectors.kafka.transport import TopicPartition
from tests.support.kafka_daemon import ensure_topics_for, send_and_read_back, settings

T = 1_700_000_000_000


def test_records_sent_read_back_as_given(kafka_broker):
    config = ensure_topics_for(kafka_broker, settings(kafka_broker, "confluent-send", **{"kafka.client": "confluent"}))
    assert send_and_read_back(kafka_broker, ConfluentProducer(config), config.topics.output) == []


def test_a_poll_groups_the_records_by_partition_in_order(kafka_broker):
    config = ensure_topics_for(kafka_broker, settings(kafka_broker, "confluent-poll", **{"kafka.client": "confluent"}))
    producer, topic = ConfluentProducer(config), config.topics.input
    sent = {partition: [f"{partition}-{i}".encode() for i in range(40)] for partition in range(3)}
    for i in range(40):
        for partition, values in sent.items():
            producer.send(topic, key=None, value=values[i], partition=partition, timestamp_ms=T + i)
    producer.flush(10)
    reader = ConfluentConsumer(config, group=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(config.topics.partitions)]
        reader.assign(partitions)
        for tp in partitions:
            reader.seek(tp, 0)
        polled: dict = {}
        deadline = time.monotonic() + 20
        while sum(map(len, polled.values())) < 120 and time.monotonic() < deadline:
            for tp, records in reader.poll(200).items():
                assert all((record.topic, record.partition) == tp for record in records)
                polled.setdefault(tp, []).extend(records)
    finally:
        reader.close()
    assert {tp.partition: [record.value for record in records] for tp, records in polled.items()} == sent
    assert all(type(tp) is TopicPartition for tp in polled)
    for records in polled.values():
        assert [record.offset for record in records] == list(range(40))
        assert [record.timestamp for record in records] == [T + i for i in range(40)]
