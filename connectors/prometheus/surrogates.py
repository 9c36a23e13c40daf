"""Prometheus export of the surrogate optimisers' diagnostics (SSO and the black-box metric tuner)."""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge

from connectors.prometheus.collectors import check_registry, label_values
from streamfair.validation import check_integer


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
      ``streamfair_gradest_condition_number`` (the condition number of the matrix ``H`` of Algorithm 3 of
      Jiang et al., ICML 2020, spelled out because Prometheus names are lower-case snake case),
      ``streamfair_gradest_zero_diff_fraction``, ``streamfair_gradest_negative_component_fraction``,
      ``streamfair_gradest_sigma``, ``streamfair_tuner_outer_iterations_total``,
      ``streamfair_tuner_skipped_steps_total``, ``streamfair_tuner_weights_version``, and per cell
      ``streamfair_surrogate_value``, ``streamfair_psi_grad_estimate`` and ``streamfair_tuner_cell_weight``.

    Parameters
    ----------
    models
        The ``model`` label values allowed (one per optimiser exported): a sequence of at least
        one, distinct as strings.
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
        self.models = tuple(label_values("models", models, 1))
        self.registry = CollectorRegistry() if registry is None else check_registry(registry)
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
        """Increase ``counter`` to follow the cumulative ``value`` of ``owner`` (a new owner restarts at 0).

        ``value`` is a count checked by :func:`count_of`.
        """
        seen_owner, seen = self._seen.get(key, (None, 0))
        if seen_owner is None or seen_owner() is not owner:  # a weak reference: a freed id may be reused
            seen = 0
        child = counter.labels(key[0])  # exported from the first observation on, at 0 if nothing happened yet
        if value > seen:
            child.inc(value - seen)
        self._seen[key] = (weakref.ref(owner), value)

    def observe_sso(self, sso: Any, model: Any = "default") -> None:
        """Export an SSO optimiser's counts and its last step (``sso.last_step``, if any).

        Parameters
        ----------
        sso
            An :class:`~streamfair.surrogates.SSO` or a :class:`~connectors.river.surrogates.RiverSSO`
            (``n_oracle_calls``, ``n_inner_steps`` and, optionally, ``last_step`` are read).
        model
            The ``model`` label value, one of ``models``.
        """
        label = self._model(model)
        calls, steps = count_of(sso, "n_oracle_calls", "sso"), count_of(sso, "n_inner_steps", "sso")
        self._advance(self.oracle_calls, (label, "oracle"), sso, calls)
        self._advance(self.inner_steps, (label, "inner"), sso, steps)
        step = getattr(sso, "last_step", None)
        if step is not None:
            self.surrogate_decrease.labels(label).set(step.surrogate_decrease)
            self.target_step_norm.labels(label).set(step.target_step_norm)
            self.projection_gap.labels(label).set(step.projection_gap)
            self.target_step_size.labels(label).set(step.eta)
            self.batch_loss.labels(label).set(step.loss_at_z)

    def observe_tuner(self, tuner: Any, model: Any = "default") -> None:
        """Export a :class:`~streamfair.surrogates.MetricWeightTuner`'s counts, version and last report.

        Parameters
        ----------
        tuner
            The tuner.
        model
            The ``model`` label value, one of ``models``.
        """
        label = self._model(model)
        outer, skipped = count_of(tuner, "outer_iterations", "tuner"), count_of(tuner, "skipped_steps", "tuner")
        self._advance(self.outer_iterations, (label, "outer"), tuner, outer)
        self._advance(self.skipped_steps, (label, "skipped"), tuner, skipped)
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
        for cell, (value, gradient) in enumerate(zip(report.surrogates, report.gradient, strict=True)):
            self.surrogate_value.labels(label, str(cell)).set(float(value))
            self.psi_gradient.labels(label, str(cell)).set(float(gradient))


def count_of(owner: Any, attribute: str, name: str) -> int:
    """The cumulative count ``owner.<attribute>``: an integer >= 0, else ``ValueError`` naming ``name.attribute``.

    >>> from types import SimpleNamespace
    >>> count_of(SimpleNamespace(n_oracle_calls=3), "n_oracle_calls", "sso")
    3
    >>> count_of(SimpleNamespace(n_oracle_calls=float("nan")), "n_oracle_calls", "sso")
    Traceback (most recent call last):
    ...
    ValueError: sso.n_oracle_calls must be an integer >= 0, got nan
    """
    return check_integer(f"{name}.{attribute}", getattr(owner, attribute, None), 0)
