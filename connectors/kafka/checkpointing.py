"""When and how the daemon makes its progress durable, and how it goes back to it after a failure.

Every ``checkpoint_every_messages`` records or ``checkpoint_every_seconds`` seconds -- and on
revocation and shutdown -- :meth:`Checkpointer.checkpoint` writes one changelog record per changed
task:

* ``at_least_once`` (default): flush outputs and dead letters (wait for the acks), write the
  changelog records and flush again, then commit the covered offsets.  A crash between checkpoints
  replays from the last one; the replayed outputs are byte-identical.
* ``exactly_once``: outputs, dead letters, changelog records and the offsets are one Kafka
  transaction (``send_offsets_to_transaction`` + ``commit_transaction``).

A failed send, flush or transaction makes :meth:`Checkpointer.rewind` put every task back to its last
durable checkpoint (deterministic replay) after an exponential back-off.  A changelog record too
large for the producer or the broker is not a passing failure (every retry would replay the same
messages and fail again): the daemon stops with :data:`EXIT_CHECKPOINT_TOO_LARGE` and says what to
change.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from connectors.kafka.checkpoint import Checkpoint
from connectors.kafka.logs import log_event
from connectors.kafka.transport import RecordTooLarge, TopicPartition, TransportError

if TYPE_CHECKING:
    from connectors.kafka.loop import Daemon

#: Exit code when a partition's checkpoint is larger than one changelog record may be.
EXIT_CHECKPOINT_TOO_LARGE = 5


class CheckpointTooLarge(Exception):
    """The checkpoint of ``partition`` (``size`` bytes) was refused as too large by the producer or the broker."""

    def __init__(self, partition: int, size: int, error: BaseException):
        super().__init__(f"the checkpoint of partition {partition} is {size} bytes: {error}")
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

    def processed(self, partition: int, n_input: int) -> None:
        """Records of ``partition`` processed (``n_input`` of them input records)."""
        self.dirty.add(partition)
        self.since_checkpoint += n_input

    def forget(self, partition: int) -> None:
        """``partition`` is not owned any more."""
        self.dirty.discard(partition)

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
        topics = daemon.config.topics
        producer = sender.producer
        try:
            if not sender.exactly_once:
                producer.flush(timeout=timeout)  # every output before the checkpoint is acknowledged
                if sender.failure is not None:
                    raise sender.failure
            sender.begin()
            points = {p: tasks[p].checkpoint() for p in partitions}
            data = {p: point.to_bytes() for p, point in points.items()}
            undelivered: list[TransportError] = []
            for p in partitions:
                try:
                    producer.send(topics.changelog, key=points[p].key, value=data[p], partition=p,
                                  on_error=undelivered.append)
                except RecordTooLarge as error:
                    raise CheckpointTooLarge(p, len(data[p]), error) from None
            offsets = self._offsets(points)
            self._settle(offsets, data, undelivered, timeout)
        except CheckpointTooLarge as error:
            self._abandon(error, partitions, time.monotonic() - started)
            self._too_large(error)
            return False
        except (TransportError, TimeoutError) as error:
            self._abandon(error, partitions, time.monotonic() - started)
            self._retry_later(error, partitions)
            return False
        partitions_state.checkpointed(data)
        self.dirty.clear()
        self.since_checkpoint = 0
        self._last_checkpoint = now = time.monotonic()
        seconds = now - started
        stats = daemon.stats
        stats.checkpoints += len(partitions)
        stats.checkpoint_seconds += seconds
        stats.last_checkpoint = now
        daemon.backoff.reset()
        if offsets and not sender.exactly_once:
            self._commit(offsets, commit_async)
        log_event(daemon.log, logging.DEBUG, "checkpoint", partitions=partitions, seconds=round(seconds, 4),
                  offsets={p: points[p].offset for p in partitions},
                  n_samples={p: points[p].n_samples for p in partitions})
        daemon.notify("on_checkpoint", partitions, seconds, True)
        return True

    def _settle(self, offsets: dict[TopicPartition, int], data: dict[int, bytes], undelivered: list[TransportError],
                timeout: float) -> None:
        """Commit the transaction (``exactly_once``) or wait for the acks; raise what failed the changelog ``data``.

        A transaction fails as a whole: the errors of its records say whether the broker refused one
        as too large (then the largest of the round is named).
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
        refused = next((error for error in undelivered if isinstance(error, RecordTooLarge)), None)
        if refused is not None:
            largest = max(data, key=lambda p: len(data[p]))
            raise CheckpointTooLarge(largest, len(data[largest]), refused)
        if settled is not None or undelivered:
            raise settled or undelivered[0]

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

    def _abandon(self, error: BaseException, partitions: list[int], seconds: float) -> None:
        """The checkpoint failed: count it, abort its transaction, fail the interval (the rewind replays it)."""
        daemon, sender = self.daemon, self.daemon.sender
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
        """Stop: the state no longer fits in one changelog record, and every retry would fail the same way."""
        daemon = self.daemon
        log_event(daemon.log, logging.ERROR, "checkpoint_too_large", partition=error.partition, bytes=error.size,
                  error=str(error.error),
                  fix="the group-robust post-processor keeps each sample waiting for its label (docs/daemon.md, "
                      "Checkpoint size): lower postprocessor.max_pending (a restored post-processor keeps the "
                      "value it was checkpointed with: use a new topics.changelog), or, with kafka.client = "
                      "kafka-python, raise producer.max_request_size above the checkpoint's size, and the changelog "
                      "topic's max.message.bytes on the broker with it")
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
