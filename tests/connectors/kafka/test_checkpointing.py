"""Checkpoints larger than a record are written in parts; a record refused as too large stops the daemon; a record
that is not a well-formed checkpoint of its partition is unreadable, and stops the daemon at its restore (pure logic).

The producer is a stand-in: the client's own size check is tested against the bundled broker with
both clients (``test_daemon_robust.py``); here the broker refuses the record after the send, as a
broker whose ``max.message.bytes`` is below the producer's limit does.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from connectors.kafka.changelog import ChangelogPartition, UnreadableCheckpoint
from connectors.kafka.checkpoint import Checkpoint, checkpoint_key
from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.partitions import EXIT_CHECKPOINT_UNREADABLE
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import RecordTooLarge, TopicLayout, TopicPartition, TransportError
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from tests.support.consumer_records import Record
from tests.support.kafka_daemon import EventLog, OneProducer


class RefusingBroker:
    """A producer whose changelog records come back with ``refusal`` (through ``on_error``) at the flush.

    In a transaction, the commit flushes, then fails as a whole, as a transaction with a refused
    record does.
    """

    def __init__(self, refusal: TransportError):
        self.refusal, self.callbacks, self.calls = refusal, [], []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if topic == "streamfair.changelog":
            self.callbacks.append(on_error)

    def flush(self, timeout):
        for on_error in self.callbacks:
            on_error(self.refusal)
        self.callbacks.clear()

    def init_transactions(self):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def send_offsets_to_transaction(self, offsets, group_metadata):
        self.calls.append("offsets")

    def commit_transaction(self):
        self.calls.append("commit")
        self.flush(timeout=None)
        raise TransportError("transaction aborted: a record failed")

    def abort_transaction(self):
        self.calls.append("abort")


class NoGroup:
    """The consumer of a daemon that never joined a group (``exactly_once`` asks for its metadata)."""

    def group_metadata(self):
        return None


def daemon_writing_to(producer, grids: tuple[int, int], *overrides: str, log: EventLog | None = None) -> Daemon:
    """A daemon whose every producer is ``producer``, with a fresh task of grid ``L = grids[p]`` on partitions 0 and 1.

    Both tasks are at offset 10 with a checkpoint due; ``overrides`` are configuration settings.
    """
    daemon = Daemon(load_config(env={}, overrides=list(overrides)), logger=log.logger if log else None)
    if daemon.config.processing.guarantee == "exactly_once":
        daemon._consumer = NoGroup()  # it sends the offsets with the group's metadata
        daemon.sender.transactional_id = "refused"
    daemon.sender.transport = OneProducer(producer)
    daemon.sender.renew()
    for partition, L in enumerate(grids):
        fair = FairRegressionPostProcessor(n_groups=2, L=L)
        daemon.partitions.tasks[partition] = PartitionTask("streamfair.input", partition, fair,
                                                           parser=InputParser(2, 1000), offset=10)
        daemon.checkpoints.processed(partition, 10)
    return daemon


def daemon_refused_with(refusal: TransportError, log: EventLog, guarantee: str = "at_least_once") -> Daemon:
    return daemon_writing_to(RefusingBroker(refusal), (5, 25), f"processing.guarantee={guarantee}", log=log)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_checkpoint_the_broker_refuses_as_too_large_stops_the_daemon_naming_the_largest(guarantee):
    log = EventLog(f"checkpoint-too-large-{guarantee}")
    daemon = daemon_refused_with(RecordTooLarge("MESSAGE_TOO_LARGE"), log, guarantee)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is not None and daemon._fatal[0] == EXIT_CHECKPOINT_TOO_LARGE
    assert daemon.stopping.is_set()
    assert [event for event, _ in log.events] == ["checkpoint_too_large"]  # no retry is announced
    assert daemon.stats.errors["checkpoint_failed"] == 1
    (fields,) = log.fields("checkpoint_too_large")
    sizes = {p: len(task.checkpoint().to_bytes()) for p, task in daemon.partitions.tasks.items()}
    assert fields["partition"] == 1 and fields["bytes"] == sizes[1] > sizes[0]  # the larger grid's state
    if guarantee == "exactly_once":
        assert daemon.sender.producer.calls == ["init", "begin", "offsets", "commit", "abort"]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_any_other_refusal_is_a_failure_to_retry(guarantee):
    log = EventLog(f"checkpoint-refused-{guarantee}")
    refusal = TransportError("broker away")
    daemon = daemon_refused_with(refusal, log, guarantee)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is None and not daemon.stopping.is_set()
    assert daemon.sender.failure is refusal if guarantee == "at_least_once" else "aborted" in str(daemon.sender.failure)
    assert [event for event, _ in log.events] == ["checkpoint_failed"]
    assert log.fields("checkpoint_failed")[0]["retry_in_s"] > 0


class KeepingBroker:
    """A producer that keeps each changelog partition's records, and the order of sends and flushes.

    The records whose key ``lose`` accepts are reported undelivered at the next flush.
    """

    def __init__(self, lose=lambda key: False):
        self.lose, self.lost = lose, []
        self.changelog: dict[int, list[tuple[bytes, bytes | None]]] = {0: [], 1: []}
        self.calls: list[tuple] = []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if topic != "streamfair.changelog":
            return
        self.calls.append(("send", key))
        if self.lose(key):
            self.lost.append(on_error)
        else:
            self.changelog[partition].append((key, value))

    def flush(self, timeout):
        self.calls.append(("flush",))
        for on_error in self.lost:
            on_error(TransportError("part lost"))
        self.lost.clear()

    def read(self, partition: int) -> ChangelogPartition:
        reader = ChangelogPartition(checkpoint_key("streamfair.input", partition))
        for key, value in self.changelog[partition]:
            reader.add(key, value)
        return reader


def daemon_keeping(broker: KeepingBroker) -> Daemon:
    """A daemon writing to ``broker`` in records of 50,000 bytes; checkpoints of about 107 kB (0) and 40 kB (1)."""
    daemon = daemon_writing_to(broker, (50, 5), "processing.checkpoint_record_bytes=50000")
    learn(daemon, 0)
    return daemon


def learn(daemon: Daemon, seed: int) -> None:
    """Each task learns 2,000 more samples, and a checkpoint is due."""
    rng = np.random.default_rng(seed)
    for partition, task in daemon.partitions.tasks.items():
        task.fair.learn_many(rng.uniform(-1, 1, 2000), rng.dirichlet([1, 1], 2000))
        task.offset = (task.offset or 0) + 2000  # a task rewound to no checkpoint starts afresh
        daemon.checkpoints.processed(partition, 2000)


def test_a_checkpoint_larger_than_a_record_is_written_in_parts_acknowledged_before_their_manifest():
    broker = KeepingBroker()
    daemon = daemon_keeping(broker)
    assert daemon.checkpoints.checkpoint() is True
    expected = {p: task.checkpoint().to_bytes() for p, task in daemon.partitions.tasks.items()}
    assert len(expected[0]) > 2 * 50_000 and len(expected[1]) <= 50_000
    assert len(broker.changelog[0]) == 3 + 1 and len(broker.changelog[1]) == 1
    assert all(len(value) <= 50_000 for records in broker.changelog.values() for _, value in records)
    for partition, data in expected.items():
        assert broker.read(partition).checkpoint() == data
        assert daemon.partitions._baselines[partition] == data  # what a rewind goes back to
    manifest = broker.calls.index(("send", checkpoint_key("streamfair.input", 0)))
    parts = [i for i, call in enumerate(broker.calls) if call[0] == "send" and b"#" in call[1]]
    assert max(parts) < broker.calls.index(("flush",), max(parts)) < manifest


def test_parts_no_longer_current_are_deleted_with_the_next_checkpoint():
    broker = KeepingBroker()
    daemon = daemon_keeping(broker)
    written = []
    for seed in range(1, 4):
        assert daemon.checkpoints.checkpoint() is True
        written.append(broker.read(0).current_parts())
        learn(daemon, seed)
    assert daemon.checkpoints.checkpoint() is True
    reader = broker.read(0)
    assert reader.checkpoint() == daemon.partitions.tasks[0].checkpoint().to_bytes()
    assert reader.stale_parts() == written[-1]  # superseded by the last checkpoint: deleted with the next one
    tombstones = {key for key, value in broker.changelog[0] if value is None}
    assert tombstones == written[0] | written[1]
    assert not broker.read(1).stale_parts() and not broker.read(1).current_parts()


def test_a_write_that_fails_half_way_keeps_the_last_checkpoint_current_and_its_parts_go_after_the_next():
    lose = {"on": True}
    broker = KeepingBroker(lose=lambda key: lose["on"] and key.endswith(b"/1/3"))
    daemon = daemon_keeping(broker)
    assert daemon.checkpoints.checkpoint() is False  # a part lost: no manifest goes out
    assert broker.calls[-1] == ("flush",) and ("send", checkpoint_key("streamfair.input", 0)) not in broker.calls
    lost_write = broker.read(0).stale_parts()
    assert broker.read(0).checkpoint() is None and len(lost_write) == 2
    daemon.checkpoints.rewind(daemon.sender.failure)
    lose["on"] = False
    learn(daemon, 1)  # the replay of the rewind, and more: another checkpoint
    assert daemon.checkpoints.checkpoint() is True
    reader = broker.read(0)
    assert reader.checkpoint() == daemon.partitions.tasks[0].checkpoint().to_bytes()
    assert reader.stale_parts() == lost_write  # kept while this checkpoint's manifest was not yet acknowledged
    learn(daemon, 2)
    assert daemon.checkpoints.checkpoint() is True
    assert not broker.read(0).stale_parts() & lost_write  # gone with the checkpoint after it


def test_the_parts_of_a_write_reported_failed_stay_until_a_later_manifest_is_acknowledged():
    """A flush that times out may have delivered the manifest: the failed write can be the current
    checkpoint.  Its parts were deleted first thing at the next checkpoint; when that one's manifest
    did not arrive either, the current manifest named deleted parts, and the restore stopped (exit 6)."""
    lose = {"on": False}
    broker = KeepingBroker(lose=lambda key: lose["on"] and b"/" not in key.rpartition(b"#")[2])
    daemon = daemon_keeping(broker)
    flush = broker.flush

    def timing_out(timeout):  # the manifests' flush: delivered, yet reported as a timeout
        manifests = bool(broker.calls) and broker.calls[-1][0] == "send" and b"#" not in broker.calls[-1][1]
        flush(timeout)
        if manifests:
            raise TransportError("KafkaTimeoutError: flush timed out")

    broker.flush = timing_out
    assert daemon.checkpoints.checkpoint() is False and broker.read(0).checkpoint() is not None
    broker.flush = flush
    daemon.checkpoints.rewind(daemon.sender.failure)
    learn(daemon, 1)
    lose["on"] = True  # the next manifest does not arrive
    assert daemon.checkpoints.checkpoint() is False
    reader = broker.read(0)
    assert reader.checkpoint() is not None and not reader.stale_parts() & reader.current_parts()


@pytest.mark.parametrize("data", [b"not a checkpoint", b'{"format": "streamfair.checkpoint/1", "topic": "in"}',
                                  b'{"format": "other/2"}'], ids=["not-json", "fields-missing", "other-format"])
def test_a_record_that_is_not_a_checkpoint_is_unreadable_naming_the_partition(data):
    with pytest.raises(UnreadableCheckpoint, match="^checkpoint of partition 2: "):
        Daemon(load_config(env={})).partitions.new_task(2, data)


# ---------------------------------------------------------------------- records that are not well-formed checkpoints
#: Batches of 4: a checkpoint may hold up to 3 samples predicted but not learned.
BATCHES_OF_4 = ["processing.batch_size=4"]
#: A field to leave out of a checkpoint (as :func:`checkpoint_with` takes them).
ABSENT = object()


def checkpoint_with(daemon: Daemon, partition: int = 0, **fields) -> bytes:
    """``partition``'s checkpoint at offset 42 of ``daemon``'s fresh post-processor, ``fields`` changed in its JSON."""
    point = Checkpoint(daemon.config.topics.input, partition, offset=42, feedback_offset=None,
                       state=daemon.config.postprocessor.build().state_dict())
    payload = json.loads(point.to_bytes())
    payload.update(fields)
    return json.dumps({name: value for name, value in payload.items() if value is not ABSENT}).encode()


@pytest.mark.parametrize("fields, named", [
    ({"pending_eta": [0.1], "pending_tau": []}, "pending_tau"),
    ({"pending_eta": [0.1], "pending_tau": [[0.5]]}, "pending_tau"),
    ({"pending_eta": [0.1], "pending_tau": [[0.5, 0.6]]}, "pending_tau"),
    ({"pending_eta": [0.1], "pending_tau": [1]}, "pending_tau"),
    ({"pending_eta": ["x"], "pending_tau": [[0.5, 0.5]]}, "pending_eta"),
    ({"pending_eta": [float("nan")], "pending_tau": [[0.5, 0.5]]}, "pending_eta"),
    ({"pending_eta": [0.1], "pending_tau": [[0.5, 0.5]], "pending_keys": ["a", "b"]}, "pending_keys"),
    ({"pending_eta": [0.1] * 4, "pending_tau": [[0.5, 0.5]] * 3 + [[1.0]]}, "pending_tau"),
], ids=["rows-missing", "row-too-narrow", "row-not-a-distribution", "row-not-a-list", "score-not-a-number",
        "score-not-finite", "ids-of-other-samples", "narrow-row-in-a-batch-learned-at-restore"])
def test_a_checkpoint_whose_pending_samples_are_malformed_is_unreadable_naming_the_field(fields, named):
    """Pending samples the post-processor cannot learn are an unreadable checkpoint, not a crash or dead letters."""
    daemon = Daemon(load_config(env={}, overrides=BATCHES_OF_4))
    with pytest.raises(UnreadableCheckpoint, match=rf"^checkpoint of partition 0: ValueError\(.{named} "):
        daemon.partitions.new_task(0, checkpoint_with(daemon, **fields))


@pytest.mark.parametrize("field, value", [("offset", "42"), ("offset", -5), ("offset", 4.5), ("offset", True),
                                          ("feedback_offset", "x"), ("feedback_offset", -1)])
def test_a_checkpoint_whose_position_is_not_an_offset_is_unreadable_naming_it(field, value):
    """A position the consumer could not seek to is refused at the restore, with the field and its value."""
    daemon = Daemon(load_config(env={}))
    with pytest.raises(UnreadableCheckpoint, match=rf"{field} must be an integer >= 0, got {value!r}"):
        daemon.partitions.new_task(0, checkpoint_with(daemon, **{field: value}))


@pytest.mark.parametrize("fields", [{"partition": 1}, {"topic": "other"}], ids=["partition", "topic"])
def test_a_checkpoint_of_another_partition_is_not_taken_for_this_one(fields):
    """The record under a partition's key must be that partition's: its task would write under the other's key."""
    daemon = Daemon(load_config(env={}))
    with pytest.raises(UnreadableCheckpoint, match="topic and partition must be those of the key 'streamfair.input:0'"):
        daemon.partitions.new_task(0, checkpoint_with(daemon, **fields))


@pytest.mark.parametrize("fields, message", [
    ({"models": ABSENT}, "checkpoint has no field 'models'"),
    ({"partition": "x"}, "partition must be an integer >= 0, got 'x'"),
    ({"state": 5}, "state must be an object, got 5"),
    ({"pending_keys": "ab"}, "pending_keys must be a list, got 'ab'"),
    ({"models": "abc"}, "models must be base64, got 'abc'"),
    ({"topic_id": 5}, "topic_id must be a string or null, got 5"),
    ({"groups": [0, 1]}, r"groups must be a list of strings, got \[0, 1\]"),
    ({"pending_labels": [["m9", 0.5]]}, r"pending_labels must hold \[id, y\] pairs of pending ids"),
], ids=["absent", "partition", "state", "pending_keys", "models", "topic_id", "groups", "pending_labels"])
def test_checkpoint_from_bytes_raises_value_error_naming_the_field_and_its_value(fields, message):
    """Every field is checked as it is read: the error says which one is wrong, and how."""
    data = checkpoint_with(Daemon(load_config(env={})), **fields)
    with pytest.raises(ValueError, match=f"^{message}"):
        Checkpoint.from_bytes(data)


def test_checkpoints_without_the_fields_later_versions_added_still_restore():
    """No pending ids, topic id, models origin or group labels, no positions yet, integer scores: it restores."""
    daemon = Daemon(load_config(env={}, overrides=BATCHES_OF_4))
    data = checkpoint_with(daemon, offset=None, pending_eta=[0], pending_tau=[[1, 0]], pending_keys=ABSENT,
                           topic_id=ABSENT, models_origin=ABSENT, groups=ABSENT)
    task = daemon.partitions.new_task(0, data)
    assert (task.offset, task.feedback_offset, task.topic_id, task.n_pending) == (None, None, None, 1)
    assert Checkpoint.from_bytes(task.checkpoint().to_bytes()).pending_tau == [[1.0, 0.0]]


@pytest.mark.parametrize("make, pending, named", [
    (FairRegressionPostProcessor, {"pending_eta": [0.1], "pending_tau": []}, "pending_tau"),
    (FairRegressionPostProcessor, {"pending_eta": [0.1], "pending_tau": [[0.5]]}, "pending_tau"),
    (FairRegressionPostProcessor, {"pending_eta": [float("inf")], "pending_tau": [[0.5, 0.5]]}, "pending_eta"),
    (FairClassificationPostProcessor, {"pending_eta": [[0.5, 0.5]], "pending_tau": [[0.5, 0.5]]}, "pending_eta"),
], ids=["rows-missing", "row-too-narrow", "score-not-finite", "class-row-too-narrow"])
def test_a_task_refuses_pending_samples_its_post_processor_cannot_learn_naming_them(make, pending, named):
    """The task's own check: each pending score is an input of its post-processor, with one tau row of its groups."""
    fair = make(n_groups=2, **({"L": 5} if make is FairRegressionPostProcessor else {"n_classes": 3}))
    with pytest.raises(ValueError, match=f"^{named} "):
        PartitionTask("in", 0, fair, parser=InputParser(2, 1024), batch_size=4, **pending)


class ChangelogHolding:
    """The daemon's consumers, stand-ins: the changelog holds one record, ``value`` under ``key``, in partition 0.

    ``seeks`` keeps where the group consumer was asked to seek.
    """

    def __init__(self, key: bytes, value: bytes):
        self.record = Record("streamfair.changelog", 0, 0, 0, key, value, [])
        self.assigned: list[TopicPartition] = []
        self.seeks: list[tuple[TopicPartition, object]] = []
        self.read = False

    def assign(self, partitions):
        self.assigned = partitions

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))

    def poll(self, timeout_ms):
        records, self.read = ({} if self.read else {tp: [self.record] for tp in self.assigned}), True
        return records

    def highwater(self, tp):
        return 1

    def position(self, tp):
        return 1 if self.read else 0

    def refresh_metadata(self):
        pass

    def beginning_offsets(self, partitions):
        return {tp: 0 for tp in partitions}

    def topic_id(self, topic):
        return None

    def pause(self, partitions):
        pass

    def resume(self, partitions):
        pass


@pytest.mark.parametrize("fields, named", [
    ({"pending_eta": [0.1], "pending_tau": []}, "pending_tau"),
    ({"pending_eta": [0.1], "pending_tau": [[0.5]]}, "pending_tau"),
    ({"offset": "42"}, "offset"),
    ({"partition": 1}, "topic and partition"),
], ids=["pending-rows-missing", "pending-row-too-narrow", "offset-a-string", "another-partition"])
def test_a_restore_that_cannot_read_a_checkpoint_stops_the_daemon_with_its_exit_code(fields, named):
    """No task, no seek, no exception out of the loop: the daemon stops with exit code 6, naming the field."""
    log = EventLog("restore-unreadable")
    daemon = Daemon(load_config(env={}, overrides=BATCHES_OF_4), logger=log.logger)
    key = checkpoint_key(daemon.config.topics.input, 0)
    daemon._consumer = daemon._restorer = consumers = ChangelogHolding(key, checkpoint_with(daemon, **fields))
    daemon.layout = TopicLayout(1, 1, 1, 1, None)  # the topics as the start read them: partition 0 is within
    daemon.partitions.assigned([TopicPartition(daemon.config.topics.input, 0)])
    daemon.partitions.restore()
    assert daemon._fatal is not None and daemon._fatal[0] == EXIT_CHECKPOINT_UNREADABLE and daemon.stopping.is_set()
    (error,) = log.fields("checkpoint_unreadable")
    assert error["key"] == key.decode() and named in error["error"]
    assert daemon.partitions.tasks == {} and daemon.partitions.to_restore == {0}
    assert [tp.topic for tp, _ in consumers.seeks] == [daemon.config.topics.changelog]  # read from 0, nothing else


class GroupConsumer:
    """The daemon's group consumer, a stand-in: it keeps the offsets it is asked to commit, and its seeks."""

    def __init__(self):
        self.commits: list[dict] = []
        self.seeks: list[tuple[TopicPartition, int]] = []

    def seek(self, tp, offset):
        self.seeks.append((tp, offset))

    def commit(self, offsets, asynchronous=False):
        self.commits.append(dict(offsets))

    def group_metadata(self):
        return None


class Transactions(KeepingBroker):
    """A transactional producer that keeps the changelog and the offsets each transaction sent."""

    def __init__(self):
        super().__init__()
        self.offsets: list[dict] = []

    def init_transactions(self):
        pass

    def begin_transaction(self):
        pass

    def send_offsets_to_transaction(self, offsets, group_metadata):
        self.offsets.append(dict(offsets))

    def commit_transaction(self):
        pass


def test_a_checkpoint_counts_each_partition_it_writes_and_the_count_of_records_starts_again():
    daemon = daemon_writing_to(KeepingBroker(), (5, 5), "processing.checkpoint_every_messages=30")
    checkpoints = daemon.checkpoints
    assert checkpoints.since_checkpoint == 20 and checkpoints.checkpoint() is True
    assert daemon.stats.checkpoints == 2 and checkpoints.since_checkpoint == 0 and not checkpoints.dirty
    checkpoints.processed(0, 29)
    assert not checkpoints.due(time.monotonic())
    checkpoints.processed(0, 1)
    assert checkpoints.due(time.monotonic())


def test_with_nothing_changed_a_checkpoint_touches_nothing():
    broker = KeepingBroker()
    daemon = daemon_writing_to(broker, (5, 5))
    assert daemon.checkpoints.checkpoint() is True
    broker.calls.clear()
    assert daemon.checkpoints.checkpoint() is True
    assert broker.calls == [] and daemon.stats.checkpoints == 2


def test_a_failed_checkpoint_is_retried_after_the_back_off_and_a_rewind_counts_records_from_the_checkpoint():
    log = EventLog("checkpoint-back-off")
    daemon = daemon_writing_to(RefusingBroker(TransportError("broker away")), (5, 5),
                               "processing.checkpoint_every_messages=20", log=log)
    checkpoints = daemon.checkpoints
    assert checkpoints.due(time.monotonic()) and checkpoints.checkpoint() is False
    (failed,) = log.fields("checkpoint_failed")
    assert not checkpoints.due(time.monotonic())  # 20 records: due, but not before the back-off
    assert checkpoints.due(time.monotonic() + failed["retry_in_s"])
    checkpoints.rewind(daemon.sender.failure)
    assert checkpoints.since_checkpoint == 0 and not checkpoints.dirty  # the tasks are back where it was durable


def daemon_committing(feedback: str, *overrides: str, producer=None) -> tuple[Daemon, GroupConsumer]:
    """A daemon with one task on partition 0 at input offset ``None`` and feedback offset 7, a checkpoint due."""
    daemon = Daemon(load_config(env={}, overrides=[f"topics.feedback={feedback}", *overrides]))
    daemon._consumer = consumer = GroupConsumer()
    daemon.sender.transport = OneProducer(producer or KeepingBroker())
    daemon.sender.renew()
    daemon.partitions.tasks[0] = PartitionTask("streamfair.input", 0, FairRegressionPostProcessor(n_groups=2, L=5),
                                               parser=InputParser(2, 1000), feedback_offset=7)
    daemon.checkpoints.processed(0, 0)
    return daemon, consumer


def test_a_task_that_has_read_only_feedback_commits_its_feedback_offset_alone():
    daemon, consumer = daemon_committing("labels")
    assert daemon.checkpoints.checkpoint() is True
    assert consumer.commits == [{TopicPartition("labels", 0): 7}]


def test_without_a_feedback_topic_the_feedback_offset_of_a_checkpoint_is_not_committed():
    """A checkpoint written while the daemon read feedback, restored by one that reads none."""
    daemon, consumer = daemon_committing("")
    daemon.partitions.tasks[0].offset = 12
    assert daemon.checkpoints.checkpoint() is True
    assert consumer.commits == [{TopicPartition("streamfair.input", 0): 12}]


def test_exactly_once_sends_the_offsets_in_the_transaction_and_commits_none_outside_it():
    producer = Transactions()
    daemon, consumer = daemon_committing("labels", "processing.guarantee=exactly_once", producer=producer)
    daemon.sender.transactional_id = "streamfair-test"
    daemon.partitions.tasks[0].offset = 12
    assert daemon.checkpoints.checkpoint() is True
    assert producer.offsets == [{TopicPartition("streamfair.input", 0): 12, TopicPartition("labels", 0): 7}]
    assert consumer.commits == []


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_partition_lost_with_work_in_the_open_transaction_fails_it(guarantee):
    """Its outputs are in the transaction: the next checkpoint would commit them without its checkpoint
    and offsets, and its new owner would answer them again.  The transaction is failed (a rewind aborts
    it); outside a transaction the outputs are out already, and the other partitions carry on."""
    producer = Transactions()
    daemon = daemon_writing_to(producer, (5, 5), f"processing.guarantee={guarantee}")
    daemon.sender.begin()  # the poll's outputs went into the open transaction
    daemon.partitions.revoked([TopicPartition("streamfair.input", 1)], lost=True)
    if guarantee == "exactly_once":
        assert daemon.sender.failure is not None and daemon.checkpoints.checkpoint() is False
        assert producer.offsets == [] and producer.changelog == {0: [], 1: []}
        daemon.checkpoints.rewind(daemon.sender.failure)
        assert daemon.stats.rewinds == 1 and not daemon.sender.in_transaction
    else:
        assert daemon.sender.failure is None and daemon.checkpoints.checkpoint() is True
        assert [partition for partition, records in producer.changelog.items() if records] == [0]


def test_parts_written_again_after_a_failed_write_are_not_deleted_first():
    """A failed write of a checkpoint leaves its parts to delete; after the rewind the replay reaches the same
    state, and its checkpoint writes the same parts: they are current again, not deleted then rewritten."""
    lose = {"on": False}
    broker = KeepingBroker(lose=lambda key: lose["on"] and key.endswith(b"/2/3"))
    daemon = daemon_keeping(broker)
    daemon._consumer = GroupConsumer()  # the rewind seeks it back
    assert daemon.checkpoints.checkpoint() is True
    daemon.checkpoints.rewind(RuntimeError("back to the checkpoint"))  # the tasks as a rewind rebuilds them
    learn(daemon, 1)
    lose["on"] = True
    sent = len(broker.calls)
    assert daemon.checkpoints.checkpoint() is False
    part_of_0 = checkpoint_key("streamfair.input", 0) + b"#"
    failed = {call[1] for call in broker.calls[sent:] if call[0] == "send" and call[1].startswith(part_of_0)}
    assert len(failed) == 3
    daemon.checkpoints.rewind(daemon.sender.failure)
    lose["on"] = False
    learn(daemon, 1)  # the same records again: the same state
    written = len(broker.changelog[0])
    assert daemon.checkpoints.checkpoint() is True
    assert broker.read(0).current_parts() == failed
    assert not {key for key, value in broker.changelog[0][written:] if value is None} & failed
