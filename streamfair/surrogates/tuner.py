"""Metric-adaptive cell weights for an upstream model (after Jiang et al., ICML 2020).

A slow outer loop beside the per-sample stream: every ``every`` labelled feedback events it freezes
the last ``window`` events, splits them into a surrogate slice and a metric slice (a keyed,
reproducible split), and takes one step of Algorithm 1 against a user-supplied black-box metric.
All ``2m`` metric evaluations of the step use the same frozen snapshot (common random numbers: the
differences carry no sampling noise).  The projection's clipped residuals are the KKT weights for
which the new parameters minimise the weighted loss ``sum_k w_k l_k`` (the paper's Appendix C); they
are published together with the parameters as one immutable, versioned :class:`PublishedWeights`
(replaced by a single reference assignment, so readers never see half an update).  An upstream
model trained with :meth:`PublishedWeights.sample_weight` as per-sample weights (e.g. River's
``learn_one(x, y, w=...)``) minimises that weighted loss.

Fairness is **not** a coordinate of the surrogate space: a business metric usually improves when
unfairness grows, so ``psi`` would decrease in such a coordinate and the relaxation and projection
of Algorithm 1 (Observation 2, Lemma 1) would fail.  :func:`check_surrogate_kinds` rejects such a
configuration; fairness is enforced downstream by the DP post-processor as a hard constraint.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = np.c_[rng.standard_normal((3000, 2)), np.ones(3000)]
>>> group = (X[:, 0] > 0).astype(int)
>>> y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.standard_normal(3000)
>>> def group_one_error(scores, window):          # the business cares about group 1 only
...     one = window.cells == 1
...     return float(np.mean((scores[one] - window.y[one]) ** 2))
>>> tuner = MetricWeightTuner(3, 2, group_one_error, every=500, window=1000, seed=0)
>>> published = tuner.observe_many(X, y, group)
>>> [w.version for w in published], tuner.weights.version
([1, 2, 3, 4, 5, 6], 6)
>>> bool(tuner.weights.cell_weights[1] > tuner.weights.cell_weights[0])
True
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..keyed_random import keyed_uniform
from ..validation import (
    SUM_TOLERANCE,
    check_array,
    check_bool,
    check_finite,
    check_index,
    check_indices,
    check_integer,
    check_positive,
    check_seed,
    first_entry,
    show,
)
from ._checks import check_finite_or_nan, check_fraction, check_label, check_labels
from .blackbox import StepConfig, StepReport, pgd_step
from .cells import SURROGATE_LOSSES, CellSurrogates
from .gradient_estimates import LinearInterpolation, check_coordinates_fit
from .problem import BlackBoxProblem

#: Surrogate kinds: per-cell losses are monotone for any sensible metric; fairness violations are not.
LOSS_KINDS = ("loss",)
FAIRNESS_KINDS = ("fairness_violation",)


def check_surrogate_kinds(kinds: Sequence[str], assume_monotone: bool = False) -> tuple[str, ...]:
    """Validate what each surrogate coordinate measures.

    Parameters
    ----------
    kinds
        What each surrogate measures, a sequence of ``"loss"`` or ``"fairness_violation"``.
    assume_monotone
        ``True``: the caller vouches that the metric never improves when a fairness violation grows.

    Returns
    -------
    tuple of str
        The kinds.

    Raises
    ------
    ValueError
        For an unknown kind, or for a fairness violation in the surrogate space unless
        ``assume_monotone=True`` (the caller vouches that the metric never improves when that
        violation grows, e.g. because it prices unfairness).

    Examples
    --------
    >>> check_surrogate_kinds(["loss", "loss"])
    ('loss', 'loss')
    >>> check_surrogate_kinds(["loss", "fairness_violation"], assume_monotone=True)
    ('loss', 'fairness_violation')
    >>> check_surrogate_kinds(["loss", "fairness_violation"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: surrogate_kinds[1] is 'fairness_violation': a fairness violation cannot be a coordinate of ...
    """
    try:
        listed = None if isinstance(kinds, str) else tuple(kinds)
    except TypeError:
        listed = None
    if listed is None:
        raise ValueError(f"surrogate_kinds must be a sequence of kinds, one per surrogate, got {show(kinds)}")
    kinds = listed
    check_bool("assume_monotone", assume_monotone)
    for index, kind in enumerate(kinds):
        if kind not in LOSS_KINDS + FAIRNESS_KINDS:
            raise ValueError(f"surrogate_kinds[{index}] must be one of {LOSS_KINDS + FAIRNESS_KINDS}, got {kind!r}")
        if kind in FAIRNESS_KINDS and not assume_monotone:
            raise ValueError(
                f"surrogate_kinds[{index}] is {kind!r}: a fairness violation cannot be a coordinate of the "
                "metric's surrogate space. Algorithm 1 needs the metric to be non-decreasing in every "
                "surrogate (Observation 2 and Lemma 1 of Jiang et al.), but a business metric usually "
                "improves when unfairness grows, so the tuner would trade fairness for the metric. Keep "
                "fairness as a hard constraint of the downstream DP post-processor (its eps), or pass "
                "assume_monotone=True if the metric itself penalises unfairness."
            )
    return kinds


@dataclass(frozen=True)
class FeedbackWindow:
    """A frozen slice of labelled feedback (what the metric sees).

    Parameters
    ----------
    X
        Features, shape ``(n, d)``.
    y
        Labels, shape ``(n,)``.
    cells
        Cell of each event, integers of shape ``(n,)``.
    extra
        User columns (e.g. revenue), numbers of shape ``(n, e)`` (``nan`` allowed: they are only
        handed to the metric); ``e = 0`` if none.

    Raises
    ------
    ValueError
        For features or labels that are not finite, cells that are not integers ``>= 0``, or
        arrays whose numbers of rows differ.

    Examples
    --------
    A metric of the tuner reads the window, here the squared error in cell 1 only:

    >>> import numpy as np
    >>> window = FeedbackWindow(
    ...     X=np.ones((3, 1)), y=np.array([1.0, 2.0, 4.0]), cells=np.array([0, 1, 1]), extra=np.zeros((3, 0))
    ... )
    >>> scores, one = window.X @ [2.0], window.cells == 1
    >>> float(np.mean((scores[one] - window.y[one]) ** 2))        # residuals 0 and -2
    2.0
    """

    X: np.ndarray
    y: np.ndarray
    cells: np.ndarray
    extra: np.ndarray

    def __post_init__(self) -> None:
        X = check_array("X", self.X, ("n", "d"))
        n = X.shape[0]
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "y", check_array("y", self.y, (n,)))
        object.__setattr__(self, "cells", check_indices("cells", self.cells, n, None))
        object.__setattr__(self, "extra", check_array("extra", self.extra, (n, "e"), finite=False))


@dataclass(frozen=True)
class PublishedWeights:
    """One published version of the tuned parameters and cell weights (immutable).

    Parameters
    ----------
    version
        Version number, an integer ``>= 0``, ``0`` for the initial parameters.
    theta
        Parameters of the linear component, finite, shape ``(d,)``.
    cell_weights
        KKT weights of the surrogates, finite and ``>= 0``, shape ``(K,)``, mean 1.
    cell_shares
        Share of each cell in the window used, shape ``(K,)``: each ``> 0``, summing to 1.
    metric
        ``M(theta)`` before the step that produced this version, finite (``nan`` for version 0).
    n_events
        Labelled events observed when published, an integer ``>= 0``.

    Raises
    ------
    ValueError
        For a field outside these ranges.

    Examples
    --------
    Cell 0 holds a quarter of the events and weighs ``3/2``: each of its samples weighs
    ``1.5 / (2 * 0.25) = 3``, each of cell 1's ``0.5 / (2 * 0.75) = 1/3``; over a window with these
    shares the sample weights average to the mean cell weight, 1.

    >>> import numpy as np
    >>> published = PublishedWeights(1, np.zeros(2), np.array([1.5, 0.5]), np.array([0.25, 0.75]), 0.3, 100)
    >>> published.sample_weight(0), round(published.sample_weight(1), 6)
    (3.0, 0.333333)
    >>> weights = published.sample_weights([0, 1, 1, 1])
    >>> weights.round(6).tolist(), round(float(weights.mean()), 6)
    ([3.0, 0.333333, 0.333333, 0.333333], 1.0)
    """

    version: int
    theta: np.ndarray
    cell_weights: np.ndarray
    cell_shares: np.ndarray
    metric: float
    n_events: int

    def __post_init__(self) -> None:
        check_integer("version", self.version, 0)
        object.__setattr__(self, "theta", check_array("theta", self.theta, ("d",)))
        weights = check_array("cell_weights", self.cell_weights, ("K",))
        if weights.size < 1:
            raise ValueError(f"cell_weights must hold at least one weight, got shape {weights.shape}")
        if np.any(weights < 0):
            raise ValueError(f"cell_weights must be >= 0; {first_entry(weights, weights < 0)}")
        shares = check_array("cell_shares", self.cell_shares, weights.shape)
        if np.any(shares <= 0):
            raise ValueError(f"cell_shares must be > 0; {first_entry(shares, shares <= 0)}")
        total = math.fsum(shares)
        if abs(total - 1.0) > SUM_TOLERANCE:
            raise ValueError(
                f"cell_shares must sum to 1 (within {SUM_TOLERANCE}), got {show(shares.tolist())} (sum {total:.6g})"
            )
        object.__setattr__(self, "cell_weights", weights)
        object.__setattr__(self, "cell_shares", shares)
        check_finite_or_nan("metric", self.metric)
        check_integer("n_events", self.n_events, 0)

    def sample_weight(self, cell: int) -> float:
        """Per-sample loss weight ``w_k / (K share_k)``: training on it minimises ``sum_k w_k l_k / K``.

        Parameters
        ----------
        cell
            The sample's cell ``k``, an integer in ``[0, K)``.

        Returns
        -------
        float
            Its loss weight.
        """
        cell = check_index("cell", cell, self.cell_weights.size)
        return float(self.cell_weights[cell] / (self.cell_weights.size * self.cell_shares[cell]))

    def sample_weights(self, cells: ArrayLike) -> np.ndarray:
        """:meth:`sample_weight` for an array of cells.

        Parameters
        ----------
        cells
            Cells of the samples, integers in ``[0, K)`` of shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            Their loss weights.
        """
        cells = check_indices("cells", cells, None, self.cell_weights.size)
        return self.cell_weights[cells] / (self.cell_weights.size * self.cell_shares[cells])


ScoreMetric = Callable[[np.ndarray, FeedbackWindow], float]


class MetricWeightTuner:
    """Slow outer loop tuning per-cell loss weights of a linear component against a black-box metric.

    Parameters
    ----------
    n_features, n_cells
        ``d`` and ``K``.
    metric
        ``metric(scores, window) -> float`` (lower is better): scores of the linear component on the
        metric slice ``window`` (:class:`FeedbackWindow`).  It may wrap a downstream post-processor
        (with frozen duals) to measure the served output.
    loss
        Cell surrogate: ``"squared"`` (regression), ``"logistic"`` or ``"hinge"`` (labels +-1).
    every
        Labelled events between outer steps.
    window
        Labelled events kept (the last ones); the outer step uses all of them.
    metric_fraction
        Share of events routed to the metric slice (keyed on the event index, reproducible), in ``(0, 1)``.
    n_perturbations, sigma, coordinates
        Algorithm 3's ``m``, ``sigma`` and perturbed coordinates (``None``: all; else distinct
        indices of the ``d`` parameters).
    eta, projection_steps, projection_lr, dead_zone, sigma_growth, max_sigma_raises, lipschitz, clip_negative
        See :class:`~.blackbox.SurrogatePGD` (``clip_negative`` defaults to ``True`` here: ``psi`` is
        monotone, and the raw negative fraction stays in the reports).
    surrogate_kinds, assume_monotone
        See :func:`check_surrogate_kinds`; ``None``: every cell is a ``"loss"``.
    theta0
        Initial parameters, shape ``(d,)``; ``None``: zeros.
    seed
        Seed of the slice split and of the perturbations.

    Attributes
    ----------
    weights : PublishedWeights
        The current version (version 0: ``theta0`` and uniform weights).
    last_report : StepReport or None
        Diagnostics of the latest outer step (metric, estimate quality, projection residual).
    outer_iterations, skipped_steps, n_events : int
        Outer steps run, outer steps that published nothing, and labelled events observed.

    Examples
    --------
    The business cares about the squared error in cell 1 only; a version is published every 200
    events, and its cell weights are normalised to mean 1.

    >>> import numpy as np
    >>> rng = np.random.default_rng(1)
    >>> X = np.c_[rng.standard_normal((400, 1)), np.ones(400)]
    >>> cells = (X[:, 0] > 0).astype(int)
    >>> y = np.where(cells == 1, 2.0, -1.0) * X[:, 0] + 0.1 * rng.standard_normal(400)
    >>> def cell_one_error(scores, window):
    ...     one = window.cells == 1
    ...     return float(np.mean((scores[one] - window.y[one]) ** 2))
    >>> tuner = MetricWeightTuner(2, 2, cell_one_error, every=200, window=400, seed=0)
    >>> tuner.weights.version, tuner.weights.cell_weights.tolist()           # version 0: uniform
    (0, [1.0, 1.0])
    >>> tuner.observe(X[0], y[0], int(cells[0])) is None                       # no step due yet
    True
    >>> published = tuner.observe_many(X[1:], y[1:], cells[1:])
    >>> [(w.version, w.n_events) for w in published], tuner.outer_iterations
    ([(1, 200), (2, 400)], 2)
    >>> round(float(tuner.weights.cell_weights.mean()), 6), bool(published[1].metric < published[0].metric)
    (1.0, True)
    """

    def __init__(
        self,
        n_features: int,
        n_cells: int,
        metric: ScoreMetric,
        *,
        loss: str = "squared",
        every: int = 1000,
        window: int = 5000,
        metric_fraction: float = 1 / 3,
        n_perturbations: int = 10,
        sigma: float = 0.1,
        coordinates: ArrayLike | None = None,
        eta: float = 0.1,
        projection_steps: int = 100,
        projection_lr: float = 1.0,
        dead_zone: str = "raise_sigma",
        sigma_growth: float = 2.0,
        max_sigma_raises: int = 3,
        lipschitz: float | None = None,
        clip_negative: bool = True,
        surrogate_kinds: Sequence[str] | None = None,
        assume_monotone: bool = False,
        theta0: ArrayLike | None = None,
        seed: int = 0,
    ):
        self.n_features = check_integer("n_features", n_features, 1)
        self.n_cells = check_integer("n_cells", n_cells, 1)
        kinds = ("loss",) * self.n_cells if surrogate_kinds is None else surrogate_kinds
        self.surrogate_kinds = check_surrogate_kinds(kinds, assume_monotone)
        if len(self.surrogate_kinds) != self.n_cells:
            raise ValueError(f"surrogate_kinds must have {self.n_cells} entries, got {len(self.surrogate_kinds)}")
        if not callable(metric):
            raise ValueError(f"metric must be callable, got {metric!r}")
        self.metric = metric
        if loss not in SURROGATE_LOSSES:
            raise ValueError(f"loss must be one of {SURROGATE_LOSSES}, got {loss!r}")
        self.loss = loss
        self.every = check_integer("every", every, 1)
        self.window = check_integer("window", window, 2)
        self.metric_fraction = check_fraction("metric_fraction", metric_fraction)
        self.estimator = LinearInterpolation(n_perturbations, sigma, coordinates)
        check_coordinates_fit(self.estimator.coordinates, self.n_features)
        self.config = StepConfig(
            eta, projection_steps, projection_lr, dead_zone, sigma_growth, max_sigma_raises, lipschitz, clip_negative
        )
        self.sigma = check_positive("sigma", sigma)
        self.seed = check_seed(seed)
        theta = np.zeros(self.n_features) if theta0 is None else check_finite("theta0", theta0, self.n_features).copy()
        uniform = np.full(self.n_cells, 1.0)
        self._published = PublishedWeights(0, theta, uniform, uniform / self.n_cells, math.nan, 0)
        self._X = np.zeros((self.window, self.n_features))
        self._y = np.zeros(self.window)
        self._cells = np.zeros(self.window, dtype=int)
        self._extra: np.ndarray | None = None
        self._is_metric = np.zeros(self.window, dtype=bool)
        self.n_events = 0
        self.outer_iterations = 0
        self.skipped_steps = 0
        self.last_report: StepReport | None = None

    @property
    def weights(self) -> PublishedWeights:
        """The latest published version."""
        return self._published

    def observe(self, x: ArrayLike, y: float, cell: int, extra: ArrayLike | None = None) -> PublishedWeights | None:
        """Record one labelled event; run an outer step every ``every`` events.

        Parameters
        ----------
        x
            Features of the event, finite, shape ``(d,)``.
        y
            Its label, a finite number (``-1`` or ``+1`` for the ``"logistic"`` and ``"hinge"`` losses).
        cell
            Its cell, an integer in ``[0, n_cells)``.
        extra
            User columns passed to the metric in :attr:`FeedbackWindow.extra`, numbers (``nan``
            allowed), as many for every event as for the first one; ``None``: none.

        Returns
        -------
        PublishedWeights or None
            The newly published version, or ``None`` (no step due, or the step was skipped: see
            :attr:`last_report`).

        Raises
        ------
        ValueError
            For a bad event, which is then not recorded.
        """
        x = check_finite("x", x, self.n_features)
        y = check_label("y", y, self.loss)
        cell = check_index("cell", cell, self.n_cells)
        return self._record(x, y, cell, self._check_extra([extra])[0])

    def _check_extra(self, extra: Sequence[ArrayLike | None] | np.ndarray) -> np.ndarray:
        """The user columns of each event, as many as the first event's: shape ``(n, e)``."""
        rows = []
        for e in extra:
            try:
                row = np.atleast_1d(np.asarray([] if e is None else e, dtype=float))
            except (TypeError, ValueError, OverflowError):
                row = np.zeros((0, 0))
            if row.ndim != 1:
                raise ValueError(f"extra must be None, a number or a 1-d sequence of numbers per event, got {show(e)}")
            rows.append(row)
        width = self._extra.shape[1] if self._extra is not None else rows[0].size if rows else 0
        for row in rows:
            if row.size != width:
                raise ValueError(f"extra must have {width} entries like the first event, got {row.size}")
        return np.array(rows).reshape(len(rows), width)

    def _record(self, x: np.ndarray, y: float, cell: int, extra: np.ndarray) -> PublishedWeights | None:
        """Store one checked event; run an outer step when one is due."""
        if self._extra is None:
            self._extra = np.zeros((self.window, extra.size))
        slot = self.n_events % self.window
        self._X[slot], self._y[slot], self._cells[slot], self._extra[slot] = x, y, cell, extra
        self._is_metric[slot] = keyed_uniform(self.seed, self.n_events) < self.metric_fraction
        self.n_events += 1
        if self.n_events % self.every:
            return None
        return self._outer_step()

    def observe_many(
        self,
        X: ArrayLike,
        y: ArrayLike,
        cells: Sequence[int] | np.ndarray,
        extra: Sequence[ArrayLike | None] | np.ndarray | None = None,
    ) -> list[PublishedWeights]:
        """:meth:`observe` for each row; returns the versions published meanwhile.

        Parameters
        ----------
        X
            Features, finite, shape ``(n, d)``.
        y
            Labels, shape ``(n,)`` (see :meth:`observe`).
        cells
            Cells, ``n`` integers in ``[0, n_cells)``.
        extra
            User columns of each event (see :meth:`observe`); ``None``: none.

        Returns
        -------
        list of PublishedWeights
            The versions published meanwhile, oldest first.

        Raises
        ------
        ValueError
            For a bad event, found before any event is recorded.
        """
        X = check_array("X", X, ("n", self.n_features))
        y = check_labels("y", check_finite("y", y, X.shape[0]), self.loss)
        cells = check_indices("cells", cells, y.size, self.n_cells)
        if extra is not None and (isinstance(extra, str) or not hasattr(extra, "__len__") or len(extra) != y.size):
            raise ValueError(f"extra must have {y.size} entries like y, got {show(extra)}")
        extras = self._check_extra([None] * y.size if extra is None else extra)
        published = [self._record(*event) for event in zip(X, y, cells, extras, strict=True)]
        return [version for version in published if version is not None]

    def _outer_step(self) -> PublishedWeights | None:
        filled = min(self.n_events, self.window)
        metric_rows = self._is_metric[:filled]
        cells = self._cells[:filled][~metric_rows]
        counts: np.ndarray = np.bincount(cells, minlength=self.n_cells)  # np.ndarray: numpy 2.5's stubs refuse .min()
        if metric_rows.sum() < 1 or counts.min() < 1:
            self.skipped_steps += 1
            return None
        assert self._extra is not None  # observe() sets it before any step
        frozen = FeedbackWindow(
            self._X[:filled][metric_rows].copy(),
            self._y[:filled][metric_rows].copy(),
            self._cells[:filled][metric_rows].copy(),
            self._extra[:filled][metric_rows].copy(),
        )
        surrogates = CellSurrogates(
            self._X[:filled][~metric_rows].copy(),
            self._y[:filled][~metric_rows].copy(),
            cells.copy(),
            self.n_cells,
            self.loss,
        )
        problem = BlackBoxProblem(surrogates, lambda scores: self.metric(scores, frozen), frozen.X)
        rng = np.random.default_rng([self.seed, self.outer_iterations])
        current = self._published
        theta, report = pgd_step(
            problem, current.theta, self.estimator, self.config, rng, self.sigma, self.outer_iterations
        )
        self.outer_iterations += 1
        self.sigma = report.sigma
        self.last_report = report
        if report.projection is None:  # the step was skipped
            self.skipped_steps += 1
            return None
        multipliers = report.projection.multipliers
        weights = multipliers * (self.n_cells / multipliers.sum()) if multipliers.sum() > 0 else current.cell_weights
        shares = surrogates.counts / surrogates.counts.sum()
        self._published = PublishedWeights(current.version + 1, theta, weights, shares, report.metric, self.n_events)
        return self._published
