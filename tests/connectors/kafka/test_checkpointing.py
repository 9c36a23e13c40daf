"""Checkpoints larger than a record are written in parts; a record refused as too large stops the daemon; a record
that is not a checkpoint is unreadable (pure logic).

The producer is a stand-in: the client's own size check is tested against the bundled broker with
both clients (``test_daemon_robust.py``); here the broker refuses the record after the send, as a
broker whose ``max.message.bytes`` is below the producer's limit does.
"""

from __future__ import annotations

import numpy as np
import pytest

from connectors.kafka.changelog import ChangelogPartition, UnreadableCheckpoint
from connectors.kafka.checkpoint import checkpoint_key
from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import RecordTooLarge, TransportError
from streamfair import FairRegressionPostProcessor
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


def test_a_write_that_fails_half_way_keeps_the_last_checkpoint_current_and_its_parts_are_deleted_later():
    lose = {"on": True}
    broker = KeepingBroker(lose=lambda key: lose["on"] and key.endswith(b"/1/3"))
    daemon = daemon_keeping(broker)
    assert daemon.checkpoints.checkpoint() is False  # a part lost: no manifest goes out
    assert broker.calls[-1] == ("flush",) and ("send", checkpoint_key("streamfair.input", 0)) not in broker.calls
    assert broker.read(0).checkpoint() is None and len(broker.read(0).stale_parts()) == 2
    daemon.checkpoints.rewind(daemon.sender.failure)
    lose["on"] = False
    learn(daemon, 1)  # the replay of the rewind, and more: another checkpoint
    assert daemon.checkpoints.checkpoint() is True
    reader = broker.read(0)
    assert reader.checkpoint() == daemon.partitions.tasks[0].checkpoint().to_bytes()
    assert reader.stale_parts() == set()  # the lost write's parts went with this checkpoint


@pytest.mark.parametrize("data", [b"not a checkpoint", b'{"format": "streamfair.checkpoint/1", "topic": "in"}',
                                  b'{"format": "other/2"}'], ids=["not-json", "fields-missing", "other-format"])
def test_a_record_that_is_not_a_checkpoint_is_unreadable_naming_the_partition(data):
    with pytest.raises(UnreadableCheckpoint, match="^checkpoint of partition 2: "):
        Daemon(load_config(env={})).partitions.new_task(2, data)
