"""``streamfair serve``: the Kafka consumer daemon (fair predictions on a live stream).

One :class:`~connectors.kafka.task.PartitionTask` per assigned input partition.  The loop polls, hands
each partition's records to its task (predictions to the output topic, bad records to the
dead-letter topic), and every ``checkpoint_every_messages`` records or ``checkpoint_every_seconds``
seconds -- and on revocation and shutdown -- checkpoints:

* ``at_least_once`` (default): flush outputs and dead letters (wait for the acks), write one
  changelog record per changed task and flush again, then commit the covered offsets.  A crash
  between checkpoints replays from the last one; the replayed outputs are byte-identical.
* ``exactly_once``: outputs, dead letters, changelog records and the offsets are one Kafka
  transaction (``send_offsets_to_transaction`` + ``commit_transaction``).  Tansu keeps aborted
  records visible to ``read_committed`` readers, so this mode cannot be verified against it.

On assignment a task is restored from the latest changelog record for its partition and the
consumer seeks to the offset stored in it (the changelog, not the group offset, is the source of
truth).  A failed send, flush or transaction makes every task go back to its last checkpoint
(deterministic replay) after an exponential back-off; a missing broker is waited for the same way.

Whatever goes wrong with one message dead-letters that message (the task isolates it).  A position
outside the input log (the topic created again, beyond its high-watermark, before its start) is an
error handled by ``processing.out_of_range``; a codec the client cannot read stops the daemon with
its own exit code.  A stop signal exits 0 in every state.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from typing import Any, Sequence

from kafka import TopicPartition
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.errors import KafkaConfigurationError, KafkaError, MessageSizeTooLargeError, UnsupportedCodecError
from kafka.structs import OffsetAndMetadata

from connectors.kafka.checkpoint import Checkpoint, checkpoint_key
from connectors.kafka.codec import FeedbackParser, InputParser, dead_letter_headers
from connectors.kafka.config import (
    CODEC_PACKAGES, Config, ConfigError, add_config_arguments, config_from_args, log_level,
)
from connectors.kafka.clients import TopicLayout, ensure_topics, make_consumer, make_producer, read_latest, topic_id
from connectors.kafka.logs import log_event, setup_logging
from connectors.kafka.models import BaseModels
from connectors.kafka.observer import DaemonObserver, DaemonStats
from connectors.kafka.task import PartitionTask
from connectors.prometheus import make_observer

#: Seconds the final checkpoint and closing the clients are planned to take after a stop signal.
SHUTDOWN_BUDGET_S = 7.0
#: After a stop signal the process exits (code 1) at the latest after this many seconds.
SHUTDOWN_DEADLINE_S = 9.5
RESTORE_TIMEOUT_S = 30.0
#: Exit code when a position outside the input log stops the daemon (``processing.out_of_range = "fail"``).
EXIT_OUT_OF_RANGE = 3
#: Exit code when a topic holds record batches compressed with a codec this installation cannot read.
EXIT_UNSUPPORTED_CODEC = 4


class Backoff:
    """Exponential back-off delays: ``initial * 2**k`` capped at ``maximum``; :meth:`reset` on success.

    >>> backoff = Backoff(0.1, 0.5)
    >>> [backoff.next() for _ in range(4)]
    [0.1, 0.2, 0.4, 0.5]
    """

    def __init__(self, initial: float = 0.1, maximum: float = 5.0):
        self.initial, self.maximum = initial, maximum
        self._delay = initial

    def next(self) -> float:
        delay = self._delay
        self._delay = min(self.maximum, self._delay * 2)
        return delay

    def reset(self) -> None:
        self._delay = self.initial


class _Listener(ConsumerRebalanceListener):
    """Runs on kafka-python's I/O thread: must not call blocking consumer methods."""

    def __init__(self, daemon: Daemon):
        self.daemon = daemon

    def on_partitions_revoked(self, revoked):
        self.daemon._on_revoked(revoked, lost=False)

    def on_partitions_lost(self, lost):
        self.daemon._on_revoked(lost, lost=True)

    def on_partitions_assigned(self, assigned):
        self.daemon._on_assigned(assigned)


class Daemon:
    """The consume-predict-produce loop with per-partition state.

    Parameters
    ----------
    config
        A validated :class:`~connectors.kafka.config.Config`.
    observers
        :class:`~connectors.kafka.observer.DaemonObserver` instances (metrics).
    logger
        Where structured events go (default: the ``streamfair`` logger).

    Attributes
    ----------
    stats : DaemonStats
        Counters for metrics.
    tasks : dict[int, PartitionTask]
        Tasks of the input partitions currently owned.
    """

    def __init__(self, config: Config, observers: Sequence[DaemonObserver] = (), logger: logging.Logger | None = None):
        self.config = config
        self.observers = list(observers)
        self.log = logger or logging.getLogger("streamfair")
        self.stats = DaemonStats()
        self.tasks: dict[int, PartitionTask] = {}
        self.layout: TopicLayout | None = None
        self._stop = threading.Event()
        self._lock = threading.RLock()
        self._exactly_once = config.processing.guarantee == "exactly_once"
        self._output_topic = config.topics.output
        self._n_groups = config.n_groups
        self._classes = config.classes()
        self._parser = InputParser(self._n_groups, config.processing.max_message_bytes, config.models.features or None,
                                   models=config.models.enabled,
                                   n_classes=None if self._classes is None else len(self._classes))
        self._feedback_parser = FeedbackParser(config.group_labels(), config.processing.max_message_bytes,
                                               config.models.features or None,
                                               labels_only=config.postprocessor.robust and not config.models.learn,
                                               classes=self._classes)
        self._models: BaseModels | None = None
        self._baselines: dict[int, bytes | None] = {}  # last durable checkpoint per task (None: fresh)
        self._first_offsets: dict[tuple[str, int], int] = {}  # where a fresh task started reading
        self._to_restore: set[int] = set()
        self._dirty: set[int] = set()
        self._since_checkpoint = 0
        self._last_checkpoint = time.monotonic()
        self._checkpoint_retry_at = 0.0
        self._failure: BaseException | None = None
        self._in_transaction = False
        self._backoff = Backoff()
        self._consumer = self._producer = self._restorer = None
        self._transactional_id: str | None = None
        self._producer_generation = 0
        self._errback = None
        self._co_partitioned = False
        self._dead_co_partitioned = False
        self._closing = False
        self._input_topic_id: str | None = None  # the input topic's id as last seen in metadata
        self._seen_topic_id: str | None = None  # ... in the group consumer's metadata
        self._log_start: dict[int, int] = {}  # first offset of each owned input partition, read at restore
        self._fatal: tuple[int, str] | None = None  # (exit code, why) when the daemon stops on its own
        self._unassigned_since: float | None = None  # since when no partition is assigned (after subscribing)
        self._progress = (time.monotonic(), 0, 0)  # time, consumed and produced at the last progress line

    # ------------------------------------------------------------------ public
    def stop(self) -> None:
        """Ask the loop to finish: safe from signal handlers and other threads."""
        self._stop.set()

    @property
    def ready(self) -> bool:
        """Assigned at least one partition and every assigned task restored (for readiness probes)."""
        return bool(self.tasks) and not self._to_restore

    def lag(self) -> dict[int, int]:
        """Records behind the fetch high-watermark, per owned input partition (call on the daemon's thread)."""
        lags = {}
        if self._consumer is None:
            return lags
        for partition, task in self.tasks.items():
            try:
                highwater = self._consumer.highwater(TopicPartition(self.config.topics.input, partition))
            except KafkaError:
                continue
            if highwater is not None and task.offset is not None:
                lags[partition] = max(0, highwater - task.offset)
        return lags

    def run(self, once: bool = False, max_messages: int | None = None) -> int:
        """Process until :meth:`stop` (or, with ``once``, until every owned partition is drained).

        Returns 0 after :meth:`stop` (a failed final checkpoint is then only a warning: at-least-once
        replays cover it), 1 if the final checkpoint of a bounded run failed, and
        :data:`EXIT_OUT_OF_RANGE` or :data:`EXIT_UNSUPPORTED_CODEC` when the daemon stopped itself.
        """
        if not self._open():  # stopped while waiting for the broker: nothing to checkpoint
            log_event(self.log, logging.INFO, "stopped", ok=True, consumed=0, produced=0, dead_letters={},
                      checkpoints=0)
            return 0
        ok = False
        try:
            self._notify("on_start")
            while not self._stop.is_set():
                self._iterate()
                if once and self._drained():
                    log_event(self.log, logging.INFO, "drained", consumed=self.stats.consumed)
                    break
                if max_messages is not None and self.stats.consumed >= max_messages:
                    break
            requested = self._stop.is_set()  # by stop() (a signal), rather than --once / --max-messages
            deadline = time.monotonic() + SHUTDOWN_BUDGET_S
            with self._lock:
                ok = self._checkpoint(timeout=max(0.5, (deadline - time.monotonic()) / 2))
            self._notify("on_stop")
        finally:
            self._close()
        log_event(self.log, logging.INFO, "stopped", ok=ok, consumed=self.stats.consumed, produced=self.stats.produced,
                  dead_letters=dict(self.stats.dead_letters), checkpoints=self.stats.checkpoints,
                  **({"fatal": self._fatal[1]} if self._fatal else {}))
        if self._fatal is not None:
            return self._fatal[0]
        if not ok and requested:  # a stop signal: the work since the last checkpoint is replayed, not lost
            log_event(self.log, logging.WARNING, "final_checkpoint_failed",
                      detail="the next owner of these partitions replays them from their last checkpoint "
                             "(byte-identical outputs)")
            return 0
        return 0 if ok else 1

    # ------------------------------------------------------------------ set-up
    def _open(self) -> bool:
        """Topics, models and clients; waits for the broker with back-off.  False if stopped meanwhile."""
        config = self.config
        if config.models.enabled:
            self._models = BaseModels.load(config.models.eta, config.models.tau, config.group_labels(), self._classes)
        if config.ignored_variables:
            log_event(self.log, logging.WARNING, "unknown_variables", variables=list(config.ignored_variables),
                      hint="ignored: not STREAMFAIR_<SECTION>_<NAME> settings (Kubernetes adds such variables for "
                           "Services whose name starts with streamfair; enableServiceLinks: false stops that)")
        if config.processing.guarantee == "exactly_once":
            self._transactional_id = config.processing.transactional_id or (
                f"{config.kafka.client_id}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        while not self._stop.is_set():
            try:
                self._closing = False
                self.layout = ensure_topics(config)
                self._new_producer()
                self._restorer = make_consumer(config, group=False)
                self._consumer = make_consumer(config)
                break
            except KafkaConfigurationError as error:
                self._close()
                raise ValueError(f"kafka: {error}") from None
            except KafkaError as error:
                self._close()
                self._wait_after("broker_unavailable", error)
        else:
            return False
        self._backoff.reset()
        layout = self.layout
        self._co_partitioned = layout.output_partitions >= layout.input_partitions
        self._dead_co_partitioned = layout.dead_letter_partitions >= layout.input_partitions
        topics = [config.topics.input] + ([config.topics.feedback] if config.topics.feedback else [])
        self._consumer.subscribe(topics, listener=_Listener(self))
        self._unassigned_since = now = time.monotonic()
        self._progress = (now, self.stats.consumed, self.stats.produced)
        log_event(self.log, logging.INFO, "started", topics=topics, group_id=config.kafka.group_id,
                  guarantee=config.processing.guarantee, partitions=layout.input_partitions,
                  batch_size=config.processing.batch_size)
        return True

    def _new_producer(self) -> None:
        """(Re)create the producer: after a failure its idempotence/transaction state may be unusable."""
        old, self._producer = self._producer, None
        self._in_transaction = False
        if old is not None:
            try:
                old.close(timeout=0)
            except Exception as error:  # a broken producer may fail to close; it is dropped anyway
                log_event(self.log, logging.DEBUG, "close_failed", client="producer", error=repr(error))
        producer = make_producer(self.config, self._transactional_id)
        if self._transactional_id:
            producer.init_transactions()
        self._producer = producer
        self._producer_generation += 1
        generation = self._producer_generation
        self._errback = lambda error: self._on_send_error(error, generation)

    def _close(self) -> None:
        self._closing = True
        for name in ("_consumer", "_restorer", "_producer"):
            client = getattr(self, name)
            setattr(self, name, None)
            if client is None:
                continue
            try:
                if name == "_producer":
                    client.close(timeout=1.0)
                else:
                    client.close(autocommit=False, timeout_ms=1000)
            except Exception as error:  # closing must not mask the real outcome
                log_event(self.log, logging.WARNING, "close_failed", client=name.strip("_"), error=repr(error))

    def _give_up(self, code: int, reason: str) -> None:
        """Stop after this iteration (with a final checkpoint of what was processed) and exit with ``code``."""
        self._fatal = (code, reason)
        self._stop.set()

    def _unsupported_codec(self, error: UnsupportedCodecError, topic: str) -> None:
        """A batch no retry can read: stop with a message saying what to install, not a silent poll loop."""
        packages = ", ".join(f"{codec}: {package}" for codec, package in CODEC_PACKAGES.items())
        self.stats.errors["unsupported_codec"] += 1
        log_event(self.log, logging.ERROR, "unsupported_codec", topic=topic, error=str(error),
                  fix=f"install the codec's package ({packages}; all come with streamfair[connectors])")
        self._give_up(EXIT_UNSUPPORTED_CODEC, f"{topic}: {error}")

    def _wait_after(self, kind: str, error: BaseException) -> None:
        delay = self._backoff.next()
        self.stats.errors[kind] += 1
        log_event(self.log, logging.WARNING, kind, error=repr(error), retry_in_s=delay)
        self._stop.wait(delay)

    # ------------------------------------------------------------------ task construction
    def _task_options(self) -> dict[str, Any]:
        processing = self.config.processing
        return {
            "parser": self._parser,
            "batch_size": processing.batch_size,
            "mode": processing.mode,
            "distribution": processing.distribution,
            "learn_models": self.config.models.learn,
            "feedback_parser": self._feedback_parser if self.config.topics.feedback else None,
            "output_key": processing.output_key,
            "propagate_headers": processing.propagate_headers,
        }

    def _new_task(self, partition: int, data: bytes | None) -> PartitionTask:
        """A task from checkpoint bytes, or a fresh one (``data=None``)."""
        if data is not None:
            point = Checkpoint.from_bytes(data)
            task = PartitionTask.from_checkpoint(point, models=self._task_models(), **self._task_options())
            expected = self.config.postprocessor.postprocessor_class
            if type(task.fair) is not expected:  # its inputs would not even parse: refuse rather than guess
                raise ConfigError(
                    f"postprocessor: the changelog {self.config.topics.changelog!r} holds a {type(task.fair).__name__} "
                    f"for partition {partition}, but the configuration builds a {expected.__name__}; "
                    "use a new changelog topic to change the post-processor's class")
            return task
        return PartitionTask(self.config.topics.input, partition, self.config.postprocessor.build(),
                             models=self._task_models(), **self._task_options())

    def _task_models(self) -> BaseModels | None:
        """Tasks share the base models unless they learn online (then each has its own copy)."""
        if self._models is None or not self.config.models.learn:
            return self._models
        return BaseModels.from_bytes(self._models.to_bytes(), self._models.groups, self._models.classes)

    # ------------------------------------------------------------------ rebalancing (I/O thread)
    def _on_assigned(self, assigned) -> None:
        with self._lock:
            partitions = sorted(tp.partition for tp in assigned if tp.topic == self.config.topics.input)
            new = [p for p in partitions if p not in self.tasks]
            self._to_restore.update(new)
            self._consumer.pause(*self._partitions_of(new))
            log_event(self.log, logging.INFO, "assigned", partitions=partitions)

    def _on_revoked(self, revoked, lost: bool) -> None:
        with self._lock:
            partitions = sorted(tp.partition for tp in revoked if tp.topic == self.config.topics.input)
            if not lost and not self._closing:  # closing: the final checkpoint has been written (or failed)
                self._checkpoint(commit_async=True)
            for partition in partitions:
                self.tasks.pop(partition, None)
                self._baselines.pop(partition, None)
                self._dirty.discard(partition)
                self._to_restore.discard(partition)
                for topic in (self.config.topics.input, self.config.topics.feedback):
                    self._first_offsets.pop((topic, partition), None)
            log_event(self.log, logging.INFO, "lost" if lost else "revoked", partitions=partitions)
            self._notify("on_revoked", partitions)

    def _partitions_of(self, partitions: Sequence[int]) -> list[TopicPartition]:
        topics = [self.config.topics.input] + ([self.config.topics.feedback] if self.config.topics.feedback else [])
        return [TopicPartition(topic, p) for topic in topics for p in partitions]

    def _restore(self) -> None:
        """Restore the tasks of newly assigned partitions from the changelog, seek, resume."""
        partitions = sorted(self._to_restore)
        topics = self.config.topics
        started = time.monotonic()
        try:
            latest = read_latest(self._restorer, topics.changelog,
                                 {p: checkpoint_key(topics.input, p) for p in partitions}, RESTORE_TIMEOUT_S,
                                 self._stop)
            self._restorer.topics()  # fresh metadata: the input topic's current id
            starts = self._restorer.beginning_offsets([TopicPartition(topics.input, p) for p in partitions])
        except UnsupportedCodecError as error:
            self._unsupported_codec(error, topics.changelog)
            return
        except (KafkaError, TimeoutError) as error:
            if not self._stop.is_set():
                self._wait_after("restore_failed", error)
            return
        self._input_topic_id = topic_id(self._restorer, topics.input) or self._input_topic_id
        seconds = time.monotonic() - started
        for partition in partitions:
            data = latest.get(partition)
            task = self._new_task(partition, data)
            task.topic_id = task.topic_id or self._input_topic_id
            self.tasks[partition] = task
            self._baselines[partition] = data
            self._log_start[partition] = starts.get(TopicPartition(topics.input, partition), 0)
            if task.offset is not None:
                self._consumer.seek(TopicPartition(topics.input, partition), task.offset)
            if task.feedback_offset is not None:
                self._consumer.seek(TopicPartition(topics.feedback, partition), task.feedback_offset)
            self.stats.restores += data is not None
            log_event(self.log, logging.INFO, "restored", partition=partition, checkpoint=data is not None,
                      offset=task.offset, n_samples=task.fair.n_samples, seconds=round(seconds, 4))
            self._notify("on_restored", partition, task.fair.n_samples, task.offset, seconds)
        self._to_restore.difference_update(partitions)
        self._consumer.resume(*self._partitions_of(partitions))
        self._backoff.reset()
        self._notify("on_assigned", sorted(self.tasks))

    # ------------------------------------------------------------------ the loop
    def _iterate(self) -> None:
        with self._lock:
            if self._failure is not None:
                self._rewind()
            if self._to_restore:
                self._restore()
        try:
            batch = self._consumer.poll(timeout_ms=self.config.kafka.poll_timeout_ms)
        except UnsupportedCodecError as error:
            self._unsupported_codec(error, ", ".join(sorted({tp.topic for tp in self._consumer.assignment()})))
            return
        except KafkaError as error:
            self._wait_after("poll_failed", error)
            return
        with self._lock:
            try:
                self._process(batch)
            except Exception as error:  # noqa: BLE001 -- tasks isolate messages; this is the daemon's own
                # failure (e.g. a dead letter that could not be sent): the half-processed poll is dropped
                # by going back to the last checkpoint, and no checkpoint is written before that.
                self._failure = error
                self.stats.errors["process_failed"] += 1
                log_event(self.log, logging.ERROR, "process_failed", error=repr(error))
            now = time.monotonic()
            self.stats.last_loop = now
            if self._checkpoint_due(now):
                self._checkpoint()
            self._watch_assignment(now)
            if self.config.log.progress_seconds and now - self._progress[0] >= self.config.log.progress_seconds:
                self._log_progress(now)
            self._notify("on_loop")

    # ------------------------------------------------------------------ what an operator sees
    def _watch_assignment(self, now: float) -> None:
        """A WARNING each session timeout during which this member owns no partition."""
        if self.tasks or self._to_restore:
            self._unassigned_since = None
            return
        if self._unassigned_since is None:
            self._unassigned_since = now
        seconds = now - self._unassigned_since
        session = self.config.kafka.session_timeout_ms / 1000
        if seconds < session:
            return
        self._unassigned_since = now  # the next warning after another session timeout
        config = self.config
        layout = self.layout
        log_event(self.log, logging.WARNING, "no_assignment", seconds=round(seconds, 1), group_id=config.kafka.group_id,
                  topic=config.topics.input, partitions=layout.input_partitions if layout else None,
                  check=("members of kafka.group_id beyond the input's partition count get nothing (scale down or "
                         "add partitions); another member may hold the partitions; a broker that wedges a group "
                         "whose member left during its first join (Tansu does) recovers after minutes, or with a "
                         "new kafka.group_id"))

    def _log_progress(self, now: float) -> None:
        """The INFO ``progress`` line: rates since the last one, lag, dead letters by reason."""
        since, consumed, produced = self._progress
        interval = max(now - since, 1e-9)
        stats = self.stats
        log_event(self.log, logging.INFO, "progress", partitions=sorted(self.tasks), consumed=stats.consumed,
                  produced=stats.produced, interval_s=round(interval, 3),
                  consumed_per_s=round((stats.consumed - consumed) / interval, 1),
                  produced_per_s=round((stats.produced - produced) / interval, 1),
                  lag={str(p): lag for p, lag in sorted(self.lag().items())}, dead_letters=dict(stats.dead_letters),
                  checkpoints=stats.checkpoints, rewinds=stats.rewinds, errors=dict(stats.errors))
        self._progress = (now, stats.consumed, stats.produced)

    def _process(self, batch: dict) -> None:
        topics = self.config.topics
        moved = self._check_positions()
        for tp, records in batch.items():
            task = self.tasks.get(tp.partition)
            if task is None or tp.partition in self._to_restore or (tp.topic, tp.partition) in moved:
                continue  # not ours any more, not restored yet, or repositioned (the seek will re-fetch)
            key = (tp.topic, tp.partition)
            if key not in self._first_offsets and self._baselines.get(tp.partition) is None:
                self._first_offsets[key] = records[0].offset
            started = time.monotonic()
            dead_before = sum(self.stats.dead_letters.values())
            if tp.topic == topics.input:
                if self.stats.first_record is None:
                    self.stats.first_record = started
                task.process(records, self._emit, self._dead)
                self.stats.consumed += len(records)
                self._since_checkpoint += len(records)
            else:
                accepted = task.add_feedback(records, self._dead)
                self.stats.feedback += len(accepted)
                self._notify("on_feedback", task, accepted)
            self._dirty.add(tp.partition)
            self._notify("on_records", tp.partition, len(records),
                         sum(self.stats.dead_letters.values()) - dead_before, time.monotonic() - started)

    # ------------------------------------------------------------------ positions outside the log
    def _check_positions(self) -> set[tuple[str, int]]:
        """Owned input (and feedback) partitions whose position is outside their log, after the policy.

        A position is outside when the input topic has been created again since it was read (a new
        topic id), lies beyond the fetch high-watermark (Tansu then answers every fetch with nothing,
        silently) or before the log start.
        """
        topics = self.config.topics
        current = topic_id(self._consumer, topics.input)
        if current is not None and current != self._seen_topic_id:
            self._seen_topic_id = self._input_topic_id = current
        moved = set()
        for partition, task in self.tasks.items():
            if partition in self._to_restore:
                continue
            positions = [(topics.input, task.offset)] + ([(topics.feedback, task.next_feedback_offset)]
                                                          if topics.feedback else [])
            for topic, position in positions:
                cause, highwater = self._outside(topic, partition, position, task)
                if cause is not None and self._reposition(topic, partition, task, cause, highwater):
                    moved.add((topic, partition))
        return moved

    def _outside(self, topic: str, partition: int, position: int | None,
                 task: PartitionTask) -> tuple[str | None, int | None]:
        """Why ``position`` of ``topic``'s ``partition`` is outside its log (``None``: it is not), and the log's end."""
        if position is None:
            return None, None
        try:
            highwater = self._consumer.highwater(TopicPartition(topic, partition))
        except KafkaError:
            return None, None
        is_input = topic == self.config.topics.input
        if is_input and self._input_topic_id and task.topic_id and task.topic_id != self._input_topic_id:
            return "the input topic was created again", highwater
        if highwater is not None and position > highwater:
            return "beyond the high-watermark", highwater
        if is_input and position < self._log_start.get(partition, 0):
            return "before the log start", highwater
        return None, highwater

    def _reposition(self, topic: str, partition: int, task: PartitionTask, cause: str, highwater: int | None) -> bool:
        """Apply ``processing.out_of_range`` to ``task``'s position in ``topic``; False while the log's end is unknown."""
        policy = self.config.processing.out_of_range
        if policy == "latest" and highwater is None:
            return False  # the next fetch tells where the log ends
        tp = TopicPartition(topic, partition)
        is_input = topic == self.config.topics.input
        try:
            start = self._restorer.beginning_offsets([tp])[tp]
        except KafkaError:
            start = self._log_start.get(partition, 0) if is_input else 0
        if is_input:
            self._log_start[partition] = start
        position = task.offset if is_input else task.next_feedback_offset
        log_event(self.log, logging.ERROR, "position_out_of_range", topic=topic, partition=partition,
                  position=position, log_start=start, high_watermark=highwater, cause=cause, policy=policy,
                  **({"topic_id": task.topic_id, "current_topic_id": self._input_topic_id} if is_input else {}))
        self.stats.errors["out_of_range"] += 1
        if policy == "fail":
            self._give_up(EXIT_OUT_OF_RANGE, f"{topic} partition {partition}: position {position} {cause}")
            return True
        target = start if policy == "earliest" else highwater
        if is_input:
            task.offset, task.topic_id = target, self._input_topic_id
        else:
            task.move_feedback(target)
        self._consumer.seek(tp, target)
        self._dirty.add(partition)  # the next checkpoint records the new position
        return True

    def _send(self, topic: str, **record: Any) -> None:
        """Queue one record.

        A record too large for the producer raises :class:`MessageSizeTooLargeError` (it is that
        record's problem).  Any other Kafka error fails the interval since the last checkpoint, which
        is replayed after the rewind, so the rest of the poll is not sent.
        """
        if self._failure is not None:
            return
        try:
            if self._exactly_once and not self._in_transaction:
                self._producer.begin_transaction()
                self._in_transaction = True
            self._producer.send(topic, **record).add_errback(self._errback)
        except MessageSizeTooLargeError:
            raise
        except KafkaError as error:
            self._failure = error

    def _emit(self, key: bytes, value: bytes, timestamp: int, partition: int, headers: list | None = None) -> None:
        self._send(self._output_topic, value=value, key=key, partition=partition if self._co_partitioned else None,
                   timestamp_ms=timestamp if timestamp >= 0 else None, headers=headers)
        self.stats.produced += 1

    def _dead(self, record: Any, reason: str, detail: str, error_type: str | None = None) -> None:
        headers = dead_letter_headers(reason, detail, record.topic, record.partition, record.offset,
                                      list(record.headers or []), error_type)
        partition = record.partition if self._dead_co_partitioned else None
        key = record.key if record.key is not None else b""  # a record needs a key or a value
        try:
            self._send(self.config.topics.dead_letter, value=record.value,
                       key=record.key if record.value is not None else key, headers=headers, partition=partition)
        except MessageSizeTooLargeError:  # keep the reason and the source position, drop the bytes
            headers.append(("streamfair.value_dropped", b"too large for the producer"))
            self._send(self.config.topics.dead_letter, value=None, key=key, headers=headers, partition=partition)
        self.stats.dead_letters[reason] += 1
        self._notify("on_dead_letter", reason, record.topic, record.partition)
        log_event(self.log, logging.DEBUG, "dead_letter", reason=reason, topic=record.topic,
                  partition=record.partition, offset=record.offset, **({"error_type": error_type} if error_type else {}))

    def _on_send_error(self, error: BaseException, generation: int) -> None:  # producer I/O thread
        if self._failure is None and generation == self._producer_generation:
            self._failure = error

    def _checkpoint_due(self, now: float) -> bool:
        if not self._dirty or now < self._checkpoint_retry_at:
            return False
        processing = self.config.processing
        return (self._since_checkpoint >= processing.checkpoint_every_messages
                or now - self._last_checkpoint >= processing.checkpoint_every_seconds)

    def _drained(self) -> bool:
        """Every owned partition read up to its fetch high-watermark (the ``--once`` end)."""
        if not self.tasks or self._to_restore:
            return False
        try:
            for tp in self._consumer.assignment():
                highwater = self._consumer.highwater(tp)
                position = self._consumer.position(tp, timeout_ms=0)
                if highwater is None or position is None or position < highwater:
                    return False
        except KafkaError:
            return False
        return True

    # ------------------------------------------------------------------ checkpoints
    def _checkpoint(self, timeout: float | None = None, commit_async: bool = False) -> bool:
        """Make the progress of every changed task durable, then commit its offsets."""
        partitions = sorted(p for p in self._dirty if p in self.tasks)
        if self._failure is not None:
            return False
        if not partitions and not self._in_transaction:
            return True
        timeout = timeout if timeout is not None else self.config.kafka.max_block_ms / 1000
        started = time.monotonic()
        topics = self.config.topics
        try:
            if not self._exactly_once:
                self._producer.flush(timeout=timeout)  # every output before the checkpoint is acknowledged
                if self._failure is not None:
                    raise self._failure
            if self._exactly_once and not self._in_transaction:
                self._producer.begin_transaction()
                self._in_transaction = True
            points = {p: self.tasks[p].checkpoint() for p in partitions}
            data = {p: point.to_bytes() for p, point in points.items()}
            futures = [self._producer.send(topics.changelog, key=points[p].key, value=data[p], partition=p)
                       for p in partitions]
            offsets = self._offsets(points)
            if self._exactly_once:
                if offsets:
                    self._producer.send_offsets_to_transaction(offsets, self._consumer.group_metadata())
                self._producer.commit_transaction()
                self._in_transaction = False
            else:
                self._producer.flush(timeout=timeout)
                for future in futures:
                    future.get(timeout=0)
        except (KafkaError, TimeoutError) as error:
            self._checkpoint_failed(error, partitions, time.monotonic() - started)
            return False
        self._baselines.update(data)
        for p in partitions:
            self._first_offsets.pop((topics.input, p), None)
            if topics.feedback:
                self._first_offsets.pop((topics.feedback, p), None)
        self._dirty.clear()
        self._since_checkpoint = 0
        self._last_checkpoint = now = time.monotonic()
        seconds = now - started
        self.stats.checkpoints += len(partitions)
        self.stats.checkpoint_seconds += seconds
        self.stats.last_checkpoint = now
        self._backoff.reset()
        if offsets and not self._exactly_once:
            self._commit(offsets, commit_async)
        log_event(self.log, logging.DEBUG, "checkpoint", partitions=partitions, seconds=round(seconds, 4),
                  offsets={p: points[p].offset for p in partitions},
                  n_samples={p: points[p].n_samples for p in partitions})
        self._notify("on_checkpoint", partitions, seconds, True)
        return True

    def _offsets(self, points: dict[int, Checkpoint]) -> dict[TopicPartition, OffsetAndMetadata]:
        topics = self.config.topics
        offsets = {}
        for p, point in points.items():
            if point.offset is not None:
                offsets[TopicPartition(topics.input, p)] = OffsetAndMetadata(point.offset, "", -1)
            if topics.feedback and point.feedback_offset is not None:
                offsets[TopicPartition(topics.feedback, p)] = OffsetAndMetadata(point.feedback_offset, "", -1)
        return offsets

    def _commit(self, offsets: dict, commit_async: bool) -> None:
        """Group offsets are informational (the changelog decides where a task resumes): failures only log."""
        if self._consumer is None:
            return
        try:
            if commit_async:
                self._consumer.commit_async(offsets)
            else:
                self._consumer.commit(offsets)
        except KafkaError as error:
            self.stats.errors["commit_failed"] += 1
            log_event(self.log, logging.WARNING, "commit_failed", error=repr(error))

    def _checkpoint_failed(self, error: BaseException, partitions: list[int], seconds: float) -> None:
        self.stats.errors["checkpoint_failed"] += 1
        if self._exactly_once and self._in_transaction:
            try:
                self._producer.abort_transaction()
            except KafkaError as abort_error:
                log_event(self.log, logging.WARNING, "abort_failed", error=repr(abort_error))
            self._in_transaction = False
        self._failure = self._failure or error
        delay = self._backoff.next()
        self._checkpoint_retry_at = time.monotonic() + delay
        log_event(self.log, logging.WARNING, "checkpoint_failed", error=repr(error), partitions=partitions,
                  retry_in_s=delay)
        self._notify("on_checkpoint", partitions, seconds, False)

    def _rewind(self) -> None:
        """A new producer, every task back to its last durable checkpoint, the consumer seeks there."""
        error = self._failure
        self._wait_after("rewind", error)
        try:
            self._new_producer()
        except KafkaError as producer_error:  # broker still away: try again at the next iteration
            log_event(self.log, logging.WARNING, "producer_unavailable", error=repr(producer_error))
            return
        self._failure = None
        topics = self.config.topics
        for partition in list(self.tasks):
            task = self._new_task(partition, self._baselines.get(partition))
            self.tasks[partition] = task
            for topic, offset in ((topics.input, task.offset), (topics.feedback, task.feedback_offset)):
                if not topic:
                    continue
                offset = offset if offset is not None else self._first_offsets.get((topic, partition))
                if offset is not None:
                    self._consumer.seek(TopicPartition(topic, partition), offset)
        self._dirty.clear()
        self._since_checkpoint = 0
        self.stats.rewinds += 1
        self._notify("on_rewind", repr(error))

    def _notify(self, event: str, *args: Any) -> None:
        for observer in self.observers:
            try:
                getattr(observer, event)(self, *args)
            except Exception as error:  # an observer must never stop the daemon
                self.stats.errors["observer_failed"] += 1
                log_event(self.log, logging.WARNING, "observer_failed", observer=type(observer).__name__,
                          hook=event, error=repr(error))


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_arguments(parser)
    parser.add_argument("--once", action="store_true", help="stop when every owned partition is drained")
    parser.add_argument("--max-messages", type=int, default=None, help="stop after about this many input records")


def metrics_observers(config: Config) -> list[DaemonObserver]:
    """:func:`connectors.prometheus.make_observer` when ``metrics.port`` is set."""
    return [make_observer(config)] if config.metrics.port else []


def _give_up(logger: logging.Logger) -> None:
    """Last resort when a blocking client call (e.g. a transaction commit to a dead broker) hangs."""
    log_event(logger, logging.ERROR, "shutdown_timeout", seconds=SHUTDOWN_DEADLINE_S)
    os._exit(1)


def run(args: argparse.Namespace) -> int:
    try:
        config = config_from_args(args)
        observers = metrics_observers(config)
    except ConfigError as error:
        print(f"streamfair serve: configuration error: {error}", file=sys.stderr)
        return 2
    logger = setup_logging(log_level(config))
    daemon = Daemon(config, observers, logger)
    signals: list[int] = []

    def handle(signum: int, frame: Any) -> None:
        signals.append(signum)
        if len(signals) > 1:
            log_event(logger, logging.ERROR, "forced_exit", signal=signal.Signals(signum).name)
            os._exit(130)
        log_event(logger, logging.INFO, "stopping", signal=signal.Signals(signum).name)
        daemon.stop()
        watchdog = threading.Timer(SHUTDOWN_DEADLINE_S, _give_up, args=(logger,))
        watchdog.daemon = True
        watchdog.start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    try:
        return daemon.run(once=args.once, max_messages=args.max_messages)
    except ValueError as error:  # topics or models that do not fit the configuration
        log_event(logger, logging.ERROR, "fatal", error=str(error))
        return 2
