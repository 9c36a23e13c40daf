"""The daemon's owned partitions: one task each, from assignment (restore) to revocation.

On assignment the new partitions are paused, and at the next iteration each one's task is restored
from its current checkpoint in the changelog (:mod:`connectors.kafka.changelog`); the consumer
seeks to the offsets stored in it (the changelog, not the group offset, is the source of truth)
and resumes the input (the feedback once the input has passed what an earlier run may have
answered, :mod:`connectors.kafka.feedback_hold`).  On revocation the tasks are checkpointed
(unless the partitions were lost) and dropped.  The last durable checkpoint of every task is kept,
so that a failure can put every task back there (:meth:`Partitions.back_to_checkpoints`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, NamedTuple

from connectors.kafka.changelog import UnreadableCheckpoint, read_checkpoints
from connectors.kafka.checkpoint import Checkpoint, changed_settings, checkpoint_key, restore_postprocessor
from connectors.kafka.logs import log_event
from connectors.kafka.models import BaseModels
from connectors.kafka.records import TaskResult
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import TopicPartition, TransportError, UnsupportedCodec

if TYPE_CHECKING:
    from connectors.kafka.loop import Daemon

#: Seconds a restore's reading of the changelog may go without progress before it is retried (``restore_failed``).
RESTORE_STALL_TIMEOUT_S = 30.0
#: Exit code when a partition's current checkpoint cannot be read (see :meth:`Partitions.restore`).
EXIT_CHECKPOINT_UNREADABLE = 6
#: Synthetic score messages of :meth:`Partitions.warm_up` (at least a mini-batch of them).
WARM_UP_MESSAGES = 16


class SyntheticRecord(NamedTuple):
    """A :class:`~connectors.kafka.transport.Record` made up by the daemon (:meth:`Partitions.warm_up`).

    Partition ``-1`` and timestamp ``-1``: it belongs to no partition and was never in a topic.

    >>> from connectors.kafka.codec import InputParser
    >>> record = SyntheticRecord("in", -1, 0, -1, None, b'{"id": "warm-up-0", "eta": 0.0, "tau": [0.5, 0.5]}', [])
    >>> InputParser(n_groups=2, max_bytes=1024).parse(record.value).id, record.partition
    ('warm-up-0', -1)
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes
    headers: list[tuple[str, bytes]]


class Partitions:
    """The tasks of the input partitions a daemon owns.

    Attributes
    ----------
    tasks : dict[int, PartitionTask]
        Tasks of the input partitions currently owned and restored.
    to_restore : set[int]
        Partitions assigned whose task is not restored yet.

    Examples
    --------
    A task is made fresh, or from the bytes of its last checkpoint (it then resumes at its offsets):

    >>> from connectors.kafka.checkpoint import Checkpoint
    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.loop import Daemon
    >>> daemon = Daemon(load_config(env={}, overrides=["topics.input=orders", "topics.feedback=labels"]))
    >>> partitions = daemon.partitions
    >>> fresh = partitions.new_task(0, None)
    >>> fresh.offset, type(fresh.fair).__name__
    (None, 'FairRegressionPostProcessor')
    >>> point = Checkpoint("orders", 1, offset=42, feedback_offset=7,
    ...                    state=daemon.config.postprocessor.build().state_dict())
    >>> restored = partitions.new_task(1, point.to_bytes())
    >>> restored.offset, restored.feedback_offset
    (42, 7)

    A partition of the input is also the feedback topic's partition of the same number:

    >>> [(tp.topic, tp.partition) for tp in partitions.topic_partitions([1])]
    [('orders', 1), ('labels', 1)]
    """

    def __init__(self, daemon: Daemon):
        self.daemon = daemon
        self.tasks: dict[int, PartitionTask] = {}
        self.to_restore: set[int] = set()
        self._baselines: dict[int, bytes | None] = {}  # last durable checkpoint per task (None: fresh)
        self._first_offsets: dict[tuple[str, int], int] = {}  # where each task started reading each topic
        self.models: BaseModels | None = None  # the configured base models (copied per task when they learn)
        self.groups = daemon.config.group_labels()  # tau's column labels, recorded in checkpoints

    # ------------------------------------------------------------------ tasks
    def new_task(self, partition: int, data: bytes | None) -> PartitionTask:
        """A task from checkpoint bytes, or a fresh one (``data=None``).

        :class:`UnreadableCheckpoint` if ``data`` is not a checkpoint of this partition (its key) that
        this version restores.

        A checkpoint's post-processor continues only under the settings that made it: when the
        configured post-processor differs (:func:`~connectors.kafka.checkpoint.changed_settings`), or
        the configured group labels are the checkpoint's in another order (its per-group columns
        would go to the wrong groups), the configured one starts afresh at the checkpoint's
        positions, and a warning names the changes.  Labels renamed in place keep the state.
        Likewise, base models learned online continue only while the configured model files are
        the ones they descend from.
        """
        config = self.daemon.config
        fair = config.postprocessor.build()
        if data is None:
            return PartitionTask(config.topics.input, partition, fair, models=self._task_models(),
                                 **self._task_options())
        try:
            point = Checkpoint.from_bytes(data, checkpoint_key(config.topics.input, partition))
            restored = restore_postprocessor(point.state)
            changed = changed_settings(restored, fair)
            groups = self.groups
            if point.groups is not None and point.groups != groups and sorted(point.groups) == sorted(groups):
                changed["groups"] = [point.groups, groups]
            if changed:
                log_event(self.daemon.log, logging.WARNING, "settings_changed", partition=partition,
                          offset=point.offset, changed=changed,
                          action="the configured post-processor starts afresh at the checkpoint's offset")
                # the pending mini-batch was served by the post-processor that is replaced: not learned
                point = replace(point, pending_eta=[], pending_tau=[], pending_keys=[])
            models = self._task_models()
            if point.models is not None and models is not None and point.models_origin not in (None, models.origin):
                log_event(self.daemon.log, logging.WARNING, "models_changed", partition=partition, offset=point.offset,
                          action="the configured model files replace the models the checkpoint learned from older ones")
                point = replace(point, models=None)
            return PartitionTask.from_checkpoint(point, models=models, fair=fair if changed else restored,
                                                 **self._task_options())
        except Exception as error:  # noqa: BLE001 -- whatever is wrong with the record, no retry can read it
            raise UnreadableCheckpoint(f"checkpoint of partition {partition}: {error!r}") from error

    def warm_up(self) -> TaskResult:
        """Run a throwaway task, built as a fresh one, on synthetic score messages; nothing is kept or sent.

        Numba loads a compiled function at its first call (tenths of a second each from its cache,
        more when it compiles).  Without this, the first poll of the first partition would pay for it
        while its messages wait.  Half of the messages ask for the distribution, so that both output
        paths are loaded, and there are at least ``processing.batch_size`` of them.  Returns what the
        task made of them.
        """
        config, parser = self.daemon.config, self.daemon.parser
        groups = [1.0 / parser.n_groups] * parser.n_groups
        score = {"eta": 0.0} if parser.n_classes is None else {"proba": [1.0 / parser.n_classes] * parser.n_classes}
        records = [
            SyntheticRecord(config.topics.input, -1, offset, -1, None, json.dumps(
                {"id": f"warm-up-{offset}", **score, "tau": groups, "distribution": offset % 2 == 0}).encode(), [])
            for offset in range(max(WARM_UP_MESSAGES, config.processing.batch_size))
        ]
        return self.new_task(-1, None).process(records)

    def _task_options(self) -> dict[str, Any]:
        daemon = self.daemon
        config, processing = daemon.config, daemon.config.processing
        return {
            "parser": daemon.parser,
            "batch_size": processing.batch_size,
            "mode": processing.mode,
            "distribution": processing.distribution,
            "learn_models": config.models.learn,
            "feedback_parser": daemon.feedback_parser if config.topics.feedback else None,
            "output_key": processing.output_key,
            "propagate_headers": processing.propagate_headers,
            "groups": self.groups,
        }

    def _task_models(self) -> BaseModels | None:
        """Tasks share the base models unless they learn online (then each has its own copy)."""
        if self.models is None or not self.daemon.config.models.learn:
            return self.models
        return self.models.copy()

    def topic_partitions(self, partitions: Sequence[int]) -> list[TopicPartition]:
        """The input (and feedback) topic partitions of ``partitions``."""
        topics = self.daemon.config.topics
        names = [topics.input] + ([topics.feedback] if topics.feedback else [])
        return [TopicPartition(topic, p) for topic in names for p in partitions]

    # ------------------------------------------------------------------ rebalancing (the consumer's callbacks)
    # kafka-python calls them on its I/O thread, confluent-kafka inside poll: no blocking consumer calls here.
    def assigned(self, assigned: list[TopicPartition]) -> None:
        """Pause the newly assigned partitions until their tasks are restored."""
        daemon = self.daemon
        with daemon.lock:
            partitions = sorted(tp.partition for tp in assigned if tp.topic == daemon.config.topics.input)
            new = [p for p in partitions if p not in self.tasks]
            self.to_restore.update(new)
            daemon.consumer.pause(self.topic_partitions(new))
            log_event(daemon.log, logging.INFO, "assigned", partitions=partitions)

    def revoked(self, revoked: list[TopicPartition], lost: bool) -> None:
        """Checkpoint (unless ``lost`` or closing), then drop the tasks of the revoked partitions.

        ``exactly_once``: partitions lost with work in the open transaction fail it (a rewind aborts it).
        """
        daemon = self.daemon
        with daemon.lock:
            topics = daemon.config.topics
            partitions = sorted(tp.partition for tp in revoked if tp.topic == topics.input)
            if not lost and not daemon.closing:  # closing: the final checkpoint has been written (or failed)
                daemon.checkpoints.checkpoint(commit_async=True)
            elif lost and daemon.sender.in_transaction and daemon.checkpoints.dirty.intersection(partitions):
                # their outputs are in the open transaction, which must not commit without their checkpoints:
                # it is aborted, and the other tasks go back to theirs (their new owner answers them again)
                daemon.sender.fail(RuntimeError(f"partitions {partitions} lost in the middle of a transaction"))
            daemon.feedback_hold.forget(partitions)
            for partition in partitions:
                self.tasks.pop(partition, None)
                self._baselines.pop(partition, None)
                daemon.checkpoints.forget(partition)
                self.to_restore.discard(partition)
                for topic in (topics.input, topics.feedback):
                    self._first_offsets.pop((topic, partition), None)
            log_event(daemon.log, logging.INFO, "lost" if lost else "revoked", partitions=partitions)
            daemon.notify("on_revoked", partitions)

    # ------------------------------------------------------------------ restore (daemon thread)
    def restore(self) -> None:
        """Restore the tasks of newly assigned partitions from the changelog, seek, resume.

        Partitions added to the input topic since the daemon read its topics make it read them again
        first (:meth:`~connectors.kafka.loop.Daemon.covers`).
        """
        daemon = self.daemon
        partitions = sorted(self.to_restore)
        topics = daemon.config.topics
        started = time.monotonic()
        restored = {}
        try:
            if not daemon.covers(partitions):
                return
            changelog = read_checkpoints(daemon.restorer, topics.changelog,
                                         {p: checkpoint_key(topics.input, p) for p in partitions},
                                         RESTORE_STALL_TIMEOUT_S, daemon.stopping)
            for partition in partitions:
                data = changelog[partition].checkpoint()
                restored[partition] = self.new_task(partition, data), data
            # a task without a checkpoint starts where the group committed, not where this consumer last read
            daemon.consumer.seek_to_committed([
                TopicPartition(topic, p) for p, (task, _) in restored.items()
                for topic, offset in ((topics.input, task.offset), (topics.feedback, task.feedback_offset))
                if topic and offset is None])
            daemon.restorer.refresh_metadata()  # the input topic's current id
            starts = daemon.restorer.beginning_offsets([TopicPartition(topics.input, p) for p in partitions])
        except UnreadableCheckpoint as error:
            self._unreadable(next(p for p in partitions if p not in restored), error)
            return
        except UnsupportedCodec as error:
            daemon.unsupported_codec(error, topics.changelog)
            return
        except (TransportError, TimeoutError) as error:
            if not daemon.stopping.is_set():
                daemon.wait_after("restore_failed", error)
            return
        positions = daemon.positions
        positions.input_topic_id = daemon.restorer.topic_id(topics.input) or positions.input_topic_id
        seconds = time.monotonic() - started
        for partition, (task, data) in restored.items():
            daemon.checkpoints.restored(partition, changelog[partition])
            task.topic_id = task.topic_id or positions.input_topic_id
            self.tasks[partition] = task
            self._baselines[partition] = data
            positions.log_start[partition] = starts.get(TopicPartition(topics.input, partition), 0)
            if task.offset is not None:
                daemon.consumer.seek(TopicPartition(topics.input, partition), task.offset)
            if task.feedback_offset is not None:
                daemon.consumer.seek(TopicPartition(topics.feedback, partition), task.feedback_offset)
            daemon.stats.restores += data is not None
            log_event(daemon.log, logging.INFO, "restored", partition=partition, checkpoint=data is not None,
                      offset=task.offset, n_samples=task.fair.n_samples, seconds=round(seconds, 4))
            daemon.notify("on_restored", partition, task.fair.n_samples, task.offset, seconds)
        self.to_restore.difference_update(partitions)
        daemon.consumer.resume([TopicPartition(topics.input, p) for p in partitions]
                               + daemon.feedback_hold.restored(partitions))
        daemon.backoff.reset()
        daemon.notify("on_assigned", sorted(self.tasks))

    def _unreadable(self, partition: int, error: UnreadableCheckpoint) -> None:
        """A current checkpoint no retry can read: stop with what it is and what to do, not a crash loop.

        Such a record was written by another program sharing the changelog topic, by a later version
        of streamfair, or lost its parts to a retention policy on a changelog that is not compacted.
        """
        daemon = self.daemon
        key = checkpoint_key(daemon.config.topics.input, partition).decode()
        daemon.stats.errors["checkpoint_unreadable"] += 1
        log_event(daemon.log, logging.ERROR, "checkpoint_unreadable", partition=partition,
                  changelog=daemon.config.topics.changelog, key=key, error=repr(error),
                  fix=f"write the record again with the program that wrote it, or delete key {key!r} (a tombstone): "
                      "the partition then starts afresh from the group's committed offset")
        daemon.give_up(EXIT_CHECKPOINT_UNREADABLE, f"checkpoint {key!r}: {error}")

    # ------------------------------------------------------------------ checkpoints
    def reading(self, topic: str, partition: int, first_offset: int) -> None:
        """Records of ``topic``'s ``partition`` read from ``first_offset`` on.

        The first such offset since the task was assigned is kept: a rewind seeks there when the
        durable checkpoint has no offset for that topic (there is none, or it was written before
        the task read that topic, e.g. after feedback alone).
        """
        self._first_offsets.setdefault((topic, partition), first_offset)

    def checkpointed(self, data: dict[int, bytes]) -> None:
        """The checkpoints ``data`` (bytes by partition) are durable."""
        self._baselines.update(data)

    def back_to_checkpoints(self) -> None:
        """Every task back to its last durable checkpoint (a fresh one if none), the consumer seeks there."""
        daemon = self.daemon
        topics = daemon.config.topics
        daemon.feedback_hold.rewound(self.tasks)
        for partition in list(self.tasks):
            task = self.new_task(partition, self._baselines.get(partition))
            self.tasks[partition] = task
            for topic, offset in ((topics.input, task.offset), (topics.feedback, task.feedback_offset)):
                if not topic:
                    continue
                offset = offset if offset is not None else self._first_offsets.get((topic, partition))
                if offset is not None:
                    daemon.consumer.seek(TopicPartition(topic, partition), offset)
