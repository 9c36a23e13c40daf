"""When and how the daemon makes its progress durable, and how it goes back to it after a failure.

Every ``checkpoint_every_messages`` records or ``checkpoint_every_seconds`` seconds -- and on
revocation and shutdown -- :meth:`Checkpointer.checkpoint` writes the checkpoint of every changed
task to the changelog: one record, or parts and a manifest when it is larger than
``processing.checkpoint_record_bytes`` (:mod:`connectors.kafka.changelog`).

* ``at_least_once`` (default): flush outputs and dead letters (wait for the acks), write the
  parts (and wait for their acks), then the checkpoints or manifests, flush again, then commit
  the covered offsets.  A crash between checkpoints replays from the last one; the replayed
  outputs are byte-identical (feedback waits until the replay has passed them,
  :mod:`connectors.kafka.feedback_hold`).
* ``exactly_once``: outputs, dead letters, changelog records and the offsets are one Kafka
  transaction (``send_offsets_to_transaction`` + ``commit_transaction``).

The parts of checkpoints that are no longer current are deleted (tombstones) with the next
checkpoint of their partition.  A failed send, flush or transaction makes
:meth:`Checkpointer.rewind` put every task back to its last durable checkpoint (deterministic
replay) after an exponential back-off.  A changelog record too large for the producer or the
broker is not a passing failure (every retry would replay the same messages and fail again): the
daemon stops with :data:`EXIT_CHECKPOINT_TOO_LARGE` and says what to change.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from connectors.kafka.changelog import ChangelogPartition, ChangelogRecords
from connectors.kafka.checkpoint import Checkpoint
from connectors.kafka.logs import log_event
from connectors.kafka.transport import RecordTooLarge, TopicPartition, TransportError

if TYPE_CHECKING:
    from connectors.kafka.loop import Daemon

#: Exit code when a changelog record is larger than the producer or the broker accepts.
EXIT_CHECKPOINT_TOO_LARGE = 5


class CheckpointTooLarge(Exception):
    """A changelog record of ``partition`` (``size`` bytes) was refused as too large by the producer or the broker."""

    def __init__(self, partition: int, size: int, error: BaseException):
        super().__init__(f"a changelog record of partition {partition} is {size} bytes: {error}")
        self.partition, self.size, self.error = partition, size, error


class Checkpointer:
    """The checkpoints of one daemon's tasks.

    Attributes
    ----------
    dirty : set[int]
        Partitions whose task changed since its last checkpoint.
    since_checkpoint : int
        Input records processed since the last checkpoint.

    Examples
    --------
    A checkpoint is due once a changed task has seen ``processing.checkpoint_every_messages``
    input records (or ``checkpoint_every_seconds`` have passed):

    >>> import time
    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.loop import Daemon
    >>> daemon = Daemon(load_config(env={}, overrides=["processing.checkpoint_every_messages=100"]))
    >>> checkpoints = daemon.checkpoints
    >>> checkpoints.due(time.monotonic())  # nothing changed
    False
    >>> checkpoints.processed(0, n_input=60)
    >>> checkpoints.due(time.monotonic())
    False
    >>> checkpoints.processed(1, n_input=40)
    >>> checkpoints.due(time.monotonic()), sorted(checkpoints.dirty), checkpoints.since_checkpoint
    (True, [0, 1], 100)
    """

    def __init__(self, daemon: Daemon):
        self.daemon = daemon
        self.dirty: set[int] = set()
        self.since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._retry_at = 0.0
        self._parts: dict[int, frozenset[bytes]] = {}  # the keys of the parts that may be current, by partition
        self._stale: dict[int, set[bytes]] = {}  # the keys of parts to delete, by partition

    def restored(self, partition: int, changelog: ChangelogPartition) -> None:
        """The task of ``partition`` was restored from ``changelog``: the parts it uses, and those to delete."""
        self._parts[partition] = changelog.current_parts()
        self._stale[partition] = changelog.stale_parts()

    def processed(self, partition: int, n_input: int) -> None:
        """Records of ``partition`` processed (``n_input`` of them input records)."""
        self.dirty.add(partition)
        self.since_checkpoint += n_input

    def forget(self, partition: int) -> None:
        """``partition`` is not owned any more."""
        self.dirty.discard(partition)
        self._parts.pop(partition, None)
        self._stale.pop(partition, None)

    def due(self, now: float) -> bool:
        """Whether a checkpoint is due (and not waiting for a retry after a failed one)."""
        if not self.dirty or now < self._retry_at:
            return False
        processing = self.daemon.config.processing
        return (self.since_checkpoint >= processing.checkpoint_every_messages
                or now - self._last_checkpoint >= processing.checkpoint_every_seconds)

    def checkpoint(self, timeout: float | None = None, commit_async: bool = False) -> bool:
        """Make the progress of every changed task durable, then commit its offsets."""
        daemon = self.daemon
        sender, partitions_state = daemon.sender, daemon.partitions
        tasks = partitions_state.tasks
        partitions = sorted(p for p in self.dirty if p in tasks)
        if sender.failure is not None:
            return False
        if not partitions and not sender.in_transaction:
            return True
        timeout = timeout if timeout is not None else daemon.config.kafka.max_block_ms / 1000
        started = time.monotonic()
        producer = sender.producer
        records: dict[int, ChangelogRecords] = {}
        try:
            if not sender.exactly_once:
                producer.flush(timeout=timeout)  # every output before the checkpoint is acknowledged
                if sender.failure is not None:
                    raise sender.failure
            sender.begin()
            points = {p: tasks[p].checkpoint() for p in partitions}
            data = {p: point.to_bytes() for p, point in points.items()}
            record_bytes = daemon.config.processing.checkpoint_record_bytes
            records = {p: ChangelogRecords.of(points[p].key, data[p], record_bytes) for p in partitions}
            undelivered: list[TransportError] = []
            for p in partitions:  # superseded parts deleted, then the new parts: acknowledged before their manifest
                for key in sorted(self._stale.get(p, set()) - records[p].part_keys):
                    self._send(p, key, None, undelivered)
                for key, value in records[p].parts:
                    self._send(p, key, value, undelivered)
            if any(written.parts for written in records.values()):
                producer.flush(timeout=timeout)
                self._raise_undelivered(undelivered, records)
            for p in partitions:
                self._send(p, points[p].key, records[p].head, undelivered)
            offsets = self._offsets(points)
            self._settle(offsets, records, undelivered, timeout)
        except CheckpointTooLarge as error:
            self._abandon(error, partitions, time.monotonic() - started, records)
            self._too_large(error)
            return False
        except (TransportError, TimeoutError) as error:
            self._abandon(error, partitions, time.monotonic() - started, records)
            self._retry_later(error, partitions)
            return False
        for p, written in records.items():  # the former parts are deleted with the next checkpoint
            self._stale[p] = set(self._parts.get(p, frozenset()) - written.part_keys)
            self._parts[p] = written.part_keys
        partitions_state.checkpointed(data)
        sender.checkpointed()
        self.dirty.clear()
        self.since_checkpoint = 0
        self._last_checkpoint = now = time.monotonic()
        seconds = now - started
        stats = daemon.stats
        for p in partitions:
            labels, errors = tasks[p].unreported()
            stats.labels.update(labels)
            stats.errors.update(errors)
        stats.checkpoints += len(partitions)
        stats.checkpoint_seconds += seconds
        stats.last_checkpoint = stats.last_contact = now  # the broker acknowledged it: a round trip
        daemon.backoff.reset()
        if offsets and not sender.exactly_once:
            self._commit(offsets, commit_async)
        log_event(daemon.log, logging.DEBUG, "checkpoint", partitions=partitions, seconds=round(seconds, 4),
                  offsets={p: points[p].offset for p in partitions},
                  n_samples={p: points[p].n_samples for p in partitions})
        daemon.notify("on_checkpoint", partitions, seconds, True)
        return True

    def _send(self, partition: int, key: bytes, value: bytes | None, undelivered: list[TransportError]) -> None:
        """Queue one changelog record of ``partition`` (``value`` ``None``: a tombstone)."""
        daemon = self.daemon
        try:
            daemon.sender.producer.send(daemon.config.topics.changelog, key=key, value=value, partition=partition,
                                        on_error=undelivered.append)
        except RecordTooLarge as error:
            raise CheckpointTooLarge(partition, len(value or b""), error) from None

    def _settle(self, offsets: dict[TopicPartition, int], records: dict[int, ChangelogRecords],
                undelivered: list[TransportError], timeout: float) -> None:
        """Commit the transaction (``exactly_once``) or wait for the acks; raise what failed the changelog ``records``.

        A transaction fails as a whole: the errors of its records say whether the broker refused one
        as too large.
        """
        sender = self.daemon.sender
        settled: TransportError | None = None
        try:
            if sender.exactly_once:
                if offsets:
                    sender.producer.send_offsets_to_transaction(offsets, self.daemon.consumer.group_metadata())
                sender.producer.commit_transaction()
                sender.in_transaction = False
            else:
                sender.producer.flush(timeout=timeout)
        except TransportError as error:
            settled = error
        self._raise_undelivered(undelivered, records, settled)

    @staticmethod
    def _raise_undelivered(undelivered: list[TransportError], records: dict[int, ChangelogRecords],
                           failure: TransportError | None = None) -> None:
        """Raise what failed: a record refused as too large (the largest of the round is named), else ``failure``."""
        refused = next((error for error in undelivered if isinstance(error, RecordTooLarge)), None)
        if refused is not None:
            largest = max(records, key=lambda p: records[p].largest)
            raise CheckpointTooLarge(largest, records[largest].largest, refused)
        if failure is not None or undelivered:
            raise failure or undelivered[0]

    def _offsets(self, points: dict[int, Checkpoint]) -> dict[TopicPartition, int]:
        topics = self.daemon.config.topics
        offsets = {}
        for p, point in points.items():
            if point.offset is not None:
                offsets[TopicPartition(topics.input, p)] = point.offset
            if topics.feedback and point.feedback_offset is not None:
                offsets[TopicPartition(topics.feedback, p)] = point.feedback_offset
        return offsets

    def _commit(self, offsets: dict, commit_async: bool) -> None:
        """Group offsets are informational (the changelog decides where a task resumes): failures only log."""
        daemon = self.daemon
        if not daemon.consumer_open:
            return
        try:
            daemon.consumer.commit(offsets, asynchronous=commit_async)
        except TransportError as error:
            daemon.stats.errors["commit_failed"] += 1
            log_event(daemon.log, logging.WARNING, "commit_failed", error=repr(error))

    def _abandon(self, error: BaseException, partitions: list[int], seconds: float,
                 records: dict[int, ChangelogRecords]) -> None:
        """The checkpoint failed: count it, abort its transaction, fail the interval (the rewind replays it).

        Its parts may have been written, and so may its manifest (a flush that timed out): they are
        deleted with the checkpoint after the next one that succeeds, whose manifest supersedes it.
        """
        daemon, sender = self.daemon, self.daemon.sender
        for p, written in records.items():  # current if its manifest arrived: superseded by the next that succeeds
            self._parts[p] = self._parts.get(p, frozenset()) | written.part_keys
        daemon.stats.errors["checkpoint_failed"] += 1
        if sender.exactly_once and sender.in_transaction:
            try:
                sender.producer.abort_transaction()
            except TransportError as abort_error:
                log_event(daemon.log, logging.WARNING, "abort_failed", error=repr(abort_error))
            sender.in_transaction = False
        sender.fail(error)
        daemon.notify("on_checkpoint", partitions, seconds, False)

    def _retry_later(self, error: BaseException, partitions: list[int]) -> None:
        """A passing failure: the next checkpoint waits for the back-off."""
        delay = self.daemon.backoff.next()
        self._retry_at = time.monotonic() + delay
        log_event(self.daemon.log, logging.WARNING, "checkpoint_failed", error=repr(error), partitions=partitions,
                  retry_in_s=delay)

    def _too_large(self, error: CheckpointTooLarge) -> None:
        """Stop: a changelog record is larger than the producer or the broker accepts, and every retry would be."""
        daemon = self.daemon
        record_bytes = daemon.config.processing.checkpoint_record_bytes
        log_event(daemon.log, logging.ERROR, "checkpoint_too_large", partition=error.partition, bytes=error.size,
                  error=str(error.error),
                  fix=f"checkpoints are written in records of up to processing.checkpoint_record_bytes = "
                      f"{record_bytes} bytes of state: set it below the producer's record limit "
                      "(kafka-python's producer.max_request_size, librdkafka's message.max.bytes) and the changelog "
                      "topic's max.message.bytes on the broker (docs/daemon.md, Checkpoint size)")
        daemon.give_up(EXIT_CHECKPOINT_TOO_LARGE, str(error))

    def rewind(self, failure: BaseException) -> None:
        """After ``failure``: a new producer, every task back to its last durable checkpoint, the consumer there."""
        daemon, sender = self.daemon, self.daemon.sender
        daemon.wait_after("rewind", failure)
        try:
            sender.renew()
        except TransportError as producer_error:  # broker still away: try again at the next iteration
            log_event(daemon.log, logging.WARNING, "producer_unavailable", error=repr(producer_error))
            return
        sender.failure = None
        daemon.partitions.back_to_checkpoints()
        self.dirty.clear()
        self.since_checkpoint = 0
        daemon.stats.rewinds += 1
        daemon.notify("on_rewind", repr(failure))
