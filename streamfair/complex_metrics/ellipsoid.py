"""The ellipsoid method on the dual (Alg. 3, with JLE = Alg. 3(a)) and its constrained version (Alg. 7).

The dual ``f(lambda, mu) = min_{C, xi} psi(xi) + <lambda, C - xi> + <mu, A xi - b>`` is concave;
one oracle call and one data-free slack step give the supergradient ``(C - xi, A xi - b)``
(Danskin), which cuts the ellipsoid.  The output mixes the oracle's classifiers with the weights of
the final convex program ``min psi(sum_t alpha_t C^t)`` (subject to the constraints).

>>> import numpy as np
>>> A, centre = np.eye(2), np.zeros(2)
>>> A2, centre2 = jle(A, centre, np.array([1.0, 0.0]))   # keep the half x_0 >= 0 of the unit disc
>>> centre2.round(4).tolist(), round(float(np.sqrt(np.linalg.det(A2))), 4)  # volume ratio <= e^(-1/4)
([0.3333, 0.0], 0.7698)
"""

from __future__ import annotations

import numpy as np

from ..validation import check_instance, check_integer, check_positive
from .fit import Fit, make_fit
from .problem import Problem
from .pruning import best_mixture

__all__ = ["jle", "ellipsoid", "constrained_ellipsoid"]

#: Stop when the ellipsoid is this thin along the cut (the dual is solved to that accuracy).
THICKNESS = 1e-12


def jle(shape: np.ndarray, centre: np.ndarray, direction: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The smallest ellipsoid containing ``E(centre, shape) ∩ {x : (x - centre) . direction >= 0}``.

    ``E(c, A) = {x : (x - c)^T A^{-1} (x - c) <= 1}``; returns ``(A', c')``.  Closed form (equivalent
    to Alg. 3(a)): ``c' = c + A w / ((d + 1) sqrt(w^T A w))`` and
    ``A' = d^2 / (d^2 - 1) (A - 2 / (d + 1) A w w^T A / (w^T A w))``; for ``d = 1`` the interval halves.
    """
    d = centre.size
    aw = shape @ direction
    width = float(np.sqrt(max(direction @ aw, 0.0)))
    if width == 0.0:
        return shape, centre
    if d == 1:
        return shape / 4.0, centre + aw / (2.0 * width)
    step = aw / width
    new_centre = centre + step / (d + 1)
    new_shape = d * d / (d * d - 1.0) * (shape - 2.0 / (d + 1) * np.outer(step, step))
    return (new_shape + new_shape.T) / 2, new_centre


def ellipsoid(problem: Problem, iterations: int = 1000, radius: float = 1000.0, seed: int = 0) -> Fit:
    """Alg. 3 with ``a = radius`` (App. B.1: 1000).  Constraints of the problem are ignored (but reported).

    Parameters
    ----------
    problem
        The problem; its metric should be convex.
    iterations
        Maximum number of ellipsoid steps.
    radius
        ``a``: the multipliers are searched in the ball of this radius (the first ellipsoid).
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The oracle's classifiers mixed by the final convex program; ``history["dual"]`` holds the
        dual value ``f(lambda)`` at each oracle call.

    Examples
    --------
    Without labels the confusions use ``eta`` (here the true posterior) in their place, so the
    oracle is exact on the sample and every dual value is a lower bound on the optimum (weak
    duality): it brackets the fit's min-max error.

    >>> from streamfair.complex_metrics import MinMax, Problem, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, _ = sample_three_class(1000, seed=0)
    >>> problem = Problem(MinMax(), Sample(posterior(x)))
    >>> problem.objective(problem.baseline().point)     # argmax eta never predicts class 2 here
    1.0
    >>> fit = ellipsoid(problem, iterations=200)
    >>> gap = fit.objective - max(fit.history["dual"])
    >>> bool(0 <= gap < 1e-3), round(float(fit.classifier.weights.sum()), 9)
    (True, 1.0)
    """
    problem = check_instance("problem", problem, Problem)
    if problem.n_constraints:
        fit = ellipsoid(Problem(problem.metric, problem.sample), iterations, radius, seed)
        assert fit.confusion is not None  # a fresh fit has its confusion (only sparse() drops it)
        fit.point = problem._point(fit.confusion)
        fit.violation = problem._violation(fit.point)
        return fit
    return constrained_ellipsoid(problem, iterations, radius, seed)


def constrained_ellipsoid(problem: Problem, iterations: int = 1000, radius: float = 1000.0, seed: int = 0) -> Fit:
    """Alg. 7 (Alg. 3 for an unconstrained problem).

    The strictly feasible start ``h^0`` is :meth:`Problem.feasible_start` (a mixture of the
    constant classifiers and ``argmax eta_hat``; for Alg. 3 just ``argmax eta_hat``).  The branch for
    a negative ``mu`` is taken when ``mu`` has a negative entry (the listing prints the opposite
    test; Lemma 36 shows the intended one).  Stops early once the ellipsoid is thinner than
    ``THICKNESS`` along the cut.

    Parameters
    ----------
    problem
        The problem; its metric should be convex, its constraints strictly feasible.
    iterations
        Maximum number of ellipsoid steps.
    radius
        ``a``: the multipliers ``(lambda, mu)`` are searched in the ball of this radius.
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The oracle's classifiers mixed by the final convex program (subject to the constraints);
        ``history["dual"]`` holds the dual value ``f(lambda, mu)`` at each oracle call.

    Examples
    --------
    Min-max error with predicted class frequencies within 0.02 of the priors.  The oracle is exact
    on an unlabeled sample, so the dual values are lower bounds on the constrained optimum (weak
    duality); a ball of radius 10 holds the multipliers of this problem.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, MinMax, Problem, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, _ = sample_three_class(1000, seed=0)
    >>> sample = Sample(posterior(x))
    >>> problem = Problem(MinMax(), sample, [Coverage(eps=0.02)])
    >>> fit = constrained_ellipsoid(problem, iterations=600, radius=10.0)
    >>> coverage, priors = fit.confusion.sum(axis=(0, 1)), sample.joint.sum(axis=0)
    >>> bool(np.abs(coverage - priors).max() <= 0.02 + 1e-9), bool(fit.violation <= 1e-9)
    (True, True)
    >>> bool(0 <= fit.objective - max(fit.history["dual"]) < 0.05)
    True
    """
    problem = check_instance("problem", problem, Problem)
    iterations = check_integer("iterations", iterations, 1)
    radius = check_positive("radius", radius)
    d, k = problem.dimension, problem.n_constraints
    shape = radius**2 * np.eye(d + k)
    centre: np.ndarray = np.zeros(d + k)  # np.ndarray: numpy 2.5's stubs refuse .min() on np.zeros(n)
    start = problem.feasible_start()
    components = [start]
    dual_value = []
    for _ in range(iterations):
        lam, mu = centre[:d], centre[d:]
        if np.linalg.norm(centre) > radius:
            cut = -centre
        elif k and mu.min() < 0:
            cut = np.concatenate([np.zeros(d), np.maximum(-mu, 0.0)])
        else:
            component = problem._lmo(lam)
            components.append(component)
            xi = problem._conjugate_argmin(lam - problem.A.T @ mu)
            values = problem._constraint_values(xi)
            cut = np.concatenate([component.point - xi, values])
            dual_value.append(problem._objective(xi) + lam @ (component.point - xi) + mu @ values)
        if float(np.sqrt(max(float(cut @ shape @ cut), 0.0))) < THICKNESS:
            break
        shape, centre = jle(shape, centre, cut)
    weights = best_mixture(problem, components)
    return make_fit(problem, components, weights, seed, dual=dual_value)
