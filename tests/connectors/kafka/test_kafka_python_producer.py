"""The kafka-python producer behind the daemon, against the bundled broker: the records it appends to
kafka-python's record accumulator directly (for a partition, with a value and no headers) read back
as ``KafkaProducer.send`` makes them, and every other record goes through ``send``."""

from __future__ import annotations

import pytest

from connectors.kafka.clients import KafkaPythonProducer, make_producer
from connectors.kafka.transport import RecordTooLarge
from tests.support.kafka_daemon import ensure_topics_for, read_topic, send_and_read_back, settings


def producer_counting_sends(config) -> tuple[KafkaPythonProducer, list]:
    """The daemon's producer, and the keys of the records it passed to ``KafkaProducer.send``."""
    producer = KafkaPythonProducer(make_producer(config))
    through_send, send = [], producer.client.send
    producer.client.send = lambda topic, **record: through_send.append(record["key"]) or send(topic, **record)
    return producer, through_send


def test_records_appended_directly_read_back_as_given_and_the_others_go_through_send(kafka_broker):
    config = ensure_topics_for(kafka_broker, settings(kafka_broker, "direct-append"))
    producer, through_send = producer_counting_sends(config)
    assert send_and_read_back(kafka_broker, producer, config.topics.output) == []
    producer.close(1)
    assert through_send == [b"d", b"e", b"f"]  # headers, the partitioner's choice, a tombstone


@pytest.mark.parametrize("value_bytes,refused", [(1_870, False), (1_990, True)])
def test_a_record_near_the_request_limit_is_appended_only_when_it_surely_fits(kafka_broker, value_bytes, refused):
    """Up to ``max_request_size - 128`` bytes of key and value a record fits any request (a batch adds
    at most 61 + 21 bytes, the lengths 10); a larger one goes through ``send``, which refuses it if it
    does not fit (the daemon makes it a dead letter)."""
    values = settings(kafka_broker, f"direct-limit-{value_bytes}", **{"producer.max_request_size": 2_000})
    config = ensure_topics_for(kafka_broker, values)
    producer, through_send = producer_counting_sends(config)

    def send():
        producer.send(config.topics.output, key=b"k", value=b"x" * value_bytes, partition=0)

    if refused:
        with pytest.raises(RecordTooLarge):
            send()
    else:
        send()
        producer.flush(10)
        assert [record.value for record in read_topic(kafka_broker, config.topics.output)] == [b"x" * value_bytes]
    producer.close(1)
    assert through_send == ([b"k"] if refused else [])
