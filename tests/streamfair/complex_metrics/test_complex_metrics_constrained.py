"""Constrained problems: SplitFW, ConGDA, ConEllipsoid, ConBisection.

The reference optimum under the coverage constraint is computed independently with SciPy's SLSQP over
mixtures of plug-in classifiers ``argmax_i w_i eta_i`` (true posterior, adaptive grid of ``w``).
Demographic parity is learned from unlabeled samples: the samples carry no ``y`` at all.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import minimize

from streamfair.complex_metrics import (
    Coverage,
    DemographicParity,
    EqualOpportunity,
    GMean,
    MicroF1,
    Problem,
    QMean,
    Sample,
    SoftmaxRegression,
    ZeroOneError,
    constrained_bisection,
    constrained_ellipsoid,
    constrained_gda,
    select,
    split_frank_wolfe,
)
from streamfair.complex_metrics.gda import strict_feasibility
from streamfair.complex_metrics.synthetic import posterior, sample_three_class, sample_two_groups

EPS = 0.01


@pytest.fixture(scope="module")
def test_points():
    x, _ = sample_three_class(100_000, seed=1000)
    return x, posterior(x)


def reference_value(eta):
    """min Q-mean over mixtures of ``argmax_i w_i eta_i`` subject to coverage within 0.01 of the priors."""
    priors = eta.mean(axis=0)

    def confusion(point):
        predictions = np.argmax(eta * np.exp([0.0, point[0], point[1]]), axis=1)
        return eta.T @ np.eye(3)[predictions] / len(predictions)

    def solve(points):
        matrices = np.array([confusion(p) for p in points])
        recalls, cover = np.diagonal(matrices, axis1=1, axis2=2) / priors, matrices.sum(axis=1)
        k = len(points)
        constraints = [
            {"type": "ineq", "fun": lambda a: EPS - (a @ cover - priors)},
            {"type": "ineq", "fun": lambda a: EPS + (a @ cover - priors)},
            {"type": "eq", "fun": lambda a: a.sum() - 1},
        ]
        result = minimize(
            lambda a: math.sqrt(np.mean((1 - a @ recalls) ** 2)), np.full(k, 1 / k), method="SLSQP",
            bounds=[(0, 1)] * k, constraints=constraints, options={"maxiter": 500, "ftol": 1e-12},
        )
        assert result.success
        return result.fun, [p for p, a in zip(points, result.x, strict=True) if a > 1e-4]

    grid = np.linspace(-2, 6, 13)
    value, support = solve([(a, b) for a in grid for b in grid])
    for step in (0.2, 0.05):
        value, support = solve(
            sorted({(p[0] + i * step, p[1] + j * step) for p in support for i in (-1, 0, 1) for j in (-1, 0, 1)})
        )
    return value


@pytest.mark.slow
def test_constrained_algorithms_reach_the_reference_with_the_constraint_met(test_points):
    x_test, eta_test = test_points
    reference = reference_value(eta_test)
    assert 0.635 < reference < 0.65  # reference: 0.643 (against 0.522 unconstrained)
    n = 10_000
    x, y = sample_three_class(n, seed=11)
    model = SoftmaxRegression(l2=1e-4).fit(x, y)
    problem = Problem(QMean(), Sample(model.predict_proba(x), y), [Coverage(EPS)])
    test_sample = Sample(model.predict_proba(x_test), eta_test)
    test_coverage = Coverage(EPS, target=eta_test.mean(axis=0))
    fits = {
        "SplitFW": split_frank_wolfe(problem, iterations=2000),
        "ConGDA": select([constrained_gda(problem, 2000, a, b) for a in (0.1, 0.01) for b in (0.1, 0.01)]),
        "ConEllipsoid": constrained_ellipsoid(problem, iterations=500),
    }
    for name, fit in fits.items():
        assert fit.violation <= 1e-9, name  # after pruning the training constraint holds exactly
        confusion = fit.classifier.confusion(test_sample)
        assert test_coverage(confusion) <= 1 / math.sqrt(n), name  # max |cov - pi| <= 0.01 + O(N^-1/2)
        assert abs(QMean()(confusion) - reference) <= 0.01, (name, QMean()(confusion), reference)
    unconstrained = problem.baseline()
    assert problem.violation(unconstrained.point) > 0.05  # argmax eta_hat breaks the coverage constraint


@pytest.mark.slow
def test_congda_multipliers_stay_in_their_ball_and_pruning_makes_the_mixture_feasible():
    """ConGDA: ||mu||_1 <= 2 / r along the run (Thm. 17's set Xi), training violation 0 after pruning."""
    proba = np.random.default_rng(3).dirichlet([2.0, 1.0, 0.5], 3000)
    y = (np.random.default_rng(4).random((3000, 1)) > np.cumsum(proba, axis=1)).sum(axis=1)
    problem = Problem(QMean(), Sample(proba, y), [Coverage(0.02)])
    r = strict_feasibility(problem)
    assert r == pytest.approx(0.02, abs=1e-9)  # the constant classifiers mixed by the priors: slack eps
    fit = constrained_gda(problem, 1500, step_xi=0.05, step_lambda=0.5)
    assert fit.history["mu_norm"].max() <= 2 / r + 1e-9 and fit.history["radii"][1] == pytest.approx(2 / r)
    assert fit.history["mu_norm"].max() > 0  # the constraint was active
    assert fit.violation <= 1e-9
    unpruned = constrained_gda(problem, 1500, step_xi=0.05, step_lambda=0.5, pruning=False)
    assert unpruned.violation > fit.violation


def dp_gap(confusion):
    """``max_{a,j} |P(Y_hat = j | A = a) - P(Y_hat = j)|`` of a group confusion tensor."""
    rates = confusion.sum(axis=1) / confusion.sum(axis=(1, 2))[:, None]
    return float(np.abs(rates - confusion.sum(axis=(0, 1))).max())


@pytest.mark.slow
@pytest.mark.parametrize("grouping", ["aware", "unaware"])
def test_demographic_parity_holds_on_held_out_data_learned_without_labels(grouping):
    eps = 0.02 if grouping == "aware" else 0.005
    train, test = sample_two_groups(20_000, seed=21), sample_two_groups(100_000, seed=22)
    if grouping == "aware":  # Alg. 10: the group is known at prediction time
        sample = Sample(train["eta_aware"], None, train["a"])
        held_out = Sample(test["eta_aware"], test["y"], test["a"])
    else:  # unaware: tau = P(A | x) replaces the group
        sample = Sample(train["eta"], None, tau=train["tau"])
        held_out = Sample(test["eta"], test["y"], test["a"], tau=test["tau"])
    assert sample.y is None and sample.soft_labels is None  # there is no y to read
    problem = Problem(ZeroOneError(), sample, [DemographicParity(eps)])
    base = held_out.confusion(held_out.predict(problem.baseline().scores[0]))
    assert dp_gap(base) > eps + 0.005  # argmax eta_hat is unfair
    smallest = min(np.bincount(test["a"]))
    for fit in (constrained_gda(problem, 1500, 0.1, 0.1), constrained_ellipsoid(problem, 2000)):
        assert fit.violation <= 1e-9
        confusion = fit.classifier.confusion(held_out)
        assert dp_gap(confusion) <= eps + 3 / math.sqrt(smallest)
        assert ZeroOneError()(confusion) < 1 - confusion.sum(axis=(0, 2)).max()  # beats the best constant


@pytest.mark.slow
def test_equal_opportunity_with_g_mean_on_binary_groups():
    """The paper's fairness task (Fig. 9): G-mean subject to EOpp <= 0.05, group-aware."""
    rng = np.random.default_rng(31)
    n = 6000
    a = (rng.random(n) < 0.3).astype(int)
    score = rng.normal(1.5 * a - 0.5, 1.0)
    proba1 = 1 / (1 + np.exp(-2 * score))
    y = (rng.random(n) < proba1).astype(int)
    problem = Problem(GMean(), Sample(np.column_stack([1 - proba1, proba1]), y, a), [EqualOpportunity(0.05)])
    assert problem.violation(problem.baseline().point) > 0.05
    fit = select([constrained_gda(problem, 1500, s, t) for s in (0.1, 0.01) for t in (0.1, 0.01)])
    assert fit.violation <= 1e-9
    assert fit.objective < problem.objective(problem.feasible_start().point) - 0.1  # vs the fair start
    assert fit.objective < 0.5


@pytest.mark.slow
def test_constrained_bisection_improves_micro_f1_under_coverage():
    proba = np.random.default_rng(41).dirichlet([3.0, 1.0, 1.0], 2000)
    y = (np.random.default_rng(42).random((2000, 1)) > np.cumsum(proba, axis=1)).sum(axis=1)
    problem = Problem(MicroF1(), Sample(proba, y), [Coverage(0.02)])
    fit = constrained_bisection(problem, iterations=8, inner_iterations=600, step_xi=0.1, step_lambda=0.1)
    interval = fit.history["interval"]
    assert np.array_equal(interval[:, 1] - interval[:, 0], 2.0 ** -np.arange(1, 9))
    assert fit.violation <= 1e-9
    assert fit.objective <= interval[-1, 1] + 1e-12
    assert fit.objective < problem.objective(problem.feasible_start().point) - 0.05
