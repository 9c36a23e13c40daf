"""The daemon's metrics: throughput, dead letters, latency, checkpoints, lag, and its post-processors."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Sequence
from importlib import metadata
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)

from connectors.kafka.codec import group_label
from connectors.kafka.config import ConfigError
from connectors.kafka.logs import log_event
from connectors.kafka.observer import DaemonObserver
from connectors.prometheus.collectors import LATENCY_BUCKETS, WeightedHistogram, remove_series
from connectors.prometheus.fairness import StreamfairMetrics
from connectors.prometheus.report import HistoryRecord, HistoryWriter
from connectors.prometheus.server import MetricsServer, serve


class DaemonMetrics(DaemonObserver):
    """The daemon's metrics: a :class:`~connectors.kafka.observer.DaemonObserver` over :class:`StreamfairMetrics`.

    The counters are the daemon's own (:class:`~connectors.kafka.observer.DaemonStats`), read at every
    loop; only what the daemon does not count is counted here (dead letters and consumed feedback by
    topic, and the duration histograms).  Every ``metrics.interval_seconds`` the post-processor of each
    owned partition is sampled (live fairness, convergence, audited window) and, with
    ``metrics.history`` set, appended to the history file of ``streamfair report``.  Feedback
    messages (features, y, S) are scored with the task's base models and the served distribution
    goes into the partition's audit window; without base models there is nothing to audit.

    Parameters
    ----------
    config
        The daemon's :class:`~connectors.kafka.config.Config`.
    registry
        ``None``: a new private registry.

    Examples
    --------
    >>> from types import SimpleNamespace
    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.observer import DaemonStats
    >>> metrics = DaemonMetrics(load_config(env={}, overrides=["models.groups=a,b"]))
    >>> metrics.live(), metrics.ready()
    ((True, 'starting'), (False, 'not ready: no partition assigned yet, or restoring'))

    The daemon calls :meth:`on_loop` at every poll; here a stand-in with what it reads (the
    daemon's counters, its tasks, whether it is ready and the consumer lag):

    >>> daemon = SimpleNamespace(stats=DaemonStats(consumed=120, produced=118), tasks={}, ready=True,
    ...                          lag=lambda: {0: 3})
    >>> metrics.on_loop(daemon)
    >>> metrics.ready()
    (True, 'ready')
    >>> get = metrics.registry.get_sample_value
    >>> (get("streamfair_messages_consumed_total", {"topic": "input"}), get("streamfair_messages_produced_total"),
    ...  get("streamfair_consumer_lag_records", {"partition": "0"}))
    (120.0, 118.0, 3.0)
    >>> metrics.close()
    """

    def __init__(self, config: Any, registry: CollectorRegistry | None = None):
        self.config = config
        self.interval = float(config.metrics.interval_seconds)
        groups, fair = config.group_labels(), config.postprocessor.build()
        self.fairness = StreamfairMetrics(groups, fair.eps, registry, config.metrics.audit_window, ks=fair.ks)
        self.registry = reg = self.fairness.registry
        for collector in (ProcessCollector, PlatformCollector, GCCollector):  # process_*, python_* (standard names)
            collector(registry=reg)
        self._group_index = {group_label(g): i for i, g in enumerate(groups)}
        self._feedback_topic = config.topics.feedback
        self.info = Info("streamfair_build", "Version and main settings of the daemon.", registry=reg)
        try:
            version = metadata.version("streamfair")
        except metadata.PackageNotFoundError:
            version = "unknown"
        self.info.info({"version": version, "guarantee": config.processing.guarantee,
                        "group_id": config.kafka.group_id, "input_topic": config.topics.input})
        self.consumed = Counter("streamfair_messages_consumed_total",
                                "Records read, valid or not (topic: input or feedback).", ["topic"], registry=reg)
        self.produced = Counter("streamfair_messages_produced_total", "Predictions sent to the output topic.",
                                registry=reg)
        self.dead_letters = Counter("streamfair_dead_letters_total", "Records sent to the dead-letter topic.",
                                    ["topic", "reason"], registry=reg)
        self.restores = Counter("streamfair_restores_total", "Tasks restored from a checkpoint.", registry=reg)
        self.rewinds = Counter("streamfair_rewinds_total", "Returns to the last checkpoint after a failure.",
                               registry=reg)
        self.errors = Counter("streamfair_errors_total", "Errors handled by the daemon, by kind.", ["kind"],
                              registry=reg)
        self.labels = Counter("streamfair_labels_total", "Feedback labels of the group-robust post-processor, by "
                              "outcome: applied to a learned sample, or unmatched (id unknown, expired or repeated).",
                              ["outcome"], registry=reg)
        self.checkpoints = Counter("streamfair_checkpoints_total", "Task checkpoints written.", registry=reg)
        self.checkpoint_failures = Counter("streamfair_checkpoint_failures_total", "Checkpoints that failed.",
                                           registry=reg)
        self.checkpoint_seconds = Histogram("streamfair_checkpoint_duration_seconds", "Duration of a checkpoint.",
                                            buckets=LATENCY_BUCKETS, registry=reg)
        self.message_seconds = WeightedHistogram(
            "streamfair_message_processing_seconds",
            "Processing time per input record (parse, predict, learn, send), a poll's mean per record.", reg)
        self.lag = Gauge("streamfair_consumer_lag_records", "Records behind the fetch high-watermark (absent while "
                         "unknown: before the partition's first fetch, or while the broker is silent).",
                         ["partition"], registry=reg)
        self.assigned = Gauge("streamfair_assigned_partitions", "Input partitions owned by this instance.",
                              registry=reg)
        self.ready_gauge = Gauge("streamfair_ready", "1 when /readyz answers ready: every assigned partition "
                                 "restored, the broker answering, not stopping.", registry=reg)
        self.ready_gauge.set_function(lambda: 1.0 if self.ready()[0] else 0.0)
        self._created = time.monotonic()
        self._last_loop: float | None = None
        self._stats: Any = None  # the daemon's DaemonStats, from the first loop on
        self.contact_timeout = float(config.kafka.contact_timeout_seconds)
        self._brokers = ", ".join(config.kafka.bootstrap_servers)
        self.broker_contact = Gauge("streamfair_broker_last_contact_seconds",
                                    "Seconds since the daemon's last completed round trip with the broker (or since "
                                    "start).", registry=reg)
        self.broker_contact.set_function(
            lambda: time.monotonic() - self._created if self._stats is None else self._stats.contact_age())
        self.checkpoint_age = Gauge("streamfair_checkpoint_age_seconds",
                                    "Seconds since the last successful checkpoint (or since start).", registry=reg)
        self.checkpoint_age.set_function(lambda: time.monotonic() - self._last_checkpoint())
        self.loop_age = Gauge("streamfair_loop_age_seconds", "Seconds since the consumer loop last polled.",
                              registry=reg)
        self.loop_age.set_function(lambda: time.monotonic() - (self._last_loop or self._created))
        self.liveness_timeout = config.kafka.max_poll_interval_ms / 1000.0
        self._ready = False
        self._stopping = False
        self._next_sample = 0.0
        self._seen: dict[Any, int] = {}  # exported counter -> the daemon's count it was last brought to
        self._consumed_at_records = 0
        self._learned: dict[int, tuple[Any, float, int]] = {}  # partition -> (task, learn_seconds, learned)
        self._lag_partitions: set[int] = set()
        self.history = None
        if config.metrics.history:
            self.history = HistoryWriter(config.metrics.history, groups, fair.slack, "gap" if fair.ks is None else "ks",
                                         set_aside=True)
        self.server: MetricsServer | None = None

    # -------------------------------------------------------------- probes
    def live(self) -> tuple[bool, str]:
        """Liveness: the loop polled within ``kafka.max_poll_interval_ms`` (or has not started yet).

        Returns
        -------
        tuple of (bool, str)
            ``(ok, message)``, the ``/healthz`` probe: ``(True, "starting")`` before the first
            loop, ``(False, "stalled: ...")`` after a silence longer than the limit.
        """
        if self._last_loop is None:
            return True, "starting"
        age = time.monotonic() - self._last_loop
        if age > self.liveness_timeout:
            return False, f"stalled: no poll for {age:.1f} s (limit {self.liveness_timeout:.0f} s)"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Readiness: partitions assigned and every one restored, the broker answering, and not shutting down.

        The broker's silence is measured when asked (the daemon's loop may be waiting on it): a round
        trip within ``kafka.contact_timeout_seconds``, see
        :meth:`~connectors.kafka.observer.DaemonStats.broker_silence`.

        Returns
        -------
        tuple of (bool, str)
            ``(ok, message)``, the ``/readyz`` probe: ``(True, "ready")``, or ``False`` with the reason.
        """
        if self._stopping:
            return False, "stopping"
        silence = None if self._stats is None else self._stats.broker_silence(self.contact_timeout)
        if silence is not None:
            return False, (f"not ready: no round trip with the broker ({self._brokers}) for {silence:.1f} s "
                           f"(kafka.contact_timeout_seconds = {self.contact_timeout:g})")
        if self._ready:
            return True, "ready"
        return False, "not ready: no partition assigned yet, or restoring"

    def start_server(self, port: int, host: str = "0.0.0.0") -> MetricsServer:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` (stopped by :meth:`close`).

        Parameters
        ----------
        port
            TCP port; 0 picks a free one.
        host
            Bind address (``"0.0.0.0"``: every interface).

        Returns
        -------
        MetricsServer
            The server, probed by :meth:`live` and :meth:`ready` (also kept as ``server``).
        """
        self.server = serve(self.registry, port, host, live=self.live, ready=self.ready)
        return self.server

    def close(self) -> None:
        """Stop the HTTP server and close the history file."""
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.history is not None:
            self.history.close()
            self.history = None

    # -------------------------------------------------------------- observer callbacks (daemon thread)
    def on_start(self, daemon: Any) -> None:
        """The daemon starts: a history file of other groups or another target was set aside (WARNING).

        Parameters
        ----------
        daemon
            The daemon (its ``log`` is written to).
        """
        if self.history is not None and self.history.set_aside_as is not None:
            log_event(daemon.log, logging.WARNING, "history_set_aside", path=str(self.history.path),
                      kept_as=str(self.history.set_aside_as),
                      reason="it holds another fairness target or other groups; a new history starts")

    def on_restored(self, daemon: Any, partition: int, n_samples: int, offset: int | None, seconds: float) -> None:
        """A task was restored: its post-processor is sampled at the next loop.

        Parameters
        ----------
        daemon
            The daemon (not read).
        partition
            The task's input partition.
        n_samples, offset, seconds
            What the checkpoint held (samples learned, the input offset to resume from; 0 and
            ``None`` without one) and the restore's duration; not exported.
        """
        self._next_sample = 0.0  # sample the restored post-processor at the next loop

    def on_assigned(self, daemon: Any, partitions: Sequence[int]) -> None:
        """Partitions were assigned: the readiness and ``streamfair_assigned_partitions`` follow the daemon.

        Parameters
        ----------
        daemon
            The daemon (``ready`` and ``tasks`` are read).
        partitions
            The input partitions assigned.
        """
        self._ready = bool(daemon.ready)
        self.assigned.set(len(daemon.tasks))

    def on_revoked(self, daemon: Any, partitions: Sequence[int]) -> None:
        """Partitions were taken away: their series go (fairness, audit window, lag).

        Parameters
        ----------
        daemon
            The daemon (``ready`` and ``tasks`` are read).
        partitions
            The input partitions revoked.
        """
        for partition in partitions:
            self.fairness.forget_partition(partition)
            self._learned.pop(partition, None)
        self._forget_lag(partitions)
        self._ready = bool(daemon.ready)
        self.assigned.set(len(daemon.tasks))

    def on_records(self, daemon: Any, partition: int, n_records: int, n_dead: int, seconds: float) -> None:
        """A poll's input records of a partition were processed: the time per record, and per sample learned.

        Feedback records (which the daemon does not count as consumed input) are not timed here.

        Parameters
        ----------
        daemon
            The daemon (``stats`` and ``tasks`` are read).
        partition
            The input partition.
        n_records
            Records processed, dead letters included.
        n_dead
            Of them, those sent to the dead-letter topic (counted by :meth:`on_dead_letter`).
        seconds
            The time all of them took.
        """
        consumed = daemon.stats.consumed
        if consumed == self._consumed_at_records:  # feedback records: the daemon counts only input as consumed
            return
        self._consumed_at_records = consumed
        self.message_seconds.observe(seconds / max(n_records, 1), n_records)
        task = daemon.tasks.get(partition)
        if task is not None:
            self._observe_learning(partition, task)

    def _observe_learning(self, partition: int, task: Any) -> None:
        """Per-sample update time from the task's ``learn_seconds`` / ``learned`` counters."""
        seconds, learned = task.learn_seconds, task.learned
        seen_task, seen_seconds, seen_learned = self._learned.get(partition, (task, 0.0, 0))
        if seen_task is not task:  # a new task (restored or rewound): its counters started from zero
            seen_seconds, seen_learned = 0.0, 0
        if learned > seen_learned:
            self.fairness.update_seconds.observe((seconds - seen_seconds) / (learned - seen_learned),
                                                 learned - seen_learned)
        self._learned[partition] = (task, seconds, learned)

    def on_dead_letter(self, daemon: Any, reason: str, topic: str, partition: int) -> None:
        """A record was sent to the dead-letter topic: ``streamfair_dead_letters_total`` counts it.

        Parameters
        ----------
        daemon
            The daemon (not read).
        reason
            Why (the ``reason`` label).
        topic
            The record's topic: the feedback topic, or else the input (the ``topic`` label).
        partition
            The record's partition (not exported).
        """
        role = "feedback" if self._feedback_topic and topic == self._feedback_topic else "input"
        self.dead_letters.labels(role, reason).inc()
        if role == "feedback":  # valid feedback is counted from daemon.stats.feedback
            self.consumed.labels("feedback").inc()

    def on_feedback(self, daemon: Any, task: Any, accepted: Sequence[Any]) -> None:
        """Valid feedback for a task: the served distributions go into its partition's audit window.

        Parameters
        ----------
        daemon
            The daemon (not read).
        task
            The partition's task, which scores the feedback with its base models (``task.audit``).
        accepted
            The valid feedback records (features, ``y`` and S).
        """
        audit = task.audit(accepted) if accepted else None
        if audit is not None:
            groups = [self._group_index[group_label(s)] for s in audit.groups]
            self.fairness.add_feedback(task.partition, audit.atoms, audit.proba, audit.y, groups)

    def on_checkpoint(self, daemon: Any, partitions: Sequence[int], seconds: float, ok: bool) -> None:
        """A checkpoint finished: a successful one's duration goes into its histogram.

        Parameters
        ----------
        daemon
            The daemon (not read).
        partitions
            The partitions checkpointed.
        seconds
            The checkpoint's duration.
        ok
            Whether it succeeded (the counts follow the daemon's ``stats``).
        """
        if ok:  # the count follows daemon.stats.checkpoints, failures its errors["checkpoint_failed"]
            self.checkpoint_seconds.observe(seconds)

    def on_loop(self, daemon: Any) -> None:
        """After every poll: the counters, readiness and lag follow the daemon; every
        ``metrics.interval_seconds`` the post-processors are sampled.

        A partition whose lag the daemon does not know (``lag()`` leaves it out: no high-watermark
        fetched yet, or the broker silent) has no lag series until it is known again: a gauge left at
        its last value would read as a consumer keeping up.

        Parameters
        ----------
        daemon
            The daemon (``stats``, ``ready``, ``tasks`` and ``lag()`` are read).
        """
        now = time.monotonic()
        self._last_loop = now
        self._stats = daemon.stats
        self._ready = bool(daemon.ready)
        self.assigned.set(len(daemon.tasks))
        self._sync_counters(daemon.stats)
        lags = daemon.lag()
        self._forget_lag(self._lag_partitions - lags.keys())
        for partition, lag in lags.items():
            self.lag.labels(str(partition)).set(lag)
            self._lag_partitions.add(partition)
        if now >= self._next_sample:
            self._next_sample = now + self.interval
            self._sample(daemon)

    def on_stop(self, daemon: Any) -> None:
        """Shutting down: a last sample, then the server and the history file close.

        Parameters
        ----------
        daemon
            The daemon (``stats`` and ``tasks`` are read).
        """
        self._stopping = True
        self._sync_counters(daemon.stats)
        self._sample(daemon)
        self.close()

    # -------------------------------------------------------------- helpers
    def _last_checkpoint(self) -> float:
        """Time of the daemon's last successful checkpoint (before one: of this observer's start)."""
        last = None if self._stats is None else self._stats.last_checkpoint
        return self._created if last is None else last

    def _forget_lag(self, partitions: Iterable[int]) -> None:
        """Remove the lag series of ``partitions`` (those it has)."""
        for partition in set(partitions) & self._lag_partitions:
            self._lag_partitions.discard(partition)
            remove_series(self.lag, str(partition))

    def _sync_counters(self, stats: Any) -> None:
        """Bring the counters kept by the daemon up to its ``stats``."""
        followed = [(self.consumed.labels("input"), "consumed", ""), (self.produced, "produced", ""),
                    (self.consumed.labels("feedback"), "feedback", ""), (self.restores, "restores", ""),
                    (self.rewinds, "rewinds", ""), (self.checkpoints, "checkpoints", ""),
                    (self.checkpoint_failures, "errors", "checkpoint_failed")]
        followed += [(self.errors.labels(kind), "errors", kind) for kind in stats.errors]
        followed += [(self.labels.labels(outcome), "labels", outcome) for outcome in stats.labels]
        for counter, name, kind in followed:
            value = getattr(stats, name)[kind] if kind else getattr(stats, name)
            seen = self._seen.get(counter, 0)
            if value > seen:
                counter.inc(value - seen)
            self._seen[counter] = value

    def _sample(self, daemon: Any) -> None:
        """Live fairness, convergence and the audited window of every owned partition (+ history)."""
        for partition, task in sorted(daemon.tasks.items()):
            diagnostics, report = self.fairness.observe(task.fair, partition)
            if self.history is not None and diagnostics.n_samples > 0:
                self.history.write(HistoryRecord.from_diagnostics(
                    partition, diagnostics, report, self.fairness.audited_samples(partition)))
            dro_diagnostics = getattr(task.fair, "dro_diagnostics", None)
            if dro_diagnostics is not None:
                robust = dro_diagnostics()
                self.fairness.set_dro_weights(partition, robust.weights, robust.robust_value)


def make_observer(config: Any) -> DaemonMetrics:
    """The daemon's metrics observer, serving on ``metrics.host:metrics.port`` (``streamfair serve``).

    A port of 0 picks a free one here; ``streamfair serve`` reads ``metrics.port = 0`` as "no endpoint"
    and does not call this function then.

    Parameters
    ----------
    config
        The daemon's :class:`~connectors.kafka.config.Config`; its ``metrics`` section says where to serve.

    Returns
    -------
    DaemonMetrics
        The observer, its server started (``observer.server``); :meth:`DaemonMetrics.close` stops it.

    Raises
    ------
    ConfigError
        If the server cannot listen on ``metrics.host:metrics.port``.

    Examples
    --------
    Before the first poll the daemon is live but not ready, and ``/readyz`` says so:

    >>> import urllib.error, urllib.request
    >>> from connectors.kafka.config import load_config
    >>> config = load_config(env={}, overrides=["models.groups=a,b", "metrics.host=127.0.0.1"])
    >>> observer = make_observer(config)                   # metrics.port = 0: a free port
    >>> try:
    ...     urllib.request.urlopen(f"http://127.0.0.1:{observer.server.port}/readyz", timeout=5)
    ... except urllib.error.HTTPError as error:
    ...     with error:
    ...         error.code, error.read().decode().strip()
    (503, 'not ready: no partition assigned yet, or restoring')
    >>> observer.close()
    >>> observer.server is None
    True
    """
    observer = DaemonMetrics(config)
    host = config.metrics.host
    try:
        observer.start_server(config.metrics.port, host)
    except OSError as error:
        observer.close()
        raise ConfigError(f"metrics.port: cannot listen on {host}:{config.metrics.port}: {error.strerror}") from None
    return observer
