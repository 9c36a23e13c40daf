"""Partitions added to the input topic while the daemon runs (pure logic).

The bundled broker (Tansu) cannot add partitions to a topic (it does not implement CreatePartitions),
so a stand-in plays the broker and the daemon's clients: topics with partition counts and logs, a
producer that refuses a partition its topic does not have (as kafka-python's does), and a group
consumer that is given the input's new partitions at its next poll.  The daemon itself, its
topic checks (``plan_topics``) and its restore are the real ones, run by :meth:`Daemon.run`.
"""

from __future__ import annotations

import json
import threading
import time
import zlib
from collections import defaultdict

import pytest

from connectors.kafka.checkpoint import Checkpoint
from connectors.kafka.config import load_config
from connectors.kafka.loop import EXIT_CONFIGURATION, Daemon
from connectors.kafka.transport import TopicPartition, plan_topics
from tests.support.consumer_records import Record
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import EventLog

FEEDBACK = "streamfair.feedback"


class Cluster:
    """Topics (partition counts and logs), and the daemon's transport: its topic check, producer and consumers.

    ``described`` counts the topic checks (what costs an admin request on a broker); ``requested``
    keeps the partition each record was sent to (``None``: the producer's choice, by key).
    """

    def __init__(self, counts: dict[str, int]):
        self.counts = dict(counts)
        self.logs: dict[TopicPartition, list[Record]] = defaultdict(list)
        self.described = 0
        self.requested: dict[str, list[int | None]] = defaultdict(list)

    def ensure_topics(self, config):
        self.described += 1
        return plan_topics(config, self.counts, self.counts.update)

    def producer(self, config, transactional_id=None):
        return self

    def consumer(self, config, *, group=True):
        return Client(self)

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        count = self.counts[topic]
        if partition is not None and partition >= count:
            raise ValueError(f"Unrecognized partition {partition} for topic {topic}")  # kafka-python's refusal
        self.requested[topic].append(partition)
        tp = TopicPartition(topic, zlib.crc32(key or b"") % count if partition is None else partition)
        log = self.logs[tp]
        log.append(Record(topic, tp.partition, len(log), 0, key, value, headers or []))

    def flush(self, timeout):
        pass

    def close(self, timeout):
        pass

    def records(self, topic: str, partition: int) -> list[Record]:
        return list(self.logs[TopicPartition(topic, partition)])


class Client:
    """A consumer of the :class:`Cluster`; once subscribed, each poll first hands it the partitions it has not got."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.positions: dict[TopicPartition, int] = {}
        self.paused: set[TopicPartition] = set()
        self.topics: list[str] = []
        self.listener = None

    def subscribe(self, topics, listener):
        self.topics, self.listener = list(topics), listener

    def poll(self, timeout_ms):
        if self.listener is not None:
            new = [TopicPartition(topic, p) for topic in self.topics for p in range(self.cluster.counts[topic])
                   if TopicPartition(topic, p) not in self.positions]
            if new:  # a rebalance: the new partitions from their start (no committed offsets)
                self.positions.update(dict.fromkeys(new, 0))
                self.listener.assigned(new)
                return {}
        batch = {}
        for tp, position in list(self.positions.items()):
            records = self.cluster.logs[tp][position:] if tp not in self.paused else []
            if records:
                batch[tp] = records
                self.positions[tp] = position + len(records)
        if not batch:
            time.sleep(0.005)
        return batch

    def assign(self, partitions):
        self.positions = dict.fromkeys(partitions, 0)

    def assignment(self):
        return set(self.positions)

    def pause(self, partitions):
        self.paused.update(partitions)

    def resume(self, partitions):
        self.paused.difference_update(partitions)

    def seek(self, tp, offset):
        self.positions[tp] = offset

    def seek_to_committed(self, partitions):
        self.positions.update(dict.fromkeys(partitions, 0))  # nothing is committed here: from the start

    def _exists(self, tp) -> bool:
        return tp.partition < self.cluster.counts.get(tp.topic, 0)

    def highwater(self, tp):
        return len(self.cluster.logs[tp]) if self._exists(tp) else None  # a partition never fetched

    def position(self, tp):
        return self.positions.get(tp) if self._exists(tp) else None

    def beginning_offsets(self, partitions, timeout_ms=None):
        return dict.fromkeys(partitions, 0)

    def refresh_metadata(self):
        pass

    def topic_id(self, topic):
        return None

    def commit(self, offsets, asynchronous=False):
        pass

    def group_metadata(self):
        return None

    def close(self):
        pass


def produce(cluster: Cluster, partition: int, ids: list[str], invalid: str | None = None) -> None:
    """Score messages ``ids`` to the input's ``partition``; ``invalid``: one more that is not JSON."""
    for ident in ids:
        body = json.dumps({"id": ident, "eta": 0.2, "tau": [0.7, 0.3]}).encode()
        cluster.send("streamfair.input", key=ident.encode(), value=body, partition=partition)
    if invalid is not None:
        cluster.send("streamfair.input", key=invalid.encode(), value=b"{not json", partition=partition)


class Running:
    """:meth:`Daemon.run` on a thread, over a :class:`Cluster` of topics with partition ``counts``."""

    def __init__(self, name: str, counts: dict[str, int], *overrides: str):
        self.cluster = Cluster(counts)
        self.log = EventLog(name)
        self.daemon = Daemon(load_config(env={}, overrides=["processing.checkpoint_every_seconds=0.05", *overrides]),
                             logger=self.log.logger)
        self.daemon.transport = self.daemon.sender.transport = self.cluster
        self.code: list[int] = []
        self.thread = threading.Thread(target=lambda: self.code.append(self.daemon.run()), daemon=True)
        self.thread.start()

    def wait(self, predicate, what: str, timeout: float = 20.0):
        return wait_for(predicate, timeout, what, interval=0.02, context=lambda: self.log.events[-6:])

    def stop(self, timeout: float = 10.0) -> int | None:
        """Stop the daemon (if it has not stopped itself); its exit code, ``None`` if it did not return."""
        self.daemon.stop()
        self.thread.join(timeout)
        return self.code[0] if self.code else None


def checkpoint_of(cluster: Cluster, partition: int) -> Checkpoint | None:
    """The last checkpoint written to ``partition`` of the changelog."""
    key = f"streamfair.input:{partition}".encode()
    heads = [r for r in cluster.records("streamfair.changelog", partition) if r.key == key]
    return Checkpoint.from_bytes(heads[-1].value) if heads else None


@pytest.mark.parametrize("output, dead_letter", [(3, 4), (2, 3), (3, 2)],
                         ids=["both-grown", "output-not-grown", "dead-letters-not-grown"])
def test_a_partition_added_with_its_changelog_is_restored_served_and_checkpointed(output, dead_letter):
    """Outputs and dead letters stay on the input's partition number where their topic grew, else go by key."""
    running = Running(f"added-{output}-{dead_letter}", {"streamfair.input": 2, "streamfair.output": 2,
                                                        "streamfair.dead-letter": 2, "streamfair.changelog": 2})
    cluster, daemon, log = running.cluster, running.daemon, running.log
    try:
        running.wait(lambda: daemon.ready and sorted(daemon.tasks) == [0, 1], "partitions 0 and 1")
        for p in (0, 1):
            produce(cluster, p, [f"p{p}-{i}" for i in range(5)])
        running.wait(lambda: all(checkpoint_of(cluster, p) and checkpoint_of(cluster, p).offset == 5 for p in (0, 1)),
                     "checkpoints of partitions 0 and 1")
        assert cluster.described == 1  # the start's topic check; none for the restores within its layout

        cluster.counts.update({"streamfair.input": 3, "streamfair.changelog": 3, "streamfair.output": output,
                               "streamfair.dead-letter": dead_letter})
        new = [f"p2-{i}" for i in range(6)]
        produce(cluster, 2, new, invalid="p2-bad")
        running.wait(lambda: (point := checkpoint_of(cluster, 2)) is not None and point.offset == 7,
                     "the checkpoint of partition 2")
        assert running.stop() == 0
    finally:
        running.stop()

    assert checkpoint_of(cluster, 2).n_samples == 6  # every valid message of the new partition learned
    outputs = [json.loads(r.value) for p in range(output) for r in cluster.records("streamfair.output", p)]
    assert sorted(o["id"] for o in outputs if o["partition"] == 2) == sorted(new)
    requested = cluster.requested["streamfair.output"]
    assert requested[:10] == [0] * 5 + [1] * 5  # before: on the input's partition number
    assert requested[10:] == [2 if output >= 3 else None] * 6  # after: there, or by key
    (dead,) = [r for p in range(dead_letter) for r in cluster.records("streamfair.dead-letter", p)]
    assert dict(dead.headers)["streamfair.reason"] == b"invalid_json" and not any(
        name == "streamfair.headers_dropped" for name, _ in dead.headers)  # not refused, then sent without them
    assert cluster.requested["streamfair.dead-letter"] == [2 if dead_letter >= 3 else None]
    assert cluster.described == 2 and daemon.layout is not None and daemon.layout.input_partitions == 3
    (added,) = log.fields("partitions_added")
    assert (added["partitions"], added["known"], added["changelog"]) == (3, 2, 3)
    assert [(w["topic"], w["partitions"], w["input_partitions"]) for w in log.fields("co_partitioning_stopped")] == (
        [(topic, count, 3) for topic, count in (("streamfair.output", output), ("streamfair.dead-letter", dead_letter))
         if count < 3])
    assert not daemon.stats.errors and daemon.stats.dead_letters == {"invalid_json": 1}


@pytest.mark.parametrize("feedback", [False, True], ids=["changelog", "feedback"])
def test_a_partition_added_without_changelog_or_feedback_partitions_stops_the_daemon_as_at_its_start(feedback):
    """Exit code 2 and an ERROR naming the key and the partitions needed, the message the start refuses with."""
    counts = {"streamfair.input": 2, "streamfair.output": 2, "streamfair.dead-letter": 2, "streamfair.changelog": 2}
    if feedback:
        counts[FEEDBACK] = 2
    running = Running(f"refused-{feedback}", counts, *([f"topics.feedback={FEEDBACK}"] if feedback else []))
    cluster, daemon, log = running.cluster, running.daemon, running.log
    try:
        running.wait(lambda: daemon.ready, "partitions 0 and 1")
        produce(cluster, 0, ["p0-0", "p0-1"])
        cluster.counts.update({"streamfair.input": 3, **({"streamfair.changelog": 3} if feedback else {})})
        running.thread.join(10)
        assert not running.thread.is_alive(), f"the daemon did not stop on its own: {log.events[-6:]}"
        code = running.stop()
    finally:
        running.stop()

    if feedback:
        message = f"topics.feedback: {FEEDBACK!r} has 2 partitions, needs 3 (co-partitioned with the input)"
    else:
        message = ("topics.changelog: 'streamfair.changelog' has 2 partitions, needs at least 3 "
                   "(one per input partition)")
    assert code == EXIT_CONFIGURATION, log.events[-6:]
    with pytest.raises(ValueError) as refused:  # what the start says of the same topics
        plan_topics(daemon.config, cluster.counts, cluster.counts.update)
    assert str(refused.value) == message
    (error,) = log.fields("layout_refused")
    assert (error["error"], error["partitions"], error["topic"]) == (message, [2], "streamfair.input")
    assert log.fields("stopped")[0]["fatal"] == message
    assert 2 not in daemon.tasks and not log.fields("restore_failed")
    assert checkpoint_of(cluster, 0).offset == 2  # what was processed is checkpointed before it stops


def test_a_layout_read_before_the_broker_shows_the_new_partitions_is_retried():
    """A topic check that does not show the assigned partition yet is a failed restore, retried after a back-off."""
    running = Running("stale", {"streamfair.input": 2, "streamfair.output": 2, "streamfair.dead-letter": 2,
                                "streamfair.changelog": 3})
    cluster, daemon, log = running.cluster, running.daemon, running.log
    checks = []

    def lagging(config):  # the first check after the growth is answered from metadata without it
        checks.append(config)
        counts = cluster.counts if len(checks) > 1 else {**cluster.counts, "streamfair.input": 2}
        return plan_topics(config, counts, cluster.counts.update)

    try:
        running.wait(lambda: daemon.ready, "partitions 0 and 1")
        cluster.ensure_topics = lagging
        cluster.counts["streamfair.input"] = 3
        running.wait(lambda: 2 in daemon.tasks and daemon.ready, "partition 2")
        assert running.stop() == 0
    finally:
        running.stop()
    (failed,) = log.fields("restore_failed")
    assert "'streamfair.input' partition 2 assigned, but the broker's metadata shows 2 partitions" in failed["error"]
    assert len(checks) == 2 and daemon.layout is not None and daemon.layout.input_partitions == 3
