"""The daemon's consume-predict-produce loop (:class:`Daemon`, run by ``streamfair serve``).

One :class:`~connectors.kafka.task.PartitionTask` per assigned input partition
(:mod:`connectors.kafka.partitions`).  The loop polls, hands each partition's records to its task,
which returns its outputs and dead letters (:class:`~connectors.kafka.records.TaskResult`), sends
them (:mod:`connectors.kafka.sender`) and checkpoints when due (:mod:`connectors.kafka.checkpointing`).
A failed send, flush or transaction makes every task go back to its last checkpoint (deterministic
replay) after an exponential back-off; a missing broker is waited for the same way.

While records come, each poll that returns some is a round trip with the broker; while none do, the
daemon asks the broker for the input's first offset itself (:meth:`Daemon.probe_broker`).  After
``kafka.contact_timeout_seconds`` without any round trip (records, a checkpoint, that request) the
daemon is not :attr:`~Daemon.ready` and its :meth:`~Daemon.lag` is unknown, until the broker answers again.

Whatever goes wrong with one message dead-letters that message (the task isolates it).  A position
outside the input log (the topic created again, beyond its high-watermark, before its start) is an
error handled by ``processing.out_of_range`` (:mod:`connectors.kafka.positions`); a codec the client
cannot read stops the daemon with its own exit code.  A stop signal exits 0 in every state.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from connectors.kafka.checkpointing import Checkpointer
from connectors.kafka.codec import FeedbackParser, InputParser
from connectors.kafka.config import CODEC_PACKAGES, Config
from connectors.kafka.feedback_hold import FeedbackHold
from connectors.kafka.logs import log_event
from connectors.kafka.models import BaseModels
from connectors.kafka.observer import DaemonObserver, DaemonStats
from connectors.kafka.partitions import Partitions
from connectors.kafka.positions import LogPositions
from connectors.kafka.sender import Sender
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import (
    ClientConfigurationError,
    Consumer,
    Record,
    TopicLayout,
    TopicPartition,
    TransportError,
    UnsupportedCodec,
    caught_up,
    transport,
)

#: Seconds the final checkpoint and closing the clients are planned to take after a stop signal.
SHUTDOWN_BUDGET_S = 7.0
#: Exit code for a configuration error: settings, or topics that do not fit them (at the start, or when the
#: input topic gains partitions, see :meth:`Daemon.covers`).
EXIT_CONFIGURATION = 2
#: Exit code when a topic holds record batches compressed with a codec this installation cannot read.
EXIT_UNSUPPORTED_CODEC = 4
#: While no round trip with the broker completes, the daemon makes one itself this many times per
#: ``kafka.contact_timeout_seconds``: one slow or failed request does not make it unready.
PROBES_PER_CONTACT_TIMEOUT = 3
#: The longest wait for the broker's answer to that request: it blocks the loop (and a stop signal) meanwhile.
PROBE_TIMEOUT_S = 2.0


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
    partitions : Partitions
        The owned partitions' tasks (:attr:`tasks`), their restore and revocation.
    sender : Sender
        The producer: outputs, dead letters, transactions, the failure that triggers a rewind.
    checkpoints : Checkpointer
        When and how the tasks' progress is made durable.
    positions : LogPositions
        Positions outside the logs and ``processing.out_of_range``.
    transport : Transport
        The Kafka client library (``kafka.client``) behind the consumers and the producer.
    consumer, restorer : Consumer
        The group consumer and the unassigned consumer that reads the changelog (open from the start
        of :meth:`run` until it returns; ``RuntimeError`` otherwise).

    Examples
    --------
    Building a daemon connects to nothing: :meth:`run` does.  Before it has partitions it is not
    ready and has no lag; a daemon stopped before it connected returns 0 at once:

    >>> from connectors.kafka.config import load_config
    >>> daemon = Daemon(load_config(env={}, overrides=["topics.input=orders"]))
    >>> type(daemon.transport).__name__, daemon.parser.n_groups
    ('KafkaPythonTransport', 2)
    >>> daemon.ready, daemon.tasks, daemon.lag()
    (False, {}, {})
    >>> daemon.stop()
    >>> daemon.run()
    0
    """

    def __init__(self, config: Config, observers: Sequence[DaemonObserver] = (), logger: logging.Logger | None = None):
        self.config = config
        self.observers = list(observers)
        self.log = logger or logging.getLogger("streamfair")
        self.stats = DaemonStats()
        self.layout: TopicLayout | None = None
        self.stopping = threading.Event()
        self.lock = threading.RLock()
        self.backoff = Backoff()
        classes = config.classes()
        self.parser = InputParser(config.n_groups, config.processing.max_message_bytes,
                                  config.models.features or None, models=config.models.enabled,
                                  n_classes=None if classes is None else len(classes))
        self.feedback_parser = FeedbackParser(config.group_labels(), config.processing.max_message_bytes,
                                              config.models.features or None,
                                              labels_only=config.postprocessor.robust and not config.models.learn,
                                              classes=classes)
        self.transport = transport(config)
        self._consumer: Consumer | None = None
        self._restorer: Consumer | None = None
        self.closing = False
        self.partitions = Partitions(self)
        self.sender = Sender(config, self.transport, self.stats, self.log, self.notify)
        self.checkpoints = Checkpointer(self)
        self.positions = LogPositions(self)
        self.feedback_hold = FeedbackHold(self)
        self._fatal: tuple[int, str] | None = None  # (exit code, why) when the daemon stops on its own
        self._unassigned_since: float | None = None  # since when no partition is assigned (after subscribing)
        self._progress = (time.monotonic(), 0, 0)  # time, consumed and produced at the last progress line
        self._probed = float("-inf")  # time of the daemon's last request made only to hear from the broker
        self._silent = False  # whether the broker has been silent beyond kafka.contact_timeout_seconds

    # ------------------------------------------------------------------ public
    @property
    def consumer(self) -> Consumer:
        """The group consumer (``RuntimeError`` when the daemon is not running)."""
        return self._open_client(self._consumer, "consumer")

    @property
    def restorer(self) -> Consumer:
        """The unassigned consumer that reads the changelog (``RuntimeError`` when the daemon is not running)."""
        return self._open_client(self._restorer, "restorer")

    @property
    def consumer_open(self) -> bool:
        """Whether the group consumer is open (from the start of :meth:`run` until its clients are closed)."""
        return self._consumer is not None

    @staticmethod
    def _open_client(client: Consumer | None, name: str) -> Consumer:
        if client is None:
            raise RuntimeError(f"the daemon's {name} is not open (before run() connected, or after it closed)")
        return client

    @property
    def tasks(self) -> dict[int, PartitionTask]:
        """Tasks of the input partitions currently owned."""
        return self.partitions.tasks

    def stop(self) -> None:
        """Ask the loop to finish: safe from signal handlers and other threads."""
        self.stopping.set()

    @property
    def ready(self) -> bool:
        """Assigned at least one partition, every assigned task restored, and the broker not silent (for
        readiness probes): a round trip with it within ``kafka.contact_timeout_seconds``."""
        return bool(self.tasks) and not self.partitions.to_restore and self.broker_silence() is None

    def broker_silence(self) -> float | None:
        """Seconds since the last round trip with the broker, when more than ``kafka.contact_timeout_seconds``.

        ``None`` while the broker answers; see :meth:`~connectors.kafka.observer.DaemonStats.broker_silence`.
        """
        return self.stats.broker_silence(self.config.kafka.contact_timeout_seconds)

    def lag(self) -> dict[int, int]:
        """Records behind the fetch high-watermark, per owned input partition (call on the daemon's thread).

        A partition whose high-watermark is not known yet is left out, and so is every partition while
        the broker is silent (:meth:`broker_silence`): the last high-watermarks fetched are then stale.
        """
        lags: dict[int, int] = {}
        consumer = self._consumer
        if consumer is None or self.broker_silence() is not None:
            return lags
        for partition, task in self.tasks.items():
            try:
                highwater = consumer.highwater(TopicPartition(self.config.topics.input, partition))
            except TransportError:
                continue
            if highwater is not None and task.offset is not None:
                lags[partition] = max(0, highwater - task.offset)
        return lags

    def run(self, once: bool = False, max_messages: int | None = None) -> int:
        """Process until :meth:`stop` (or, with ``once``, until every owned partition is drained).

        Returns 0 after :meth:`stop` (a failed final checkpoint is then only a warning: at-least-once
        replays cover it), 1 if the final checkpoint of a bounded run failed, and :data:`EXIT_CONFIGURATION`,
        :data:`~connectors.kafka.positions.EXIT_OUT_OF_RANGE`, :data:`EXIT_UNSUPPORTED_CODEC`,
        :data:`~connectors.kafka.checkpointing.EXIT_CHECKPOINT_TOO_LARGE` or
        :data:`~connectors.kafka.partitions.EXIT_CHECKPOINT_UNREADABLE` when the daemon stopped itself.
        Topics that do not fit the configuration at the start raise ``ValueError``.
        """
        if not self._open():  # stopped while waiting for the broker: nothing to checkpoint
            log_event(self.log, logging.INFO, "stopped", ok=True, consumed=0, produced=0, dead_letters={},
                      checkpoints=0)
            return 0
        ok = False
        try:
            self.notify("on_start")
            while not self.stopping.is_set():
                self._iterate()
                if once and self._drained():
                    log_event(self.log, logging.INFO, "drained", consumed=self.stats.consumed)
                    break
                if max_messages is not None and self.stats.consumed >= max_messages:
                    break
            requested = self.stopping.is_set()  # by stop() (a signal), rather than --once / --max-messages
            deadline = time.monotonic() + SHUTDOWN_BUDGET_S
            with self.lock:
                ok = self.checkpoints.checkpoint(timeout=max(0.5, (deadline - time.monotonic()) / 2))
            self.notify("on_stop")
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

    # ------------------------------------------------------------------ for the daemon's parts
    def notify(self, event: str, *args: Any) -> None:
        """Call ``event`` on every observer; an observer that raises is counted and logged, never fatal."""
        for observer in self.observers:
            try:
                getattr(observer, event)(self, *args)
            except Exception as error:  # an observer must never stop the daemon
                self.stats.errors["observer_failed"] += 1
                log_event(self.log, logging.WARNING, "observer_failed", observer=type(observer).__name__,
                          hook=event, error=repr(error))

    def warm_up(self) -> float:
        """Load (or compile) the compiled kernels: :meth:`Partitions.warm_up`; its seconds, rounded to 1 ms."""
        started = time.monotonic()
        self.partitions.warm_up()
        return round(time.monotonic() - started, 3)

    def wait_after(self, kind: str, error: BaseException) -> None:
        """Count and log the error ``kind``, then wait the next back-off delay (or until stopped)."""
        delay = self.backoff.next()
        self.stats.errors[kind] += 1
        log_event(self.log, logging.WARNING, kind, error=repr(error), retry_in_s=delay)
        self.stopping.wait(delay)

    def give_up(self, code: int, reason: str) -> None:
        """Stop after this iteration (with a final checkpoint of what was processed) and exit with ``code``."""
        self._fatal = (code, reason)
        self.stopping.set()

    def probe_broker(self, now: float) -> None:
        """Ask the broker for the input's first offset when no round trip has completed for a while.

        Due when neither a round trip (``stats.last_contact``) nor such a request has happened for
        ``kafka.contact_timeout_seconds`` / :data:`PROBES_PER_CONTACT_TIMEOUT`: on an idle stream this
        request is what shows the broker answering.  An answer is a round trip, dated ``now`` (when
        the request left); no answer within :data:`PROBE_TIMEOUT_S` (or that interval, if shorter)
        leaves the silence growing.  Crossing the limit is logged (WARNING ``broker_silent``), and so
        is the broker's return (INFO ``broker_answering``).

        Parameters
        ----------
        now
            The time (``time.monotonic()``) after the iteration's poll.
        """
        limit = self.config.kafka.contact_timeout_seconds
        interval = limit / PROBES_PER_CONTACT_TIMEOUT
        if self.stats.contact_age(now) >= interval and now - self._probed >= interval:
            self._probed = now
            partition = TopicPartition(self.config.topics.input, 0)
            try:
                self.restorer.beginning_offsets([partition],
                                                timeout_ms=max(1, round(1000 * min(PROBE_TIMEOUT_S, interval))))
            except TransportError:
                pass  # the silence grows: readiness says so once it exceeds the limit
            else:
                self.stats.last_contact = now
        silence = self.stats.broker_silence(limit, now)
        if (silence is not None) == self._silent:
            return
        self._silent = silence is not None
        brokers = list(self.config.kafka.bootstrap_servers)
        if silence is not None:
            log_event(self.log, logging.WARNING, "broker_silent", brokers=brokers, seconds=round(silence, 1),
                      limit_s=limit, effect="not ready, and the lag unknown, until the broker answers again")
        else:
            log_event(self.log, logging.INFO, "broker_answering", brokers=brokers)

    def covers(self, partitions: Sequence[int]) -> bool:
        """Whether the topic layout holds the input ``partitions`` (a restore's first step, on the daemon's thread).

        A partition beyond the layout known so far was added to the input topic since it was read:
        the layout is read again, with the checks (and the topic creation) of the start
        (:meth:`~connectors.kafka.transport.Transport.ensure_topics`), and outputs and dead letters keep
        the input's partition number only where their topic has grown along (a WARNING,
        ``co_partitioning_stopped``, where it has not).  Topics that do not fit the grown input (a
        changelog with fewer partitions, a feedback topic with another count) stop the daemon with
        :data:`EXIT_CONFIGURATION` and an ERROR, ``layout_refused``, as they would refuse its start:
        False.  Raises :class:`~connectors.kafka.transport.TransportError` when the broker does not
        answer, or does not show the new partitions yet (the restore is retried after a back-off).
        """
        known, newest = self.layout, max(partitions)
        if known is not None and newest < known.input_partitions:
            return True
        topics = self.config.topics
        try:
            layout = self.transport.ensure_topics(self.config)
        except ValueError as error:
            self.stats.errors["layout_refused"] += 1
            log_event(self.log, logging.ERROR, "layout_refused", topic=topics.input, partitions=list(partitions),
                      error=str(error), fix="add partitions to the topic named, up to the input's count, then start "
                                            "the daemon again")
            self.give_up(EXIT_CONFIGURATION, str(error))
            return False
        if newest >= layout.input_partitions:
            raise TransportError(f"{topics.input!r} partition {newest} assigned, but the broker's metadata shows "
                                 f"{layout.input_partitions} partitions")
        sender = self.sender
        before = (sender.co_partitioned, sender.dead_co_partitioned)
        self._use_layout(layout)
        log_event(self.log, logging.INFO, "partitions_added", topic=topics.input, partitions=layout.input_partitions,
                  known=known.input_partitions if known else None, output=layout.output_partitions,
                  dead_letter=layout.dead_letter_partitions, changelog=layout.changelog_partitions)
        for topic, count, was, now in (
                (topics.output, layout.output_partitions, before[0], sender.co_partitioned),
                (topics.dead_letter, layout.dead_letter_partitions, before[1], sender.dead_co_partitioned)):
            if was and not now:
                log_event(self.log, logging.WARNING, "co_partitioning_stopped", topic=topic, partitions=count,
                          input_partitions=layout.input_partitions,
                          action="its records now go to the partition the producer picks by key, for every input "
                                 "partition; add partitions to it up to the input's count to keep the input's "
                                 "partition numbers (from the next start)")
        return True

    def unsupported_codec(self, error: UnsupportedCodec, topic: str) -> None:
        """A batch no retry can read: stop with a message saying what to install, not a silent poll loop."""
        packages = ", ".join(f"{codec}: {package}" for codec, package in CODEC_PACKAGES.items())
        self.stats.errors["unsupported_codec"] += 1
        log_event(self.log, logging.ERROR, "unsupported_codec", topic=topic, error=str(error),
                  fix=f"install the codec's package ({packages}; all come with streamfair[connectors])")
        self.give_up(EXIT_UNSUPPORTED_CODEC, f"{topic}: {error}")

    # ------------------------------------------------------------------ set-up
    def _open(self) -> bool:
        """Topics, models and clients; waits for the broker with back-off.  False if stopped meanwhile."""
        config = self.config
        if config.models.enabled:
            self.partitions.models = BaseModels.load(config.models.eta, config.models.tau, config.group_labels(),
                                                     config.classes())
        if config.ignored_variables:
            log_event(self.log, logging.WARNING, "unknown_variables", variables=list(config.ignored_variables),
                      hint="ignored: not STREAMFAIR_<SECTION>_<NAME> settings (Kubernetes adds such variables for "
                           "Services whose name starts with streamfair; enableServiceLinks: false stops that)")
        if config.processing.guarantee == "exactly_once":
            self.sender.transactional_id = config.processing.transactional_id or (
                f"{config.kafka.client_id}-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}")
        while not self.stopping.is_set():
            try:
                self.closing = False
                layout = self.transport.ensure_topics(config)
                self.sender.renew()
                self._restorer = self.transport.consumer(config, group=False)
                self._consumer = self.transport.consumer(config)
                break
            except ClientConfigurationError as error:
                self._close()
                raise ValueError(f"kafka: {error}") from None
            except TransportError as error:
                self._close()
                self.wait_after("broker_unavailable", error)
        else:
            return False
        self.stats.last_contact = time.monotonic()
        self.backoff.reset()
        self._use_layout(layout)
        topics = [config.topics.input] + ([config.topics.feedback] if config.topics.feedback else [])
        warm_up_s = self.warm_up()  # before joining the group: no partition waits for it
        self.consumer.subscribe(topics, self.partitions)
        self._unassigned_since = now = time.monotonic()
        self._progress = (now, self.stats.consumed, self.stats.produced)
        log_event(self.log, logging.INFO, "started", topics=topics, group_id=config.kafka.group_id,
                  guarantee=config.processing.guarantee, partitions=layout.input_partitions,
                  batch_size=config.processing.batch_size, warm_up_s=warm_up_s)
        return True

    def _use_layout(self, layout: TopicLayout) -> None:
        """The topics' partition counts from now on, and where outputs and dead letters go.

        Each goes to the input's partition number when its topic has at least as many partitions as
        the input, else to the partition the producer picks by its key.
        """
        self.layout = layout
        self.sender.co_partitioned = layout.output_partitions >= layout.input_partitions
        self.sender.dead_co_partitioned = layout.dead_letter_partitions >= layout.input_partitions

    def _close(self) -> None:
        self.closing = True
        for name in ("consumer", "restorer"):
            client = getattr(self, f"_{name}")
            setattr(self, f"_{name}", None)
            if client is None:
                continue
            try:
                client.close()
            except Exception as error:  # closing must not mask the real outcome
                log_event(self.log, logging.WARNING, "close_failed", client=name, error=repr(error))
        self.sender.close()

    # ------------------------------------------------------------------ the loop
    def _iterate(self) -> None:
        with self.lock:
            failure = self.sender.failure
            if failure is not None:
                self.checkpoints.rewind(failure)
            if self.partitions.to_restore:
                self.partitions.restore()
            self.feedback_hold.release()
        try:
            batch = self.consumer.poll(timeout_ms=self.config.kafka.poll_timeout_ms)
        except UnsupportedCodec as error:
            self.unsupported_codec(error, ", ".join(sorted({tp.topic for tp in self.consumer.assignment()})))
            return
        except TransportError as error:
            self.wait_after("poll_failed", error)
            return
        if batch:  # fetched from the broker
            self.stats.last_contact = time.monotonic()
        self.probe_broker(time.monotonic())
        with self.lock:
            try:
                self._process(batch)
            except Exception as error:  # noqa: BLE001 -- tasks isolate messages; this is the daemon's own
                # failure (e.g. a dead letter that could not be sent): the half-processed poll is dropped
                # by going back to the last checkpoint, and no checkpoint is written before that.
                self.sender.fail(error)
                self.stats.errors["process_failed"] += 1
                log_event(self.log, logging.ERROR, "process_failed", error=repr(error))
            now = time.monotonic()
            self.stats.last_loop = now
            if self.checkpoints.due(now):
                self.checkpoints.checkpoint()
            self._watch_assignment(now)
            if self.config.log.progress_seconds and now - self._progress[0] >= self.config.log.progress_seconds:
                self._log_progress(now)
            self.notify("on_loop")

    def _process(self, batch: Mapping[TopicPartition, Sequence[Record]]) -> None:
        """Each partition's records through its task; the results go out through the sender."""
        input_topic = self.config.topics.input
        partitions = self.partitions
        moved = self.positions.check()
        # skipped: partitions not ours any more, not restored yet, or repositioned (the seek will re-fetch)
        owned = [(tp, records) for tp, records in batch.items()
                 if tp.partition in partitions.tasks and tp.partition not in partitions.to_restore
                 and (tp.topic, tp.partition) not in moved]
        for tp, records in owned:  # where each was read from, noted before any fails: a rewind seeks there
            partitions.reading(tp.topic, tp.partition, records[0].offset)
        for tp, records in owned:
            task = partitions.tasks[tp.partition]
            started = time.monotonic()
            dead_before = sum(self.stats.dead_letters.values())
            if tp.topic == input_topic:
                if self.stats.first_record is None:
                    self.stats.first_record = started
                self.sender.deliver(task.process(records))
                self.stats.consumed += len(records)
                self.checkpoints.processed(tp.partition, len(records))
            else:
                result = task.add_feedback(records)
                self.sender.deliver(result)
                self.stats.feedback += len(result.feedback)
                self.notify("on_feedback", task, result.feedback)
                self.checkpoints.processed(tp.partition, 0)
            self.notify("on_records", tp.partition, len(records),
                        sum(self.stats.dead_letters.values()) - dead_before, time.monotonic() - started)

    def _drained(self) -> bool:
        """Every owned partition read up to its fetch high-watermark (the ``--once`` end).

        A position beyond the high-watermark is not drained: the next iteration's positions check
        applies ``processing.out_of_range`` to it, also where the end became known only now.
        """
        if not self.tasks or self.partitions.to_restore:
            return False
        try:
            return caught_up(self.consumer, self.consumer.assignment())
        except TransportError:
            return False

    # ------------------------------------------------------------------ what an operator sees
    def _watch_assignment(self, now: float) -> None:
        """A WARNING each session timeout during which this member owns no partition."""
        if self.tasks or self.partitions.to_restore:
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
                  checkpoints=stats.checkpoints, rewinds=stats.rewinds, errors=dict(stats.errors),
                  labels=dict(stats.labels))
        self._progress = (now, stats.consumed, stats.produced)
