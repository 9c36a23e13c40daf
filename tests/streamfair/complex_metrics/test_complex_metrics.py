"""Building blocks of the complex-metric algorithms of Narasimhan et al. (JMLR 2024).

The plug-in oracle against brute force, the metrics and constraints against the formulas of Table 1,
the LP solver and the pruning programs against SciPy, the mixture's sampling against its confusion
matrix, the JLE step against its geometric definition, and bisection's interval halving.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from scipy.optimize import linprog as scipy_linprog

from streamfair.complex_metrics import (
    BalancedError,
    CostSensitive,
    Coverage,
    DemographicParity,
    EqualizedOdds,
    EqualOpportunity,
    GMean,
    HMean,
    MacroF1,
    MicroF1,
    MinMax,
    Precision,
    Problem,
    QMean,
    RandomizedClassifier,
    Sample,
    ZeroOneError,
    best_mixture,
    bisection,
    prune,
    sparsify,
)
from streamfair.complex_metrics.convex import project_nonnegative_l1, project_simplex
from streamfair.complex_metrics.ellipsoid import jle
from streamfair.complex_metrics.lp import linprog


def labelled(n, classes, seed, groups=0):
    """Random class probabilities, labels drawn from them, and optionally groups."""
    rng = np.random.default_rng(seed)
    proba = rng.dirichlet(np.full(classes, 0.9), n)
    y = (rng.random((n, 1)) > np.cumsum(proba, axis=1)).sum(axis=1)
    a = rng.integers(0, groups, n) if groups else None
    return proba, y, a


def random_confusion(classes, groups, seed):
    rng = np.random.default_rng(seed)
    return rng.dirichlet(np.ones(groups * classes * classes)).reshape(groups, classes, classes)


def argmin_star(values):
    """Brute force argmin* of a list: ties to the larger index."""
    best = 0
    for j, value in enumerate(values):
        if value <= values[best]:
            best = j
    return best


# ---------------------------------------------------------------- the plug-in oracle
def test_lmo_matches_brute_force_with_ties_to_the_larger_index():
    rng = np.random.default_rng(0)
    n, size = 4, 300
    proba = rng.dirichlet(np.ones(n), size)
    proba[:50] = np.round(proba[:50] * 4) / 4  # coarse rows ...
    proba[:50] /= proba[:50].sum(axis=1, keepdims=True)
    y = rng.integers(0, n, size)
    sample = Sample(proba, y)
    for trial in range(5):
        costs = rng.integers(0, 3, (n, n)).astype(float)  # ... and integer costs: many exact ties
        predictions = sample.predict(costs)
        expected = [
            argmin_star([sum(proba[row, i] * costs[i, j] for i in range(n)) for j in range(n)]) for row in range(size)
        ]
        assert predictions.tolist() == expected
        ties = sum(1 for row in range(size) if len(set(np.round([proba[row] @ costs[:, j] for j in range(n)], 12))) < n)
        if trial == 0:
            assert ties > 10  # the tie-breaking was exercised
        # invariance (away from exact ties, which rounding may move): scaling, a constant per row of L
        values = proba @ costs
        clear = np.sort(values, axis=1)[:, 1] - values.min(axis=1) > 1e-9
        assert np.array_equal(sample.predict(3.7 * costs)[clear], predictions[clear])
        shifted = costs + rng.normal(size=(n, 1))  # row i gets its own constant
        assert np.array_equal(sample.predict(shifted)[clear], predictions[clear])
        # the returned Gamma is the count of (y, prediction) pairs / N
        counts = np.zeros((n, n))
        np.add.at(counts, (y, predictions), 1.0)
        np.testing.assert_array_equal(sample.confusion(predictions)[0], counts / size)


def test_group_aware_and_unaware_oracles_match_brute_force():
    rng = np.random.default_rng(1)
    n, m, size = 3, 2, 200
    proba, y, a = labelled(size, n, seed=2, groups=m)
    costs = rng.normal(size=(m, n, n))  # group-dependent costs (Alg. 10)
    aware = Sample(proba, y, a)
    expected = [argmin_star([proba[row] @ costs[a[row], :, j] for j in range(n)]) for row in range(size)]
    predictions = aware.predict(costs.reshape(m * n, n))
    assert predictions.tolist() == expected
    counts = np.zeros((m, n, n))
    np.add.at(counts, (a, y, predictions), 1.0)
    np.testing.assert_array_equal(aware.confusion(predictions), counts / size)
    tau = rng.dirichlet(np.ones(m), size)
    unaware = Sample(proba, y, a, tau=tau)
    expected = [
        argmin_star([sum(tau[row, g] * proba[row] @ costs[g, :, j] for g in range(m)) for j in range(n)])
        for row in range(size)
    ]
    assert unaware.predict(costs.reshape(m * n, n)).tolist() == expected
    np.testing.assert_array_equal(unaware.confusion(predictions), counts / size)  # groups known: exact


def test_label_free_confusion_is_the_eta_weighted_surrogate():
    proba, y, a = labelled(150, 3, seed=3, groups=2)
    predictions = np.random.default_rng(4).integers(0, 3, 150)
    expected = np.zeros((2, 3, 3))
    for row in range(150):
        expected[a[row], :, predictions[row]] += proba[row] / 150
    np.testing.assert_allclose(Sample(proba, None, a).confusion(predictions), expected, atol=1e-15)
    # coordinates that sum over the true class (coverage, DP) are exact without labels
    exact = Sample(proba, y, a).confusion(predictions)
    np.testing.assert_allclose(expected.sum(axis=1), exact.sum(axis=1), atol=1e-15)  # P(A = a, Y_hat = j)
    assert np.abs(expected - exact).max() > 0.01  # while the label cells themselves differ


def test_problem_lmo_minimizes_the_linear_objective_over_all_deterministic_classifiers():
    """On 6 samples and 3 classes, the plug-in beats every one of the 3^6 labelings for <w, v>."""
    rng = np.random.default_rng(5)
    proba, y, _ = labelled(6, 3, seed=6)
    # an empirical oracle can only be optimal if eta_hat is the truth: use soft labels y = proba
    sample = Sample(proba, proba)
    problem = Problem(QMean(), sample, [Coverage(0.05)])
    for _ in range(5):
        w = rng.normal(size=problem.dimension)
        best = problem.lmo(w)
        values = []
        for labels in np.ndindex(*(3,) * 6):
            values.append(w @ problem.point(sample.confusion(np.array(labels))))
        assert w @ best.point <= min(values) + 1e-12


# ---------------------------------------------------------------- metrics and constraints: Table 1
def test_metrics_follow_the_table_1_formulas():
    for seed in range(5):
        c = random_confusion(3, 1, seed)[0]
        row, col, diag = c.sum(axis=1), c.sum(axis=0), np.diag(c)
        recall = diag / row
        assert QMean()(c) == pytest.approx(math.sqrt(np.mean((1 - recall) ** 2)), rel=1e-12)
        assert HMean()(c) == pytest.approx(1 - 3 / np.sum(row / diag), rel=1e-12)
        assert GMean()(c) == pytest.approx(1 - np.prod(recall) ** (1 / 3), rel=1e-12)
        assert MinMax()(c) == pytest.approx(np.max(1 - recall), rel=1e-12)
        assert ZeroOneError()(c) == pytest.approx(1 - diag.sum(), rel=1e-12)
        assert BalancedError()(c) == pytest.approx(1 - np.mean(recall), rel=1e-12)
        for k in range(3):
            micro = 1 - 2 * (diag.sum() - diag[k]) / (2 - c[k].sum() - c[:, k].sum())
            assert MicroF1(default_class=k)(c) == pytest.approx(micro, rel=1e-12)
        assert MacroF1()(c) == pytest.approx(1 - np.mean(2 * diag / (row + col)), rel=1e-12)
        costs = np.arange(9.0).reshape(3, 3)
        assert CostSensitive(costs)(c) == pytest.approx(np.sum(costs * c), rel=1e-12)
    # group tensors: metrics of the overall matrix; group-dependent costs per group
    tensor = random_confusion(3, 2, 7)
    assert QMean()(tensor) == pytest.approx(QMean()(tensor.sum(axis=0)), rel=1e-12)
    costs = np.random.default_rng(8).uniform(size=(2, 3, 3))
    assert CostSensitive(costs)(tensor) == pytest.approx(np.sum(costs * tensor), rel=1e-12)
    # binary: F1 with default class 0 is the usual F1 of class 1; zero recall gives H-mean 1
    binary = np.array([[0.5, 0.1], [0.2, 0.2]])
    assert MicroF1()(binary) == pytest.approx(1 - 2 * 0.2 / (2 * 0.2 + 0.1 + 0.2))
    assert HMean()(np.array([[0.5, 0.0], [0.5, 0.0]])) == 1.0


@pytest.mark.parametrize("metric", [QMean(), HMean(), GMean(), MicroF1(), MacroF1()], ids=repr)
def test_gradients_match_finite_differences(metric):
    d = metric.coordinates(np.array([[0.5, 0.3, 0.2]])).shape[0]
    v = np.random.default_rng(10).uniform(0.2, 0.8, d)
    gradient = metric.gradient(v)
    for k in range(v.size):
        h = np.zeros(v.size)
        h[k] = 1e-6
        assert gradient[k] == pytest.approx((metric.value(v + h) - metric.value(v - h)) / 2e-6, rel=1e-6, abs=1e-8)


@pytest.mark.slow
@pytest.mark.parametrize("metric", [QMean(), MinMax(), HMean()], ids=repr)
def test_slack_step_is_the_minimizer_over_the_box(metric):
    """``argmin_{u in [0,1]^3} psi(u) - g.u`` (closed forms for Q-mean and min-max) beats a fine grid."""
    rng = np.random.default_rng(11)
    grid = np.stack(np.meshgrid(*[np.linspace(0, 1, 41)] * 3, indexing="ij"), axis=-1).reshape(-1, 3)
    values = np.array([metric.value(u) for u in grid])
    for _ in range(6):
        g = rng.normal(0, 1.0, 3)
        u = metric.conjugate_argmin(g, np.zeros(3), np.ones(3))
        assert np.all(u >= 0) and np.all(u <= 1)
        assert metric.value(u) - g @ u <= (values - grid @ g).min() + 1e-9


def test_constraints_follow_the_table_1_formulas():
    tensor = random_confusion(3, 2, 12)
    overall = tensor.sum(axis=0)
    mu = tensor.sum(axis=(1, 2))
    cover = overall.sum(axis=0)
    target = np.array([0.5, 0.3, 0.2])
    assert Coverage(0.01, target)(tensor) == pytest.approx(np.abs(cover - target).max() - 0.01, rel=1e-12)
    assert Coverage(0.01)(tensor) == pytest.approx(np.abs(cover - overall.sum(axis=1)).max() - 0.01, rel=1e-12)
    dp = max(abs(tensor[a, :, j].sum() / mu[a] - cover[j]) for a in range(2) for j in range(3))
    assert DemographicParity(0.02)(tensor) == pytest.approx(dp - 0.02, rel=1e-12)
    priors, cells = overall.sum(axis=1), tensor.sum(axis=2)
    eodds = max(
        abs(tensor[a, i, j] / cells[a, i] - overall[i, j] / priors[i])
        for a in range(2)
        for i in range(3)
        for j in range(3)
    )
    assert EqualizedOdds(0.03)(tensor) == pytest.approx(eodds - 0.03, rel=1e-12)
    binary = random_confusion(2, 3, 13)
    b_overall, b_cells = binary.sum(axis=0), binary.sum(axis=2)
    eopp = max(abs(binary[a, 1, 1] / b_cells[a, 1] - b_overall[1, 1] / b_overall[1].sum()) for a in range(3))
    assert EqualOpportunity(0.05)(binary) == pytest.approx(eopp - 0.05, rel=1e-12)
    precision = overall[2, 2] / overall[:, 2].sum()
    assert (Precision(2, 0.9)(tensor) <= 0) == (precision >= 0.9)
    assert Precision(2, 0.9)(tensor) == pytest.approx(0.9 * overall[:, 2].sum() - overall[2, 2], rel=1e-12)
    assert DemographicParity(0.1).label_free and Coverage(0.1, target).label_free
    assert not Coverage(0.1).label_free and not EqualOpportunity(0.1).label_free


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: DemographicParity(-0.1), "eps must be a finite number >= 0"),
        (lambda: DemographicParity(5), r"eps must be <= 1 \(0.05 is 5 points\), got 5"),
        (lambda: Coverage(2.0), r"eps must be <= 1 \(0.05 is 5 points\), got 2.0"),
        (lambda: EqualOpportunity(1.5), r"eps must be <= 1"),
        (lambda: EqualizedOdds(np.float64(3)), r"eps must be <= 1"),
        (
            lambda: Problem(QMean(), Sample(np.full((4, 2), 0.5), [0, 1, 0, 1]), [DemographicParity(0.1)]),
            "needs at least 2 groups",
        ),
        (lambda: Problem(QMean(), Sample(np.full((4, 2), 0.5), [0, 0, 0, 0])), "every class needs a positive prior"),
        (lambda: Sample(np.full((3, 2), 0.5), [0, 1, 2]), r"y must be in 0..1"),
        (lambda: Sample(np.full((3, 2), 0.5), [0.0, 1.0, 0.0]), "y must be 3 integer labels"),
        (lambda: Sample([[0.5, 0.6], [0.5, 0.5]]), "proba rows must be"),
        (lambda: Sample(np.full((2, 2), 0.5), [0, 1], tau=[[0.5, 0.5]]), r"tau must have shape \(2, 2\)"),
        (lambda: CostSensitive(np.ones((2, 3))), "costs must be a finite"),
        (lambda: MicroF1(default_class=-1), "default_class must be an integer >= 0"),
        (lambda: RandomizedClassifier([0.5, 0.6], np.zeros((2, 2, 2))), "weights must be finite, >= 0 and sum to 1"),
        (lambda: RandomizedClassifier([1.0], np.zeros((1, 4, 2)), grouping="none"), "grouping 'none' needs"),
        (
            lambda: bisection(Problem(QMean(), Sample(np.full((2, 2), 0.5), [0, 1]))),
            "bisection needs a ratio-of-linear metric",
        ),
    ],
)
def test_bad_inputs_raise_value_errors_naming_the_argument(build, message):
    with pytest.raises(ValueError, match=message):
        build()


# ---------------------------------------------------------------- the LP solver and the pruning programs
@pytest.mark.slow
def test_linprog_agrees_with_scipy_on_random_programs():
    rng = np.random.default_rng(14)
    statuses = set()
    for _ in range(150):
        n, k_ub, k_eq = rng.integers(2, 25), rng.integers(0, 6), rng.integers(0, 3)
        c = rng.normal(size=n)
        a_ub, b_ub = rng.normal(size=(k_ub, n)), rng.normal(size=k_ub) + 0.5
        a_eq = rng.random((k_eq, n))
        b_eq = a_eq @ rng.random(n) if rng.random() < 0.8 else rng.normal(size=k_eq)
        if rng.random() < 0.7:  # usually bounded: add the simplex
            a_eq, b_eq = np.vstack([a_eq, np.ones(n)]), np.append(b_eq, 1.0)
        ours = linprog(
            c, a_ub if k_ub else None, b_ub if k_ub else None, a_eq if a_eq.size else None, b_eq if a_eq.size else None
        )
        theirs = scipy_linprog(
            c,
            a_ub if k_ub else None,
            b_ub if k_ub else None,
            a_eq if a_eq.size else None,
            b_eq if a_eq.size else None,
            bounds=(0, None),
            method="highs",
        )
        expected = {0: "optimal", 2: "infeasible", 3: "unbounded"}[theirs.status]
        assert ours.status == expected
        statuses.add(expected)
        if expected == "optimal":
            assert ours.fun == pytest.approx(theirs.fun, abs=1e-7)
            assert np.all(ours.x >= 0) and np.abs(a_eq @ ours.x - b_eq).max() < 1e-8 if a_eq.size else True
            assert np.count_nonzero(ours.x > 1e-12) <= k_ub + len(b_eq)  # a basic solution
    assert statuses == {"optimal", "infeasible", "unbounded"}


def candidates(problem, seed, count=30):
    """Plug-in classifiers for random diagonal weights, as mixture candidates."""
    rng = np.random.default_rng(seed)
    n = problem.sample.n_classes
    return [problem.oracle(np.diag(-np.exp(rng.normal(0, 1.5, n)))) for _ in range(count)]


def test_pruning_lp_matches_scipy_and_meets_the_constraints_exactly():
    proba, y, _ = labelled(600, 3, seed=15)
    problem = Problem(QMean(), Sample(proba, y), [Coverage(0.01)])
    comps = candidates(problem, seed=16)
    weights = prune(problem, comps)
    points = np.stack([c.point for c in comps])
    objectives = np.array([problem.objective(v) for v in points])
    values = points @ problem.A.T - problem.b
    reference = scipy_linprog(
        objectives,
        values.T,
        np.zeros(problem.n_constraints),
        np.ones((1, len(comps))),
        [1.0],
        bounds=(0, None),
        method="highs",
    )
    assert weights @ objectives == pytest.approx(reference.fun, abs=1e-9)
    assert problem.violation(weights @ points) <= 1e-9
    assert np.count_nonzero(weights) <= problem.n_constraints + 1
    assert problem.objective(weights @ points) <= weights @ objectives + 1e-12  # the LP objective is an upper bound


def test_pruning_relaxes_to_the_least_violation_when_nothing_is_feasible():
    proba, y, _ = labelled(300, 3, seed=17)
    problem = Problem(ZeroOneError(), Sample(proba, y), [Coverage(0.0, target=[0.9, 0.05, 0.05])])
    comps = [problem.baseline()]  # one classifier: it cannot meet an exact coverage target
    weights = prune(problem, comps)
    assert weights.tolist() == [1.0] and problem.violation(comps[0].point) > 0.05


def test_best_mixture_solves_the_final_convex_programs():
    proba, y, _ = labelled(800, 3, seed=18)
    sample = Sample(proba, y)
    # piecewise linear (min-max): an exact LP, compared with SciPy's epigraph LP
    problem = Problem(MinMax(), sample)
    comps = candidates(problem, seed=19)
    weights = best_mixture(problem, comps)
    points = np.stack([c.point for c in comps])
    u = len(comps)
    reference = scipy_linprog(
        np.r_[np.zeros(u), 1.0],
        np.hstack([-points.T, -np.ones((3, 1))]),
        -np.ones(3),
        np.r_[np.ones(u), 0.0][None],
        [1.0],
        bounds=[(0, None)] * u + [(None, None)],
        method="highs",
    )
    assert problem.objective(weights @ points) == pytest.approx(reference.fun, abs=1e-9)
    # smooth (Q-mean) with coverage: Frank-Wolfe's value is optimal up to its gap, vs a fine check
    problem = Problem(QMean(), sample, [Coverage(0.02)])
    comps = candidates(problem, seed=20)
    points = np.stack([c.point for c in comps])
    weights = best_mixture(problem, comps)
    value = problem.objective(weights @ points)
    assert problem.violation(weights @ points) <= 1e-9
    assert value <= problem.objective(prune(problem, comps) @ points) + 1e-12
    rng = np.random.default_rng(21)
    for _ in range(2000):  # no random feasible mixture does better
        alpha = rng.dirichlet(np.full(u, 0.3))
        if problem.violation(alpha @ points) <= 0:
            assert problem.objective(alpha @ points) >= value - 1e-6


def test_sparsify_keeps_the_point_with_at_most_d_plus_one_components():
    proba, y, _ = labelled(400, 3, seed=22)
    problem = Problem(HMean(), Sample(proba, y), [Coverage(0.05)])
    comps = candidates(problem, seed=23, count=40)
    points = np.stack([c.point for c in comps])
    weights = np.random.default_rng(24).dirichlet(np.ones(40))
    sparse = sparsify(points, weights)
    assert np.count_nonzero(sparse) <= problem.dimension + 1
    np.testing.assert_allclose(sparse @ points, weights @ points, atol=1e-10)
    assert sparse.min() >= 0 and sparse.sum() == pytest.approx(1.0)


def test_projections():
    rng = np.random.default_rng(25)
    for _ in range(20):
        x = rng.normal(0, 2, 6)
        p = project_simplex(x)
        assert p.min() >= 0 and p.sum() == pytest.approx(1.0)
        for _ in range(20):  # the projection is the closest point of the simplex
            q = rng.dirichlet(np.ones(6))
            assert np.linalg.norm(x - p) <= np.linalg.norm(x - q) + 1e-12
        r = project_nonnegative_l1(x, 1.5)
        assert r.min() >= 0 and r.sum() <= 1.5 + 1e-12


# ---------------------------------------------------------------- the randomized mixture
@pytest.mark.slow
def test_sampling_the_mixture_reproduces_its_confusion_matrix():
    proba, y, a = labelled(2000, 3, seed=26, groups=2)
    sample = Sample(proba, y, a)
    rng = np.random.default_rng(27)
    scores = rng.normal(size=(4, 6, 3))
    weights = np.array([0.1, 0.2, 0.3, 0.4])
    h = RandomizedClassifier(weights, scores, grouping="aware", seed=9)
    expected = h.confusion(sample)
    manual = sum(w * sample.confusion(sample.predict(s)) for w, s in zip(weights, scores, strict=True))
    np.testing.assert_allclose(expected, manual, atol=1e-15)
    rounds = 20  # M = 40,000 stream samples: the sample repeated, a fresh key each time
    counts = np.zeros_like(expected)
    for r in range(rounds):
        predictions = h.predict_many(proba, groups=a, keys=[f"{r}:{i}" for i in range(2000)])
        counts += sample.confusion(predictions)
    empirical = counts / rounds
    m = rounds * 2000
    assert np.all(np.abs(empirical - expected) <= 3 * np.sqrt(expected * (1 - expected) / m) + 1e-12)
    assert np.abs(empirical - expected).max() > 0  # it is sampled, not averaged


def test_mixture_draws_are_keyed_reproducible_and_survive_state_round_trips():
    rng = np.random.default_rng(28)
    h = RandomizedClassifier([0.3, 0.7], rng.normal(size=(2, 6, 3)), grouping="unaware", seed=4)
    proba, tau = rng.dirichlet(np.ones(3), 50), rng.dirichlet(np.ones(2), 50)
    keys = [f"msg-{i}" for i in range(50)]
    first = h.predict_many(proba, tau=tau, keys=keys)
    assert [h.predict_one(proba[i], tau=tau[i], key=keys[i]) for i in range(50)] == first.tolist()
    for copy in (RandomizedClassifier.from_state_dict(h.state_dict()), pickle.loads(pickle.dumps(h))):
        assert np.array_equal(copy.predict_many(proba, tau=tau, keys=keys), first)
    h.predict_many(proba[:3], tau=tau[:3])  # unkeyed draws advance a counter that is part of the state
    copy = RandomizedClassifier.from_state_dict(h.state_dict())
    assert np.array_equal(copy.predict_many(proba, tau=tau), h.predict_many(proba, tau=tau))
    with pytest.raises(ValueError, match="group-unaware: give the group posterior tau"):
        h.predict_one(proba[0])
    other_seed = RandomizedClassifier([0.3, 0.7], h.scores, grouping="unaware", seed=5)
    assert not np.array_equal(other_seed.predict_many(proba, tau=tau, keys=keys), first)


# ---------------------------------------------------------------- bisection and JLE
def test_bisection_halves_the_interval_and_reaches_the_best_level_classifier():
    proba, _, _ = labelled(1500, 3, seed=29)
    problem = Problem(MicroF1(), Sample(proba, proba))  # soft labels = eta_hat: the oracle is exact
    fit = bisection(problem, iterations=25)
    interval = fit.history["interval"]
    assert np.array_equal(interval[:, 1] - interval[:, 0], 2.0 ** -np.arange(1, 26))  # Lemma 48, exactly
    assert fit.objective <= interval[-1, 1] + 1e-12 and fit.classifier.n_components == 1
    # Prop. 8: the optimum is a level classifier argmin <A - gamma B, .>; brute force over gamma
    levels = []
    for gamma in np.linspace(0, 1, 2001):
        w = np.zeros(problem.dimension)
        w[:2] = 1.0, -gamma
        levels.append(problem.objective(problem.lmo(w).point))
    assert fit.objective <= min(levels) + 1e-6
    assert fit.objective < problem.objective(problem.baseline().point)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_jle_contains_the_half_ellipsoid_and_shrinks_its_volume(d):
    rng = np.random.default_rng(30 + d)
    root = rng.normal(size=(d, d))
    shape, centre, direction = root @ root.T + 0.5 * np.eye(d), rng.normal(size=d), rng.normal(size=d)
    new_shape, new_centre = jle(shape, centre, direction)
    inverse, new_inverse = np.linalg.inv(shape), np.linalg.inv(new_shape)
    # random points of E(centre, shape) on the kept side lie in the new ellipsoid
    z = rng.normal(size=(20000, d))
    z *= (rng.random((20000, 1)) ** (1 / d)) / np.linalg.norm(z, axis=1, keepdims=True)
    points = centre + z @ np.linalg.cholesky(shape).T
    kept = (points - centre) @ direction >= 0
    offsets = points[kept] - new_centre
    assert kept.sum() > 5000
    assert np.max(np.einsum("ij,jk,ik->i", offsets, new_inverse, offsets)) <= 1 + 1e-9
    assert np.einsum("ij,jk,ik->i", points - centre, inverse, points - centre).max() <= 1 + 1e-9
    ratio = math.sqrt(np.linalg.det(new_shape) / np.linalg.det(shape))
    assert ratio <= math.exp(-1 / (2 * d)) + 1e-12  # Lemma 34
