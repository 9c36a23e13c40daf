"""The librdkafka clients where a broker cannot steer them (pure logic: stand-ins for librdkafka, no broker).

The consumer: its seek of a partition it has just been assigned, its poll's batches, positions and
high-watermarks, the rebalance callbacks, commits and topic ids; the producer: its wait on a full queue
and its flush; and the translation of librdkafka's errors.
"""

from __future__ import annotations

import time
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException
from confluent_kafka import TopicPartition as ConfluentTopicPartition

from connectors.kafka.config import load_config
from connectors.kafka.confluent_clients import (
    TOPIC_ID_MAX_AGE_S,
    ConfluentConsumer,
    ConfluentProducer,
    _delivery_report,
    _translated,
)
from connectors.kafka.transport import RecordRefused, RecordTooLarge, TopicPartition, TransportError


class Client:
    """librdkafka's consumer as far as ``assign`` and ``seek`` go: each seek answers ``error`` (``None``: done),
    a seek of a partition in ``refused`` only, if given."""

    def __init__(self, error: int | None, refused: set[int] | None = None):
        self.error, self.refused, self.assigned, self.seeks = error, refused, [], []

    def assign(self, partitions):
        self.assigned.append([(tp.topic, tp.partition, tp.offset) for tp in partitions])

    def get_watermark_offsets(self, tp, cached):
        return -1001, -1001  # none known

    def seek(self, tp):
        self.seeks.append((tp.topic, tp.partition, tp.offset))
        if self.error is not None and (self.refused is None or tp.partition in self.refused):
            raise KafkaException(KafkaError(self.error))


def consumer(error: int | None) -> ConfluentConsumer:
    reader = ConfluentConsumer.__new__(ConfluentConsumer)  # no librdkafka client: a stand-in
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


class Message:
    """A message ``consume`` hands out: a record of ``partition`` at ``offset``, or librdkafka's ``error`` there."""

    def __init__(self, partition: int, offset: int, error: int | None = None):
        self._partition, self._offset = partition, offset
        self._error = None if error is None else KafkaError(error)

    def error(self): return self._error
    def topic(self): return "in"
    def partition(self): return self._partition
    def offset(self): return self._offset
    def timestamp(self): return (1, 1700000000000 + self._offset)
    def key(self): return None
    def value(self): return b"v%d" % self._offset
    def headers(self): return None


class Queue(Client):
    """librdkafka's consumer handing out ``messages``: ``consume(n, timeout)`` has nothing before a call that
    waits, then at most ``n``; the high-watermarks it has are ``highwaters`` (partition: offset)."""

    def __init__(self, messages: list[Message], highwaters: dict[int, int] | None = None):
        super().__init__(None)
        self.messages, self.highwaters, self.calls = messages, highwaters or {}, []

    def consume(self, n, timeout):
        self.calls.append((n, timeout))
        if len(self.calls) == 1:
            return []
        taken, self.messages = self.messages[:n], self.messages[n:]
        return taken

    def get_watermark_offsets(self, tp, cached):
        return 0, self.highwaters.get(tp.partition, -1001)


def polling(messages: list[Message], highwaters: dict[int, int] | None = None) -> ConfluentConsumer:
    reader = consumer(None)
    reader.client, reader.max_records = Queue(messages, highwaters), 10
    return reader


def test_a_poll_that_waits_for_its_first_record_takes_the_rest_without_passing_max_poll_records():
    """One record waited for (the timeout in seconds), then at most ``max_poll_records - 1`` more at once."""
    reader = polling([Message(0, offset) for offset in range(25)])
    [records] = reader.poll(250).values()
    assert [record.offset for record in records] == list(range(10))
    assert reader.client.calls == [(10, 0), (1, 0.25), (9, 0)]
    assert [record.offset for record in reader.poll(250)[TopicPartition("in", 0)]] == list(range(10, 20))


def test_a_poll_leaves_each_partition_after_its_last_record_or_at_its_end_and_its_high_watermark_known():
    """The position after a poll: past the partition's last record, or the end an end-of-partition event
    gives (0: an empty partition).  The high-watermark librdkafka had at the assignment counts once a
    fetch reported on the partition (a record or its end), and not again after the next assignment."""
    eof = KafkaError._PARTITION_EOF
    partitions = [TopicPartition("in", p) for p in range(4)]
    reader = polling([Message(0, 3), Message(1, 0, eof), Message(0, 4), Message(2, 0), Message(0, 5), Message(2, 1)],
                     highwaters={0: 6, 1: 0, 2: 2, 3: 4})
    reader.assign(partitions)
    assert [reader.highwater(tp) for tp in partitions] == [None] * 4  # possibly from an earlier assignment
    batch = reader.poll(100)
    assert {tp: [record.offset for record in records] for tp, records in batch.items()} == {
        partitions[0]: [3, 4, 5], partitions[2]: [0, 1]}
    assert [reader.position(tp) for tp in partitions] == [6, 0, 2, None]
    assert [reader.highwater(tp) for tp in partitions] == [6, 0, 2, None]  # 1: empty
    reader.assign(partitions)
    assert [(reader.position(tp), reader.highwater(tp)) for tp in partitions] == [(None, None)] * 4


def test_an_error_librdkafka_hands_out_in_a_poll_is_a_transport_error_naming_it():
    """Any error but the end of a partition: not a record to skip."""
    reader = polling([Message(0, 0), Message(1, 0, KafkaError.UNKNOWN_TOPIC_OR_PART)])
    with pytest.raises(TransportError, match="^UNKNOWN_TOPIC_OR_PART: "):
        reader.poll(100)


def test_a_seek_assigning_again_starts_the_other_partitions_where_they_were_sought_or_read_to():
    """A refused seek assigns every partition again: the others go on from their positions, not from the
    group's stored offset (none for a reader: ``auto.offset.reset``, the log's end with ``latest``)."""
    reader = polling([Message(2, 0), Message(2, 1), Message(2, 2)])
    reader.client.error, reader.client.refused = KafkaError._OUTDATED, {1}
    partitions = [TopicPartition("in", p) for p in range(3)]
    reader.assign(partitions)
    reader.seek(partitions[0], 5)
    reader.seek(partitions[2], 0)
    reader.poll(100)
    reader.seek(partitions[1], 0)
    assert reader.client.assigned[-1] == [("in", 0, 5), ("in", 1, 0), ("in", 2, 3)]
    assert [reader.position(tp) for tp in partitions] == [5, 0, 3]


class Stored(Client):
    """librdkafka's consumer with the group's committed offsets (``OFFSET_INVALID``: none) and logs of 2..9."""

    def __init__(self, committed: dict[int, int]):
        super().__init__(None)
        self.stored, self.asked = committed, []

    def committed(self, partitions, timeout):
        self.asked.append([tp.partition for tp in partitions])
        return [ConfluentTopicPartition(tp.topic, tp.partition, self.stored[tp.partition]) for tp in partitions]

    def get_watermark_offsets(self, tp, timeout):
        return 2, 9


@pytest.mark.parametrize("reset, start", [("earliest", 2), ("latest", 9)])
def test_seek_to_committed_moves_only_partitions_read_or_sought_since_their_assignment(reset, start):
    """The others are where librdkafka starts an assignment (the committed offset, else the reset policy)."""
    member = consumer(None)
    member.client, member.settings = Stored({0: 4, 1: OFFSET_INVALID, 2: 6}), {"auto.offset.reset": reset}
    member.timeout_s = 1.0
    partitions = [TopicPartition("in", p) for p in range(4)]
    for tp in partitions[:2]:
        member.seek(tp, 7)
    member.seek_to_committed(partitions)
    assert member.client.asked == [[0, 1]]
    assert member.client.seeks[2:] == [("in", 0, 4), ("in", 1, start)]
    assert [member.position(tp) for tp in partitions] == [4, start, None, None]
    member.client.asked.clear()
    member.seek_to_committed(partitions[2:])
    assert member.client.asked == []


class Committer:
    """librdkafka's consumer as far as ``commit`` goes: records what each commit was asked."""

    def __init__(self):
        self.commits = []

    def commit(self, *, offsets, asynchronous):
        self.commits.append(([(tp.topic, tp.partition, tp.offset) for tp in offsets], asynchronous))


def test_a_commit_is_asked_of_librdkafka_with_its_offsets_asynchronous_or_not_as_given():
    """The daemon commits asynchronously in a rebalance (not waiting for the coordinator there), else it waits."""
    reader = consumer(None)
    reader.client = Committer()
    reader.commit({TopicPartition("in", 0): 3, TopicPartition("in", 2): 0}, asynchronous=True)
    reader.commit({TopicPartition("in", 1): 7})
    assert reader.client.commits == [([("in", 0, 3), ("in", 2, 0)], True), ([("in", 1, 7)], False)]


class Member(Client):
    """librdkafka's group consumer: ``subscribe`` keeps the rebalance callbacks, which record what they ask of it."""

    def __init__(self):
        super().__init__(None)
        self.callbacks, self.calls = {}, []

    def subscribe(self, topics, **callbacks):
        self.callbacks = callbacks

    def get_watermark_offsets(self, tp, cached):
        return 0, 40  # from an earlier assignment

    def incremental_assign(self, partitions):
        self.calls.append(("incremental_assign", [tp.partition for tp in partitions]))

    def incremental_unassign(self, partitions):
        self.calls.append(("incremental_unassign", [tp.partition for tp in partitions]))

    def unassign(self):
        self.calls.append(("unassign", None))


class Listener:
    """A :class:`~connectors.kafka.transport.RebalanceListener` that records what it is told."""

    def __init__(self):
        self.events = []

    def assigned(self, partitions):
        self.events.append(("assigned", [tp.partition for tp in partitions], None))

    def revoked(self, partitions, lost):
        self.events.append(("revoked", [tp.partition for tp in partitions], lost))


@pytest.mark.parametrize("cooperative", [False, True], ids=["eager", "cooperative"])
def test_a_rebalance_tells_the_listener_and_forgets_what_the_partitions_had(cooperative):
    """Given partitions: assigned (only those added, cooperative), their old high-watermarks not trusted;
    revoked or lost ones: the listener told which, their positions forgotten, unassigned."""
    member, listener = consumer(None), Listener()
    member.client, member.cooperative = Member(), cooperative
    member.subscribe(["in"], listener)
    partitions = [ConfluentTopicPartition("in", p) for p in range(3)]
    member.client.callbacks["on_assign"](member.client, partitions)
    assert [member.highwater(TopicPartition("in", p)) for p in range(3)] == [None] * 3
    for p in range(3):
        member.seek(TopicPartition("in", p), 5)
    member.client.callbacks["on_revoke"](member.client, partitions[:1])
    member.client.callbacks["on_lost"](member.client, partitions[2:])
    assert listener.events == [("assigned", [0, 1, 2], None), ("revoked", [0], False), ("revoked", [2], True)]
    assert [member.position(TopicPartition("in", p)) for p in range(3)] == [None, 5, None]
    if cooperative:
        assert member.client.calls == [("incremental_assign", [0, 1, 2]), ("incremental_unassign", [0]),
                                       ("incremental_unassign", [2])]
    else:
        assert member.client.assigned == [[("in", p, OFFSET_INVALID) for p in range(3)]]
        assert member.client.calls == [("unassign", None), ("unassign", None)]


class Admin:
    """librdkafka's admin client as far as ``describe_topics`` goes: its answers in turn (a ``KafkaError``: failed)."""

    def __init__(self, *answers):
        self.answers = list(answers)

    def describe_topics(self, topics, request_timeout):
        answer, described = self.answers.pop(0), Future()
        if isinstance(answer, KafkaError):
            described.set_exception(KafkaException(answer))
        else:
            described.set_result(SimpleNamespace(topic_id=answer))
        return {topics.topic_names[0]: described}


def test_a_topic_id_is_asked_again_once_older_than_its_max_age_and_kept_while_the_broker_does_not_answer():
    """A topic created again gets a new id: the cached one is trusted for ``TOPIC_ID_MAX_AGE_S`` only."""
    reader = consumer(None)
    reader._admin, reader.timeout_s, reader._topic_ids = Admin("id-1", "id-2", KafkaError(KafkaError._TRANSPORT)), 1, {}

    def aged():
        reader._topic_ids["in"] = (reader._topic_ids["in"][0], time.monotonic() - TOPIC_ID_MAX_AGE_S - 1)

    assert [reader.topic_id("in"), reader.topic_id("in")] == ["id-1", "id-1"]  # the second from the cache
    aged()
    assert reader.topic_id("in") == "id-2"
    aged()
    assert reader.topic_id("in") == "id-2" and reader._admin.answers == []  # the broker away: the last id known


@pytest.mark.parametrize(("guarantee", "isolation"), [("exactly_once", "read_committed"),
                                                       ("at_least_once", "read_uncommitted")])
def test_an_exactly_once_consumer_asks_librdkafka_for_committed_records_only(guarantee, isolation):
    """librdkafka drops aborted records itself, asked to (the bundled broker cannot show it: it hands them out)."""
    config = load_config(env={}, overrides=["kafka.client=confluent", "kafka.bootstrap_servers=127.0.0.1:1",
                                            f"processing.guarantee={guarantee}"])
    for group in (True, False):
        assert ConfluentConsumer(config, group=group).settings["isolation.level"] == isolation


class FullQueue:
    """librdkafka's producer whose queue is full (``BufferError``) until ``room_after`` polls served its reports."""

    def __init__(self, room_after: int):
        self.room_after, self.polls, self.produced = room_after, 0, []

    def produce(self, *args):
        if self.polls < self.room_after:
            raise BufferError("Local: Queue full")
        self.produced.append(args)

    def poll(self, timeout):  # no delivery report comes: waits the whole timeout
        self.polls += 1
        assert self.polls < 100, "polled on and on"
        time.sleep(timeout)


def producer(client, block_s: float = 5.0) -> ConfluentProducer:
    sender = ConfluentProducer.__new__(ConfluentProducer)  # no librdkafka client: send only
    sender.client, sender.block_s, sender._delivery_reports = client, block_s, _delivery_report
    return sender


def test_a_send_to_a_full_queue_serves_delivery_reports_until_there_is_room():
    """Then the record goes out as given (positional: topic, value, key, partition, ..., timestamp 0: now)."""
    client = FullQueue(room_after=3)
    producer(client).send("out", key=b"k", value=b"v", partition=2)
    assert client.polls == 3 and client.produced == [("out", b"v", b"k", 2, None, None, 0, None)]


def test_a_queue_that_stays_full_for_max_block_ms_fails_the_send():
    """``kafka.max_block_ms`` in all, however many retries: not at once, not never."""
    started = time.monotonic()
    with pytest.raises(TransportError, match="queue stayed full for 0.3 s"):
        producer(FullQueue(room_after=1000), block_s=0.3).send("out", key=b"k", value=b"v")
    assert 0.3 <= time.monotonic() - started < 2


def test_a_flush_that_leaves_a_record_undelivered_fails_saying_so():
    """No broker at the address: the record sent is still queued when the flush's time is up."""
    config = load_config(env={}, overrides=["kafka.client=confluent", "kafka.bootstrap_servers=127.0.0.1:1"])
    sender = ConfluentProducer(config)
    sender.send("outputs", key=b"k", value=b"v", partition=0)
    with pytest.raises(TransportError, match=r"^1 records not delivered within 0.2 s$"):
        sender.flush(0.2)


@pytest.mark.parametrize(("code", "kind"), [(KafkaError.MSG_SIZE_TOO_LARGE, RecordTooLarge),
                                            (KafkaError.RECORD_LIST_TOO_LARGE, RecordTooLarge),
                                            (KafkaError.INVALID_TIMESTAMP, RecordRefused),
                                            (KafkaError.INVALID_RECORD, RecordRefused),
                                            (KafkaError._MSG_TIMED_OUT, TransportError)],
                         ids=["too-large", "batch-too-large", "timestamp", "invalid-record", "timed-out"])
def test_a_librdkafka_error_is_a_transport_error_naming_its_code_a_refused_record_its_own(code, kind):
    """Raised (a ``KafkaException``) or reported (a delivery report's ``KafkaError``): the same translation."""
    reported: list[TransportError] = []
    _delivery_report(reported.append)(KafkaError(code), None)
    _delivery_report(reported.append)(None, None)  # delivered
    for error in (_translated(KafkaException(KafkaError(code))), *reported):
        assert type(error) is kind and str(error) == f"{KafkaError(code).name()}: {KafkaError(code).str()}"
    assert len(reported) == 1
