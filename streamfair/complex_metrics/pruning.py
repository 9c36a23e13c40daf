"""Re-weighting a mixture of plug-in classifiers after the fact (no further oracle calls).

* :func:`prune` -- the pruning LP of Sec. 8.2 (applied to every constrained method): minimize the
  *linearized* objective ``sum_t alpha_t psi(C_t)`` subject to ``sum_t alpha_t phi(C_t) <= 0``.
  With linear constraint rows the constraint part is exact, and a vertex solution has at most
  ``K + 1`` non-zero weights.  If no mixture is feasible, the least-violating one is relaxed to.
* :func:`best_mixture` -- the final convex program of the ellipsoid methods (Alg. 3 line 14,
  Alg. 7): ``min psi(sum_t alpha_t C_t)`` over the simplex, subject to the constraints -- an LP for
  piecewise-linear ``psi``, Frank-Wolfe with an LP oracle otherwise.
* :func:`sparsify` -- Caratheodory: the same point ``sum_t alpha_t v_t`` with at most ``d + 1``
  classifiers (a basic solution of ``V^T alpha = v, alpha in the simplex``), for cheaper serving
  and evaluation; training objective and constraints are unchanged.

>>> import numpy as np
>>> from streamfair.complex_metrics import Coverage, Problem, QMean, Sample
>>> rng = np.random.default_rng(0)
>>> proba = rng.dirichlet([1.0, 1.0, 1.0], 300)
>>> sample = Sample(proba, y=(rng.random(300)[:, None] > proba.cumsum(axis=1)).sum(axis=1))
>>> problem = Problem(QMean(), sample, [Coverage(eps=0.01)])
>>> candidates = [problem.baseline()] + [problem.constant(j) for j in range(3)]
>>> weights = prune(problem, candidates)
>>> point = weights @ np.stack([c.point for c in candidates])
>>> bool(problem.violation(point) <= 1e-9), int(np.count_nonzero(weights)) <= problem.n_constraints + 1
(True, True)
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..validation import check_array, check_instance, check_integer, check_non_negative, check_weights
from .lp import linprog
from .problem import Component, Problem

__all__ = ["prune", "best_mixture", "sparsify"]


def _component_points(problem: Problem, components: Sequence[Component]) -> np.ndarray:
    """``(k, d)``: the vector of each component, checked to be at least one component placed on ``problem``."""
    check_instance("problem", problem, Problem)
    if not isinstance(components, Sequence) or not components:
        raise ValueError(f"components must be a non-empty list of components, got {components!r}")
    for component in components:
        check_instance("components", component, Component)
    shapes = {component.point.shape for component in components}
    if shapes != {(problem.dimension,)}:
        raise ValueError(
            f"components must be placed on the problem (vectors of shape ({problem.dimension},)), got shapes "
            f"{sorted(shapes)}"
        )
    return np.stack([c.point for c in components])


def _unique_points(points: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(unique, first, inverse)``: distinct rows, the index of each one's first occurrence, the map back."""
    unique, first, inverse = np.unique(points, axis=0, return_index=True, return_inverse=True)
    return unique, first, inverse.reshape(-1)


def _spread(weights_unique: np.ndarray, first: np.ndarray, size: int) -> np.ndarray:
    weights = np.zeros(size)
    weights[first] = weights_unique
    return weights


def _least_violation(values: np.ndarray) -> float:
    """``min_alpha max_k sum_t alpha_t values[t, k]`` over the simplex (an LP)."""
    u, k = values.shape
    cost = np.concatenate([np.zeros(u), [1.0, -1.0]])
    a_ub = np.hstack([values.T, -np.ones((k, 1)), np.ones((k, 1))])
    a_eq = np.concatenate([np.ones(u), [0.0, 0.0]])[None]
    result = linprog(cost, a_ub, np.zeros(k), a_eq, np.ones(1))
    return float(result.fun)


def _relaxation(problem: Problem, points: np.ndarray) -> np.ndarray:
    """Constraint values per point, shifted so that the best mixture is exactly feasible if none is."""
    values = points @ problem.A.T - problem.b
    if problem.n_constraints:
        slack = _least_violation(values)
        if slack > 0:
            values = values - slack * (1 + 1e-9)
    return values


def prune(problem: Problem, components: Sequence[Component]) -> np.ndarray:
    """The pruning LP of Sec. 8.2: new weights for ``components`` (same order).

    Parameters
    ----------
    problem
        The problem whose objective and constraint rows are used.
    components
        The candidate classifiers (at least one), placed on ``problem``'s sample (the LP searches
        the whole simplex of their weights, whatever the current mixture).

    Returns
    -------
    ndarray of shape (k,)
        Weights summing to one, at most ``K + 1`` of them non-zero (components with the same
        vector share one weight, on the first of them).

    Examples
    --------
    Always predicting 0 has 0-1 error ``P(Y = 1) = 0.75``, always predicting 1 has 0.25; predicting
    0 at a rate within 0.01 of 0.3 forces a weight of at least 0.29 on the worse one.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, Problem, Sample, ZeroOneError
    >>> sample = Sample(np.full((4, 2), 0.5), y=[0, 1, 1, 1])
    >>> free = Problem(ZeroOneError(), sample)
    >>> prune(free, [free.constant(0), free.constant(1)]).tolist()
    [0.0, 1.0]
    >>> problem = Problem(ZeroOneError(), sample, [Coverage(eps=0.01, target=[0.3, 0.7])])
    >>> prune(problem, [problem.constant(0), problem.constant(1)]).round(6).tolist()
    [0.29, 0.71]
    """
    points = _component_points(problem, components)
    unique, first, _ = _unique_points(points)
    objectives = np.array([problem._objective(v) for v in unique])
    values = _relaxation(problem, unique)
    u = unique.shape[0]
    result = linprog(
        objectives,
        values.T if problem.n_constraints else None,
        np.zeros(problem.n_constraints) if problem.n_constraints else None,
        np.ones((1, u)),
        np.ones(1),
    )
    weights = result.solution()
    return _spread(weights / weights.sum(), first, len(components))


def _line_search(f, a: np.ndarray, b: np.ndarray, steps: int = 60) -> float:
    """``argmin_{g in [0, 1]} f((1 - g) a + g b)`` for convex ``f`` (golden section)."""
    low, high = 0.0, 1.0
    ratio = (np.sqrt(5) - 1) / 2
    x1, x2 = high - ratio * (high - low), low + ratio * (high - low)
    f1, f2 = f((1 - x1) * a + x1 * b), f((1 - x2) * a + x2 * b)
    for _ in range(steps):
        if f1 <= f2:
            high, x2, f2 = x2, x1, f1
            x1 = high - ratio * (high - low)
            f1 = f((1 - x1) * a + x1 * b)
        else:
            low, x1, f1 = x1, x2, f2
            x2 = low + ratio * (high - low)
            f2 = f((1 - x2) * a + x2 * b)
    best = min([(f(a), 0.0), (f(b), 1.0), (min(f1, f2), (low + high) / 2)])
    return best[1]


def best_mixture(
    problem: Problem, components: Sequence[Component], iterations: int = 2000, tolerance: float = 1e-7
) -> np.ndarray:
    """Weights minimizing ``psi(sum_t alpha_t v_t)`` subject to the constraints (relaxed if infeasible).

    Parameters
    ----------
    problem
        The problem whose objective and constraint rows are used.
    components
        The classifiers to mix (at least one), placed on ``problem``'s sample.
    iterations
        Maximum Frank-Wolfe steps over the weights, an integer ``>= 0`` (metrics that are not
        piecewise linear; for the others the program is one LP).
    tolerance
        Frank-Wolfe stops once its duality gap is below this (a finite number ``>= 0``).

    Returns
    -------
    ndarray of shape (k,)
        Weights summing to one (components with the same vector share one weight, on the first
        of them).

    Examples
    --------
    The constant classifiers have recalls ``e_j``, so their mixture has recalls ``alpha``: the
    worst-class error ``max_i (1 - alpha_i)`` and the Q-mean are smallest at ``alpha = 1/3``.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import MinMax, Problem, QMean, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> problem = Problem(MinMax(), Sample(posterior(x), y))
    >>> constants = [problem.constant(j) for j in range(3)]
    >>> weights = best_mixture(problem, constants)               # an LP: MinMax is piecewise linear
    >>> weights.round(6).tolist(), round(problem.objective(weights @ np.stack([c.point for c in constants])), 6)
    ([0.333333, 0.333333, 0.333333], 0.666667)
    >>> smooth = problem.with_metric(QMean())                    # Frank-Wolfe on the weights
    >>> best_mixture(smooth, [smooth.constant(j) for j in range(3)]).round(3).tolist()
    [0.333, 0.333, 0.333]
    """
    points = _component_points(problem, components)
    iterations = check_integer("iterations", iterations, 0)
    tolerance = check_non_negative("tolerance", tolerance)
    unique, first, _ = _unique_points(points)
    u, k = unique.shape[0], problem.metric_size
    values = _relaxation(problem, unique)
    a_ub = values.T if problem.n_constraints else np.zeros((0, u))
    pieces = problem.metric.pieces(k)
    if pieces is not None:
        g, h = pieces
        # variables (alpha, t_plus, t_minus): min t  s.t.  G V_k^T alpha + h <= t,  constraints,  sum alpha = 1.
        rows = np.hstack([g @ unique[:, :k].T, -np.ones((g.shape[0], 1)), np.ones((g.shape[0], 1))])
        rows = np.vstack([rows, np.hstack([a_ub, np.zeros((a_ub.shape[0], 2))])])
        rhs = np.concatenate([-h, np.zeros(a_ub.shape[0])])
        cost = np.concatenate([np.zeros(u), [1.0, -1.0]])
        a_eq = np.concatenate([np.ones(u), [0.0, 0.0]])[None]
        alpha = linprog(cost, rows, rhs, a_eq, np.ones(1)).solution()[:u]
        return _spread(alpha / alpha.sum(), first, len(components))
    # Frank-Wolfe over {alpha in the simplex, A V^T alpha <= b}, started at the pruning LP's solution.
    objectives = np.array([problem._objective(v) for v in unique])
    alpha = linprog(objectives, a_ub if problem.n_constraints else None,
                    np.zeros(a_ub.shape[0]) if problem.n_constraints else None, np.ones((1, u)), np.ones(1)).solution()

    def f(weights):
        return problem._objective(weights @ unique)

    for _ in range(iterations):
        gradient = unique @ problem._objective_gradient(alpha @ unique)
        if problem.n_constraints:
            vertex = linprog(gradient, a_ub, np.zeros(a_ub.shape[0]), np.ones((1, u)), np.ones(1)).solution()
        else:
            vertex = np.zeros(u)
            vertex[int(np.argmin(gradient))] = 1.0
        if gradient @ (alpha - vertex) < tolerance:
            break
        step = _line_search(f, alpha, vertex)
        if step == 0.0:
            break
        alpha = (1 - step) * alpha + step * vertex
    return _spread(alpha / alpha.sum(), first, len(components))


def sparsify(points: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Weights with at most ``d + 1`` non-zeros and the same mixture point ``sum_t w_t points[t]``.

    Parameters
    ----------
    points
        ``(k, d)``: the vector of each component (finite, ``k >= 1``).
    weights
        ``(k,)`` non-negative mixture weights summing to one (within ``1e-6``).

    Returns
    -------
    ndarray of shape (k,)
        Weights summing to one with the same mixture point, non-zero on at most ``d + 1`` distinct
        points (if the LP fails numerically, only duplicate points are merged).

    Examples
    --------
    >>> import numpy as np
    >>> points = np.array([[0.0], [1.0], [2.0]])
    >>> sparse = sparsify(points, np.full(3, 1 / 3))
    >>> int(np.count_nonzero(sparse)) <= 2, (sparse @ points).round(9).tolist(), round(float(sparse.sum()), 9)
    (True, [1.0], 1.0)
    """
    points = check_array("points", points, ("k", "d"))
    if points.shape[0] < 1:
        raise ValueError(f"points must have shape (k, d) with k >= 1, got shape {points.shape}")
    weights = check_weights("weights", weights, points.shape[0])
    support = np.flatnonzero(weights > 0)
    unique, first, inverse = _unique_points(points[support])
    merged = np.bincount(inverse, weights=weights[support])
    target = merged @ unique
    a_eq = np.vstack([unique.T, np.ones((1, unique.shape[0]))])
    result = linprog(np.zeros(unique.shape[0]), A_eq=a_eq, b_eq=np.concatenate([target, [1.0]]))
    if result.x is None:  # numerically degenerate: merge duplicates only
        basic = merged
    else:
        basic = result.x
    sparse = np.zeros(weights.size)
    sparse[support[first]] = basic / basic.sum()
    return sparse
