"""The offline fair LP: its risk against the same LP written over the predictions' laws, its constraint values
recomputed from its policy, and its prices against LP duality (the dual value they give is the risk)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

from connectors.experiments import fair_lp
from streamfair.constraints import AtomConstraints, CdfConstraints

FAMILIES = {"atom": (AtomConstraints, lambda m: np.eye(m)),
            "cdf": (CdfConstraints, lambda m: np.tril(np.ones((m - 1, m))))}  # C[k, l] = 1(l <= k), k < m - 1


def instance(seed: int, n: int = 12, m: int = 4, k: int = 3):
    """Group features, squared costs on ``m`` atoms and weights of ``n`` samples whose base predictions
    depend on their groups; the shares ``p`` are the weighted means of tau, so a constant prediction is fair."""
    rng = np.random.default_rng(seed)
    tau = rng.dirichlet(np.ones(k), n)
    weights = rng.uniform(0.5, 1.5, n)
    weights /= weights.sum()
    t = 1 - tau / (weights @ tau)
    eta = tau @ np.linspace(-0.8, 0.8, k) + 0.2 * rng.standard_normal(n)
    r = (eta[:, None] - np.linspace(-1, 1, m)) ** 2
    return t, r, weights


def constraint_rows(C: np.ndarray, t: np.ndarray, weights: np.ndarray, policy: np.ndarray) -> np.ndarray:
    """``sum_i w_i (C pi_i)_j t_is`` for every row ``j`` and group ``s``."""
    return np.einsum("i,is,jl,il->js", weights, t, C, policy)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_the_lp_is_solved_and_its_prices_are_optimal_dual_prices(family, seed):
    family_class, matrix = FAMILIES[family]
    t, r, weights = instance(seed)
    n, m = r.shape
    C = matrix(m)
    slack = np.array([0.02, 0.05, 0.1])  # one per group
    lp = fair_lp.solve(t, r, weights, slack, family_class(m))

    # the same LP over the laws pi_i themselves (simplex rows, C applied to each)
    rows = np.einsum("i,is,jl->jsil", weights, t, C).reshape(C.shape[0] * t.shape[1], n * m)
    bound = np.broadcast_to(slack, (C.shape[0], t.shape[1])).ravel()
    reference = linprog((weights[:, None] * r).ravel(), A_ub=np.vstack([rows, -rows]), b_ub=np.r_[bound, bound],
                        A_eq=np.kron(np.eye(n), np.ones((1, m))), b_eq=np.ones(n), bounds=(0, 1), method="highs")
    assert reference.status == 0
    assert lp.risk == pytest.approx(reference.fun, abs=1e-9)
    assert lp.risk > float(weights @ r.min(axis=1)) + 1e-3  # the constraints cost something: they bind

    # the policy: a law per sample, with the LP's risk, meeting every group's own slack
    assert lp.policy.min() >= -1e-9 and np.allclose(lp.policy.sum(axis=1), 1.0, atol=1e-9)
    assert float(weights @ (lp.policy * r).sum(axis=1)) == pytest.approx(lp.risk, abs=1e-9)
    values = constraint_rows(C, t, weights, lp.policy)
    np.testing.assert_allclose(lp.constraint_values, values, atol=1e-9)
    assert np.all(np.abs(values) <= slack + 1e-9)

    # prices: sum_i w_i min_l (r_il + (C^T mu t_i)_l) - sum_js |mu_js| slack_s is the dual value at mu, at most
    # the risk for any mu, and equal to it exactly for optimal dual prices
    scores = r + np.einsum("jl,js,is->il", C, lp.prices, t)
    dual_value = float(weights @ scores.min(axis=1)) - float((np.abs(lp.prices) * slack).sum())
    assert dual_value == pytest.approx(lp.risk, abs=1e-8)
    assert np.abs(lp.prices).max() > 1e-3  # some price is not zero: the check is not the unconstrained one
    # complementary slackness: each sample's law puts its mass on atoms of least score, which the prices choose
    assert float((lp.policy * (scores - scores.min(axis=1, keepdims=True))).sum()) < 1e-8
    sorted_scores = np.sort(scores, axis=1)
    unique = sorted_scores[:, 1] - sorted_scores[:, 0] > 1e-6
    assert unique.sum() >= n // 2
    np.testing.assert_array_equal(lp.predict_index(t, r)[unique], scores.argmin(axis=1)[unique])


def test_an_infeasible_lp_is_an_error():
    """Both samples are more in group 0 than its share says: the per-atom gaps sum to 0.5 whatever the law,
    so two atoms cannot each keep theirs within 0.1."""
    t = np.array([[0.5, -0.5], [0.5, -0.5]])
    with pytest.raises(RuntimeError, match="the fair LP did not solve"):
        fair_lp.solve(t, np.zeros((2, 2)), np.array([0.5, 0.5]), np.array([0.1, 0.1]), AtomConstraints(2))
