"""Gradient descent-ascent (Alg. 2) and its constrained version ConGDA (Alg. 6).

The Lagrangian ``psi(xi) + <lambda, C - xi> + <mu, A xi - b>`` is played between the oracle
(``C``, best response to the cost ``lambda``), projected gradient descent on the slack ``xi`` (a box
containing the achievable vectors, as in Sec. 8.2) and projected gradient ascent on the multipliers
``lambda`` (a ball) and ``mu >= 0`` (an l1 ball).  The output is the uniform mixture of the oracle's
classifiers; ConGDA then applies the pruning LP.

>>> import numpy as np
>>> from streamfair.complex_metrics import MinMax, Problem, Sample
>>> rng = np.random.default_rng(2)
>>> y = rng.choice(3, 2000, p=[0.7, 0.2, 0.1])
>>> proba = np.eye(3)[y] * 0.4 + rng.dirichlet([3, 1, 1], 2000) * 0.6
>>> problem = Problem(MinMax(), Sample(proba, y))
>>> fit = gradient_descent_ascent(problem, iterations=300, step_xi=0.05, step_lambda=0.05)
>>> bool(fit.objective < problem.objective(problem.baseline().point))
True
"""

from __future__ import annotations

import numpy as np

from ..validation import check_bool, check_instance, check_integer, check_positive
from .convex import project_ball, project_box, project_nonnegative_l1
from .fit import Fit, make_fit
from .problem import Problem
from .pruning import prune

__all__ = ["gradient_descent_ascent", "constrained_gda", "strict_feasibility"]


def strict_feasibility(problem: Problem) -> float:
    """``r`` of Assumption 1, estimated as ``-max_k phi_k`` of :meth:`Problem.feasible_start`."""
    return max(-problem._violation(problem.feasible_start().point), 1e-3)


def gradient_descent_ascent(
    problem: Problem,
    iterations: int = 1000,
    step_xi: float = 0.01,
    step_lambda: float = 0.01,
    radius: float | None = None,
    seed: int = 0,
) -> Fit:
    """Alg. 2.  ``radius``: of the multiplier ball ``Lambda`` (default ``2 L``, Thm. 13).

    ``xi^0`` is the point of ``argmax eta_hat`` and ``lambda^0 = grad psi(xi^0)`` (the paper leaves
    them open; the latter is where ``lambda`` settles at a saddle point).  Constraints of the
    problem, if any, are ignored while optimizing but reported in the fit's ``violation``.

    Parameters
    ----------
    problem
        The problem; its metric should be convex (Lipschitz; not necessarily smooth).
    iterations
        ``T``, the number of oracle calls; the output mixes their classifiers uniformly.
    step_xi, step_lambda
        ``eta_xi`` and ``eta_lambda``, the steps on the slack ``xi`` and on the multipliers.
    radius
        Radius of ``Lambda = {||lambda||_2 <= radius}``; ``None``: ``2 L`` with ``L`` the metric's
        Lipschitz constant.
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The uniform mixture; ``history["objective"]`` is ``psi`` of the running average.

    Examples
    --------
    >>> from streamfair.complex_metrics import Coverage, Problem, QMean, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> problem = Problem(QMean(), Sample(posterior(x), y))
    >>> fit = gradient_descent_ascent(problem, iterations=200, step_xi=0.05, step_lambda=0.05)
    >>> bool(fit.objective < problem.objective(problem.baseline().point))
    True
    >>> fit.classifier.n_components, round(float(fit.classifier.weights.max()), 9)   # uniform weights
    (200, 0.005)

    A coverage constraint does not change the fit; its violation is reported.

    >>> constrained = Problem(QMean(), problem.sample, [Coverage(eps=0.02)])
    >>> other = gradient_descent_ascent(constrained, iterations=200, step_xi=0.05, step_lambda=0.05)
    >>> other.objective == fit.objective, bool(other.violation > 0.1)
    (True, True)
    """
    problem = check_instance("problem", problem, Problem)
    if problem.n_constraints == 0:
        return constrained_gda(problem, iterations, step_xi, step_lambda, radius=radius, seed=seed)
    # Constraints are ignored while optimizing (the unconstrained baseline) but reported.
    fit = constrained_gda(
        Problem(problem.metric, problem.sample), iterations, step_xi, step_lambda, radius=radius, seed=seed
    )
    assert fit.confusion is not None  # a fresh fit has its confusion (only sparse() drops it)
    fit.point = problem._point(fit.confusion)
    fit.violation = problem._violation(fit.point)
    return fit


def constrained_gda(
    problem: Problem,
    iterations: int = 1000,
    step_xi: float = 0.01,
    step_lambda: float = 0.01,
    step_mu: float | None = None,
    radius: float | None = None,
    mu_radius: float | None = None,
    pruning: bool = True,
    seed: int = 0,
) -> Fit:
    """Alg. 6 (and Alg. 2 when the problem has no constraints).

    Parameters
    ----------
    problem
        The problem; its metric should be convex, its constraints strictly feasible.
    iterations
        ``T``, the number of oracle calls.
    step_xi, step_lambda, step_mu
        ``eta_xi``, ``eta_lambda`` and ``eta_mu`` (App. B.1: ``eta_mu = eta_lambda``, the default).
    radius, mu_radius
        Radii of ``Lambda = {||lambda||_2 <= radius}`` and ``Xi = {mu >= 0, ||mu||_1 <= mu_radius}``;
        defaults from Thm. 17: ``2 L (1 + 1/r)`` and ``2 / r``, with ``r`` the strict-feasibility
        margin of :func:`strict_feasibility` (``r = inf`` without constraints).
    pruning
        Apply the pruning LP to the uniform mixture (constrained problems).
    seed
        Seed of the returned classifier's draws.

    Returns
    -------
    Fit
        The (pruned) mixture; ``history`` holds ``"objective"`` (``psi`` of the running average of
        the oracle's vectors), ``"mu_norm"`` (``||mu||_1`` per iteration) and ``"radii"``.

    Examples
    --------
    Q-mean with predicted class frequencies within 0.02 of the priors: after pruning, the
    mixture meets the constraint on the training sample with at most ``K + 1`` classifiers
    (``K = 6`` one-sided rows).

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, Problem, QMean, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> sample = Sample(posterior(x), y)
    >>> problem = Problem(QMean(), sample, [Coverage(eps=0.02)])
    >>> fit = constrained_gda(problem, iterations=200, step_xi=0.05, step_lambda=0.05)
    >>> coverage, priors = fit.confusion.sum(axis=(0, 1)), sample.joint.sum(axis=0)
    >>> bool(np.abs(coverage - priors).max() <= 0.02 + 1e-9), bool(fit.violation <= 1e-9)
    (True, True)
    >>> problem.n_constraints, fit.classifier.n_components <= problem.n_constraints + 1
    (6, True)
    """
    problem = check_instance("problem", problem, Problem)
    iterations = check_integer("iterations", iterations, 1)
    step_xi, step_lambda = check_positive("step_xi", step_xi), check_positive("step_lambda", step_lambda)
    pruning = check_bool("pruning", pruning)
    step_mu = step_lambda if step_mu is None else check_positive("step_mu", step_mu)
    lipschitz = problem.metric.lipschitz(problem.metric_size)
    r = strict_feasibility(problem) if problem.n_constraints else np.inf
    radius = 2 * lipschitz * (1 + 1 / r) if radius is None else check_positive("radius", radius)
    mu_radius = (
        (2 / r if problem.n_constraints else 0.0) if mu_radius is None else check_positive("mu_radius", mu_radius)
    )
    start = problem.baseline()
    xi = project_box(start.point, problem.lower, problem.upper)
    lam = project_ball(problem._objective_gradient(xi), radius)
    mu = np.zeros(problem.n_constraints)
    components = []
    objective, mu_norm = np.empty(iterations), np.empty(iterations)
    running = np.zeros(problem.dimension)
    for t in range(iterations):
        component = problem._lmo(lam)
        components.append(component)
        gradient_xi = problem._objective_gradient(xi) - lam + problem.A.T @ mu
        lam = project_ball(lam + step_lambda * (component.point - xi), radius)
        if problem.n_constraints:
            mu = project_nonnegative_l1(mu + step_mu * problem._constraint_values(xi), mu_radius)
        xi = project_box(xi - step_xi * gradient_xi, problem.lower, problem.upper)
        running += (component.point - running) / (t + 1)
        objective[t], mu_norm[t] = problem._objective(running), float(mu.sum())
    weights = np.full(iterations, 1.0 / iterations)
    if pruning and problem.n_constraints:
        weights = prune(problem, components)
    return make_fit(problem, components, weights, seed, objective=objective, mu_norm=mu_norm, radii=[radius, mu_radius])
