"""Batch DRO solvers: within eps of exact optima, exact oracle counters, MLMC estimator, projections."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from streamfair.dro.accelerated import (
    AcceleratedParameters,
    _DivergenceBallOracle,
    _GroupBallOracle,
    mlmc_level_pmf,
    project_ball_box,
)
from streamfair.dro.oracle import CountingOracle
from streamfair.dro.problem import (
    ChiSquarePenalty,
    ChiSquareSet,
    CVaRSet,
    KLPenalty,
    KLSet,
    LinearDROProblem,
    imbalanced_groups,
    make_synthetic,
)
from streamfair.dro.solvers import SOLVERS, solve
from tests.streamfair.dro import load_benchmark

_benchmark = load_benchmark("bench_dro")  # the LP and cutting-plane references (scipy is not a library dependency)
lp_optimum, cutting_plane_optimum, reference_optimum = (
    _benchmark.lp_optimum,
    _benchmark.cutting_plane_optimum,
    _benchmark.reference_optimum,
)


def group_problem():
    return make_synthetic(100, 2, imbalanced_groups(100, 3), seed=0, flip=0.1, radius=1.0)


def cvar_problem():
    return make_synthetic(100, 2, CVaRSet(0.5), seed=0, flip=0.0, radius=1.0)


def chi_square_penalty_problem():
    return make_synthetic(100, 2, ChiSquarePenalty(0.5), seed=0, flip=0.0, radius=1.0)


def kl_penalty_problem():
    return make_synthetic(100, 2, KLPenalty(0.3), seed=0, flip=0.0, radius=1.0)


def chi_square_problem():
    return make_synthetic(100, 2, ChiSquareSet(0.2), seed=0, flip=0.0, radius=0.5)


def kl_problem():
    return make_synthetic(100, 2, KLSet(0.1), seed=0, flip=0.0, radius=0.5)


# ---------------------------------------------------------------- within eps of the reference optimum
# Scaled down from N = 1e4, d = 20 so that the file runs in seconds; the benchmark runs
# the larger problems.  Each problem's starting gap is more than twice the tolerance.  References:
# the LP (group DRO, CVaR) or certified cutting planes (chi-square, KL), see ``reference_optimum``.
CASES = [
    (group_problem, "subgradient", 20_000, {}),
    (group_problem, "primal_dual", 100_000, {}),
    (group_problem, "accelerated", 300_000, {"epsilon": 0.08}),
    (cvar_problem, "subgradient", 20_000, {}),
    (cvar_problem, "dual_sgd", 150_000, {}),
    (cvar_problem, "accelerated", 300_000, {"epsilon": 0.08}),
    (cvar_problem, "primal_dual", 60_000, {}),
    (chi_square_penalty_problem, "subgradient", 20_000, {}),
    (chi_square_penalty_problem, "accelerated", 300_000, {"epsilon": 0.08}),
    (kl_penalty_problem, "subgradient", 20_000, {}),
    (kl_penalty_problem, "accelerated", 300_000, {"epsilon": 0.08}),
    (chi_square_problem, "subgradient", 20_000, {}),
    (chi_square_problem, "accelerated", 300_000, {"epsilon": 0.1}),  # nu-search over penalized solves
    (group_problem, "accelerated_continuation", 300_000, {"epsilon": 0.08}),
    (chi_square_problem, "accelerated_continuation", 300_000, {"epsilon": 0.1}),
    (kl_problem, "subgradient", 20_000, {}),
    (kl_problem, "accelerated", 300_000, {"epsilon": 0.1}),
]


@pytest.mark.slow
@pytest.mark.parametrize("make, method, budget, options", CASES, ids=[f"{m.__name__}-{s}" for m, s, _, _ in CASES])
def test_solver_reaches_the_reference_optimum(make, method, budget, options):
    problem = make()
    optimum = reference_optimum(problem)
    start_gap = problem.objective(np.zeros(problem.dim)) - optimum
    tolerance = 0.05
    assert start_gap > 2 * tolerance
    result = solve(problem, method, budget, seed=1, **options)
    assert np.all(np.abs(result.x) <= problem.radius + 1e-12)  # feasible
    assert optimum - 1e-9 <= problem.objective(result.x) <= optimum + tolerance
    assert result.calls >= budget and result.snapshots[-1][0] == result.calls


def test_lp_reference_matches_the_exact_objective_at_its_solution():
    problem = cvar_problem()
    optimum = lp_optimum(problem)
    best = solve(problem, "subgradient", 50_000).x
    assert problem.objective(best) == pytest.approx(optimum, abs=1e-6)


@pytest.mark.parametrize("make", [group_problem, cvar_problem], ids=["group", "cvar"])
def test_cutting_planes_reproduce_the_lp_optimum(make):
    problem = make()
    assert cutting_plane_optimum(problem, tolerance=1e-8) == pytest.approx(lp_optimum(problem), abs=1e-7)


@pytest.mark.slow
@pytest.mark.parametrize(
    "make", [chi_square_problem, kl_problem, chi_square_penalty_problem], ids=["chi2", "kl", "chi2-pen"]
)
def test_cutting_plane_reference_is_attained_and_not_beaten(make):
    """The certified value is attained (a long subgradient run gets there) and no iterate is below it."""
    problem = make()
    optimum = cutting_plane_optimum(problem)
    result = solve(problem, "subgradient", 200_000)
    values = [problem.objective(x) for _, x in result.snapshots]
    assert min(values) >= optimum - 1e-6
    assert problem.objective(result.x) == pytest.approx(optimum, abs=1e-4)


def test_subgradient_respects_its_anytime_guarantee():
    """best gap after t steps <= (D^2 + G^2 sum eta_s^2) / (2 sum eta_s), eta_s = D / (G sqrt(s + 1))."""
    problem = make_synthetic(200, 5, imbalanced_groups(200, 4), seed=3, flip=0.2, radius=1.0)
    optimum = lp_optimum(problem)
    d, g = problem.diameter, problem.lipschitz
    for steps in (1, 4, 16, 64, 256):
        oracle = CountingOracle(problem, budget=steps * problem.n + 1)
        x = SOLVERS["subgradient"](oracle)
        etas = d / (g * np.sqrt(np.arange(1, steps + 1)))
        bound = (d**2 + g**2 * np.sum(etas**2)) / (2 * np.sum(etas))
        assert problem.objective(x) - optimum <= bound


# ---------------------------------------------------------------- exact counters (mock-instrumented problem)
class CountingProblem(LinearDROProblem):
    """Counts every row the solvers evaluate, independently of the oracle's counters."""

    rows_valued = 0
    rows_differentiated = 0

    def losses_at(self, index, x):
        self.rows_valued += self.n if isinstance(index, slice) else len(index)
        return super().losses_at(index, x)

    def gradient_sum(self, index, x, weights):
        self.rows_differentiated += len(index)
        return super().gradient_sum(index, x, weights)


@pytest.mark.slow
@pytest.mark.parametrize(
    "robust, method",
    [
        (imbalanced_groups(60, 3), "subgradient"),
        (imbalanced_groups(60, 3), "primal_dual"),
        (imbalanced_groups(60, 3), "accelerated"),
        (CVaRSet(0.25), "subgradient"),
        (CVaRSet(0.25), "dual_sgd"),
        (CVaRSet(0.25), "primal_dual"),
        (CVaRSet(0.25), "accelerated"),
        (ChiSquareSet(1.0), "subgradient"),
        (ChiSquareSet(1.0), "accelerated"),
        (KLSet(0.5), "accelerated"),
        (imbalanced_groups(60, 3), "accelerated_continuation"),
        (ChiSquarePenalty(0.5), "accelerated"),
        (KLPenalty(0.5), "subgradient"),
    ],
)
def test_oracle_counts_every_evaluation_exactly(robust, method):
    base = make_synthetic(60, 3, robust, seed=4, flip=0.05)
    problem = CountingProblem(base.features, base.labels, robust, radius=1.0)
    oracle = CountingOracle(problem, budget=4000)
    SOLVERS[method](oracle, seed=0, **({"epsilon": 0.1} if method.startswith("accelerated") else {}))
    assert oracle.n_values == problem.rows_valued
    assert oracle.n_gradients == problem.rows_differentiated
    assert oracle.calls >= 4000


def test_subgradient_cost_per_step_is_n_values_plus_support_gradients():
    problem = make_synthetic(40, 3, CVaRSet(0.25), seed=5, flip=0.0)
    oracle = CountingOracle(problem, budget=1000)
    SOLVERS["subgradient"](oracle)
    steps = oracle.n_values // 40
    assert oracle.n_values == 40 * steps
    assert oracle.n_gradients in (10 * steps, 10 * (steps - 1))  # alpha N = 10 weights per step


def test_snapshots_are_geometric_and_validated():
    problem = cvar_problem()
    oracle = CountingOracle(problem, budget=10_000, spacing=2.0)
    SOLVERS["subgradient"](oracle)
    calls = [c for c, _ in oracle.snapshots]
    buckets = np.floor(np.log2(calls))
    assert np.all(np.diff(buckets) >= 1)  # at most one snapshot per factor of 2 in the count
    with pytest.raises(ValueError, match="spacing"):
        CountingOracle(problem, budget=10, spacing=1.0)
    with pytest.raises(ValueError, match="method"):
        solve(problem, "newton", 10)
    with pytest.raises(ValueError, match="dual_sgd"):
        SOLVERS["dual_sgd"](CountingOracle(group_problem(), 10))


# ---------------------------------------------------------------- the accelerated method's pieces
def test_parameters_label_every_constant():
    problem = group_problem()
    for profile in ("practical", "faithful"):
        params = AcceleratedParameters.build(problem, 0.05, profile)
        fields = {f.name for f in dataclasses.fields(params)} - {"provenance"}
        assert set(params.provenance) == fields
        assert set(params.provenance.values()) <= {"paper", "practical"}
        assert params.eps_prime == pytest.approx(0.05 / (2 * math.log(3)))
        assert params.radius == pytest.approx(params.eps_prime / problem.lipschitz)
        assert params.a_max == pytest.approx(9 * problem.diameter**2 / 0.05)
        assert params.lambda_min <= params.lambda_max
    faithful = AcceleratedParameters.build(problem, 0.05, "faithful")
    assert faithful.bisection_accuracy == pytest.approx(faithful.radius / 30)
    assert faithful.bias == pytest.approx(0.05 / (120 * problem.diameter))
    with pytest.raises(ValueError, match="profile"):
        AcceleratedParameters.build(problem, 0.05, "fast")


@pytest.mark.slow
def test_mlmc_level_law_and_group_estimator_is_unbiased():
    levels = np.arange(1, 400)
    assert mlmc_level_pmf(levels).sum() == pytest.approx(1.0, abs=1e-14)
    expected_cost = float((mlmc_level_pmf(levels) * 2.0**levels).sum())
    assert expected_cost == pytest.approx(2 * (1 - 8**-0.5) / (1 - 2 * 8**-0.5), rel=1e-12)  # ~4.41

    problem = make_synthetic(40, 3, imbalanced_groups(40, 2), seed=6, flip=0.2)
    params = dataclasses.replace(AcceleratedParameters.build(problem, 0.5, "faithful"), max_level=40)
    oracle = CountingOracle(problem, budget=10**9)
    broo = _GroupBallOracle(oracle, params, np.random.default_rng(7))
    centre = np.zeros(3)
    broo._prepare(centre)
    x = centre + np.array([0.05, -0.04, 0.03])
    group, shift = 1, 0.1
    members = problem.robust.members[group]
    truth = params.eps_prime * math.exp(
        (problem.losses_at(members, x) - problem.losses_at(members, centre)).mean() / params.eps_prime + shift
    )
    before = oracle.n_values
    draws = np.array([broo.mlmc(x, centre, group, shift) for _ in range(40_000)])
    error = draws.std() / math.sqrt(draws.size)
    assert abs(draws.mean() - truth) <= 4 * error
    assert (oracle.n_values - before) / draws.size == pytest.approx(expected_cost, rel=0.1)


def test_ball_box_projection_is_the_euclidean_projection():
    rng = np.random.default_rng(8)
    for _ in range(300):
        d = int(rng.integers(1, 6))
        half = rng.uniform(0.2, 2)
        centre = rng.uniform(-half, half, d)
        r = rng.uniform(0.05, 2)
        z = centre + rng.normal(size=d) * rng.uniform(0, 4)
        p = project_ball_box(z, centre, r, half)
        assert np.linalg.norm(p - centre) <= r * (1 + 1e-9) and np.all(np.abs(p) <= half + 1e-12)
        for _ in range(20):  # variational inequality against feasible points
            q = centre + rng.normal(size=d) * r * rng.uniform(0, 1) / math.sqrt(d)
            q = np.clip(q, -half, half)
            if np.linalg.norm(q - centre) <= r:
                assert (z - p) @ (q - p) <= 1e-7


@pytest.mark.parametrize("robust", [CVaRSet(0.2), ChiSquarePenalty(0.3), KLPenalty(0.2)], ids=["cvar", "chi2", "kl"])
def test_estimator_13_ratios_are_bounded_and_its_mean_is_the_dual_gradient(robust):
    """In B_r(x_bar) x [eta_bar +- eps'], rho_i <= e^2 and E_{i ~ p_bar}[g] = grad Upsilon_eps."""
    problem = make_synthetic(60, 3, robust, seed=9, flip=0.0, radius=2.0)
    params = AcceleratedParameters.build(problem, 0.5)
    oracle = CountingOracle(problem, budget=10**9)
    penalty = robust.entropic_penalty(problem.n, params.eps_prime)
    broo = _DivergenceBallOracle(oracle, params, np.random.default_rng(10), penalty)
    centre = np.array([0.3, -0.2, 0.1])
    broo._prepare(centre)
    rng = np.random.default_rng(11)
    g = problem.lipschitz
    for _ in range(20):
        direction = rng.normal(size=3)
        x = centre + direction / np.linalg.norm(direction) * params.radius * rng.uniform(0, 1)
        eta = broo.eta_bar + params.eps_prime * rng.uniform(-1, 1)
        estimates = [broo.estimator(i, x, eta) for i in range(problem.n)]
        ratios = np.array([1.0 - g_y / g for _, g_y in estimates])
        assert ratios.max() <= math.e**2
        mean_x = sum(p * g_x for p, (g_x, _) in zip(broo.p_bar, estimates, strict=True))
        mean_y = sum(p * g_y for p, (_, g_y) in zip(broo.p_bar, estimates, strict=True))

        def upsilon(point, threshold):
            return broo.penalty.dual_objective(problem.losses_at(slice(None), point), threshold)

        h = 1e-6  # the losses are piecewise linear: keep x away from kinks by a random draw
        numeric_x = np.array([(upsilon(x + h * e, eta) - upsilon(x - h * e, eta)) / (2 * h) for e in np.eye(3)])
        numeric_eta = (upsilon(x, eta + h) - upsilon(x, eta - h)) / (2 * h)
        np.testing.assert_allclose(mean_x, numeric_x, atol=1e-5)
        assert mean_y == pytest.approx(g * numeric_eta, abs=1e-5)  # d/dy = G d/d(eta)


@pytest.mark.parametrize("loss", ["hinge", "logistic"])
def test_problem_gradients_match_finite_differences(loss):
    problem = make_synthetic(30, 4, CVaRSet(0.2), seed=12, loss=loss)
    rng = np.random.default_rng(13)
    index = np.arange(30)
    for _ in range(10):
        x = rng.normal(size=4)
        weights = rng.uniform(size=30)
        h = 1e-6
        numeric = np.array(
            [
                weights @ (problem.losses_at(index, x + h * e) - problem.losses_at(index, x - h * e)) / (2 * h)
                for e in np.eye(4)
            ]
        )
        np.testing.assert_allclose(problem.gradient_sum(index, x, weights), numeric, atol=1e-6)
    assert problem.losses_at(index, np.full(4, 1e4)).max() < np.inf  # logaddexp: no overflow


@pytest.mark.slow
def test_logistic_cvar_solvers_reach_the_cutting_plane_optimum():
    problem = make_synthetic(200, 4, CVaRSet(0.5), seed=14, loss="logistic", radius=4.0, flip=0.0)
    optimum = reference_optimum(problem)  # logistic: certified cutting planes, no LP
    assert problem.objective(np.zeros(4)) - optimum > 0.15
    for method in ("subgradient", "dual_sgd"):
        assert optimum - 1e-6 <= problem.objective(solve(problem, method, 100_000, seed=0).x) <= optimum + 0.01


def test_capped_oracle_limits_a_sub_run_and_pauses_snapshots():
    oracle = CountingOracle(cvar_problem(), budget=1000, spacing=1.01)
    oracle.values(np.arange(10), np.zeros(2))
    oracle.record(np.zeros(2))
    with oracle.capped(50) as inner:
        assert inner.budget == 60 and not inner.exhausted
        inner.values(np.arange(50), np.zeros(2))
        inner.record(np.ones(2))
        assert inner.exhausted
    assert oracle.budget == 1000 and not oracle.exhausted and len(oracle.snapshots) == 1
    oracle.record(np.ones(2))
    assert [calls for calls, _ in oracle.snapshots] == [10, 60]


@pytest.mark.slow
def test_nu_search_bisects_towards_the_constrained_multiplier(monkeypatch):
    """The penalized problems it solves have multipliers converging to nu* = argmin h (end to end)."""
    import streamfair.dro.accelerated as accelerated_module

    problem = chi_square_problem()
    seen = []
    original = ChiSquareSet.penalized

    def spy(self, nu):
        seen.append(nu)
        return original(self, nu)

    monkeypatch.setattr(ChiSquareSet, "penalized", spy)
    solve(problem, "accelerated", 300_000, seed=1, epsilon=0.1)
    params = accelerated_module.AcceleratedParameters.build(problem, 0.1)
    assert len(seen) == params.nu_evaluations
    monkeypatch.undo()

    def h(log_nu: float) -> float:
        penalized = make_synthetic(100, 2, ChiSquareSet(0.2).penalized(math.exp(log_nu)), seed=0, flip=0.0, radius=0.5)
        return math.exp(log_nu) + cutting_plane_optimum(penalized, tolerance=1e-9)

    best = minimize_scalar(
        h, bounds=(math.log(seen[-1]) - 3, math.log(seen[-1]) + 3), method="bounded", options={"xatol": 1e-6}
    )
    assert best.fun == pytest.approx(reference_optimum(problem), abs=1e-7)  # Prop. 3: min_nu h = constrained optimum
    assert abs(math.log(seen[-1]) - best.x) <= math.log(1.5)  # the bisection ends near nu*


def test_continuation_stages_decrease_to_the_target_accuracy(monkeypatch):
    """eps-continuation: stages at G R / 8, halving down to eps, then restarts at eps until the budget.

    The staging logic alone: each run of Algorithm 1 is replaced by one that spends 10,000 calls.
    """
    import streamfair.dro.accelerated as accelerated_module

    problem = group_problem()
    stages = []

    def one_run(oracle, broo, params, rng, start):
        stages.append(params.epsilon)
        oracle.values(np.zeros(10_000, dtype=int), start)
        return start + 1.0

    monkeypatch.setattr(accelerated_module, "_proximal_point", one_run)
    result = solve(problem, "accelerated_continuation", 100_000, seed=0, epsilon=0.05)
    start = problem.lipschitz * problem.diameter / 8
    np.testing.assert_allclose(stages, [max(0.05, start / 2**k) for k in range(10)])
    np.testing.assert_array_equal(result.x, np.full(2, 10.0))  # each stage warm-starts at the previous output
