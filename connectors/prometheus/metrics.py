"""Prometheus metrics of streamfair: live fairness without S, convergence, audited fairness, the daemon.

Three layers, each usable on its own:

* :class:`StreamfairMetrics` -- the post-processor's metrics on a :class:`~prometheus_client.CollectorRegistry`
  (a new private one unless you pass yours): the plug-in fairness estimates of
  :meth:`~streamfair.DualPostProcessor.diagnostics` (no S needed), convergence, the audited fairness
  and risk over a sliding window of labelled feedback, per-sample update latency, and the DRO
  weights once a post-processor has them.  Library users call it from their own loop.
* :class:`MetricsServer` / :func:`serve` -- ``/metrics`` plus ``/healthz`` (liveness) and
  ``/readyz`` (readiness) over HTTP, in a background thread.
* :class:`DaemonMetrics` -- a :class:`~connectors.kafka.observer.DaemonObserver` that adds the daemon's
  metrics (throughput, dead letters, processing latency, checkpoints, consumer lag) and samples
  the post-processors of its tasks; ``streamfair serve`` gets it from :func:`make_observer` when
  ``metrics.port`` is set.
* :class:`SurrogateMetrics` -- the diagnostics of the surrogate optimisers (SSO and the black-box
  metric tuner of :mod:`streamfair.surrogates`), a separate set of collectors; pass the same
  registry to expose them beside the others.

Conventions: every name starts with ``streamfair_``; counters end in ``_total``; durations are
``_seconds`` histograms whose buckets (:data:`LATENCY_BUCKETS`) resolve microseconds; label values
are bounded (partitions of the input topic, configured groups, dead-letter reasons, fixed kinds).

Examples
--------
A library loop with its own registry (``serve(metrics.registry, port=9100)`` would expose it):

>>> from prometheus_client import generate_latest
>>> from streamfair import FairRegressionPostProcessor
>>> fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05)
>>> metrics = StreamfairMetrics(groups=["0", "1"], ks=fair.ks)
>>> for i in range(200):
...     with metrics.time_update():
...         fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
>>> diagnostics, audited = metrics.observe(fair)
>>> text = generate_latest(metrics.registry).decode()
>>> 'streamfair_postprocessor_samples{partition="0"} 200.0' in text
True
>>> metrics.registry.get_sample_value("streamfair_update_seconds_count")
200.0
"""

from __future__ import annotations

import bisect
import contextlib
import math
import threading
import time
import weakref
from importlib import metadata
from socketserver import ThreadingMixIn
from typing import Any, Callable, Iterator, Sequence
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import numpy as np
from prometheus_client import (
    CollectorRegistry, Counter, Gauge, GCCollector, Histogram, Info, PlatformCollector, ProcessCollector, make_wsgi_app,
)
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from streamfair.evaluation import FairnessReport, evaluate

from connectors.kafka.codec import Invalid, group_label
from connectors.kafka.observer import DaemonObserver
from connectors.prometheus.report import HistoryRecord, HistoryWriter

#: Histogram buckets for durations, 1 microsecond to 10 seconds (the client's defaults start at 5 ms).
LATENCY_BUCKETS: tuple[float, ...] = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)
METRICS_PATH, HEALTH_PATH, READY_PATH = "/metrics", "/healthz", "/readyz"


# ---------------------------------------------------------------------------- building blocks
class WeightedHistogram(Collector):
    """A histogram whose observations carry a count: ``observe(value, n)`` adds ``value`` ``n`` times in O(1).

    Used for per-message and per-sample durations measured over a batch (the batch's mean, counted
    once per message), so that quantiles are over messages, not batches.
    """

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry,
                 buckets: Sequence[float] = LATENCY_BUCKETS):
        self.name, self.documentation = name, documentation
        self._bounds = sorted(float(b) for b in buckets) + [math.inf]
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, value: float, n: int = 1) -> None:
        """Count ``value`` (seconds) ``n`` times; ``n <= 0`` is ignored."""
        if n <= 0:
            return
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += n
            self._sum += value * n

    def describe(self) -> Iterator[HistogramMetricFamily]:
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, buckets = 0, []
        for bound, count in zip(self._bounds, counts):
            cumulative += count
            buckets.append((floatToGoString(bound), float(cumulative)))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)


class AuditWindow:
    """The last ``size`` labelled predictions of one post-processor, for the audited fairness and risk.

    Each row is the distribution that was served for a sample (over ``atoms``), its label ``y`` and
    its group; :meth:`report` evaluates them with :func:`streamfair.evaluate`.

    >>> window = AuditWindow(atoms=[0.0, 1.0], n_groups=2, size=3)
    >>> window.add([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], y=[0, 1, 1, 0], groups=[0, 1, 1, 0])
    >>> window.group_counts().tolist(), window.report().risk
    ([1, 2], 0.0)
    """

    def __init__(self, atoms: Sequence[float], n_groups: int, size: int):
        self.atoms = np.asarray(atoms, dtype=float)
        if self.atoms.ndim != 1 or self.atoms.size < 1 or not np.all(np.isfinite(self.atoms)):
            raise ValueError(f"atoms must be a non-empty 1-d array of finite numbers, got {atoms!r}")
        if not (isinstance(n_groups, (int, np.integer)) and n_groups >= 2):
            raise ValueError(f"n_groups must be an integer >= 2, got {n_groups!r}")
        if not (isinstance(size, (int, np.integer)) and size >= 1):
            raise ValueError(f"size must be an integer >= 1, got {size!r}")
        self.n_groups, self.size = int(n_groups), int(size)
        self._proba = np.zeros((self.size, self.atoms.size))
        self._y = np.zeros(self.size)
        self._group = np.zeros(self.size, dtype=int)
        self._next = 0
        self.count = 0

    def add(self, proba: Any, y: Any, groups: Any) -> None:
        """Append rows (the oldest fall out once ``size`` are held)."""
        proba = np.asarray(proba, dtype=float)
        y = np.asarray(y, dtype=float).reshape(-1)
        groups = np.asarray(groups).reshape(-1)
        n = y.size
        if proba.shape != (n, self.atoms.size):
            raise ValueError(f"proba must have shape ({n}, {self.atoms.size}), got {proba.shape}")
        if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer) or np.any(groups < 0) \
                or np.any(groups >= self.n_groups):
            raise ValueError(f"groups must be {n} integers in 0..{self.n_groups - 1}, got {groups.tolist()!r}")
        if not (np.all(np.isfinite(proba)) and np.all(np.isfinite(y))):
            raise ValueError("proba and y must be finite")
        if n > self.size:
            proba, y, groups, n = proba[-self.size:], y[-self.size:], groups[-self.size:], self.size
        rows = (self._next + np.arange(n)) % self.size
        self._proba[rows], self._y[rows], self._group[rows] = proba, y, groups
        self._next = int((self._next + n) % self.size)
        self.count = min(self.size, self.count + n)

    def group_counts(self) -> np.ndarray:
        """Rows held per group."""
        return np.bincount(self._group[: self.count], minlength=self.n_groups)

    def report(self) -> FairnessReport | None:
        """Risk and per-group unfairness of the rows held; ``None`` until every group has a row."""
        if self.count == 0 or np.any(self.group_counts() == 0):
            return None
        rows = slice(0, self.count)
        return evaluate(self._proba[rows], self.atoms, self._y[rows], self._group[rows], n_groups=self.n_groups)


# ---------------------------------------------------------------------------- the post-processor's metrics
class StreamfairMetrics:
    """Metrics of one or more post-processors (one per ``partition`` label) on a registry.

    Parameters
    ----------
    groups
        Group labels in the column order of tau (the ``group`` label values).
    eps
        The post-processors' per-atom slack (the paper's constraints): one number or one per group,
        exported as ``streamfair_fairness_eps``.
    ks
        Or their KS target (the default constraints), exported as ``streamfair_fairness_ks_target``
        next to the live and audited KS.  Exactly one of ``eps`` and ``ks`` is given.
    registry
        Where the metrics are registered; ``None``: a new :class:`~prometheus_client.CollectorRegistry`
        (so two instances never clash, and the process-wide default registry stays untouched).
    audit_window
        Labelled samples per partition in the audited sliding window.

    Attributes
    ----------
    registry : CollectorRegistry
        Expose it with :func:`serve`, :func:`prometheus_client.generate_latest` or a push gateway.
    """

    def __init__(self, groups: Sequence[Any], eps: float | Sequence[float] | None = None,
                 registry: CollectorRegistry | None = None, audit_window: int = 1000,
                 ks: float | Sequence[float] | None = None):
        self.groups = [str(g) for g in groups]
        if len(self.groups) < 2 or len(set(self.groups)) != len(self.groups):
            raise ValueError(f"groups must be at least 2 distinct labels, got {list(groups)!r}")
        if (eps is None) == (ks is None):
            raise ValueError(f"give exactly one of eps and ks, got eps={eps!r}, ks={ks!r}")
        name, target = ("eps", eps) if ks is None else ("ks", ks)
        k = len(self.groups)
        target = np.broadcast_to(np.asarray(target, float), (k,)) if np.ndim(target) == 0 else np.asarray(target, float)
        if target.shape != (k,) or not np.all(np.isfinite(target)) or np.any(target < 0):
            raise ValueError(f"{name} must be one number >= 0 or {k} of them, got {target.tolist()!r}")
        if not (isinstance(audit_window, int) and audit_window >= 1):
            raise ValueError(f"audit_window must be an integer >= 1, got {audit_window!r}")
        self.audit_window = audit_window
        self.registry = CollectorRegistry() if registry is None else registry
        reg, pg, p = self.registry, ["partition", "group"], ["partition"]
        self.update_seconds = WeightedHistogram(
            "streamfair_update_seconds", "Time of one post-processor update, per sample learned.", reg)
        if name == "eps":
            self.target = Gauge("streamfair_fairness_eps", "Per-atom fairness tolerance eps of each group.", ["group"],
                                registry=reg)
        else:
            self.target = Gauge("streamfair_fairness_ks_target",
                                "Fairness target: the largest KS distance allowed for each group.", ["group"],
                                registry=reg)
        for group, value in zip(self.groups, target):
            self.target.labels(group).set(float(value))
        # live, from tau (no S): Diagnostics of the served predictor over the last `window` samples
        self.live_gap = Gauge("streamfair_live_fairness_gap",
                              "Plug-in estimate (no S) of max_l |P(l|s) - P(l)|, the group's worst-atom gap.", pg,
                              registry=reg)
        self.live_ks = Gauge("streamfair_live_fairness_ks",
                             "Plug-in estimate (no S) of the KS distance between the group's and the overall "
                             "prediction distributions.", pg, registry=reg)
        self.live_mean = Gauge("streamfair_live_prediction_mean",
                               "Plug-in estimate (no S) of the mean prediction E[Y_hat | S=s].", pg, registry=reg)
        self.live_violation = Gauge("streamfair_live_violation",
                                    "sqrt(sum_{l,s} (|gap| - eps_s)_+^2) of the live estimate.", p, registry=reg)
        # convergence
        self.samples = Gauge("streamfair_postprocessor_samples", "Samples learned by the post-processor.", p,
                             registry=reg)
        self.clipped = Gauge("streamfair_postprocessor_clipped_samples",
                             "Samples whose prediction was clipped to [-B, B].", p, registry=reg)
        self.epoch = Gauge("streamfair_postprocessor_epoch",
                           "Completed epochs (paper profile) or memory windows (anytime profile).", p, registry=reg)
        self.progress = Gauge("streamfair_postprocessor_epoch_progress_ratio",
                              "Fraction of the current epoch or memory window done.", p, registry=reg)
        self.horizon = Gauge("streamfair_postprocessor_epoch_horizon_samples",
                             "Samples in the current epoch (paper profile) or in the memory (anytime profile).", p,
                             registry=reg)
        self.gradient_norm = Gauge("streamfair_postprocessor_gradient_mapping_norm",
                                   "Norm of the plug-in gradient mapping at the served dual point.", p, registry=reg)
        self.dual_norm = Gauge("streamfair_postprocessor_dual_norm", "Norm of each dual multiplier (lambda, v).",
                               ["partition", "multiplier"], registry=reg)
        # audited, from labelled feedback (y and S) over a sliding window
        self.audited_gap = Gauge("streamfair_audited_fairness_gap",
                                 "max_l |P(l|s) - P(l)| over the audit window (true groups).", pg, registry=reg)
        self.audited_ks = Gauge("streamfair_audited_fairness_ks",
                                "KS distance of the group's predictions to all predictions over the audit window.",
                                pg, registry=reg)
        self.audited_risk = Gauge("streamfair_audited_squared_error",
                                  "Mean squared error (expected over the randomization) over the audit window.", p,
                                  registry=reg)
        self.audited_group_risk = Gauge("streamfair_audited_group_squared_error",
                                        "Mean squared error within the group over the audit window.", pg, registry=reg)
        self.audited_count = Gauge("streamfair_audited_window_samples", "Labelled samples of the group in the window.",
                                   pg, registry=reg)
        # DRO (issue 6): set by set_dro_weights() once a post-processor keeps DRO weights
        self.dro_weight = Gauge("streamfair_dro_weight", "Current DRO weight of the group.", pg, registry=reg)
        self.dro_value = Gauge("streamfair_dro_robust_value", "Current robust (worst-case weighted) risk.", p,
                               registry=reg)
        self._audits: dict[str, AuditWindow] = {}

    # -------------------------------------------------------------- updates
    @contextlib.contextmanager
    def time_update(self, n: int = 1) -> Iterator[None]:
        """Time the block as an update of ``n`` samples (``with metrics.time_update(): fair.learn_one(...)``)."""
        started = time.perf_counter()
        yield
        self.update_seconds.observe((time.perf_counter() - started) / max(n, 1), n)

    def observe(self, fair: Any, partition: Any = "0") -> tuple[Any, FairnessReport | None]:
        """Set the live fairness and convergence gauges from ``fair.diagnostics()`` and the audited
        ones from the partition's window; returns the diagnostics and the audited report (or ``None``).

        The live fairness gauges appear with the first sample learned (an empty window estimates nothing).
        """
        diagnostics = fair.diagnostics()
        part = str(partition)
        if diagnostics.group_unfairness.shape != (len(self.groups),):
            raise ValueError(f"fair has {diagnostics.group_unfairness.size} groups, expected {len(self.groups)}")
        if diagnostics.n_samples > 0:
            for g, group in enumerate(self.groups):
                self.live_gap.labels(part, group).set(float(diagnostics.group_unfairness[g]))
                self.live_ks.labels(part, group).set(float(diagnostics.group_ks[g]))
                self.live_mean.labels(part, group).set(float(diagnostics.group_mean[g]))
            self.live_violation.labels(part).set(diagnostics.violation)
        self.samples.labels(part).set(diagnostics.n_samples)
        self.clipped.labels(part).set(diagnostics.n_clipped)
        self.epoch.labels(part).set(diagnostics.epoch)
        self.progress.labels(part).set(diagnostics.epoch_progress)
        self.horizon.labels(part).set(diagnostics.epoch_horizon)
        self.gradient_norm.labels(part).set(diagnostics.gradient_mapping_norm)
        for name, value in zip(("lambda", "v"), diagnostics.dual_norms):
            self.dual_norm.labels(part, name).set(value)
        return diagnostics, self.observe_audit(part)

    def add_feedback(self, partition: Any, atoms: Sequence[float], proba: Any, y: Any, groups: Any) -> None:
        """Labelled samples: the served distributions ``proba`` over ``atoms``, labels ``y``, group
        indices ``groups`` (columns of tau).  A change of ``atoms`` starts a new window."""
        part = str(partition)
        window = self._audits.get(part)
        if window is None or not np.array_equal(window.atoms, np.asarray(atoms, dtype=float)):
            window = self._audits[part] = AuditWindow(atoms, len(self.groups), self.audit_window)
        window.add(proba, y, groups)

    def audited_samples(self, partition: Any = "0") -> int:
        """Labelled samples held in the partition's window."""
        window = self._audits.get(str(partition))
        return 0 if window is None else window.count

    def observe_audit(self, partition: Any = "0") -> FairnessReport | None:
        """Set the audited gauges of the partition from its window; returns the report (or ``None``)."""
        part = str(partition)
        window = self._audits.get(part)
        if window is None:
            return None
        for group, count in zip(self.groups, window.group_counts()):
            self.audited_count.labels(part, group).set(int(count))
        report = window.report()
        if report is not None:
            for g, group in enumerate(self.groups):
                self.audited_gap.labels(part, group).set(float(report.atom_unfairness[g]))
                self.audited_ks.labels(part, group).set(float(report.ks_unfairness[g]))
                self.audited_group_risk.labels(part, group).set(float(report.group_risk[g]))
            self.audited_risk.labels(part).set(report.risk)
        return report

    def set_dro_weights(self, partition: Any, weights: Sequence[float], robust_value: float | None = None) -> None:
        """Export a post-processor's current DRO group weights (and robust risk value)."""
        weights = np.asarray(weights, dtype=float)
        if weights.shape != (len(self.groups),) or not np.all(np.isfinite(weights)) or np.any(weights < 0):
            raise ValueError(f"weights must be {len(self.groups)} finite numbers >= 0, got {weights.tolist()!r}")
        part = str(partition)
        for group, value in zip(self.groups, weights):
            self.dro_weight.labels(part, group).set(float(value))
        if robust_value is not None:
            self.dro_value.labels(part).set(float(robust_value))

    def forget_partition(self, partition: Any) -> None:
        """Drop every series of the partition (its post-processor moved to another instance)."""
        part = str(partition)
        self._audits.pop(part, None)
        for gauge in (self.live_gap, self.live_ks, self.live_mean, self.audited_gap, self.audited_ks,
                      self.audited_group_risk, self.audited_count, self.dro_weight):
            for group in self.groups:
                _remove(gauge, part, group)
        for gauge in (self.live_violation, self.samples, self.clipped, self.epoch, self.progress, self.horizon,
                      self.gradient_norm, self.audited_risk, self.dro_value):
            _remove(gauge, part)
        for name in ("lambda", "v"):
            _remove(self.dual_norm, part, name)


def _remove(metric: Any, *labels: str) -> None:
    try:
        metric.remove(*labels)
    except KeyError:  # never set for this partition
        pass


# ---------------------------------------------------------------------------- HTTP
class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes every few seconds would flood stderr
        pass


Probe = Callable[[], "tuple[bool, str]"]


class MetricsServer:
    """``/metrics`` (Prometheus text or OpenMetrics), ``/healthz`` and ``/readyz`` in a background thread.

    Parameters
    ----------
    registry
        What ``/metrics`` exposes.
    port
        TCP port; 0 picks a free one (see :attr:`port`).
    host
        Bind address (``"0.0.0.0"``: every interface, as a container needs).
    live, ready
        ``() -> (ok, message)`` for ``/healthz`` and ``/readyz`` (200 if ok, else 503); ``None``: always ok.

    Attributes
    ----------
    port : int
        The port actually bound.
    """

    def __init__(self, registry: CollectorRegistry, port: int = 0, host: str = "0.0.0.0",
                 live: Probe | None = None, ready: Probe | None = None):
        if not (isinstance(port, int) and 0 <= port <= 65535):
            raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
        self._metrics = make_wsgi_app(registry)
        self._probes = {HEALTH_PATH: live or _always_ok, READY_PATH: ready or _always_ok}
        self._server = make_server(host, port, self._app, server_class=_Server, handler_class=_QuietHandler)
        self.host, self.port = host, int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="streamfair-metrics", daemon=True)
        self._thread.start()

    def _app(self, environ: dict, start_response: Callable) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == METRICS_PATH:
            return self._metrics(environ, start_response)
        if path in self._probes:
            ok, message = self._probes[path]()
            status = "200 OK" if ok else "503 Service Unavailable"
        elif path == "/":
            status, message = "200 OK", f"streamfair: {METRICS_PATH} {HEALTH_PATH} {READY_PATH}"
        else:
            status, message = "404 Not Found", f"no such path {path!r}"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [(message + "\n").encode("utf-8")]

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _always_ok() -> tuple[bool, str]:
    return True, "ok"


def serve(registry: CollectorRegistry, port: int = 0, host: str = "0.0.0.0", live: Probe | None = None,
          ready: Probe | None = None) -> MetricsServer:
    """Start a :class:`MetricsServer` (close it with ``.close()``)."""
    return MetricsServer(registry, port, host, live, ready)


# ---------------------------------------------------------------------------- the daemon
class DaemonMetrics(DaemonObserver):
    """The daemon's metrics: a :class:`~connectors.kafka.observer.DaemonObserver` over :class:`StreamfairMetrics`.

    Counters follow ``daemon.stats``; every ``metrics.interval_seconds`` the post-processor of each
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
        self.checkpoints = Counter("streamfair_checkpoints_total", "Task checkpoints written.", registry=reg)
        self.checkpoint_failures = Counter("streamfair_checkpoint_failures_total", "Checkpoints that failed.",
                                           registry=reg)
        self.checkpoint_seconds = Histogram("streamfair_checkpoint_duration_seconds", "Duration of a checkpoint.",
                                            buckets=LATENCY_BUCKETS, registry=reg)
        self.message_seconds = WeightedHistogram(
            "streamfair_message_processing_seconds",
            "Processing time per input record (parse, predict, learn, send), a poll's mean per record.", reg)
        self.lag = Gauge("streamfair_consumer_lag_records", "Records behind the fetch high-watermark.",
                         ["partition"], registry=reg)
        self.assigned = Gauge("streamfair_assigned_partitions", "Input partitions owned by this instance.",
                              registry=reg)
        self.ready_gauge = Gauge("streamfair_ready", "1 when every assigned partition is restored.", registry=reg)
        self._created = self._last_checkpoint = time.monotonic()
        self._last_loop: float | None = None
        self.checkpoint_age = Gauge("streamfair_checkpoint_age_seconds",
                                    "Seconds since the last successful checkpoint (or since start).", registry=reg)
        self.checkpoint_age.set_function(lambda: time.monotonic() - self._last_checkpoint)
        self.loop_age = Gauge("streamfair_loop_age_seconds", "Seconds since the consumer loop last polled.",
                              registry=reg)
        self.loop_age.set_function(lambda: time.monotonic() - (self._last_loop or self._created))
        self.liveness_timeout = config.kafka.max_poll_interval_ms / 1000.0
        self._ready = False
        self._stopping = False
        self._next_sample = 0.0
        self._seen: dict[str, int] = {"consumed": 0, "produced": 0, "feedback": 0, "restores": 0, "rewinds": 0}
        self._seen_errors: dict[str, int] = {}
        self._consumed_at_records = 0
        self._learned: dict[int, tuple[Any, float, int]] = {}  # partition -> (task, learn_seconds, learned)
        self._lag_partitions: set[int] = set()
        self.history = None
        if config.metrics.history:
            self.history = HistoryWriter(config.metrics.history, groups, fair.slack,
                                         "gap" if fair.ks is None else "ks")
        self.server: MetricsServer | None = None

    # -------------------------------------------------------------- probes
    def live(self) -> tuple[bool, str]:
        """Liveness: the loop polled within ``kafka.max_poll_interval_ms`` (or has not started yet)."""
        if self._last_loop is None:
            return True, "starting"
        age = time.monotonic() - self._last_loop
        if age > self.liveness_timeout:
            return False, f"stalled: no poll for {age:.1f} s (limit {self.liveness_timeout:.0f} s)"
        return True, "ok"

    def ready(self) -> tuple[bool, str]:
        """Readiness: partitions assigned and every one restored, and not shutting down."""
        if self._ready and not self._stopping:
            return True, "ready"
        return False, "stopping" if self._stopping else "not ready: no partition assigned yet, or restoring"

    def start_server(self, port: int, host: str = "0.0.0.0") -> MetricsServer:
        """Serve ``/metrics``, ``/healthz`` and ``/readyz`` (stopped by :meth:`close`)."""
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
    def on_restored(self, daemon: Any, partition: int, n_samples: int, offset: int | None, seconds: float) -> None:
        self._next_sample = 0.0  # sample the restored post-processor at the next loop

    def on_assigned(self, daemon: Any, partitions: Sequence[int]) -> None:
        self._ready = bool(daemon.ready)
        self.assigned.set(len(daemon.tasks))

    def on_revoked(self, daemon: Any, partitions: Sequence[int]) -> None:
        for partition in partitions:
            self.fairness.forget_partition(partition)
            self._learned.pop(partition, None)
            if partition in self._lag_partitions:
                self._lag_partitions.discard(partition)
                _remove(self.lag, str(partition))
        self._ready = bool(daemon.ready)
        self.assigned.set(len(daemon.tasks))

    def on_records(self, daemon: Any, partition: int, n_records: int, n_dead: int, seconds: float) -> None:
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
        role = "feedback" if self._feedback_topic and topic == self._feedback_topic else "input"
        self.dead_letters.labels(role, reason).inc()
        if role == "feedback":  # valid feedback is counted from daemon.stats.feedback
            self.consumed.labels("feedback").inc()

    def on_feedback(self, daemon: Any, task: Any, accepted: Sequence[tuple]) -> None:
        models = getattr(task, "models", None)
        if models is None or not accepted or getattr(models, "classes", None) is not None:
            return  # no models to score the features with, or classification (labels are classes, not values)
        etas, taus, ys, groups = [], [], [], []
        for _, _, features, y, s in accepted:
            if features is None or s is None:  # a label for the robust post-processor only
                continue
            try:
                eta, tau = models.score(features)
            except Invalid:  # the same record as input would be a dead letter: nothing to audit
                continue
            etas.append(eta)
            taus.append(tau)
            ys.append(y)
            groups.append(self._group_index[group_label(s)])
        if etas:
            fair = task.fair
            self.fairness.add_feedback(task.partition, fair.atoms, fair.proba_many(etas, taus), ys, groups)

    def on_checkpoint(self, daemon: Any, partitions: Sequence[int], seconds: float, ok: bool) -> None:
        if ok:
            self.checkpoints.inc(len(partitions))
            self.checkpoint_seconds.observe(seconds)
            self._last_checkpoint = time.monotonic()
        else:
            self.checkpoint_failures.inc()

    def on_loop(self, daemon: Any) -> None:
        now = time.monotonic()
        self._last_loop = now
        self._ready = bool(daemon.ready)
        self.ready_gauge.set(1 if self._ready else 0)
        self.assigned.set(len(daemon.tasks))
        self._sync_counters(daemon.stats)
        for partition, lag in daemon.lag().items():
            self.lag.labels(str(partition)).set(lag)
            self._lag_partitions.add(partition)
        if now >= self._next_sample:
            self._next_sample = now + self.interval
            self._sample(daemon)

    def on_stop(self, daemon: Any) -> None:
        self._stopping = True
        self._sync_counters(daemon.stats)
        self._sample(daemon)
        self.close()

    # -------------------------------------------------------------- helpers
    def _sync_counters(self, stats: Any) -> None:
        for name, counter in (("consumed", self.consumed.labels("input")), ("produced", self.produced),
                              ("feedback", self.consumed.labels("feedback")), ("restores", self.restores),
                              ("rewinds", self.rewinds)):
            value = getattr(stats, name)
            if value > self._seen[name]:
                counter.inc(value - self._seen[name])
            self._seen[name] = value
        for kind, value in stats.errors.items():
            seen = self._seen_errors.get(kind, 0)
            if value > seen:
                self.errors.labels(kind).inc(value - seen)
            self._seen_errors[kind] = value

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
    """The daemon's metrics observer, serving on ``metrics.host:metrics.port`` (``streamfair serve``)."""
    from connectors.kafka.config import ConfigError

    observer = DaemonMetrics(config)
    host = config.metrics.host
    try:
        observer.start_server(config.metrics.port, host)
    except OSError as error:
        observer.close()
        raise ConfigError(f"metrics.port: cannot listen on {host}:{config.metrics.port}: {error.strerror}") from None
    return observer


# ---------------------------------------------------------------------------- surrogate optimisers (issue 8)
class SurrogateMetrics:
    """Diagnostics of the surrogate optimisers of :mod:`streamfair.surrogates` on a registry.

    A separate collector set, independent of :class:`StreamfairMetrics` (pass the same ``registry``
    to expose both on one endpoint).  Every series carries a ``model`` label whose values are fixed
    at construction (bounded), and the tuner's per-cell series a ``cell`` label ``0 .. K - 1``.

    * SSO (:class:`~streamfair.surrogates.SSO` or :class:`~connectors.river.surrogates.RiverSSO`),
      from :meth:`observe_sso`: ``streamfair_sso_oracle_calls_total``, ``streamfair_sso_inner_steps_total``
      (counters following the optimiser's cumulative counts), and the last step's
      ``streamfair_sso_surrogate_decrease``, ``streamfair_sso_target_step_norm``,
      ``streamfair_sso_projection_gap``, ``streamfair_sso_target_step_size`` (eta) and
      ``streamfair_sso_batch_loss`` (the batch loss at the query point: the prequential loss).
    * The black-box tuner (:class:`~streamfair.surrogates.MetricWeightTuner`), from
      :meth:`observe_tuner`: ``streamfair_blackbox_metric``, ``streamfair_projection_residual``,
      ``streamfair_gradest_condition_number`` (the spec's ``streamfair_gradest_cond_H``; Prometheus
      names are snake case), ``streamfair_gradest_zero_diff_fraction``,
      ``streamfair_gradest_negative_component_fraction``, ``streamfair_gradest_sigma``,
      ``streamfair_tuner_outer_iterations_total``, ``streamfair_tuner_skipped_steps_total``,
      ``streamfair_tuner_weights_version``, and per cell ``streamfair_surrogate_value``,
      ``streamfair_psi_grad_estimate`` and ``streamfair_tuner_cell_weight``.

    Parameters
    ----------
    models
        The ``model`` label values allowed (one per optimiser exported).
    registry
        ``None``: a new private :class:`~prometheus_client.CollectorRegistry`.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfair.surrogates import SSO
    >>> sso = SSO(2, m=5, eta=0.5)
    >>> _ = sso.step(np.eye(2), [1.0, -1.0])
    >>> metrics = SurrogateMetrics(models=["base"])
    >>> metrics.observe_sso(sso, "base")
    >>> metrics.registry.get_sample_value("streamfair_sso_inner_steps_total", {"model": "base"})
    5.0
    """

    def __init__(self, models: Sequence[str] = ("default",), registry: CollectorRegistry | None = None):
        self.models = tuple(str(m) for m in models)
        if not self.models or len(set(self.models)) != len(self.models):
            raise ValueError(f"models must be at least one distinct label, got {list(models)!r}")
        self.registry = CollectorRegistry() if registry is None else registry
        reg, m, mc = self.registry, ["model"], ["model", "cell"]
        self.oracle_calls = Counter("streamfair_sso_oracle_calls_total",
                                    "SSO oracle calls (expensive target-gradient evaluations, one per batch).", m,
                                    registry=reg)
        self.inner_steps = Counter("streamfair_sso_inner_steps_total", "SSO inner (oracle-free) parameter updates.",
                                   m, registry=reg)
        self.surrogate_decrease = Gauge("streamfair_sso_surrogate_decrease",
                                        "g_t(theta_t) - g_t(theta_t+1) of the last SSO step.", m, registry=reg)
        self.target_step_norm = Gauge("streamfair_sso_target_step_norm",
                                      "||f_B(theta_t+1) - z_t|| of the last SSO step.", m, registry=reg)
        self.projection_gap = Gauge("streamfair_sso_projection_gap",
                                    "||f_B(theta_t+1) - (z_t - eta g)|| of the last SSO step (0: exact projection).",
                                    m, registry=reg)
        self.target_step_size = Gauge("streamfair_sso_target_step_size", "Target-space step eta of the last SSO step.",
                                      m, registry=reg)
        self.batch_loss = Gauge("streamfair_sso_batch_loss",
                                "Batch loss at the query point of the last SSO step (prequential: before learning).",
                                m, registry=reg)
        self.metric = Gauge("streamfair_blackbox_metric", "Black-box metric M(theta_t) at the last outer step "
                            "(lower is better).", m, registry=reg)
        self.projection_residual = Gauge("streamfair_projection_residual",
                                         "||(l(theta_t+1) - u~)_+||^2 of the last projection.", m, registry=reg)
        self.condition = Gauge("streamfair_gradest_condition_number",
                               "Condition number of H in the last gradient estimate (Alg. 3; NaN otherwise).", m,
                               registry=reg)
        self.zero_diff = Gauge("streamfair_gradest_zero_diff_fraction",
                               "Fraction of metric differences exactly 0 in the last estimate (1: dead zone).", m,
                               registry=reg)
        self.negative = Gauge("streamfair_gradest_negative_component_fraction",
                              "Fraction of negative components of the last raw gradient estimate (psi monotone: ~0).",
                              m, registry=reg)
        self.sigma = Gauge("streamfair_gradest_sigma", "Perturbation scale of the last gradient estimate.", m,
                           registry=reg)
        self.outer_iterations = Counter("streamfair_tuner_outer_iterations_total", "Outer steps of the tuner.", m,
                                        registry=reg)
        self.skipped_steps = Counter("streamfair_tuner_skipped_steps_total",
                                     "Outer steps that published nothing (dead zone, truncation, empty slices).", m,
                                     registry=reg)
        self.version = Gauge("streamfair_tuner_weights_version", "Version of the published cell weights.", m,
                             registry=reg)
        self.surrogate_value = Gauge("streamfair_surrogate_value", "Cell surrogate loss u_t at the last outer step.",
                                     mc, registry=reg)
        self.psi_gradient = Gauge("streamfair_psi_grad_estimate",
                                  "Gradient of psi used at the last outer step (after clipping; 0 if skipped).", mc,
                                  registry=reg)
        self.cell_weight = Gauge("streamfair_tuner_cell_weight", "Published per-cell loss weight (mean 1).", mc,
                                 registry=reg)
        self._seen: dict[tuple[str, str], tuple[weakref.ref, int]] = {}

    def _model(self, model: Any) -> str:
        label = str(model)
        if label not in self.models:
            raise ValueError(f"model must be one of {list(self.models)}, got {model!r}")
        return label

    def _advance(self, counter: Counter, key: tuple[str, str], owner: Any, value: int) -> None:
        """Increase ``counter`` to follow the cumulative ``value`` of ``owner`` (a new owner restarts at 0)."""
        seen_owner, seen = self._seen.get(key, (None, 0))
        if seen_owner is None or seen_owner() is not owner:  # a weak reference: a freed id may be reused
            seen = 0
        child = counter.labels(key[0])  # exported from the first observation on, at 0 if nothing happened yet
        if value > seen:
            child.inc(value - seen)
        self._seen[key] = (weakref.ref(owner), value)

    def observe_sso(self, sso: Any, model: Any = "default") -> None:
        """Export an SSO optimiser's counts and its last step (``sso.last_step``, if any)."""
        label = self._model(model)
        self._advance(self.oracle_calls, (label, "oracle"), sso, int(sso.n_oracle_calls))
        self._advance(self.inner_steps, (label, "inner"), sso, int(sso.n_inner_steps))
        step = getattr(sso, "last_step", None)
        if step is not None:
            self.surrogate_decrease.labels(label).set(step.surrogate_decrease)
            self.target_step_norm.labels(label).set(step.target_step_norm)
            self.projection_gap.labels(label).set(step.projection_gap)
            self.target_step_size.labels(label).set(step.eta)
            self.batch_loss.labels(label).set(step.loss_at_z)

    def observe_tuner(self, tuner: Any, model: Any = "default") -> None:
        """Export a :class:`~streamfair.surrogates.MetricWeightTuner`'s counts, version and last report."""
        label = self._model(model)
        self._advance(self.outer_iterations, (label, "outer"), tuner, int(tuner.outer_iterations))
        self._advance(self.skipped_steps, (label, "skipped"), tuner, int(tuner.skipped_steps))
        weights = tuner.weights
        self.version.labels(label).set(weights.version)
        for cell, value in enumerate(weights.cell_weights):
            self.cell_weight.labels(label, str(cell)).set(float(value))
        report = tuner.last_report
        if report is None:
            return
        self.metric.labels(label).set(report.metric)
        if report.projection is not None:
            self.projection_residual.labels(label).set(report.projection.residual)
        estimate = report.estimate
        self.condition.labels(label).set(estimate.condition)
        self.zero_diff.labels(label).set(estimate.zero_diff_fraction)
        self.negative.labels(label).set(estimate.negative_fraction)
        self.sigma.labels(label).set(estimate.sigma)
        for cell, (value, gradient) in enumerate(zip(report.surrogates, report.gradient)):
            self.surrogate_value.labels(label, str(cell)).set(float(value))
            self.psi_gradient.labels(label, str(cell)).set(float(gradient))
