"""Bisection for ratio-of-linear metrics (Alg. 4) and its constrained version (Alg. 8).

``min psi >= gamma`` iff ``min <A - gamma B, C> >= 0`` (Prop. 8), so each step asks the oracle (or,
with constraints, ConGDA) for the best classifier of the linear cost ``<A - gamma B, C>`` and halves
the interval ``[alpha, beta]`` that contains the optimal value: ``beta - alpha = 2^-t`` (Lemma 48).

>>> import numpy as np
>>> from streamfair.complex_metrics import MicroF1, Problem, Sample
>>> rng = np.random.default_rng(3)
>>> y = rng.choice(3, 1000, p=[0.6, 0.3, 0.1])
>>> proba = np.eye(3)[y] * 0.5 + rng.dirichlet([2, 1, 1], 1000) * 0.5
>>> fit = bisection(Problem(MicroF1(), Sample(proba, y)), iterations=20)
>>> interval = fit.history["interval"]
>>> bool(np.all(interval[:, 1] - interval[:, 0] == 2.0 ** -np.arange(1, 21))), bool(fit.objective <= interval[-1, 1])
(True, True)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import check_instance, check_integer
from .fit import Fit, make_fit
from .gda import constrained_gda
from .performance import Metric
from .problem import Problem

__all__ = ["bisection", "constrained_bisection", "RatioLevel"]


class RatioLevel(Metric):
    """The linear metric ``<A - gamma B, C> = v_0 - gamma v_1`` on the coordinates of a ratio metric."""

    name = "ratio level"

    def __init__(self, ratio: Metric, gamma: float):
        self.ratio, self.gamma = ratio, float(gamma)

    def coordinates(self, joint):
        return self.ratio.coordinates(joint)

    def bounds(self, joint):
        return self.ratio.bounds(joint)

    def value(self, v):
        return float(v[0] - self.gamma * v[1])

    def gradient(self, v):
        return np.array([1.0, -self.gamma])

    def pieces(self, d):
        return np.array([[1.0, -self.gamma]]), np.zeros(1)


#: The keyword arguments of ConGDA that ConBisection passes on.
CONGDA_ARGUMENTS = frozenset({"step_xi", "step_lambda", "step_mu", "radius", "mu_radius", "pruning"})


def _check_ratio(problem: Problem) -> Problem:
    problem = check_instance("problem", problem, Problem)
    if not getattr(problem.metric, "ratio", False):
        raise ValueError(f"bisection needs a ratio-of-linear metric such as MicroF1, got {problem.metric!r}")
    return problem


def bisection(problem: Problem, iterations: int = 30, seed: int = 0) -> Fit:
    """Alg. 4 on ``[0, 1]``, starting from ``argmax eta_hat``; outputs one deterministic classifier.

    Parameters
    ----------
    problem
        The problem; its metric must be a ratio of linear functions (``metric.ratio``, e.g.
        :class:`MicroF1`).  Constraints, if any, are ignored.
    iterations
        ``T``, the number of halvings (and oracle calls).
    seed
        Seed of the returned classifier (it has one component: no draw is random).

    Returns
    -------
    Fit
        The last classifier with ``psi <= gamma``; ``history["interval"]`` is ``(T, 2)``: the
        interval ``[alpha, beta]`` after each step.

    Examples
    --------
    Without labels the confusions use ``eta`` (here the true posterior) in their place, so the
    oracle is exact on the sample: the optimum lies in every interval, and so does the fit's value,
    within ``2^-20`` of it.

    >>> from streamfair.complex_metrics import MicroF1, Problem, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, _ = sample_three_class(1000, seed=0)
    >>> problem = Problem(MicroF1(), Sample(posterior(x)))
    >>> fit = bisection(problem, iterations=20)
    >>> low, high = fit.history["interval"][-1]
    >>> bool(high - low == 2.0**-20), bool(low <= fit.objective <= high)
    (True, True)
    >>> fit.classifier.n_components, bool(fit.objective < problem.objective(problem.baseline().point))
    (1, True)
    """
    problem = _check_ratio(problem)
    iterations = check_integer("iterations", iterations, 1)
    low, high, best = 0.0, 1.0, problem.baseline()
    interval = np.empty((iterations, 2))
    for t in range(iterations):
        gamma = (low + high) / 2
        w = np.zeros(problem.dimension)
        w[:2] = (1.0, -gamma)
        candidate = problem._lmo(w)
        if problem._objective(candidate.point) <= gamma:
            high, best = gamma, candidate
        else:
            low = gamma
        interval[t] = low, high
    return make_fit(problem, [best], np.ones(1), seed, interval=interval)


def constrained_bisection(
    problem: Problem, iterations: int = 10, inner_iterations: int = 1000, seed: int = 0, **congda: Any
) -> Fit:
    """Alg. 8: bisection whose steps solve ``min <A - gamma B, C>`` s.t. the constraints with ConGDA.

    Starts from :meth:`Problem.feasible_start` (``phi <= 0``); a step lowers ``beta`` only if the
    pruned ConGDA mixture has ``psi <= gamma`` and meets the constraints on the training sample.
    ``congda`` are passed to :func:`~streamfair.complex_metrics.gda.constrained_gda`.

    Parameters
    ----------
    problem
        The problem; its metric must be a ratio of linear functions (e.g. :class:`MicroF1`).
    iterations
        ``T``, the number of halvings.
    inner_iterations
        ConGDA iterations per halving (an integer ``>= 1``).
    seed
        Seed of the returned classifier's draws.
    **congda
        Further keyword arguments of ConGDA: ``step_xi``, ``step_lambda``, ``step_mu``, ``radius``,
        ``mu_radius`` or ``pruning``.

    Returns
    -------
    Fit
        The last accepted ConGDA mixture (or the feasible start), with objective and violation of
        the ratio metric; ``history["interval"]`` is ``(T, 2)``: ``[alpha, beta]`` after each step.

    Examples
    --------
    Micro F1 with predicted class frequencies within 0.02 of the priors: the result meets the
    constraint on the training sample and improves on the feasible start.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, MicroF1, Problem, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> sample = Sample(posterior(x), y)
    >>> problem = Problem(MicroF1(), sample, [Coverage(eps=0.02)])
    >>> fit = constrained_bisection(problem, iterations=6, inner_iterations=100, step_xi=0.05, step_lambda=0.05)
    >>> coverage, priors = fit.confusion.sum(axis=(0, 1)), sample.joint.sum(axis=0)
    >>> bool(np.abs(coverage - priors).max() <= 0.02 + 1e-9), bool(fit.violation <= 1e-9)
    (True, True)
    >>> bool(fit.objective < problem.objective(problem.feasible_start().point))
    True
    >>> low, high = fit.history["interval"][-1]
    >>> bool(high - low == 2.0**-6), bool(fit.objective <= high)
    (True, True)
    """
    problem = _check_ratio(problem)
    iterations = check_integer("iterations", iterations, 1)
    inner_iterations = check_integer("inner_iterations", inner_iterations, 1)
    unknown = sorted(set(congda) - CONGDA_ARGUMENTS)
    if unknown:
        raise ValueError(f"congda takes only {sorted(CONGDA_ARGUMENTS)}, got unknown arguments {unknown}")
    start = problem.feasible_start()
    best = make_fit(problem, [start], np.ones(1), seed)
    low, high = 0.0, 1.0
    interval = np.empty((iterations, 2))
    for t in range(iterations):
        gamma = (low + high) / 2
        inner = constrained_gda(
            problem.with_metric(RatioLevel(problem.metric, gamma)), inner_iterations, seed=seed, **congda
        )
        assert inner.confusion is not None  # a fresh fit has its confusion (only sparse() drops it)
        point = problem._point(inner.confusion)
        if problem._objective(point) <= gamma and problem._violation(point) <= 1e-9:
            high = gamma
            best = inner
        else:
            low = gamma
        interval[t] = low, high
    assert best.confusion is not None  # a fresh fit has its confusion (only sparse() drops it)
    point = problem._point(best.confusion)
    best.point, best.objective, best.violation = point, problem._objective(point), problem._violation(point)
    best.history = {**best.history, "interval": interval}
    return best
