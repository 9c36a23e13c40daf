"""The librdkafka transport against the bundled broker: what its producer sends reads back as given
(key, value, partition or the partitioner's choice, timestamp or the producer's clock, headers), and
its consumer's poll hands each partition its own records in order, reads each partition to its end
(past a transaction's commit marker too), knows where each log starts, and commits the group's offsets,
which the producer's transactions commit or abort with their records."""

from __future__ import annotations

import time

from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from kafka.partitioner.default import murmur2

from connectors.kafka.confluent_clients import ConfluentConsumer, ConfluentProducer
from connectors.kafka.transport import TopicPartition, caught_up
from tests.support.kafka_daemon import ensure_topics_for, produce, read_topic, send_and_read_back, settings

T = 1_700_000_000_000


def confluent_config(broker, name: str):
    """Settings named after the test, with the librdkafka client; the topics created."""
    return ensure_topics_for(broker, settings(broker, name, **{"kafka.client": "confluent"}))


def test_records_sent_read_back_as_given(kafka_broker):
    config = confluent_config(kafka_broker, "confluent-send")
    assert send_and_read_back(kafka_broker, ConfluentProducer(config), config.topics.output) == []


def test_a_poll_groups_the_records_by_partition_in_order(kafka_broker):
    config = confluent_config(kafka_broker, "confluent-poll")
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


def test_a_reader_knows_each_partitions_start_and_after_reading_it_its_end_and_position(kafka_broker):
    """``beginning_offsets`` is each log's start, not its end; read to the end, each partition's position
    and high-watermark are its end (0 for an empty one)."""
    config = confluent_config(kafka_broker, "confluent-ends")
    topic = config.topics.input
    produce(kafka_broker, topic, [(0, None, b"a%d" % i, None) for i in range(5)] + [(2, None, b"c", None)])
    reader = ConfluentConsumer(config, group=False)
    try:
        partitions = [TopicPartition(topic, p) for p in range(3)]
        assert reader.beginning_offsets(partitions) == {tp: 0 for tp in partitions}
        reader.assign(partitions)
        for tp in partitions:
            reader.seek(tp, 0)
        deadline = time.monotonic() + 20
        while not caught_up(reader, partitions):
            reader.poll(50)
            assert time.monotonic() < deadline, "never caught up"
        assert [(reader.position(tp), reader.highwater(tp)) for tp in partitions] == [(5, 5), (0, 0), (1, 1)]
    finally:
        reader.close()


def test_committed_offsets_are_the_groups_next_offsets(kafka_broker):
    """What ``commit`` is given is what the group resumes from (kafka-python reads it back)."""
    config = confluent_config(kafka_broker, "confluent-commit")
    offsets = {TopicPartition(config.topics.input, 0): 3, TopicPartition(config.topics.input, 2): 1}
    member = ConfluentConsumer(config, group=True)
    try:
        member.commit(offsets)
    finally:
        member.close()
    reader = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=config.kafka.group_id,
                           enable_auto_commit=False)
    try:
        assert {tp: reader.committed(KafkaTopicPartition(*tp)) for tp in offsets} == offsets
    finally:
        reader.close()


def test_a_keyed_record_without_a_partition_goes_where_kafka_python_and_java_send_it(kafka_broker):
    """The partitioner's choice for a key: murmur2 of the key, positive, modulo the partition count."""
    config = confluent_config(kafka_broker, "confluent-keys")
    producer, keys = ConfluentProducer(config), [b"k%d" % i for i in range(12)]
    for key in keys:
        producer.send(config.topics.output, key=key, value=b"v", timestamp_ms=T)
    producer.flush(10)
    read = {record.key: record.partition for record in read_topic(kafka_broker, config.topics.output)}
    assert read == {key: (murmur2(key) & 0x7FFFFFFF) % config.topics.partitions for key in keys}
    assert len(set(read.values())) == config.topics.partitions  # the keys do not all go to one partition


def test_a_reader_reaches_the_end_of_a_partition_written_in_a_transaction(kafka_broker):
    """The commit marker takes the offset after the last record: only the end-of-partition event moves
    the position past it, to the high-watermark, and the reader is caught up."""
    config = confluent_config(kafka_broker, "confluent-marker")
    producer = ConfluentProducer(config, transactional_id="confluent-marker")
    tp = TopicPartition(config.topics.input, 0)
    producer.init_transactions()
    producer.begin_transaction()
    for i in range(3):
        producer.send(tp.topic, key=None, value=b"v%d" % i, partition=tp.partition, timestamp_ms=T)
    producer.commit_transaction()
    reader = ConfluentConsumer(config, group=False)
    try:
        reader.assign([tp])
        reader.seek(tp, 0)
        offsets, deadline = [], time.monotonic() + 20
        while not caught_up(reader, [tp]):
            offsets += [record.offset for records in reader.poll(50).values() for record in records]
            assert time.monotonic() < deadline, f"stuck at {reader.position(tp)}, high-watermark {reader.highwater(tp)}"
        assert (offsets, reader.position(tp), reader.highwater(tp)) == ([0, 1, 2], 4, 4)
    finally:
        reader.close()


def test_offsets_sent_in_a_transaction_are_the_groups_once_it_commits_not_if_it_aborts(kafka_broker):
    """Exactly-once: the input offsets go with the outputs' transaction, committed or aborted with them."""
    config = confluent_config(kafka_broker, "confluent-eos")
    tp, producer = TopicPartition(config.topics.input, 1), ConfluentProducer(config, transactional_id="confluent-eos")
    member = ConfluentConsumer(config, group=True)
    reader = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=config.kafka.group_id,
                           enable_auto_commit=False)
    try:
        producer.init_transactions()
        committed = []
        for offset, end in ((3, producer.abort_transaction), (7, producer.commit_transaction)):
            producer.begin_transaction()
            producer.send(config.topics.output, key=b"k", value=b"v%d" % offset, partition=0, timestamp_ms=T)
            producer.send_offsets_to_transaction({tp: offset}, member.group_metadata())
            end()
            committed.append(reader.committed(KafkaTopicPartition(*tp)))
        assert committed == [None, 7]
    finally:
        member.close()
        reader.close()
