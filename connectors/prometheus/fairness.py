"""The post-processor's metrics on a registry: live fairness without S, convergence, audited fairness, DRO.

:class:`StreamfairMetrics` is what a library user calls from their own loop; the daemon's
:class:`~connectors.prometheus.daemon.DaemonMetrics` samples its tasks' post-processors through it.

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

import contextlib
import math
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from prometheus_client import CollectorRegistry, Gauge

from connectors.prometheus.audit import AuditWindow
from connectors.prometheus.collectors import (
    WeightedHistogram,
    check_count,
    check_registry,
    label_values,
    remove_series,
)
from streamfair.evaluation import FairnessReport
from streamfair.validation import check_finite, check_integer, check_slack, is_real


class StreamfairMetrics:
    """Metrics of one or more post-processors (one per ``partition`` label) on a registry.

    Parameters
    ----------
    groups
        Group labels in the column order of tau (the ``group`` label values): a sequence of at
        least 2, distinct as strings.
    eps
        The post-processors' per-atom slack (the paper's constraints): one number or one per group,
        each finite and ``>= 0``, exported as ``streamfair_fairness_eps``.
    registry
        Where the metrics are registered; ``None``: a new :class:`~prometheus_client.CollectorRegistry`
        (so two instances never clash, and the process-wide default registry stays untouched).
    audit_window
        Labelled samples per partition in the audited sliding window, an integer ``>= 1``.
    ks
        Or, instead of ``eps``, their KS target (the default constraints), one number or one per
        group, each in ``[0, 1]``, exported as ``streamfair_fairness_ks_target`` next to the
        live and audited KS.  Exactly one of ``eps`` and ``ks`` is given.

    Attributes
    ----------
    registry : CollectorRegistry
        Expose it with :func:`serve`, :func:`prometheus_client.generate_latest` or a push gateway.

    Examples
    --------
    The live metrics come from :meth:`observe` (see the module's example).  The audited ones come
    from labelled feedback: the law ``pi(. | x)`` that was served over the atoms, the label ``y``
    and the true group (here partition 3 served each group a different law):

    >>> metrics = StreamfairMetrics(groups=["a", "b"], ks=0.05, audit_window=100)
    >>> atoms, served = [-1.0, 0.0, 1.0], [[0.0, 0.5, 0.5], [0.5, 0.5, 0.0]] * 5
    >>> metrics.add_feedback(3, atoms, served, y=[1.0, -1.0] * 5, groups=[0, 1] * 5)
    >>> metrics.audited_samples(3)
    10
    >>> report = metrics.observe_audit(3)
    >>> report.risk, report.ks_unfairness.tolist()
    (0.5, [0.25, 0.25])
    >>> get = metrics.registry.get_sample_value
    >>> get("streamfair_audited_fairness_ks", {"partition": "3", "group": "a"})
    0.25

    When the partition moves to another instance, its series go:

    >>> metrics.forget_partition(3)
    >>> get("streamfair_audited_fairness_ks", {"partition": "3", "group": "a"}) is None
    True
    """

    def __init__(self, groups: Sequence[Any], eps: float | Sequence[float] | None = None,
                 registry: CollectorRegistry | None = None, audit_window: int = 1000,
                 ks: float | Sequence[float] | None = None):
        self.groups = label_values("groups", groups, 2)
        if (eps is None) == (ks is None):
            raise ValueError(f"give exactly one of eps and ks, got eps={eps!r}, ks={ks!r}")
        name, given = ("eps", eps) if ks is None else ("ks", ks)
        target = check_slack(given, len(self.groups), name, at_most=math.inf if ks is None else 1.0)
        self.audit_window = check_integer("audit_window", audit_window, 1)
        self.registry = CollectorRegistry() if registry is None else check_registry(registry)
        reg, pg, p = self.registry, ["partition", "group"], ["partition"]
        self.update_seconds = WeightedHistogram(
            "streamfair_update_seconds", "Time of one post-processor update, per sample learned.", reg)
        if name == "eps":
            self.target = Gauge("streamfair_fairness_eps", "Per-atom fairness tolerance eps of each group.", ["group"],
                                registry=reg)
        else:
            self.target = Gauge("streamfair_fairness_ks_target",
                                "Fairness target: the KS distance each group's predictions are steered to.", ["group"],
                                registry=reg)
        for group, value in zip(self.groups, target, strict=True):
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
        self.group_present = Gauge("streamfair_group_present",
                                   "1 if the stream shows the group, so its fairness is constrained; 0 if absent "
                                   "(less than one expected sample in the memory): its live KS and gap read 0 and "
                                   "say nothing about it.", pg, registry=reg)
        self.live_violation = Gauge("streamfair_live_violation",
                                    "sqrt(sum (|constraint| - target)_+^2) of the live estimate, over the configured "
                                    "constraints (CDF thresholds for ks, atoms for eps).", p, registry=reg)
        # convergence
        self.samples = Gauge("streamfair_postprocessor_samples", "Samples learned by the post-processor.", p,
                             registry=reg)
        self.clipped = Gauge("streamfair_postprocessor_clipped_samples",
                             "Samples whose prediction was clipped to the target range.", p, registry=reg)
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
        # DRO: set by set_dro_weights() once a post-processor keeps DRO weights
        self.dro_weight = Gauge("streamfair_dro_weight", "Current DRO weight of the group.", pg, registry=reg)
        self.dro_value = Gauge("streamfair_dro_robust_value", "Current robust (worst-case weighted) risk.", p,
                               registry=reg)
        self._audits: dict[str, AuditWindow] = {}

    # -------------------------------------------------------------- updates
    @contextlib.contextmanager
    def time_update(self, n: int = 1) -> Iterator[None]:
        """Time the block as an update of ``n`` samples (``with metrics.time_update(): fair.learn_one(...)``).

        The block's duration, divided by ``n``, is counted ``n`` times in ``streamfair_update_seconds``.

        Parameters
        ----------
        n
            Samples the block learns (``learn_many`` of ``n`` rows), an integer; ``n <= 0``
            counts nothing.

        Yields
        ------
        None
            The block runs at the ``yield``.
        """
        check_count("n", n)
        started = time.perf_counter()
        yield
        self.update_seconds.observe((time.perf_counter() - started) / max(n, 1), n)

    def observe(self, fair: Any, partition: Any = "0") -> tuple[Any, FairnessReport | None]:
        """Set the live fairness and convergence gauges from ``fair.diagnostics()`` and the audited
        ones from the partition's window.

        The live fairness gauges appear with the first sample learned (an empty window estimates nothing),
        and so does ``streamfair_group_present``: 0 for a group the stream does not show (not
        constrained, its live KS and gap read 0 and say nothing about it), 1 otherwise.

        Parameters
        ----------
        fair
            A post-processor (anything with a ``diagnostics()`` that returns a
            :class:`streamfair.Diagnostics` over the ``groups``).
        partition
            The ``partition`` label value of its series.

        Returns
        -------
        tuple of (Diagnostics, FairnessReport or None)
            ``fair.diagnostics()`` and the report of :meth:`observe_audit` (``None`` without one).
        """
        if not callable(getattr(fair, "diagnostics", None)):
            raise ValueError(f"fair must be a post-processor (with a diagnostics() method), got {fair!r}")
        diagnostics = fair.diagnostics()
        part = str(partition)
        if diagnostics.group_unfairness.shape != (len(self.groups),):
            raise ValueError(f"fair has {diagnostics.group_unfairness.size} groups, expected {len(self.groups)}")
        if diagnostics.n_samples > 0:
            for g, group in enumerate(self.groups):
                self.live_gap.labels(part, group).set(float(diagnostics.group_unfairness[g]))
                self.live_ks.labels(part, group).set(float(diagnostics.group_ks[g]))
                self.live_mean.labels(part, group).set(float(diagnostics.group_mean[g]))
                self.group_present.labels(part, group).set(float(diagnostics.group_present[g]))
            self.live_violation.labels(part).set(diagnostics.violation)
        self.samples.labels(part).set(diagnostics.n_samples)
        self.clipped.labels(part).set(diagnostics.n_clipped)
        self.epoch.labels(part).set(diagnostics.epoch)
        self.progress.labels(part).set(diagnostics.epoch_progress)
        self.horizon.labels(part).set(diagnostics.epoch_horizon)
        self.gradient_norm.labels(part).set(diagnostics.gradient_mapping_norm)
        for name, value in zip(("lambda", "v"), diagnostics.dual_norms, strict=True):
            self.dual_norm.labels(part, name).set(value)
        return diagnostics, self.observe_audit(part)

    def add_feedback(self, partition: Any, atoms: Sequence[float], proba: Any, y: Any, groups: Any) -> None:
        """Labelled samples: the served distributions ``proba`` over ``atoms``, labels ``y``, group
        indices ``groups`` (columns of tau).  A change of ``atoms`` starts a new window.

        Parameters
        ----------
        partition
            The partition whose audit window gets the samples.
        atoms
            The values the distributions are over (the post-processor's atoms).
        proba
            Shape ``(n, m)``: the distribution served for each sample.
        y
            Shape ``(n,)``: the labels.
        groups
            Shape ``(n,)``: the true groups, as indices into ``groups``.
        """
        part, values = str(partition), check_finite("atoms", atoms)
        window = self._audits.get(part)
        if window is None or not np.array_equal(window.atoms, values):
            window = AuditWindow(values, len(self.groups), self.audit_window)
        window.add(proba, y, groups)
        self._audits[part] = window  # a new window replaces the old one once it holds the samples

    def audited_samples(self, partition: Any = "0") -> int:
        """Labelled samples held in the partition's window.

        Parameters
        ----------
        partition
            The partition.

        Returns
        -------
        int
            The samples in its audit window (0 before any feedback).
        """
        window = self._audits.get(str(partition))
        return 0 if window is None else window.count

    def observe_audit(self, partition: Any = "0") -> FairnessReport | None:
        """Set the audited gauges of the partition from its window.

        The per-group sample counts are set as soon as the window holds a sample, the fairness and
        risk gauges once every group has one.

        Parameters
        ----------
        partition
            The partition.

        Returns
        -------
        FairnessReport or None
            The report of the window, or ``None`` while a group has no sample (or no window exists).
        """
        part = str(partition)
        window = self._audits.get(part)
        if window is None:
            return None
        for group, count in zip(self.groups, window.group_counts(), strict=True):
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
        """Export a post-processor's current DRO group weights (and robust risk value).

        Parameters
        ----------
        partition
            The partition of the post-processor.
        weights
            One finite weight ``>= 0`` per group, in the order of ``groups``.
        robust_value
            The robust (worst-case weighted) risk, a finite number; ``None``: left as it was.
        """
        try:
            values = np.asarray(weights, dtype=float)
        except (TypeError, ValueError):
            raise ValueError(f"weights must be {len(self.groups)} finite numbers >= 0, got {weights!r}") from None
        if values.shape != (len(self.groups),) or not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError(f"weights must be {len(self.groups)} finite numbers >= 0, got {values.tolist()!r}")
        if robust_value is not None and not is_real(robust_value):
            raise ValueError(f"robust_value must be a finite number or None, got {robust_value!r}")
        part = str(partition)
        for group, value in zip(self.groups, values, strict=True):
            self.dro_weight.labels(part, group).set(float(value))
        if robust_value is not None:
            self.dro_value.labels(part).set(float(robust_value))

    def forget_partition(self, partition: Any) -> None:
        """Drop every series of the partition (its post-processor moved to another instance).

        Parameters
        ----------
        partition
            The partition; its audit window goes too.
        """
        part = str(partition)
        self._audits.pop(part, None)
        for gauge in (self.live_gap, self.live_ks, self.live_mean, self.group_present, self.audited_gap,
                      self.audited_ks, self.audited_group_risk, self.audited_count, self.dro_weight):
            for group in self.groups:
                remove_series(gauge, part, group)
        for gauge in (self.live_violation, self.samples, self.clipped, self.epoch, self.progress, self.horizon,
                      self.gradient_norm, self.audited_risk, self.dro_value):
            remove_series(gauge, part)
        for name in ("lambda", "v"):
            remove_series(self.dual_norm, part, name)
