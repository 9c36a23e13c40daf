"""Frank-Wolfe (Alg. 1, smooth convex metrics) and Split Frank-Wolfe (Alg. 5, with constraints).

Both iterate over achievable confusion vectors through the plug-in oracle and return a randomized
mixture of the plug-in classifiers the oracle produced.

>>> import numpy as np
>>> from streamfair.complex_metrics import HMean, Problem, Sample
>>> rng = np.random.default_rng(1)
>>> y = rng.choice(3, 2000, p=[0.8, 0.15, 0.05])
>>> proba = np.clip(np.eye(3)[y] * 0.3 + rng.dirichlet([4, 1, 0.5], 2000), 0, None)
>>> proba /= proba.sum(axis=1, keepdims=True)
>>> problem = Problem(HMean(), Sample(proba, y))
>>> fit = frank_wolfe(problem, iterations=200)
>>> bool(fit.objective < problem.objective(problem.baseline().point))    # beats argmax eta
True
"""

from __future__ import annotations

import numpy as np

from ..validation import check_bool, check_instance, check_integer, check_positive
from .fit import Fit, make_fit
from .lp import linprog
from .problem import Problem
from .pruning import prune

__all__ = ["frank_wolfe", "split_frank_wolfe", "feasible_set_oracle"]


def _mixture_weights(first: float, gammas: np.ndarray) -> np.ndarray:
    """Weights of ``h_0, h_1..h_T`` after ``h_t = (1 - g_t) h_{t-1} + g_t h~_t`` (``h_0`` has weight ``first``)."""
    keep = np.concatenate([np.cumprod((1.0 - gammas)[::-1])[::-1][1:], [1.0]])  # prod_{s > t} (1 - g_s)
    return np.concatenate([[first * np.prod(1.0 - gammas)], gammas * keep])


def frank_wolfe(problem: Problem, iterations: int = 1000, seed: int = 0) -> Fit:
    """Alg. 1: ``L^t = grad psi(C^{t-1})``, ``C^t = (1 - 2/(t+1)) C^{t-1} + 2/(t+1) C~^t``.

    Starts from the plug-in ``argmax eta_hat`` (the step ``gamma_1 = 1`` drops it).  Constraints of
    the problem, if any, are ignored (that is the "unconstrained FW" baseline of Sec. 8.5).

    Parameters
    ----------
    problem
        The problem; its metric should be smooth and convex (e.g. H-mean, Q-mean).
    iterations
        ``T``, the number of oracle calls; the mixture has one component per iteration.
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The Frank-Wolfe mixture; ``history["objective"]`` is ``psi(C^t)`` for ``t = 1..T``.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfair.complex_metrics import HMean, Problem, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> problem = Problem(HMean(), Sample(posterior(x), y))
    >>> problem.objective(problem.baseline().point)    # argmax eta never predicts the rare class 2 here
    1.0
    >>> fit = frank_wolfe(problem, iterations=100)
    >>> bool(fit.objective < 0.6), round(float(fit.classifier.weights.sum()), 9)
    (True, 1.0)
    >>> bool(abs(fit.objective - fit.history["objective"][-1]) < 1e-9)   # the mixture is the last iterate
    True
    """
    problem = check_instance("problem", problem, Problem)
    iterations = check_integer("iterations", iterations, 1)
    start = problem.baseline()
    components, point = [start], start.point
    gammas = 2.0 / (np.arange(1, iterations + 1) + 1.0)
    objective = np.empty(iterations)
    for t in range(iterations):
        component = problem._lmo(problem._objective_gradient(point))
        components.append(component)
        point = (1 - gammas[t]) * point + gammas[t] * component.point
        objective[t] = problem._objective(point)
    return make_fit(problem, components, _mixture_weights(1.0, gammas), seed, objective=objective)


def feasible_set_oracle(problem: Problem, direction: np.ndarray) -> np.ndarray:
    """``argmin_{F in box, A F <= b} <direction, F>``: the data-free oracle of ``F`` in SplitFW (an LP).

    Coordinates that no constraint row touches go straight to the better end of their box.
    """
    point = np.where(direction > 0, problem.lower, problem.upper).astype(float)
    touched = np.flatnonzero(np.any(problem.A != 0, axis=0))
    if touched.size == 0:
        return point
    low, high = problem.lower[touched], problem.upper[touched]
    a = problem.A[:, touched]
    # F = low + x with 0 <= x <= high - low;  A x <= b - A low - (rows of untouched coordinates: none).
    size = touched.size
    a_ub = np.vstack([a, np.eye(size)])
    b_ub = np.concatenate([problem.b - a @ low, high - low])
    result = linprog(direction[touched], a_ub, b_ub)
    if result.status != "optimal":
        raise ValueError("the constraints leave no feasible confusion vector in the box (check eps and targets)")
    point[touched] = low + result.x
    return point


def _check_steps(steps: tuple[float, float, float]) -> tuple[float, float, float]:
    """Three multiplier steps, each a finite number > 0."""
    if not isinstance(steps, (tuple, list, np.ndarray)) or len(steps) != 3:
        raise ValueError(f"steps must be three numbers (one per third of the run), got {steps!r}")
    first, second, last = (check_positive("steps", step) for step in steps)
    return first, second, last


def split_frank_wolfe(
    problem: Problem,
    iterations: int = 1000,
    zeta: float = 10.0,
    steps: tuple[float, float, float] = (0.5, 0.1, 0.001),
    pruning: bool = True,
    seed: int = 0,
) -> Fit:
    """Alg. 5 with the practice of App. B.1: ``gamma_t = 2 / (t + 2)`` instead of the line search,
    ``zeta = 10``, the multiplier step ``steps[0..2]`` on the three thirds of the run, and the
    pruning LP at the end (``pruning=False``: the Frank-Wolfe weights).

    The multiplier update is ``lambda += eta_t (C^t - F^t)`` (the listing's ``eta / t`` and App.
    B.1's step schedule disagree; the schedule is used).  ``F^0`` is the feasible-set oracle's point
    for ``grad psi(C^0)`` and ``lambda^0 = 0`` (the paper leaves both open).

    Parameters
    ----------
    problem
        The problem; its metric should be smooth and convex.
    iterations
        ``T``, the number of oracle calls.
    zeta
        The augmented-Lagrangian weight of ``||C - F||^2 / 2``.
    steps
        Multiplier steps on the first, second and last third of the iterations: three finite
        numbers ``> 0``.
    pruning
        Re-weight the oracle's classifiers with the pruning LP (:func:`prune`); ``False``: keep the
        Frank-Wolfe weights (which meet the constraints only approximately).
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The mixture; ``history["objective"]`` is ``psi(C^t)`` and ``history["split_gap"]`` is
        ``||C^t - F^t||`` per iteration.

    Examples
    --------
    Q-mean with predicted class frequencies within 0.02 of the priors, which ``argmax eta`` misses
    by 0.148: the pruned mixture meets the constraint on the training sample.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, Problem, QMean, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> sample = Sample(posterior(x), y)
    >>> problem = Problem(QMean(), sample, [Coverage(eps=0.02)])
    >>> priors = sample.joint.sum(axis=0)
    >>> round(float(np.abs(problem.baseline().confusion.sum(axis=(0, 1)) - priors).max()), 6)
    0.148
    >>> fit = split_frank_wolfe(problem, iterations=100)
    >>> bool(np.abs(fit.confusion.sum(axis=(0, 1)) - priors).max() <= 0.02 + 1e-9), bool(fit.violation <= 1e-9)
    (True, True)
    >>> bool(fit.objective < problem.objective(problem.baseline().point))
    True
    """
    problem = check_instance("problem", problem, Problem)
    iterations = check_integer("iterations", iterations, 1)
    zeta = check_positive("zeta", zeta)
    steps = _check_steps(steps)
    pruning = check_bool("pruning", pruning)
    start = problem.baseline()
    components, c_point = [start], start.point
    f_point = feasible_set_oracle(problem, problem._objective_gradient(c_point))
    multiplier = np.zeros(problem.dimension)
    gammas = 2.0 / (np.arange(1, iterations + 1) + 2.0)
    objective, gap = np.empty(iterations), np.empty(iterations)
    for t in range(iterations):
        difference = c_point - f_point
        a = problem._objective_gradient(c_point) + multiplier + zeta * difference
        b = problem._objective_gradient(f_point) - multiplier - zeta * difference
        component = problem._lmo(a)
        components.append(component)
        f_vertex = feasible_set_oracle(problem, b)
        c_point = (1 - gammas[t]) * c_point + gammas[t] * component.point
        f_point = (1 - gammas[t]) * f_point + gammas[t] * f_vertex
        multiplier += steps[min(3 * t // iterations, 2)] * (c_point - f_point)
        objective[t], gap[t] = problem._objective(c_point), float(np.linalg.norm(c_point - f_point))
    weights = _mixture_weights(1.0, gammas)
    if pruning:
        weights = prune(problem, components)
    return make_fit(problem, components, weights, seed, objective=objective, split_gap=gap)
