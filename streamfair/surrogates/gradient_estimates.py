"""Estimates of ``grad psi`` at ``u = l(theta)`` from black-box metric evaluations (Jiang et al. 2020, Sec. 5).

The metric is modelled as ``M(theta) = psi(l_1(theta), ..., l_K(theta)) + slack`` with an unknown
monotone ``psi``.  Three estimators:

* :class:`LinearInterpolation` (Alg. 3): perturb ``theta`` twice per draw, regress the metric
  differences on the surrogate differences.  Works when the metric has its own sample.
* :class:`FiniteDifference` (Alg. 2): Gaussian smoothing in surrogate space; the perturbations are
  applied to the *scores*, which needs the metric on the surrogates' sample.
* :class:`TwoStepFiniteDifference` (Alg. 4): the gradient of ``psi`` smoothed at scale ``sigma``,
  for Lipschitz but non-smooth ``psi``.

:class:`ExactGradient` wraps a known ``grad psi`` (the formula-aware comparison).  Every estimate
reports its *dead-zone* signal: the fraction of metric differences that are exactly zero (a
piecewise-constant metric with too small a ``sigma`` gives ``1`` and a useless zero estimate).

Examples
--------
>>> import numpy as np
>>> from streamfair.surrogates.cells import CellSurrogates
>>> from streamfair.surrogates.problem import BlackBoxProblem
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((400, 3)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
>>> cells = CellSurrogates(X, y, cells=(y > 0).astype(int))
>>> problem = BlackBoxProblem(cells, lambda s: float(cells.values_from_scores(s) @ [1.0, 3.0]))
>>> estimate = LinearInterpolation(n_perturbations=50, sigma=0.05).estimate(problem, np.zeros(3), rng)
>>> estimate.gradient.round(6).tolist(), estimate.zero_diff_fraction
([1.0, 3.0], 0.0)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_finite, check_instance, check_integer, check_positive, show
from .problem import BlackBoxProblem


@dataclass(frozen=True)
class GradientEstimate:
    """An estimate of ``grad psi(u)`` and its quality diagnostics.

    Parameters
    ----------
    gradient
        The estimate, shape ``(K,)``.
    sigma
        Perturbation scale used.
    metric_calls
        Black-box evaluations spent.
    zero_diff_fraction
        Fraction of metric differences exactly ``0`` (``1``: a dead zone).
    negative_fraction
        Fraction of components ``< 0`` (``psi`` is monotone: expect about ``0``).
    condition
        Condition number of ``H`` (Algorithm 3); ``nan`` for the other estimators.
    skipped_draws
        Draws dropped because a perturbed surrogate target was ``<= 0``.

    Examples
    --------
    A constant metric: every difference is zero, and the estimate says so.

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates
    >>> cells = CellSurrogates(np.eye(2), y=[1, -1], cells=[0, 1])
    >>> flat = BlackBoxProblem(cells, lambda scores: 1.0)
    >>> estimate = LinearInterpolation(n_perturbations=5).estimate(flat, np.zeros(2), np.random.default_rng(0))
    >>> estimate.gradient.tolist(), estimate.zero_diff_fraction, estimate.dead_zone, estimate.metric_calls
    ([0.0, 0.0], 1.0, True, 10)
    """

    gradient: np.ndarray
    sigma: float
    metric_calls: int
    zero_diff_fraction: float
    negative_fraction: float
    condition: float
    skipped_draws: int

    @property
    def dead_zone(self) -> bool:
        """Every metric difference was zero (or every draw was skipped): the estimate carries no information."""
        return self.zero_diff_fraction == 1.0


class GradientEstimator(Protocol):
    """What Algorithm 1 needs of a gradient estimator: a scale ``sigma`` and :meth:`estimate`.

    The estimators of this module declare it; any class with these two members will do.
    """

    sigma: float

    def estimate(
        self, problem: BlackBoxProblem, theta: np.ndarray, rng: np.random.Generator, sigma: float | None = None
    ) -> GradientEstimate:
        """An estimate of ``grad psi`` at ``u = l(theta)``."""
        ...


def _check_problem(problem: BlackBoxProblem, theta: ArrayLike) -> np.ndarray:
    """``theta`` as finite parameters of ``problem``'s linear scorer."""
    check_instance("problem", problem, BlackBoxProblem)
    return check_finite("theta", theta, problem.surrogates.n_features)


def _check_draw(rng: np.random.Generator, sigma: float | None, default: float) -> float:
    """The perturbation scale of an estimate (``default`` for ``None``); ``rng`` must be a numpy Generator."""
    check_instance("rng", rng, np.random.Generator)
    return default if sigma is None else check_positive("sigma", sigma)


def _check_coordinates(coordinates: ArrayLike | None) -> np.ndarray | None:
    """Perturbed coordinates: ``None`` (all) or distinct integers ``>= 0``."""
    if coordinates is None:
        return None
    try:
        array = np.asarray(coordinates)
    except (TypeError, ValueError):
        array = np.asarray(None)
    if (array.ndim != 1 or array.size == 0 or not np.issubdtype(array.dtype, np.integer) or array.min() < 0
            or np.unique(array).size != array.size):
        raise ValueError(f"coordinates must be distinct integers >= 0, at least one, got {show(coordinates)}")
    return array.astype(int)


def check_coordinates_fit(coordinates: np.ndarray | None, n_features: int) -> np.ndarray:
    """The coordinates (all for ``None``), each an index of the ``n_features`` parameters."""
    if coordinates is None:
        return np.arange(n_features)
    if coordinates.max() >= n_features:
        raise ValueError(f"coordinates must index the {n_features} parameters, got {coordinates.tolist()}")
    return coordinates


def _estimate(gradient, sigma, calls, differences, condition=math.nan, skipped=0) -> GradientEstimate:
    differences = np.asarray(differences)
    zero = float(np.mean(differences == 0.0)) if differences.size else 1.0
    return GradientEstimate(gradient, sigma, calls, zero, float(np.mean(gradient < 0)), condition, skipped)


class LinearInterpolation(GradientEstimator):
    """Algorithm 3: local linear interpolation from ``m`` pairs of parameter perturbations.

    Draws ``Z1, Z2 ~ N(0, I)``, forms ``H_j = l(theta + sigma Z1_j) - l(theta + sigma Z2_j)`` and
    ``M_j = M(theta + sigma Z1_j) - M(theta + sigma Z2_j)``, and returns ``argmin_g ||H g - M||``.

    Parameters
    ----------
    n_perturbations
        ``m`` (the paper: 1000 in its experiments, 10 often enough).
    sigma
        Perturbation scale in parameter space.
    coordinates
        Indices of the parameters to perturb, distinct integers ``>= 0`` (the paper's advice for
        surrogates that are only L2-Lipschitz: the few coordinates most related to the
        surrogates); ``None``: all.

    Examples
    --------
    A metric linear in the surrogates, ``M = 2 l_1 + l_2 / 2``: the differences are exactly
    ``H (2, 1/2)``, so the least-squares fit recovers ``grad psi = (2, 1/2)``.

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> cells = CellSurrogates(X, y, cells=(y > 0).astype(int))
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores) @ [2.0, 0.5]))
    >>> estimate = LinearInterpolation(n_perturbations=5, sigma=0.1).estimate(problem, np.zeros(2), rng)
    >>> estimate.gradient.round(6).tolist(), estimate.metric_calls, problem.metric_calls
    ([2.0, 0.5], 10, 10)
    """

    def __init__(self, n_perturbations: int = 10, sigma: float = 0.1, coordinates: ArrayLike | None = None):
        self.n_perturbations = check_integer("n_perturbations", n_perturbations, 1)
        self.sigma = check_positive("sigma", sigma)
        self.coordinates = _check_coordinates(coordinates)

    def estimate(
        self, problem: BlackBoxProblem, theta: np.ndarray, rng: np.random.Generator, sigma: float | None = None
    ) -> GradientEstimate:
        """Estimate ``grad psi`` at ``l(theta)`` from ``2 m`` metric evaluations.

        Parameters
        ----------
        problem
            The surrogates and the black-box metric.
        theta
            Parameters at which ``grad psi(l(theta))`` is estimated, shape ``(d,)``.
        rng
            Source of the perturbations.
        sigma
            Perturbation scale, ``> 0``; ``None``: ``self.sigma``.

        Returns
        -------
        GradientEstimate
            The estimate and its diagnostics.

        Raises
        ------
        ValueError
            For bad arguments, or coordinates that do not index the parameters.
        """
        theta = _check_problem(problem, theta)
        sigma = _check_draw(rng, sigma, self.sigma)
        d, m = theta.size, self.n_perturbations
        coordinates = check_coordinates_fit(self.coordinates, d)
        noise = np.zeros((2, m, d))
        noise[:, :, coordinates] = rng.standard_normal((2, m, coordinates.size))
        first, second = theta + sigma * noise[0], theta + sigma * noise[1]
        H = (problem.surrogates._values(first) - problem.surrogates._values(second)).T
        M = np.array([problem._metric_at(a) - problem._metric_at(b) for a, b in zip(first, second, strict=True)])
        if not (np.isfinite(H).all() and np.isfinite(M).all()):
            raise ValueError(f"sigma must keep the perturbed surrogates and metric finite, got {sigma!r}")
        gradient = np.linalg.lstsq(H, M, rcond=None)[0]
        singular = np.linalg.svd(H, compute_uv=False)
        condition = float(singular[0] / singular[-1]) if singular[-1] > 0 else math.inf
        return _estimate(gradient, sigma, 2 * m, M, condition)


class FiniteDifference(GradientEstimator):
    """Algorithm 2: ``mean_j (M(f + Delta_j) - M(f)) / sigma Z_j`` with ``l(f + Delta_j) = l(f) + sigma Z_j``.

    The metric must be evaluated on the surrogates' sample (``metric_features=None``).  Draws whose
    perturbed surrogate would be ``<= 0`` are skipped and counted.

    Parameters
    ----------
    n_perturbations
        ``m``, the draws ``Z_j ~ N(0, I_K)``.
    sigma
        Perturbation scale in surrogate space.

    Examples
    --------
    For ``M = 2 l_1 + l_2 / 2`` each difference is ``sigma (2, 1/2) . Z_j``, so the estimate is the
    Monte Carlo average ``mean_j ((2, 1/2) . Z_j) Z_j``, whose expectation is ``(2, 1/2)``:

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> cells = CellSurrogates(X, y, cells=(y > 0).astype(int))
    >>> w = np.array([2.0, 0.5])
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores) @ w))
    >>> estimate = FiniteDifference(200, sigma=0.1).estimate(problem, np.zeros(2), np.random.default_rng(1))
    >>> Z = np.random.default_rng(1).standard_normal((200, 2))          # the same draws
    >>> bool(np.allclose(estimate.gradient, (Z @ w) @ Z / 200)), estimate.metric_calls, estimate.skipped_draws
    (True, 201, 0)
    """

    def __init__(self, n_perturbations: int = 10, sigma: float = 0.1):
        self.n_perturbations = check_integer("n_perturbations", n_perturbations, 1)
        self.sigma = check_positive("sigma", sigma)

    def estimate(
        self, problem: BlackBoxProblem, theta: np.ndarray, rng: np.random.Generator, sigma: float | None = None
    ) -> GradientEstimate:
        """Estimate ``grad psi`` at ``u = l(theta)`` from ``1 + m`` metric evaluations (fewer if draws are skipped).

        Parameters
        ----------
        problem
            The surrogates and the black-box metric.
        theta
            Parameters at which ``grad psi(l(theta))`` is estimated, shape ``(d,)``.
        rng
            Source of the perturbations.
        sigma
            Perturbation scale, ``> 0``; ``None``: ``self.sigma``.

        Returns
        -------
        GradientEstimate
            The estimate and its diagnostics.

        Raises
        ------
        ValueError
            For bad arguments, or if the metric has its own sample (``metric_features`` was given).
        """
        scores, u = _shared_scores(problem, theta)
        sigma = _check_draw(rng, sigma, self.sigma)
        Z = rng.standard_normal((self.n_perturbations, u.size))
        keep = np.all(u + sigma * Z > 0, axis=1)
        Z = Z[keep]
        base = problem._metric_of_scores(scores)
        if Z.shape[0] == 0:
            return _estimate(np.zeros(u.size), sigma, 1, [], skipped=self.n_perturbations)
        perturbed = problem.surrogates.perturb_scores(np.repeat(scores[:, None], Z.shape[0], 1), (u + sigma * Z).T)
        differences = np.array([problem._metric_of_scores(column) - base for column in perturbed.T])
        gradient = (differences / sigma) @ Z / Z.shape[0]
        return _estimate(gradient, sigma, 1 + Z.shape[0], differences, skipped=int(np.sum(~keep)))


class TwoStepFiniteDifference(GradientEstimator):
    """Algorithm 4: finite differences of ``psi`` smoothed at scale ``sigma`` (non-smooth ``psi``).

    ``l(f + Delta1_j) = u + sigma Z1_j``, ``l(f + Delta2_j) = u + sigma Z1_j + sigma2 Z2_j`` and
    ``g = mean_j (M(f + Delta2_j) - M(f + Delta1_j)) / sigma2 Z2_j``, which estimates the gradient
    of ``psi_sigma(u) = E psi(u + sigma Z)``.

    Parameters
    ----------
    n_perturbations
        ``m``, the pairs of draws ``Z1_j, Z2_j ~ N(0, I_K)``.
    sigma
        ``sigma_1``, the smoothing scale.
    lipschitz
        ``L`` of ``psi``, giving the paper's ``sigma_2 = sqrt(sigma_1 / (K^{3/2} L))``.
    sigma2
        ``sigma_2`` directly (overrides ``lipschitz``); ``None``: the paper's value.

    Examples
    --------
    For ``M = 2 l_1 + l_2 / 2`` each difference is ``sigma_2 (2, 1/2) . Z2_j``, so the estimate is
    ``mean_j ((2, 1/2) . Z2_j) Z2_j``, whose expectation is ``(2, 1/2)``:

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((20, 2)); y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> cells = CellSurrogates(X, y, cells=(y > 0).astype(int))
    >>> w = np.array([2.0, 0.5])
    >>> problem = BlackBoxProblem(cells, lambda scores: float(cells.values_from_scores(scores) @ w))
    >>> two_step = TwoStepFiniteDifference(200, sigma=0.1, sigma2=0.05)
    >>> estimate = two_step.estimate(problem, np.zeros(2), np.random.default_rng(1))
    >>> Z1, Z2 = np.random.default_rng(1).standard_normal((2, 200, 2))          # the same draws
    >>> bool(np.allclose(estimate.gradient, (Z2 @ w) @ Z2 / 200)), estimate.metric_calls
    (True, 400)
    """

    def __init__(
        self, n_perturbations: int = 10, sigma: float = 0.1, lipschitz: float = 1.0, sigma2: float | None = None
    ):
        self.n_perturbations = check_integer("n_perturbations", n_perturbations, 1)
        self.sigma = check_positive("sigma", sigma)
        self.lipschitz = check_positive("lipschitz", lipschitz)
        self.sigma2 = None if sigma2 is None else check_positive("sigma2", sigma2)

    def estimate(
        self, problem: BlackBoxProblem, theta: np.ndarray, rng: np.random.Generator, sigma: float | None = None
    ) -> GradientEstimate:
        """Estimate ``grad psi_sigma`` at ``u = l(theta)`` from ``2 m`` metric evaluations (fewer if draws skipped).

        Parameters
        ----------
        problem
            The surrogates and the black-box metric.
        theta
            Parameters at which ``grad psi(l(theta))`` is estimated, shape ``(d,)``.
        rng
            Source of the perturbations.
        sigma
            Smoothing scale ``sigma_1``, ``> 0``; ``None``: ``self.sigma``.

        Returns
        -------
        GradientEstimate
            The estimate and its diagnostics.

        Raises
        ------
        ValueError
            For bad arguments, or if the metric has its own sample (``metric_features`` was given).
        """
        scores, u = _shared_scores(problem, theta)
        sigma = _check_draw(rng, sigma, self.sigma)
        k = u.size
        sigma2 = self.sigma2 if self.sigma2 is not None else math.sqrt(sigma / (k**1.5 * self.lipschitz))
        Z1, Z2 = rng.standard_normal((2, self.n_perturbations, k))
        first, second = u + sigma * Z1, u + sigma * Z1 + sigma2 * Z2
        keep = np.all(first > 0, axis=1) & np.all(second > 0, axis=1)
        if not keep.any():
            return _estimate(np.zeros(k), sigma, 0, [], skipped=self.n_perturbations)
        repeated = np.repeat(scores[:, None], int(keep.sum()), 1)
        low = problem.surrogates.perturb_scores(repeated, first[keep].T)
        high = problem.surrogates.perturb_scores(repeated, second[keep].T)
        differences = np.array(
            [problem._metric_of_scores(b) - problem._metric_of_scores(a) for a, b in zip(low.T, high.T, strict=True)]
        )
        gradient = (differences / sigma2) @ Z2[keep] / keep.sum()
        return _estimate(gradient, sigma, 2 * int(keep.sum()), differences, skipped=int(np.sum(~keep)))


class ExactGradient(GradientEstimator):
    """A known ``grad psi`` (formula-aware optimisation); spends no metric evaluation.

    Parameters
    ----------
    psi_gradient
        ``grad psi(u)``: maps the surrogates, shape ``(K,)``, to the gradient, shape ``(K,)``.

    Examples
    --------
    ``psi(u) = ||u||^2`` at ``theta = 0``, where both logistic surrogates are ``log 2``:

    >>> import numpy as np
    >>> from streamfair.surrogates import BlackBoxProblem, CellSurrogates
    >>> cells = CellSurrogates(np.eye(2), y=[1, -1], cells=[0, 1])
    >>> problem = BlackBoxProblem(cells, lambda scores: float(np.sum(cells.values_from_scores(scores) ** 2)))
    >>> estimate = ExactGradient(lambda u: 2 * u).estimate(problem, np.zeros(2), np.random.default_rng(0))
    >>> estimate.gradient.round(6).tolist(), estimate.metric_calls      # 2 log 2
    ([1.386294, 1.386294], 0)
    """

    def __init__(self, psi_gradient: Callable[[np.ndarray], np.ndarray]):
        if not callable(psi_gradient):
            raise ValueError(f"psi_gradient must be callable, got {psi_gradient!r}")
        self.psi_gradient = psi_gradient
        self.sigma = 0.0

    def estimate(
        self, problem: BlackBoxProblem, theta: np.ndarray, rng: np.random.Generator, sigma: float | None = None
    ) -> GradientEstimate:
        """``psi_gradient`` at ``u = l(theta)``.

        Parameters
        ----------
        problem
            The surrogates (the metric is not evaluated).
        theta
            Parameters, shape ``(d,)``.
        rng
            Unused (the common signature of the estimators).
        sigma
            Unused (the common signature of the estimators).

        Returns
        -------
        GradientEstimate
            The gradient, with ``sigma = 0`` and no metric call.

        Raises
        ------
        ValueError
            For bad arguments, or if ``psi_gradient`` does not return ``K`` finite numbers.
        """
        theta = _check_problem(problem, theta)
        gradient = self.psi_gradient(problem.surrogates._values(theta))
        gradient = check_array("psi_gradient(u)", gradient, (problem.n_cells,))
        return GradientEstimate(gradient, 0.0, 0, 0.0, float(np.mean(gradient < 0)), math.nan, 0)


def _shared_scores(problem: BlackBoxProblem, theta: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    theta = _check_problem(problem, theta)
    if not problem.shared_sample:
        raise ValueError("finite-difference estimates need the metric on the surrogates' sample (metric_features=None)")
    scores = problem.surrogates.X @ theta
    return scores, problem.surrogates._values_from_scores(scores)
