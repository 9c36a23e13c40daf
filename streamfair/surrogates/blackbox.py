"""Black-box metric optimisation by projected gradient descent in surrogate space (Jiang et al. 2020, Alg. 1).

Each step estimates ``g ~ grad psi(u_t)`` at ``u_t = l(theta_t)`` (see :mod:`.gradient_estimates`),
moves the surrogates to ``u~ = u_t - eta g`` and projects back onto the achievable set with the
over-constrained projection (:mod:`.projection`).  ``K`` surrogates stand in for the ``d``
parameters, which is where the method pays off (``K << d``).

Safeguards:

* **dead zones** -- a piecewise-constant metric with too small a ``sigma`` gives all-zero
  differences.  Such a step is never taken silently: ``dead_zone="raise_sigma"`` re-estimates with
  ``sigma`` multiplied by ``sigma_growth`` (keeping the larger ``sigma`` afterwards) up to
  ``max_sigma_raises`` times and then skips; ``"skip"`` skips at once.  Both are reported.
* **truncation** (App. A.5.3) -- with a Lipschitz bound ``L`` of ``psi``, estimates with
  ``||g|| > 2 sqrt(K) L`` are replaced by zero (reported as ``truncated``: no step is taken).
* **monotonicity** -- ``psi`` is non-decreasing, so negative components are noise;
  ``clip_negative=True`` clips them to 0 and the raw fraction is always reported.

Examples
--------
>>> import numpy as np
>>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates, LinearInterpolation
>>> rng = np.random.default_rng(0)
>>> X = np.c_[rng.standard_normal((600, 2)), np.ones(600)]
>>> y = np.where(X[:, 0] + 0.5 * rng.standard_normal(600) > 0.8, 1.0, -1.0)   # imbalanced
>>> cells = CellSurrogates(X, y, cells=(y > 0).astype(int))
>>> def balanced_error(scores):
...     wrong = np.sign(scores) != y
...     return 0.5 * (wrong[y > 0].mean() + wrong[y < 0].mean())
>>> pgd = SurrogatePGD(BlackBoxProblem(cells, balanced_error), LinearInterpolation(10, sigma=0.1), eta=0.5)
>>> float(balanced_error(X @ pgd.theta))             # theta = 0 predicts no class: all wrong
1.0
>>> reports = pgd.run(15)
>>> bool(pgd.best_metric < 0.15), reports[-1].estimate.metric_calls  # logistic regression: 0.22
(True, 20)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..validation import (
    check_bool,
    check_finite,
    check_instance,
    check_integer,
    check_non_negative,
    check_positive,
    check_seed,
    show,
)
from .gradient_estimates import GradientEstimate, GradientEstimator
from .problem import BlackBoxProblem
from .projection import Projection, project

DEAD_ZONE_POLICIES = ("raise_sigma", "skip")


@dataclass(frozen=True)
class StepReport:
    """Diagnostics of one outer step of Algorithm 1.

    Parameters
    ----------
    iteration
        Outer steps before this one.
    metric
        ``M(theta_t)``, before the step.
    surrogates
        ``u_t = l(theta_t)``, shape ``(K,)``.
    estimate
        The last estimate made (after any ``sigma`` raises).
    gradient
        The gradient used, shape ``(K,)`` (after truncation and clipping; ``0`` if skipped).
    sigma
        Perturbation scale of the estimate used.
    sigma_raises
        Times ``sigma`` was raised in this step because of a dead zone.
    dead_zone
        The final estimate had all metric differences zero.
    truncated
        ``||g|| > 2 sqrt(K) L``: the estimate was replaced by zero.
    skipped
        No step was taken (dead zone or truncation).
    target
        ``u~ = u_t - eta g``, shape ``(K,)``.
    projection
        The projection onto the achievable surrogates; ``None`` when skipped.

    Examples
    --------
    The truncation safeguard: with ``L = 1/4`` the bound is ``2 sqrt(2) / 4 < ||(1, 1)|| = sqrt(2)``.

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates, ExactGradient
    >>> cells = CellSurrogates([[1.0], [1.0]], y=[1.0, 3.0], cells=[0, 1], loss="squared")
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores).sum()))
    >>> estimator = ExactGradient(lambda u: np.ones(2))                 # psi(u) = u_1 + u_2
    >>> config = StepConfig(eta=0.25, lipschitz=0.25)
    >>> theta, report = pgd_step(problem, np.zeros(1), estimator, config, np.random.default_rng(0), sigma=0.0)
    >>> report.truncated, report.skipped, report.projection, report.gradient.tolist(), theta.tolist()
    (True, True, None, [0.0, 0.0], [0.0])
    >>> report.metric, report.surrogates.tolist(), report.target.tolist()      # l(0) = (1/2, 9/2)
    (5.0, [0.5, 4.5], [0.5, 4.5])
    """

    iteration: int
    metric: float
    surrogates: np.ndarray
    estimate: GradientEstimate
    gradient: np.ndarray
    sigma: float
    sigma_raises: int
    dead_zone: bool
    truncated: bool
    skipped: bool
    target: np.ndarray
    projection: Projection | None


@dataclass(frozen=True)
class StepConfig:
    """Parameters of one outer step (shared by :class:`SurrogatePGD` and the streaming tuner).

    Parameters
    ----------
    eta
        Step in surrogate space.
    projection_steps, projection_lr
        Adagrad steps and step size of the projection (the paper: 100 and 1.0).
    dead_zone
        ``"raise_sigma"`` or ``"skip"``: what a step does when every metric difference is zero
        (see the module docstring).
    sigma_growth, max_sigma_raises
        Factor by which ``sigma`` is raised after a dead zone (finite, ``> 1``), and how many times
        per step (an integer ``>= 0``).  A raise that would make ``sigma`` overflow is not made.
    lipschitz
        Lipschitz bound ``L`` of ``psi``: estimates with ``||g|| > 2 sqrt(K) L`` are dropped;
        ``None``: no truncation.
    clip_negative
        Clip negative components of the estimate to ``0`` (``psi`` is monotone): ``True`` or ``False``.

    Examples
    --------
    >>> config = StepConfig(eta=0.5, lipschitz=2.0)
    >>> config.eta, config.projection_steps, config.dead_zone, config.lipschitz
    (0.5, 100, 'raise_sigma', 2.0)
    >>> StepConfig(dead_zone="wait")
    Traceback (most recent call last):
    ...
    ValueError: dead_zone must be one of ('raise_sigma', 'skip'), got 'wait'
    """

    eta: float = 0.1
    projection_steps: int = 100
    projection_lr: float = 1.0
    dead_zone: str = "raise_sigma"
    sigma_growth: float = 2.0
    max_sigma_raises: int = 3
    lipschitz: float | None = None
    clip_negative: bool = False

    def __post_init__(self) -> None:
        check_positive("eta", self.eta)
        check_integer("projection_steps", self.projection_steps, 1)
        check_positive("projection_lr", self.projection_lr)
        if self.dead_zone not in DEAD_ZONE_POLICIES:
            raise ValueError(f"dead_zone must be one of {DEAD_ZONE_POLICIES}, got {self.dead_zone!r}")
        if not check_positive("sigma_growth", self.sigma_growth) > 1:
            raise ValueError(f"sigma_growth must be > 1, got {self.sigma_growth!r}")
        check_integer("max_sigma_raises", self.max_sigma_raises, 0)
        if self.lipschitz is not None:
            check_positive("lipschitz", self.lipschitz)
        check_bool("clip_negative", self.clip_negative)


def _check_sigma(sigma):
    """A perturbation scale: finite and ``>= 0`` (``0`` for an exact gradient)."""
    return check_non_negative("sigma", sigma)


def _check_estimator(estimator: GradientEstimator) -> GradientEstimator:
    """An estimator: an ``estimate`` method and a scale ``sigma``."""
    if not callable(getattr(estimator, "estimate", None)) or not hasattr(estimator, "sigma"):
        raise ValueError(f"estimator must have an estimate method and a sigma, got {show(estimator)}")
    return estimator


def pgd_step(
    problem: BlackBoxProblem,
    theta: np.ndarray,
    estimator: GradientEstimator,
    config: StepConfig,
    rng: np.random.Generator,
    sigma: float,
    iteration: int = 0,
) -> tuple[np.ndarray, StepReport]:
    """One step of Algorithm 1 from ``theta``; returns the new parameters and the report.

    Parameters
    ----------
    problem
        The surrogates and the black-box metric.
    theta
        The current parameters ``theta_t``, finite, shape ``(d,)``.
    estimator
        A gradient estimator of :mod:`.gradient_estimates`.
    config
        Step size, projection and safeguards.
    rng
        Source of the estimator's perturbations, a ``numpy.random.Generator``.
    sigma
        Perturbation scale of the estimate, finite and ``>= 0`` (raised here after a dead zone, see
        ``config``).
    iteration
        Outer steps before this one (recorded in the report), an integer ``>= 0``.

    Returns
    -------
    theta : ndarray of shape (d,)
        The new parameters (``theta`` itself when the step is skipped).
    report : StepReport
        Diagnostics of the step.

    Examples
    --------
    Two squared-error cells ``(theta - 1)^2 / 2`` and ``(theta - 3)^2 / 2`` and their sum as the
    metric, so ``grad psi = (1, 1)``.  From ``theta = 0`` (surrogates ``(1/2, 9/2)``) the target is
    ``(1/2, 9/2) - 0.25 (1, 1) = (1/4, 17/4)``; the first Adagrad step of the projection, of length
    1, reaches ``theta = 1``, whose surrogates ``(0, 2)`` are below that target.

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates, ExactGradient
    >>> cells = CellSurrogates([[1.0], [1.0]], y=[1.0, 3.0], cells=[0, 1], loss="squared")
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores).sum()))
    >>> estimator = ExactGradient(lambda u: np.ones(2))                 # psi(u) = u_1 + u_2
    >>> rng = np.random.default_rng(0)
    >>> theta, report = pgd_step(problem, np.zeros(1), estimator, StepConfig(eta=0.25), rng, sigma=0.0)
    >>> report.metric, report.target.tolist(), report.projection.residual
    (5.0, [0.25, 4.25], 0.0)
    >>> theta.round(6).tolist(), round(problem.metric_at(theta), 6)
    ([1.0], 2.0)
    """
    check_instance("problem", problem, BlackBoxProblem)
    theta = check_finite("theta", theta, problem.surrogates.n_features)
    _check_estimator(estimator)
    check_instance("config", config, StepConfig)
    check_instance("rng", rng, np.random.Generator)
    sigma = _check_sigma(sigma)
    check_integer("iteration", iteration, 0)
    metric = problem._metric_at(theta)
    u = problem.surrogates._values(theta)
    raises = 0
    estimate = estimator.estimate(problem, theta, rng, sigma)
    while (estimate.dead_zone and config.dead_zone == "raise_sigma" and raises < config.max_sigma_raises
           and math.isfinite(sigma * config.sigma_growth)):
        raises += 1
        sigma *= config.sigma_growth
        estimate = estimator.estimate(problem, theta, rng, sigma)
    gradient = np.maximum(estimate.gradient, 0.0) if config.clip_negative else estimate.gradient
    bound = None if config.lipschitz is None else 2 * math.sqrt(u.size) * config.lipschitz
    truncated = bound is not None and float(np.linalg.norm(gradient)) > bound
    skipped = estimate.dead_zone or truncated
    if skipped:
        gradient = np.zeros_like(gradient)
    target = u - config.eta * gradient
    projection = None
    if not skipped:
        projection = project(problem.surrogates, target, theta, steps=config.projection_steps, lr=config.projection_lr)
        theta = projection.theta
    report = StepReport(
        iteration, metric, u, estimate, gradient, estimate.sigma, raises, estimate.dead_zone, truncated, skipped,
        target, projection,
    )
    return theta, report


class SurrogatePGD:
    """Algorithm 1: projected gradient descent over the relaxed surrogate space.

    Parameters
    ----------
    problem
        The surrogates and the black-box metric.
    estimator
        A gradient estimator of :mod:`.gradient_estimates` (the paper's experiments use
        :class:`~.gradient_estimates.LinearInterpolation`).
    eta
        Step in surrogate space.
    projection_steps, projection_lr
        Adagrad steps and step size of the projection (the paper: 100 and 1.0).
    dead_zone, sigma_growth, max_sigma_raises, lipschitz, clip_negative
        Safeguards, see the module docstring and :class:`StepConfig`.
    theta0
        Initial parameters, finite, shape ``(d,)``; ``None``: zeros (the paper does not say).
    seed
        Seed of the perturbations.

    Attributes
    ----------
    theta : ndarray
        Current (last) iterate.
    sigma : float
        Current perturbation scale (raised after dead zones).
    history : list of StepReport
        The reports of the steps taken so far.
    best_theta, best_metric
        The iterate with the lowest metric seen (the paper does not say whether it reports the last
        or the best iterate; both are kept).

    Examples
    --------
    The sum of two squared-error cells ``(theta - 1)^2 / 2 + (theta - 3)^2 / 2``, minimal (``1``)
    at ``theta = 2``.  Algorithm 3 recovers ``grad psi = (1, 1)`` exactly, and each step costs the
    metric at ``theta_t`` plus ``2 m = 10`` evaluations (one more for the final iterate):

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates, LinearInterpolation
    >>> cells = CellSurrogates([[1.0], [1.0]], y=[1.0, 3.0], cells=[0, 1], loss="squared")
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores).sum()))
    >>> pgd = SurrogatePGD(problem, LinearInterpolation(5, sigma=0.1), eta=0.5)
    >>> reports = pgd.run(20)
    >>> round(pgd.best_metric, 4), pgd.best_theta.round(2).tolist(), problem.metric_calls
    (1.0, [2.0], 221)
    >>> reports[0].metric, reports[0].estimate.gradient.round(6).tolist(), len(pgd.history)
    (5.0, [1.0, 1.0], 20)
    """

    def __init__(
        self,
        problem: BlackBoxProblem,
        estimator: GradientEstimator,
        *,
        eta: float = 0.1,
        projection_steps: int = 100,
        projection_lr: float = 1.0,
        dead_zone: str = "raise_sigma",
        sigma_growth: float = 2.0,
        max_sigma_raises: int = 3,
        lipschitz: float | None = None,
        clip_negative: bool = False,
        theta0: ArrayLike | None = None,
        seed: int = 0,
    ):
        check_instance("problem", problem, BlackBoxProblem)
        self.problem = problem
        self.estimator = _check_estimator(estimator)
        self.config = StepConfig(
            eta, projection_steps, projection_lr, dead_zone, sigma_growth, max_sigma_raises, lipschitz, clip_negative
        )
        d = problem.surrogates.n_features
        self.theta = np.zeros(d) if theta0 is None else check_finite("theta0", theta0, d).copy()
        self.sigma = _check_sigma(estimator.sigma)
        self._rng = np.random.default_rng(check_seed(seed))
        self.history: list[StepReport] = []
        self.best_theta, self.best_metric = self.theta, math.inf

    def step(self) -> StepReport:
        """One outer iteration.

        Returns
        -------
        StepReport
            Diagnostics of the step (also appended to :attr:`history`).
        """
        theta, report = pgd_step(
            self.problem, self.theta, self.estimator, self.config, self._rng, self.sigma, len(self.history)
        )
        self._remember(self.theta, report.metric)
        self.theta, self.sigma = theta, report.sigma
        self.history.append(report)
        return report

    def run(self, n_steps: int) -> list[StepReport]:
        """``n_steps`` outer iterations; the final iterate's metric is evaluated for ``best_*``.

        Parameters
        ----------
        n_steps
            Outer iterations, at least 1.

        Returns
        -------
        list of StepReport
            The reports of these iterations.
        """
        reports = [self.step() for _ in range(check_integer("n_steps", n_steps, 1))]
        self._remember(self.theta, self.problem._metric_at(self.theta))
        return reports

    def _remember(self, theta: np.ndarray, metric: float) -> None:
        if metric < self.best_metric:
            self.best_theta, self.best_metric = theta, metric
