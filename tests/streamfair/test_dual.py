"""Acceptance tests of the pure dual math of Chzhen, Hebiri & Taturyan (NeurIPS 2024).

Everything is checked on a *finite population*: ``X`` takes ``n`` fixed values with weights ``w_i``,
``p = sum_i w_i tau(x_i)``, so ``F``, its gradient, the unfairness and the risks are exact finite sums
and can be compared with independent computations (finite differences, the joint law of
``(Y_hat, S)``, a linear program).
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.optimize import linprog

from streamfair import dual


def population(n, k, half_size, bound=1.0, seed=0, uniform=False):
    """A finite population: ``(t, r, weights, p, tau, eta, atoms)`` with ``p = E[tau]``."""
    rng = np.random.default_rng(seed)
    eta = rng.uniform(-bound, bound, n)
    tau = rng.dirichlet(np.full(k, 0.7), n)
    weights = np.full(n, 1.0 / n) if uniform else rng.dirichlet(np.full(n, 3.0))
    p = weights @ tau
    atoms = dual.regression_grid(bound, half_size)
    return dual.group_features(tau, p), dual.squared_costs(eta, atoms), weights, p, tau, eta, atoms


def random_dual(m, k, seed, scale=1.0):
    return scale * np.random.default_rng(seed).uniform(0.0, 1.0, (2, m, k))


def naive_softmax(z):
    """Softmax written without the library (max-subtracted)."""
    e = np.exp(z - z.max())
    return e / e.sum()


# ---------------------------------------------------------------- grid
@pytest.mark.parametrize("low,high,half_size", [(0.0, 1.0, 50), (0.0, 30.0, 50), (22.0, 84.0, 50), (-1.0, 1.0, 7)])
def test_range_grid_is_even_with_the_ends_atoms_of_short_decimals(low, high, half_size):
    atoms = dual.range_grid(low, high, half_size)
    exact = [low + (high - low) * k / (2 * half_size) for k in range(2 * half_size + 1)]
    np.testing.assert_allclose(atoms, exact, rtol=0, atol=1e-13 * max(abs(low), abs(high)))
    assert atoms[0] == low and atoms[-1] == high and atoms.size == 2 * half_size + 1
    if half_size == 50:  # each atom is the nearest double to its decimal: 0.01, 0.68, not 0.010000000000000009
        assert atoms.tolist() == [round(v, 10) for v in atoms]
    if low == -high == 1.0:
        assert np.array_equal(atoms, dual.regression_grid(1.0, half_size))  # the paper's grid, bit for bit


def test_grid_has_2L_plus_1_symmetric_atoms():
    atoms = dual.regression_grid(2.0, 3)
    np.testing.assert_allclose(atoms, [-2, -4 / 3, -2 / 3, 0, 2 / 3, 4 / 3, 2], rtol=0, atol=1e-15)
    assert atoms.size == 7 and atoms[3] == 0.0 and atoms[0] == -2.0 and atoms[-1] == 2.0
    t, r, *_ = population(5, 3, 3, bound=2.0)
    assert r.shape == (5, 7) and t.shape == (5, 3)
    # the dual (Lambda, V) has shape 2 x (2L+1) x K: the gradient says so
    g = dual.gradient(np.zeros((2, 7, 3)), t, r, np.full(5, 0.2), np.full(3, 0.1), 1.0)
    assert g.shape == (2, 7, 3)


def test_policy_and_features_follow_the_paper_formulas():
    """pi(l|x) = softmax_l(beta(<lambda_l - nu_l, t> - r_l)), t = 1 - tau/p, r_l = (eta - lB/L)^2."""
    t, r, _, p, tau, eta, atoms = population(6, 3, 4, seed=3)
    w = random_dual(9, 3, seed=4)
    beta = 3.5
    pi = dual.policy(w, t, r, beta)
    for i in range(6):
        t_i = np.array([1.0 - tau[i, s] / p[s] for s in range(3)])
        r_i = np.array([(eta[i] - atom) ** 2 for atom in atoms])
        a = np.array([np.dot(w[0, j] - w[1, j], t_i) - r_i[j] for j in range(9)])
        np.testing.assert_allclose(pi[i], naive_softmax(beta * a), rtol=1e-13, atol=1e-16)


# ---------------------------------------------------------------- finite differences
def test_gradient_matches_central_finite_differences_of_F():
    k, half_size, beta, eps = 3, 5, 7.0, np.array([0.01, 0.02, 0.05])
    t, r, weights, *_ = population(60, k, half_size, seed=1, uniform=True)
    w = random_dual(2 * half_size + 1, k, seed=2)
    grad = dual.gradient(w, t, r, weights, eps, beta)
    h = 1e-6
    numeric = np.empty_like(w)
    for index in np.ndindex(w.shape):
        up, down = w.copy(), w.copy()
        up[index] += h
        down[index] -= h
        f_up, f_down = dual.objective(up, t, r, weights, eps, beta), dual.objective(down, t, r, weights, eps, beta)
        numeric[index] = (f_up - f_down) / (2 * h)
    assert np.abs(numeric - grad).max() < 1e-8


def test_objective_is_the_mean_log_sum_exp_plus_the_slack_term():
    k, half_size, beta = 2, 3, 4.0
    t, r, weights, *_ = population(7, k, half_size, seed=5)
    w, eps = random_dual(7, k, seed=6), np.array([0.1, 0.3])
    expected = 0.0
    for i in range(7):
        a = (w[0] - w[1]) @ t[i] - r[i]
        expected += weights[i] * math.log(sum(math.exp(beta * v) for v in a)) / beta
    expected += sum(np.dot(w[0, j] + w[1, j], eps) for j in range(7))
    assert dual.objective(w, t, r, weights, eps, beta) == pytest.approx(expected, rel=1e-13)


# ---------------------------------------------------------------- stochastic gradient
def test_one_sample_gradients_average_to_the_exact_gradient():
    k, half_size, beta, eps = 3, 4, 9.0, np.array([0.0, 0.01, 0.2])
    t, r, weights, *_ = population(50, k, half_size, seed=7)
    w = random_dual(2 * half_size + 1, k, seed=8, scale=2.0)
    mean = sum(weights[i] * dual.stochastic_gradient(w, t[i], r[i], eps, beta) for i in range(50))
    assert np.abs(mean - dual.gradient(w, t, r, weights, eps, beta)).max() < 1e-12


@pytest.mark.parametrize("seed", range(4))
def test_stochastic_gradient_variance_is_bounded_by_sigma2(seed):
    """Lemma 4.1, with the factor 2 its proof drops: E||g - grad F||^2 <= 2 E||t||^2 <= 2 sigma^2.

    ``g - grad F = (G - E G, -(G - E G))`` with ``G = pi t^T`` repeats the same block for ``Lambda``
    and ``V``, so the variance is ``2 E||G - E G||^2 <= 2 E[sum_l pi_l^2 ||t||^2] <= 2 E||t||^2``,
    and Bhatia-Davis gives ``E t_s^2 <= (1 - p_s) / p_s``.  The paper states ``<= sigma^2``.
    """
    k, half_size = 3, 4
    t, r, weights, p, *_ = population(40, k, half_size, seed=10 + seed)
    sigma2 = float(np.sum((1 - p) / p))
    second_moment = float(weights @ np.sum(t**2, axis=1))
    assert second_moment <= sigma2
    for scale, beta in ((0.0, 1.0), (1.0, 5.0), (30.0, 50.0)):
        w = random_dual(2 * half_size + 1, k, seed=seed, scale=scale)
        eps = np.full(k, 0.05)
        exact = dual.gradient(w, t, r, weights, eps, beta)
        variance = sum(
            weights[i] * np.sum((dual.stochastic_gradient(w, t[i], r[i], eps, beta) - exact) ** 2) for i in range(40)
        )
        pi = dual.policy(w, t, r, beta)
        block = exact[0] - eps  # E[pi t^T]
        twice_var_g = 2 * sum(weights[i] * np.sum((np.outer(pi[i], t[i]) - block) ** 2) for i in range(40))
        assert variance == pytest.approx(twice_var_g, rel=1e-12)
        assert 0.0 < variance <= 2 * weights @ (np.sum(pi**2, axis=1) * np.sum(t**2, axis=1)) <= 2 * second_moment


def test_lemma_4_1_as_printed_fails_by_a_factor_two_when_s_is_a_function_of_x():
    """A deterministic S (tau one-hot) and a one-hot policy on one atom reach the variance 2 sigma^2."""
    n, k = 10, 2
    tau = np.eye(k)[np.arange(n) % k]
    weights = np.full(n, 1 / n)
    p = weights @ tau
    t = dual.group_features(tau, p)
    r = dual.squared_costs(np.zeros(n), dual.regression_grid(1.0, 2))  # every eta on the atom 0
    w = np.zeros((2, 5, k))
    eps = np.zeros(k)
    exact = dual.gradient(w, t, r, weights, eps, 1e3)
    variance = sum(
        weights[i] * np.sum((dual.stochastic_gradient(w, t[i], r[i], eps, 1e3) - exact) ** 2) for i in range(n)
    )
    sigma2 = float(np.sum((1 - p) / p))
    assert variance == pytest.approx(2 * sigma2, rel=1e-9)


# ---------------------------------------------------------------- simplex, invariances, overflow
def test_policy_is_a_probability_vector_and_invariant_to_cost_shifts():
    k, half_size, beta = 3, 6, 25.0
    t, r, *_ = population(30, k, half_size, seed=12)
    w = random_dual(13, k, seed=13, scale=3.0)
    pi = dual.policy(w, t, r, beta)
    assert np.all(pi >= 0) and np.abs(pi.sum(axis=1) - 1).max() < 1e-12
    shift = np.random.default_rng(0).normal(0, 5, (30, 1))
    np.testing.assert_allclose(dual.policy(w, t, r + shift, beta), pi, rtol=1e-9, atol=1e-13)


def test_policy_is_invariant_to_a_consistent_relabelling_of_the_groups():
    k, half_size, beta = 4, 3, 6.0
    t, r, weights, p, tau, eta, atoms = population(20, k, half_size, seed=14)
    w, eps = random_dual(7, k, seed=15), np.array([0.01, 0.02, 0.03, 0.04])
    perm = np.array([2, 0, 3, 1])
    t_perm = dual.group_features(tau[:, perm], p[perm])
    w_perm = w[:, :, perm]
    np.testing.assert_allclose(dual.policy(w_perm, t_perm, r, beta), dual.policy(w, t, r, beta), rtol=1e-12, atol=1e-15)
    grad = dual.gradient(w, t, r, weights, eps, beta)
    np.testing.assert_allclose(dual.gradient(w_perm, t_perm, r, weights, eps[perm], beta), grad[:, :, perm], atol=1e-14)


def test_no_overflow_at_huge_beta_and_large_duals():
    k, half_size, beta = 2, 10, 1e6
    t, r, weights, *_ = population(25, k, half_size, seed=16)
    w = random_dual(21, k, seed=17)
    w *= 1e3 / np.linalg.norm(w[0] - w[1])  # ||D|| = 1e3
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # underflow is harmless
        pi = dual.policy(w, t, r, beta)
        value = dual.objective(w, t, r, weights, np.full(k, 0.01), beta)
        grad = dual.gradient(w, t, r, weights, np.full(k, 0.01), beta)
    assert np.all(np.isfinite(pi)) and np.abs(pi.sum(axis=1) - 1).max() < 1e-12
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    # at this beta the policy is numerically one-hot on the best score
    scores = t @ (w[0] - w[1]).T - r
    assert np.array_equal(pi.argmax(axis=1), scores.argmax(axis=1))
    assert pi.max(axis=1).min() > 1 - 1e-12


# ---------------------------------------------------------------- initialization
def test_zero_dual_puts_most_mass_on_the_nearest_grid_point():
    bound, half_size = 1.5, 7
    atoms = dual.regression_grid(bound, half_size)
    rng = np.random.default_rng(18)
    eta = rng.uniform(-2.5, 2.5, 400)  # partly outside [-B, B]: the policy is fed the clipped value
    clipped = np.clip(eta, -bound, bound)
    distance = np.abs(clipped[:, None] - atoms)
    costs = np.sort(distance**2, axis=1)
    clear = costs[:, 1] - costs[:, 0] > 1e-4  # ignore (near) ties
    assert clear.mean() > 0.95
    r = dual.squared_costs(clipped, atoms)
    t = np.zeros((400, 2))
    previous_mass = None
    for beta in (2.0, 20.0, 200.0, 1e6):
        pi = dual.policy(np.zeros((2, atoms.size, 2)), t, r, beta)
        assert np.array_equal(pi.argmax(axis=1)[clear], distance.argmin(axis=1)[clear])
        mass = pi[np.arange(400), distance.argmin(axis=1)][clear]
        if previous_mass is not None:
            assert np.all(mass >= previous_mass)
        previous_mass = mass
    assert previous_mass.min() > 1 - 1e-12  # beta -> infinity: the Dirac at the nearest atom


# ---------------------------------------------------------------- large eps, independent S
def test_large_eps_makes_zero_a_minimizer():
    t, r, weights, p, *_ = population(30, 3, 4, seed=19)
    eps = np.ones(3)  # eps_s >= 1 already gives grad F(0) >= 0
    for beta in (1.0, 30.0):
        assert dual.gradient(np.zeros((2, 9, 3)), t, r, weights, eps, beta).min() >= 0
    # and eps_s >= max(1, 1/p_s - 1) makes every one-sample gradient >= 0
    eps = np.maximum(1.0, 1.0 / p - 1.0)
    for i in range(30):
        assert dual.stochastic_gradient(np.zeros((2, 9, 3)), t[i], r[i], eps, 30.0).min() >= 0


def test_independent_groups_mean_zero_features_and_zero_unfairness():
    rng = np.random.default_rng(20)
    p = np.array([0.2, 0.5, 0.3])
    tau = np.tile(p, (15, 1))
    t = dual.group_features(tau, p)
    assert np.array_equal(t, np.zeros_like(t))
    r = dual.squared_costs(rng.uniform(-1, 1, 15), dual.regression_grid(1.0, 3))
    gaps = dual.atom_gaps(random_dual(7, 3, seed=1), t, r, np.full(15, 1 / 15), 10.0)
    assert np.array_equal(gaps, np.zeros_like(gaps))


# ---------------------------------------------------------------- unfairness identity
def joint_law_gaps(pi, tau, weights):
    """P(Y_hat = l) - P(Y_hat = l | S = s) from the joint law P(x_i, S = s, Y_hat = l) = w_i tau_is pi_il."""
    n, m = pi.shape
    k = tau.shape[1]
    joint = np.zeros((m, k))
    for i in range(n):
        for s in range(k):
            for j in range(m):
                joint[j, s] += weights[i] * tau[i, s] * pi[i, j]
    p_s = joint.sum(axis=0)
    p_l = joint.sum(axis=1)
    return p_l[:, None] - joint / p_s


def test_atom_gaps_equal_the_unfairness_of_the_joint_law():
    t, r, weights, p, tau, *_ = population(35, 3, 4, seed=21)
    w = random_dual(9, 3, seed=22, scale=4.0)
    beta = 8.0
    gaps = dual.atom_gaps(w, t, r, weights, beta)
    expected = joint_law_gaps(dual.policy(w, t, r, beta), tau, weights)
    assert np.abs(gaps - expected).max() < 1e-12
    assert np.abs(gaps).max() > 1e-3  # a non-trivial unfairness


# ---------------------------------------------------------------- Lemma 3.5, duality gap
@pytest.mark.parametrize("seed", range(3))
def test_lemma_3_5_violation_equals_negative_part_of_gradient(seed):
    k, half_size, beta = 3, 5, 12.0
    t, r, weights, p, tau, *_ = population(40, k, half_size, seed=30 + seed)
    rng = np.random.default_rng(seed)
    w = random_dual(2 * half_size + 1, k, seed=seed, scale=rng.uniform(0.5, 5))
    w[rng.random(w.shape) < 0.3] = 0.0  # some coordinates on the boundary of the orthant
    eps = rng.uniform(0, 0.03, k)
    unfairness = np.abs(joint_law_gaps(dual.policy(w, t, r, beta), tau, weights))
    violation = np.sum(np.maximum(unfairness - eps, 0.0) ** 2)
    grad = dual.gradient(w, t, r, weights, eps, beta)
    negative_part = np.sum(np.maximum(-grad, 0.0) ** 2)
    assert violation > 1e-6
    assert abs(violation - negative_part) <= 1e-10 * violation
    for alpha in (1e-3, 1.0, 1e3):
        mapping = dual.gradient_mapping(w, grad, alpha)
        literal = (w - np.maximum(w - alpha * grad, 0.0)) / alpha
        np.testing.assert_allclose(mapping, literal, rtol=1e-9, atol=1e-12)
        assert math.sqrt(negative_part) <= np.linalg.norm(mapping) * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_corrected_duality_gap_identity(seed):
    """R_beta(pi_w) + F(w) = <w, grad F(w)> (a plus sign: the paper prints a minus)."""
    k, half_size = 2, 4
    t, r, weights, *_ = population(30, k, half_size, seed=40 + seed)
    rng = np.random.default_rng(seed)
    w = random_dual(9, k, seed=50 + seed, scale=3.0)
    eps, beta = rng.uniform(0, 0.1, k), rng.uniform(2, 40)
    risk, entropic = dual.entropic_risk(w, t, r, weights, beta)
    pi = dual.policy(w, t, r, beta)
    assert risk == pytest.approx(float(np.sum(weights[:, None] * pi * r)), rel=1e-13)
    assert entropic == pytest.approx(risk + float(np.sum(weights[:, None] * pi * np.log(pi))) / beta, rel=1e-12)
    lhs = entropic + dual.objective(w, t, r, weights, eps, beta)
    rhs = float(np.sum(w * dual.gradient(w, t, r, weights, eps, beta)))
    assert abs(rhs) > 1e-3
    assert abs(lhs - rhs) <= 1e-10 * abs(rhs)
    # the paper's printed sign (minus) would make lhs = -rhs: it does not
    assert abs(lhs + rhs) > 1e-3


# ---------------------------------------------------------------- exact optimum vs LP
def solve_dual(t, r, weights, eps, beta, tol=1e-10, max_iter=200_000):
    """Minimize the exact F over the orthant: projected accelerated gradient (FISTA) with adaptive restart.

    The step is ``1 / M`` with ``M = 2 beta E||t||^2`` (the Hessian of ``E LSE_beta(A w - b)`` is at most
    ``beta E||A||^2`` and ``||A||^2 = 2||t||^2``).  Stops when the gradient mapping is below ``tol``.
    """
    m, k = r.shape[1], t.shape[1]
    step = 1.0 / (2.0 * beta * float(weights @ np.sum(t**2, axis=1)))
    x = np.zeros((2, m, k))
    y, momentum = x.copy(), 1.0
    for _ in range(max_iter):
        grad_y = dual.gradient(y, t, r, weights, eps, beta)
        x_new = np.maximum(y - step * grad_y, 0.0)
        if np.sum((y - x_new) * (x_new - x)) > 0:  # restart when momentum points uphill
            momentum, y = 1.0, x.copy()
            continue
        next_momentum = (1 + math.sqrt(1 + 4 * momentum**2)) / 2
        y = x_new + (momentum - 1) / next_momentum * (x_new - x)
        x, momentum = x_new, next_momentum
        grad = dual.gradient(x, t, r, weights, eps, beta)
        if np.linalg.norm(dual.gradient_mapping(x, grad, step)) < tol:
            return x
    raise AssertionError("the reference dual solver did not converge")


def solve_lp(t, r, weights, eps):
    """LP (3): min sum_i w_i sum_l pi_il r_il s.t. rows of pi on the simplex, |sum_i w_i pi_il t_is| <= eps_s."""
    n, m = r.shape
    k = t.shape[1]
    cost = (weights[:, None] * r).ravel()  # variable pi_il at index i * m + l
    rows_sum = np.kron(np.eye(n), np.ones(m))
    gap = np.zeros((m * k, n * m))  # gap[j * k + s] . pi = sum_i w_i t_is pi_ij
    for j in range(m):
        for s in range(k):
            gap[j * k + s, np.arange(n) * m + j] = weights * t[:, s]
    bound = np.tile(eps, m)
    result = linprog(
        cost,
        A_ub=np.vstack([gap, -gap]),
        b_ub=np.concatenate([bound, bound]),
        A_eq=rows_sum,
        b_eq=np.ones(n),
        bounds=(0, None),
        method="highs",
    )
    assert result.status == 0, result.message
    pi = result.x.reshape(n, m)
    return result.fun, pi, gap @ result.x


@pytest.mark.slow
def test_entropic_optimum_is_feasible_and_within_log_m_over_beta_of_the_lp():
    k, half_size = 2, 4
    n = 40
    rng = np.random.default_rng(60)
    s = rng.integers(0, 2, n)
    eta = np.clip(0.6 * s - 0.3 + 0.35 * rng.standard_normal(n), -1, 1)  # group-dependent signal
    tau = np.where(s[:, None] == 1, [0.15, 0.85], [0.8, 0.2]) + rng.uniform(-0.1, 0.1, (n, 1)) * [1, -1]
    weights = np.full(n, 1.0 / n)
    p = weights @ tau
    atoms = dual.regression_grid(1.0, half_size)
    t, r = dual.group_features(tau, p), dual.squared_costs(eta, atoms)
    eps = np.full(k, 0.02)
    risk_lp, pi_lp, lp_gaps = solve_lp(t, r, weights, eps)
    assert np.abs(lp_gaps).max() <= 0.02 + 1e-9 and np.abs(pi_lp.sum(axis=1) - 1).max() < 1e-9
    unconstrained = float(weights @ r.min(axis=1))
    assert risk_lp > unconstrained + 1e-2  # the constraint is active: the comparison is not trivial
    risks = []
    for beta in (5.0, 20.0, 80.0):
        w_star = solve_dual(t, r, weights, eps, beta)
        gaps = dual.atom_gaps(w_star, t, r, weights, beta)
        assert (np.abs(gaps) - eps).max() <= 1e-8  # (a) Lemma 3.2
        risk, _ = dual.entropic_risk(w_star, t, r, weights, beta)
        assert risk_lp - 1e-9 <= risk <= risk_lp + math.log(2 * half_size + 1) / beta  # (b) Lemma 3.3
        risks.append(risk)
    assert risks[0] > risks[1] > risks[2]  # (c) decreasing towards R_LP
