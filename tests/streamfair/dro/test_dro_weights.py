"""Projections and exact worst-case weight oracles against closed forms and independent solvers.

Covered: projections, CVaR, constrained and penalized chi-square, KL / softmax, capped softmax, the
generic root finder of the entropic duals (Lemmas 4 and 5 of Carmon & Hausler), and a constrained
chi-square ball as the minimum over penalties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog, minimize, minimize_scalar
from scipy.special import lambertw

from streamfair.dro import (
    capped_softmax,
    chi_square,
    chi_square_divergence,
    chi_square_penalized,
    cvar,
    group_max,
    group_means,
    group_softmax,
    kl_constrained,
    kl_divergence,
    kl_penalized,
    log_sum_exp,
    project_capped_simplex,
    project_simplex,
    softmax,
)
from streamfair.dro.entropic import EntropicChiSquare, EntropicCVaR, EntropicKL, EntropicMaxLoss, solve_threshold


def random_losses(rng, n, ties=False):
    losses = rng.normal(size=n) * rng.uniform(0.1, 10)
    return np.round(losses) if ties else losses


def in_simplex(q, atol=1e-12):
    return q.min() >= 0 and abs(q.sum() - 1.0) <= atol


# ---------------------------------------------------------------- projections
def test_simplex_projection_variational_inequality_and_idempotence():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 51))
        v = rng.normal(size=n) * rng.uniform(0, 10)
        q = project_simplex(v)
        assert in_simplex(q)
        for p in rng.dirichlet(np.ones(n), size=20):
            assert (v - q) @ (p - q) <= 1e-10
        p = rng.dirichlet(np.ones(n))
        np.testing.assert_allclose(project_simplex(p), p, atol=1e-15)


def test_capped_simplex_projection_variational_inequality_and_qp():
    rng = np.random.default_rng(2)
    for case in range(200):
        n = int(rng.integers(2, 51))
        cap = rng.uniform(1.0 / n, 1.0) if case % 10 else 1.0 / n
        v = rng.normal(size=n) * rng.uniform(0, 10)
        q = project_capped_simplex(v, cap)
        assert in_simplex(q) and q.max() <= cap + 1e-15
        for d in rng.dirichlet(np.ones(n), size=20):  # feasible points: pull towards uniform until capped
            t = 1.0 if d.max() <= cap else (cap - 1.0 / n) / (d.max() - 1.0 / n)
            p = (1 - t) / n + t * d
            assert (v - q) @ (p - q) <= 1e-10
        np.testing.assert_allclose(project_capped_simplex(q, cap), q, atol=1e-12)
    with pytest.raises(ValueError, match="cap"):
        project_capped_simplex(np.zeros(4), 0.2)


# ---------------------------------------------------------------- CVaR
def lp_max(losses, cap):
    res = linprog(-losses, A_eq=np.ones((1, losses.size)), b_eq=[1.0], bounds=[(0, cap)] * losses.size, method="highs")
    assert res.status == 0
    return -res.fun


def rockafellar_uryasev(losses, alpha):
    return min(eta + np.maximum(losses - eta, 0).sum() / (alpha * losses.size) for eta in losses)


@pytest.mark.slow
def test_cvar_weights_match_lp_and_rockafellar_uryasev_dual():
    rng = np.random.default_rng(3)
    for case in range(200):
        n = int(rng.integers(1, 40))
        losses = random_losses(rng, n, ties=case % 2 == 0)
        alphas = [1.0 / n, 1.0, rng.uniform(1.0 / n, 1.0), int(rng.integers(1, n + 1)) / n]
        for alpha in alphas:
            worst = cvar(losses, alpha)
            cap = 1.0 / (alpha * n)
            assert in_simplex(worst.weights) and worst.weights.max() <= cap + 1e-15
            assert worst.value == pytest.approx(lp_max(losses, cap), abs=1e-9)
            assert worst.value == pytest.approx(rockafellar_uryasev(losses, alpha), abs=1e-9)
            dual = worst.dual + np.maximum(losses - worst.dual, 0).sum() / (alpha * n)
            assert dual == pytest.approx(worst.value, abs=1e-9)  # the returned VaR attains the dual
    with pytest.raises(ValueError, match="alpha"):
        cvar(np.zeros(4), 0.2)


# ---------------------------------------------------------------- chi-square constrained
def chi2_dual(losses, rho):
    n = losses.size

    def f(eta):
        return eta + math.sqrt((1 + 2 * rho) / n) * np.linalg.norm(np.maximum(losses - eta, 0))

    span = losses.max() - losses.min() + 1.0
    res = minimize_scalar(f, bounds=(losses.min() - 10 * span, losses.max()), method="bounded",
                          options={"xatol": 1e-13})
    return min(res.fun, f(losses.max()))


def slsqp_chi2(losses, rho, start):
    n = losses.size
    cons = [
        {"type": "eq", "fun": lambda q: q.sum() - 1.0, "jac": lambda q: np.ones(n)},
        {"type": "ineq", "fun": lambda q: rho - chi_square_divergence(q), "jac": lambda q: 1.0 - n * q},
    ]
    res = minimize(lambda q: -q @ losses, start, jac=lambda q: -losses, bounds=[(0, 1)] * n, constraints=cons,
                   method="SLSQP", options={"ftol": 1e-12, "maxiter": 500})
    return -res.fun


def test_chi_square_weights_feasible_tight_and_dual_optimal():
    rng = np.random.default_rng(4)
    tight_cases = 0
    for case in range(100):
        n = int(rng.integers(2, 40))
        losses = random_losses(rng, n, ties=case % 3 == 0)
        rho = float(rng.choice([0.01, 0.1, 1.0, 5.0, n / 4]))
        worst = chi_square(losses, rho)
        q = worst.weights
        assert in_simplex(q, 1e-12)
        assert chi_square_divergence(q) <= rho + 1e-8
        top = losses == losses.max()
        if chi_square_divergence(top / top.sum()) > rho:  # the vertex is infeasible: tight
            tight_cases += 1
            assert chi_square_divergence(q) == pytest.approx(rho, rel=1e-6)
            w = np.maximum(losses - worst.dual, 0)
            np.testing.assert_allclose(q, w / w.sum(), atol=1e-9)
        assert worst.value == pytest.approx(chi2_dual(losses, rho), abs=1e-7 * max(1, np.abs(losses).max()))
        if case % 4 == 0 and n <= 20:  # SLSQP is slow; a sample of small cases
            assert worst.value >= slsqp_chi2(losses, rho, np.full(n, 1.0 / n)) - 1e-6 * max(1, np.abs(losses).max())
    assert tight_cases > 50
    np.testing.assert_allclose(chi_square(np.full(7, 2.5), 0.3).weights, np.full(7, 1 / 7))
    losses = np.array([0.3, 1.2, -0.4])
    np.testing.assert_allclose(chi_square(losses, rho=1.0).weights, [0, 1, 0])  # N <= 1 + 2 rho: argmax


# ---------------------------------------------------------------- chi-square penalized
def chi_square_penalized_dual(eta, losses, lam):
    n = losses.size
    return eta + lam / 2 + np.sum(np.maximum(losses - eta, 0) ** 2) / (2 * lam * n)


def test_chi_square_penalized_projection_and_dual():
    rng = np.random.default_rng(5)
    for _ in range(100):
        n = int(rng.integers(1, 40))
        losses = random_losses(rng, n)
        lam = float(rng.choice([0.05, 0.5, 3.0]))
        worst = chi_square_penalized(losses, lam)
        np.testing.assert_allclose(worst.weights, project_simplex(1.0 / n + losses / (lam * n)), atol=1e-12)
        res = minimize_scalar(chi_square_penalized_dual, args=(losses, lam),
                              bounds=(losses.min() - 10 * lam - 10, losses.max() + 1), method="bounded",
                              options={"xatol": 1e-12})
        assert worst.value == pytest.approx(res.fun, abs=1e-7)
        assert chi_square_penalized_dual(worst.dual, losses, lam) == pytest.approx(worst.value, abs=1e-9)
        for p in rng.dirichlet(np.ones(n), size=10):  # primal optimality
            assert p @ losses - lam * chi_square_divergence(p) <= worst.value + 1e-12


# ---------------------------------------------------------------- KL / softmax
@pytest.mark.parametrize("ratio", [1e4, 1e5, 1e7])
def test_softmax_oracles_do_not_overflow(ratio):
    rng = np.random.default_rng(6)
    losses = rng.uniform(0, 1, 50)
    tau = 1.0 / ratio
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for worst in (kl_penalized(losses, tau), group_softmax(losses, tau)):
            assert np.all(np.isfinite(worst.weights)) and math.isfinite(worst.value)
            assert in_simplex(worst.weights, 1e-12)
        value = group_softmax(losses, tau).value
        assert losses.max() <= value <= losses.max() + tau * math.log(losses.size)  # Lemma 11 / 18 sandwich
    assert math.isfinite(log_sum_exp(np.array([1e308, 1e308])))


def test_group_softmax_within_half_epsilon_of_group_dro():
    rng = np.random.default_rng(7)
    for m in (2, 10, 100):
        groups = np.concatenate([np.arange(m), rng.integers(0, m, 500)])
        losses = rng.exponential(size=groups.size)
        group_losses = group_means(losses, groups, m)
        assert group_losses[0] == pytest.approx(losses[groups == 0].mean())
        for eps in (1e-1, 1e-3):
            smoothed = group_softmax(group_losses, eps / (2 * math.log(m))).value
            exact = group_max(group_losses).value
            assert exact == group_losses.max()
            assert 0 <= smoothed - exact <= eps / 2


def test_kl_penalized_value_is_the_primal_objective():
    rng = np.random.default_rng(8)
    for _ in range(50):
        losses = random_losses(rng, 20)
        tau = rng.uniform(0.1, 5)
        worst = kl_penalized(losses, tau)
        assert worst.value == pytest.approx(worst.weights @ losses - tau * kl_divergence(worst.weights), abs=1e-10)
        for p in rng.dirichlet(np.ones(20), size=10):
            assert p @ losses - tau * kl_divergence(p) <= worst.value + 1e-12


def kl_dual(log_t, losses, rho):
    n = losses.size
    return math.exp(log_t) * (rho + log_sum_exp(losses / math.exp(log_t)) - math.log(n))


def test_kl_constrained_is_tight_and_matches_dual():
    rng = np.random.default_rng(9)
    for case in range(60):
        n = int(rng.integers(2, 40))
        losses = random_losses(rng, n, ties=case % 4 == 0)
        rho = float(rng.choice([0.01, 0.1, 0.5, 2.0]))
        worst = kl_constrained(losses, rho)
        assert in_simplex(worst.weights, 1e-12)
        n_top = np.count_nonzero(losses == losses.max())
        if math.log(n / n_top) <= rho:
            assert worst.value == losses.max()
            continue
        assert kl_divergence(worst.weights) == pytest.approx(rho, rel=1e-9)
        res = minimize_scalar(
            kl_dual, args=(losses, rho), bracket=(math.log(worst.dual) - 1, math.log(worst.dual) + 1), tol=1e-12
        )
        assert worst.value == pytest.approx(res.fun, abs=1e-8 * max(1, np.abs(losses).max()))


# ---------------------------------------------------------------- capped softmax
def entropic_objective(p, losses, tau):
    positive = p[p > 0]
    return p @ losses - (positive * np.log(positive)).sum() * tau


def test_capped_softmax_constraints_sandwich_limit_and_local_optimality():
    rng = np.random.default_rng(10)
    for case in range(100):
        n = int(rng.integers(2, 40))
        losses = random_losses(rng, n, ties=case % 3 == 0)
        alpha = float(rng.choice([1.0 / n, rng.uniform(1.0 / n, 1), 1.0]))
        tau = float(rng.choice([1e-3, 0.1, 1.0, 10.0]))
        worst = capped_softmax(losses, alpha, tau)
        q, cap = worst.weights, 1.0 / (alpha * n)
        assert in_simplex(q, 1e-12) and q.max() <= cap * (1 + 1e-12)
        exact = cvar(losses, alpha).value
        assert exact - 1e-12 <= worst.value <= exact + tau * math.log(n) + 1e-12
        assert entropic_objective(q, losses, tau) == pytest.approx(worst.value, abs=1e-10)
        for _ in range(20):  # feasible perturbations never improve the regularized objective
            d = rng.normal(size=n)
            d -= d.mean()
            room = np.where(
                d > 0, (cap - q) / np.where(d > 0, d, 1), np.where(d < 0, q / np.where(d < 0, -d, 1), np.inf)
            )
            t = min(1e-3, float(room.min()))
            if t <= 0:  # q sits on a face that d leaves
                continue
            assert entropic_objective(q + t * d, losses, tau) <= entropic_objective(q, losses, tau) + 1e-12
    losses = rng.normal(size=30)
    assert capped_softmax(losses, 0.2, 1e-9).value == pytest.approx(cvar(losses, 0.2).value, abs=1e-6)


# ---------------------------------------------------------------- generic root finder, Lemmas 4 and 5
@pytest.mark.slow
def test_root_finder_matches_closed_forms():
    rng = np.random.default_rng(11)
    for _ in range(60):
        n = int(rng.integers(2, 60))
        losses = random_losses(rng, n)
        eps = float(rng.choice([1e-3, 0.1, 1.0]))
        alpha = float(rng.uniform(1.0 / n, 1))
        eta, q = solve_threshold(EntropicCVaR(alpha, n, eps), losses)
        assert abs(q.sum() - 1.0) <= 1e-10
        closed = capped_softmax(losses, alpha, eps)
        np.testing.assert_allclose(q, closed.weights, atol=1e-9)
        assert EntropicCVaR(alpha, n, eps).dual_objective(losses, eta) == pytest.approx(closed.value, abs=1e-8)

        eta, q = solve_threshold(EntropicMaxLoss(eps), losses)
        np.testing.assert_allclose(q, softmax(losses / eps), atol=1e-10)
        assert eta == pytest.approx(eps * log_sum_exp(losses / eps) - eps, abs=1e-9 * max(1, abs(eta)))

        lam = float(rng.uniform(0.1, 3))
        penalty = EntropicChiSquare(lam, n, eps)
        eta, q = solve_threshold(penalty, losses)
        assert abs(q.sum() - 1.0) <= 1e-10
        beta = lam * n
        z = np.log(beta / eps) + (losses - eta + beta / n) / eps - 1
        small = z < 600
        np.testing.assert_allclose(q[small], (eps / beta) * lambertw(np.exp(z[small])).real, rtol=1e-10, atol=1e-300)
        primal = q @ losses - beta / 2 * np.sum((q - 1 / n) ** 2) - eps * np.sum(q * penalty.log_weight(losses - eta))
        assert penalty.dual_objective(losses, eta) == pytest.approx(primal, abs=1e-8 * max(1, np.abs(losses).max()))


def test_lambert_solve_does_not_overflow():
    penalty = EntropicChiSquare(lam=1.0, n=10, eps=1e-3)
    v = np.array([-50.0, 0.0, 5.0, 800.0])
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        log_w = penalty.log_weight(v) - math.log(penalty.eps / penalty.beta)
    z = math.log(penalty.beta / penalty.eps) + (v + penalty.beta / penalty.n) / penalty.eps - 1
    np.testing.assert_allclose(np.exp(log_w) + log_w, z, rtol=1e-12)  # w + log w = z, also for z = 8e5


@pytest.mark.parametrize(
    "penalty",
    [EntropicCVaR(0.1, 50, 0.05), EntropicChiSquare(0.5, 50, 0.05), EntropicKL(0.3, 50, 0.05), EntropicMaxLoss(0.05)],
)
def test_lemma_4_log_weight_is_lipschitz(penalty):
    v = np.linspace(-5, 5, 20001)
    slopes = np.diff(penalty.log_weight(v)) / np.diff(v)
    assert slopes.max() <= (1 + 1e-6) / penalty.eps
    assert slopes.min() >= -1e-9


@pytest.mark.slow
@pytest.mark.parametrize(
    "penalty",
    [EntropicCVaR(0.1, 30, 0.05), EntropicChiSquare(0.5, 30, 0.05), EntropicKL(0.3, 30, 0.05), EntropicMaxLoss(0.05)],
)
def test_lemma_5_threshold_moves_less_than_the_losses_and_warm_start(penalty):
    rng = np.random.default_rng(12)
    for _ in range(200):
        losses = rng.uniform(0, 1, 30)
        other = losses + rng.normal(size=30) * rng.uniform(0, 0.3)
        eta, _ = solve_threshold(penalty, losses)
        eta_other, _ = solve_threshold(penalty, other)
        shift = np.abs(losses - other).max()
        assert abs(eta - eta_other) <= shift + 1e-12
        eta_warm, q = solve_threshold(penalty, other, warm_start=(eta, losses))
        assert abs(eta_warm - eta) <= shift + 1e-12  # the Lemma 5 bracket contains the new root
        assert eta_warm == pytest.approx(eta_other, abs=1e-10) and abs(q.sum() - 1) <= 1e-10


PENALIZED = [
    # (regularized penalty, unregularized value L_psi, psi(q) summed)
    (EntropicCVaR(0.2, 40, 0.03), lambda losses: cvar(losses, 0.2).value, lambda q: 0.0),
    (
        EntropicChiSquare(0.4, 40, 0.03),
        lambda losses: chi_square_penalized(losses, 0.4).value,
        lambda q: 0.4 * chi_square_divergence(q),
    ),
    (EntropicKL(0.25, 40, 0.03), lambda losses: kl_penalized(losses, 0.25).value, lambda q: 0.25 * kl_divergence(q)),
]


@pytest.mark.slow
@pytest.mark.parametrize("penalty, value, psi", PENALIZED, ids=["cvar", "chi_square", "kl"])
def test_regularized_dual_equals_primal_and_lemma_18_sandwich(penalty, value, psi):
    """min_eta Upsilon_eps = max_q q.l - psi(q) - eps' sum q log q, attained at q = psi_eps*'(l - eta*),
    and 0 <= L_{psi,eps} - L_psi <= eps' log N (Lemma 18)."""
    rng = np.random.default_rng(21)
    for _ in range(50):
        losses = rng.exponential(size=40) * rng.uniform(0.1, 3)
        eta, q = solve_threshold(penalty, losses)
        regularized = penalty.dual_objective(losses, eta)
        entropy_term = penalty.eps * float(np.sum(q * np.log(np.maximum(q, 1e-300))))
        assert regularized == pytest.approx(float(q @ losses) - psi(q) - entropy_term, abs=1e-9)
        for other in (eta - 0.01, eta + 0.01):  # eta* minimizes the dual
            assert penalty.dual_objective(losses, other) >= regularized - 1e-12
        assert -1e-9 <= regularized - value(losses) <= penalty.eps * math.log(40) + 1e-9


def test_entropic_kl_is_a_softmax_at_the_summed_temperature():
    losses = np.array([0.0, 1.0, 5.0, 300.0])
    penalty = EntropicKL(temperature=0.5, n=4, eps=0.01)
    eta, q = solve_threshold(penalty, losses)
    np.testing.assert_allclose(q, softmax(losses / 0.51), atol=1e-12)
    assert penalty.dual_objective(losses, eta) == pytest.approx(0.51 * log_sum_exp(losses / 0.51) - 0.5 * math.log(4))


def test_validation_names_the_argument():
    with pytest.raises(ValueError, match="losses"):
        cvar([1.0, float("nan")], 0.5)
    with pytest.raises(ValueError, match="rho"):
        chi_square([1.0, 2.0], -1.0)
    with pytest.raises(ValueError, match="temperature"):
        kl_penalized([1.0, 2.0], 0.0)
    with pytest.raises(ValueError, match="groups"):
        group_means([1.0, 2.0], [0, 2], 2)
    with pytest.raises(ValueError, match="empty"):
        group_means([1.0, 2.0], [0, 0], 2)


# ---------------------------------------------------------------- constrained = min over penalties
def nu_reduction(nu, losses, rho):
    return nu + chi_square_penalized(losses, nu / rho).value


@pytest.mark.slow
def test_nu_reduction_reproduces_the_constrained_chi_square_optimum():
    """Paper 2.9: L_f-div = min_nu nu + L_{nu f}; with f = (x - 1)^2 / (2 rho) the penalty is lam = nu / rho."""
    rng = np.random.default_rng(14)
    for _ in range(30):
        n = int(rng.integers(3, 40))
        losses = rng.uniform(0, 1, n)
        rho = float(rng.choice([0.05, 0.5, 2.0]))
        grid = np.geomspace(1e-6, 10.0, 200)  # h is convex and increasing for nu > B_l
        values = np.array([nu_reduction(nu, losses, rho) for nu in grid])
        k = int(np.argmin(values))
        res = minimize_scalar(
            nu_reduction,
            args=(losses, rho),
            bounds=(grid[max(k - 1, 0)], grid[min(k + 1, grid.size - 1)]),
            method="bounded",
            options={"xatol": 1e-12},
        )
        assert res.fun == pytest.approx(chi_square(losses, rho).value, abs=1e-7)
        assert values.min() >= chi_square(losses, rho).value - 1e-12  # weak duality on the whole grid
