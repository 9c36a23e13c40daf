"""Prometheus metrics of streamfair: live fairness without S, convergence, audited fairness, the daemon.

Each layer is usable on its own:

* :class:`StreamfairMetrics` (:mod:`~connectors.prometheus.fairness`) -- the post-processor's metrics on a
  :class:`~prometheus_client.CollectorRegistry` (a new private one unless you pass yours): the plug-in
  fairness estimates of :meth:`~streamfair.DualPostProcessor.diagnostics` (no S needed), convergence, the
  audited fairness and risk over a sliding :class:`AuditWindow` of labelled feedback, per-sample update
  latency, and the DRO weights once a post-processor has them.  Library users call it from their own loop.
* :class:`MetricsServer` / :func:`serve` (:mod:`~connectors.prometheus.server`) -- ``/metrics`` plus
  ``/healthz`` (liveness) and ``/readyz`` (readiness) over HTTP, in a background thread.
* :class:`DaemonMetrics` (:mod:`~connectors.prometheus.daemon`) -- a
  :class:`~connectors.kafka.observer.DaemonObserver` that exports the daemon's counters (throughput, dead
  letters, checkpoints, errors), processing latency and consumer lag, and samples the post-processors of
  its tasks; ``streamfair serve`` gets it from :func:`make_observer` when ``metrics.port`` is set.
* :class:`SurrogateMetrics` (:mod:`~connectors.prometheus.surrogates`) -- the diagnostics of the surrogate
  optimisers (SSO and the black-box metric tuner of :mod:`streamfair.surrogates`), a separate set of
  collectors; pass the same registry to expose them beside the others.
* :mod:`~connectors.prometheus.report` -- the history file and ``streamfair report``.

Conventions: every name starts with ``streamfair_``; counters end in ``_total``; durations are
``_seconds`` histograms whose buckets (:data:`LATENCY_BUCKETS`) resolve microseconds; label values
are bounded (partitions of the input topic, configured groups, dead-letter reasons, fixed kinds).
"""

from connectors.prometheus.audit import AuditWindow
from connectors.prometheus.collectors import LATENCY_BUCKETS, WeightedHistogram
from connectors.prometheus.daemon import DaemonMetrics, make_observer
from connectors.prometheus.fairness import StreamfairMetrics
from connectors.prometheus.server import HEALTH_PATH, METRICS_PATH, READY_PATH, MetricsServer, serve
from connectors.prometheus.surrogates import SurrogateMetrics

__all__ = [
    "AuditWindow", "DaemonMetrics", "HEALTH_PATH", "LATENCY_BUCKETS", "METRICS_PATH", "MetricsServer", "READY_PATH",
    "StreamfairMetrics", "SurrogateMetrics", "WeightedHistogram", "make_observer", "serve",
]
