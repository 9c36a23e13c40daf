"""Black-box metrics via adaptive surrogates (Jiang et al., ICML 2020).

The projection onto surrogate targets, the accuracy of the gradient estimators, the black-box optimizer
against the formula-aware one, dead zones of the metric, monotone metrics, and input validation.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize

from streamfair.surrogates import (
    BlackBoxProblem,
    CellSurrogates,
    ExactGradient,
    FiniteDifference,
    LinearInterpolation,
    SurrogatePGD,
    TwoStepFiniteDifference,
    project,
)


def cell_data(seed: int, n: int = 400, d: int = 11):
    """Two groups x two labels = 4 cells; features: Gaussians, the group indicators, an intercept."""
    rng = np.random.default_rng(seed)
    group = (rng.random(n) < 0.4).astype(int)
    Z = rng.standard_normal((n, d - 3))
    logit = Z @ np.linspace(1.0, -0.5, d - 3) + group - 0.5
    y = np.where(rng.random(n) < 1 / (1 + np.exp(-2 * logit)), 1.0, -1.0)
    X = np.c_[Z, group, 1 - group, np.ones(n)]
    return X, y, 2 * group + (y > 0)


def geometric_mean(u: np.ndarray) -> float:
    return float(np.prod(u) ** (1 / u.size))


def geometric_mean_gradient(u: np.ndarray) -> np.ndarray:
    return geometric_mean(u) / (u.size * u)


def relative_error(estimate: np.ndarray, truth: np.ndarray) -> float:
    return float(np.linalg.norm(estimate - truth) / np.linalg.norm(truth))


# ----------------------------------------------------------------------------------- A-T1
def quadratic_cells():
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((12, 5)), rng.standard_normal(12)
    return CellSurrogates(X, y, cells=np.repeat([0, 1, 2], 4), loss="squared")


def exact_projection(cells: CellSurrogates, target: np.ndarray) -> np.ndarray:
    """Lemma 5: min 1/2 ||u - target||^2 over (u, theta) subject to u >= l(theta), by SLSQP."""
    k = cells.n_cells
    start_theta = np.linalg.lstsq(cells.X, cells.y, rcond=None)[0]
    result = minimize(
        lambda v: 0.5 * np.sum((v[:k] - target) ** 2),
        np.r_[cells.values(start_theta) + 1.0, start_theta],
        constraints=[{"type": "ineq", "fun": lambda v: v[:k] - cells.values(v[k:])}],
        method="SLSQP",
        options={"ftol": 1e-14, "maxiter": 1000},
    )
    assert result.success
    return result.x[:k]


def monotone_psi(u: np.ndarray) -> float:
    return float(u @ [1.0, 2.0, 0.5] + u[0] * u[1])


@pytest.mark.parametrize("target", [[0.1, 0.26, 0.16], [0.15, 0.47, 0.26], [0.01, 0.5, 0.5]])
def test_at1_projection_outside_matches_the_exact_projection(target):
    cells, target = quadratic_cells(), np.array(target)
    u_plus = exact_projection(cells, target)
    assert np.any(u_plus > target + 1e-3)  # the target is outside U
    result = project(cells, target, np.zeros(5), steps=2000, lr=0.5)
    assert np.all(result.values <= u_plus + 1e-4)
    assert np.allclose(np.maximum(target, result.values), u_plus, atol=1e-4)
    assert monotone_psi(result.values) <= monotone_psi(u_plus) + 1e-6
    assert result.residual == pytest.approx(float(np.sum((u_plus - target) ** 2)), abs=1e-6)


def test_at1_projection_inside_returns_a_point_below_the_target():
    cells = quadratic_cells()
    least_squares = np.linalg.lstsq(cells.X, cells.y, rcond=None)[0]
    target = cells.values(least_squares) + 0.3  # inside U: the exact projection is the target
    assert np.allclose(exact_projection(cells, target), target, atol=1e-4)
    start = least_squares + 1.0  # a warm start that overshoots
    assert np.any(cells.values(start) > target)
    result = project(cells, target, start, steps=2000, lr=0.5)
    assert result.residual <= 1e-10
    assert np.all(result.values <= target + 1e-4)
    assert monotone_psi(result.values) <= monotone_psi(target)


def test_at1_paper_budget_is_close_but_not_exact():
    """100 Adagrad steps at lr 1.0 (the paper's budget) leave a visible gap on this problem."""
    cells, target = quadratic_cells(), np.array([0.1, 0.26, 0.16])
    u_plus = exact_projection(cells, target)
    gap = np.max(np.abs(np.maximum(target, project(cells, target, np.zeros(5)).values) - u_plus))
    assert 1e-4 < gap < 0.05


def test_multipliers_make_the_projection_stationary_for_the_weighted_loss():
    """KKT (Lemma 5): the clipped residuals weight the surrogates so that theta+ is stationary."""
    cells = quadratic_cells()
    result = project(cells, np.array([0.1, 0.26, 0.16]), np.zeros(5), steps=4000, lr=0.5)
    assert np.all(result.multipliers > 0)
    assert np.linalg.norm(cells.gradient(result.theta, result.multipliers)) <= 1e-6


# ----------------------------------------------------------------------------------- A-T2
def known_psi_problem(seed: int):
    X, y, cells = cell_data(seed)
    surrogates = CellSurrogates(X, y, cells)
    theta = 0.3 * np.random.default_rng(seed + 100).standard_normal(X.shape[1])
    problem = BlackBoxProblem(surrogates, lambda s: geometric_mean(surrogates.values_from_scores(s)))
    return problem, theta, geometric_mean_gradient(surrogates.values(theta))


@pytest.mark.parametrize("sigma", [0.01, 0.02])
def test_at2_linear_interpolation_accuracy(sigma):
    problem, theta, truth = known_psi_problem(0)
    estimate = LinearInterpolation(1000, sigma).estimate(problem, theta, np.random.default_rng(1))
    assert relative_error(estimate.gradient, truth) <= 0.05
    assert estimate.metric_calls == 2000 and estimate.zero_diff_fraction == 0.0


def test_at2_finite_difference_accuracy():
    problem, theta, truth = known_psi_problem(0)
    estimate = FiniteDifference(1000, 0.02).estimate(problem, theta, np.random.default_rng(1))
    assert relative_error(estimate.gradient, truth) <= 0.10
    assert estimate.metric_calls == 1001 and estimate.skipped_draws == 0


@pytest.mark.slow
@pytest.mark.parametrize("estimator", [LinearInterpolation, FiniteDifference])
def test_at2_error_decreases_with_the_number_of_perturbations(estimator):
    errors = []
    for m in (10, 100, 1000):
        per_seed = []
        for seed in range(5):
            problem, theta, truth = known_psi_problem(seed)
            sigma = 0.02 if estimator is FiniteDifference else 0.01
            estimate = estimator(m, sigma).estimate(problem, theta, np.random.default_rng(seed))
            per_seed.append(relative_error(estimate.gradient, truth))
        errors.append(np.mean(per_seed))
    assert errors[0] >= errors[1] >= errors[2]


def test_finite_difference_perturbation_hits_the_surrogate_targets():
    problem, theta, _ = known_psi_problem(0)
    cells = problem.surrogates
    scores = cells.X @ theta
    targets = cells.values(theta)[:, None] * np.array([[0.5, 1.0, 2.0]])
    perturbed = cells.perturb_scores(np.repeat(scores[:, None], 3, 1), targets)
    assert np.allclose(cells.values_from_scores(perturbed), targets, rtol=1e-10)


@pytest.mark.slow
def test_two_step_estimates_the_smoothed_gradient():
    """Alg. 4 on psi(u) = max(u): the smoothed gradient is a probability vector (sums to 1)."""
    X, y, cells = cell_data(3)
    surrogates = CellSurrogates(X, y, cells)
    problem = BlackBoxProblem(surrogates, lambda s: float(surrogates.values_from_scores(s).max()))
    estimator = TwoStepFiniteDifference(2000, sigma=0.05, sigma2=0.01)
    estimate = estimator.estimate(problem, np.zeros(11), np.random.default_rng(0))
    # at theta = 0 every cell loss is log 2: by symmetry each coordinate gets ~1/4
    assert estimate.gradient.sum() == pytest.approx(1.0, abs=0.1)
    assert np.allclose(estimate.gradient, 0.25, atol=0.08)


# ----------------------------------------------------------------------------------- A-T3 / A-T5
def soft_max_problem():
    X, y, cells = cell_data(0, n=1000, d=6)
    surrogates = CellSurrogates(X, y, cells)
    tau = 0.1
    psi = lambda u: float(tau * np.log(np.mean(np.exp(u / tau))))  # noqa: E731

    def psi_gradient(u):
        weights = np.exp((u - u.max()) / tau)
        return weights / weights.sum()

    return BlackBoxProblem(surrogates, lambda s: psi(surrogates.values_from_scores(s))), psi_gradient


def final_metric(problem, estimator, steps: int) -> float:
    pgd = SurrogatePGD(problem, estimator, eta=0.05, seed=1)
    pgd.run(steps)
    return problem.metric_at(pgd.theta)


@pytest.mark.slow
def test_at3_black_box_matches_formula_aware():
    problem, psi_gradient = soft_max_problem()
    formula_aware = final_metric(problem, ExactGradient(psi_gradient), 40)
    black_box = final_metric(problem, LinearInterpolation(10, 0.02), 40)
    assert abs(black_box - formula_aware) <= 0.01
    assert formula_aware < problem.metric_at(np.zeros(6)) - 0.2  # both moved far from the start


@pytest.mark.slow
def test_at5_ten_perturbations_are_enough():
    problem, _ = soft_max_problem()
    few = final_metric(problem, LinearInterpolation(10, 0.02), 12)
    many = final_metric(problem, LinearInterpolation(1000, 0.02), 12)
    assert abs(few - many) <= 0.005


# ----------------------------------------------------------------------------------- A-T7
def dead_zone_problem():
    X, y, cells = cell_data(4)
    surrogates = CellSurrogates(X, y, cells)
    error = lambda s: float(np.mean(np.sign(s) != y))  # noqa: E731  piecewise constant
    start = np.zeros(X.shape[1])
    start[-1] = -2.0  # every score is -2: all negative
    return BlackBoxProblem(surrogates, error), start


def test_at7_dead_zone_is_detected_and_skipped():
    problem, start = dead_zone_problem()
    estimate = LinearInterpolation(20, 0.1).estimate(problem, start, np.random.default_rng(0))
    assert estimate.zero_diff_fraction == 1.0 and estimate.dead_zone
    pgd = SurrogatePGD(problem, LinearInterpolation(20, 0.1), dead_zone="skip", theta0=start)
    report = pgd.step()
    assert report.dead_zone and report.skipped and report.projection is None
    assert not report.gradient.any()
    assert np.array_equal(pgd.theta, start)


def test_at7_dead_zone_raises_sigma_until_the_metric_moves():
    problem, start = dead_zone_problem()
    pgd = SurrogatePGD(problem, LinearInterpolation(20, 0.1), dead_zone="raise_sigma", max_sigma_raises=6, theta0=start)
    report = pgd.step()
    assert report.sigma_raises >= 1 and report.sigma == pytest.approx(0.1 * 2**report.sigma_raises)
    assert not report.dead_zone and not report.skipped and report.estimate.zero_diff_fraction < 1.0
    assert report.gradient.any() and not np.array_equal(pgd.theta, start)
    assert pgd.sigma == report.sigma  # kept for the next steps


def test_at7_dead_zone_skips_when_raises_are_exhausted():
    problem, start = dead_zone_problem()
    pgd = SurrogatePGD(problem, LinearInterpolation(20, 0.1), max_sigma_raises=0, theta0=start)
    report = pgd.step()
    assert report.sigma_raises == 0 and report.dead_zone and report.skipped
    assert np.array_equal(pgd.theta, start)


def test_no_step_is_ever_taken_with_a_zero_gradient():
    problem, start = dead_zone_problem()
    pgd = SurrogatePGD(problem, LinearInterpolation(10, 0.1), max_sigma_raises=4, theta0=start, eta=0.5)
    for report in pgd.run(10):
        assert report.skipped or report.gradient.any()
        assert report.skipped == (report.projection is None)


def test_truncation_replaces_large_estimates_by_a_skip():
    problem, psi_gradient = soft_max_problem()
    pgd = SurrogatePGD(problem, ExactGradient(lambda u: 10 * psi_gradient(u)), lipschitz=1.0)
    report = pgd.step()
    assert report.truncated and report.skipped and np.array_equal(pgd.theta, np.zeros(6))


# ----------------------------------------------------------------------------------- A-T9
@pytest.mark.slow
def test_at9_monotone_psi_gives_non_negative_estimates():
    components, reported = [], []
    for seed in range(6):
        problem, theta, _ = known_psi_problem(seed)
        estimate = LinearInterpolation(1000, 0.02).estimate(problem, theta, np.random.default_rng(seed))
        components.extend(estimate.gradient)
        reported.append(estimate.negative_fraction)
        assert estimate.negative_fraction == np.mean(estimate.gradient < 0)
    assert np.mean(np.array(components) >= 0) >= 0.95
    assert np.mean(reported) <= 0.05


def test_at9_decreasing_psi_is_flagged():
    """The diagnostic can fail: a metric that improves with a surrogate gives negative components."""
    problem, theta, _ = known_psi_problem(0)
    surrogates = problem.surrogates
    flipped = BlackBoxProblem(surrogates, lambda s: -geometric_mean(surrogates.values_from_scores(s)))
    assert LinearInterpolation(200, 0.02).estimate(flipped, theta, np.random.default_rng(0)).negative_fraction == 1.0


def test_clip_negative_uses_only_non_negative_components():
    problem, theta, _ = known_psi_problem(0)
    surrogates = problem.surrogates
    flipped = BlackBoxProblem(surrogates, lambda s: -geometric_mean(surrogates.values_from_scores(s)))
    report = SurrogatePGD(flipped, LinearInterpolation(50, 0.02), clip_negative=True, theta0=theta).step()
    assert report.estimate.negative_fraction == 1.0 and not report.gradient.any() and report.skipped is False


# ----------------------------------------------------------------------------------- validation
def test_invalid_inputs_name_the_argument():
    X, y, cells = cell_data(0)
    with pytest.raises(ValueError, match="loss must be one of"):
        CellSurrogates(X, y, cells, loss="cubic")
    with pytest.raises(ValueError, match="y must be -1 or"):
        CellSurrogates(X, np.abs(y) * 2, cells)
    with pytest.raises(ValueError, match="cells must cover 0..4"):
        CellSurrogates(X, y, cells, n_cells=5)
    surrogates = CellSurrogates(X, y, cells)
    with pytest.raises(ValueError, match="metric_features must be a finite"):
        BlackBoxProblem(surrogates, np.mean, metric_features=np.ones((3, 2)))
    separate = BlackBoxProblem(surrogates, np.mean, metric_features=X[:10])
    with pytest.raises(ValueError, match="metric on the surrogates' sample"):
        FiniteDifference().estimate(separate, np.zeros(11), np.random.default_rng(0))
    with pytest.raises(ValueError, match="dead_zone must be one of"):
        SurrogatePGD(separate, LinearInterpolation(), dead_zone="ignore")
    with pytest.raises(ValueError, match="sigma must be a finite number > 0, got 0"):
        LinearInterpolation(sigma=0)
    with pytest.raises(ValueError, match="targets must be > 0"):
        surrogates.perturb_scores(X @ np.zeros(11), np.zeros(4))
