"""The compiled kernel against the pure-numpy reference of :mod:`streamfair.dual` and the constraint maps.

Each compiled step is compared, for both constraint families, with the same step written with the
reference functions (``dual.policy``, ``rows_of``, ``atoms_of``); serving with ``dual.policy`` and
``sample_indices``.  The contracts between the public paths (``learn_many`` a loop of ``learn_one``,
the fused paths the two calls, replays) are :mod:`streamfair.checks`' (tests/test_checks.py).
"""

from __future__ import annotations

import math
import os
import subprocess
import sys

import numpy as np
import pytest

from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor, dual, kernel
from streamfair.constraints import CONSTRAINTS
from streamfair.keyed_random import sample_indices
from streamfair.softmax import softmax
from tests.support import REPO

RTOL = 1e-12
ATOL = 1e-15


def random_case(family: str, m: int, k: int, seed: int, n: int = 1):
    """A dual with some zero entries, ``n`` samples' group features and scaled costs, from one seed."""
    rng = np.random.default_rng(seed)
    constraints = CONSTRAINTS[family](m)
    w = np.maximum(rng.normal(0.0, 0.3, (2, constraints.n_rows, k)), 0.0)
    tau = rng.dirichlet(np.ones(k), n)
    features = dual.group_features(tau, tau.mean(axis=0) if n > 1 else np.full(k, 1.0 / k))
    costs = 8.0 * dual.squared_costs(rng.uniform(-1, 1, n), np.linspace(-1, 1, m))
    return rng, constraints, w, features, costs


def reference_rows(constraints, dual_scores, features, costs):
    """``C pi`` of each sample for the policy at ``dual_scores = beta (Lambda - V)``, with ``dual.policy``."""
    per_atom = constraints.atoms_of(dual_scores)
    pi = dual.policy(np.stack([per_atom, np.zeros_like(per_atom)]), np.atleast_2d(features), np.atleast_2d(costs), 1.0)
    return constraints.rows_of(pi)


def reference_tracking_step(constraints, w, baseline, slack, step, beta, features, costs, count):
    """The tracking optimizer's step with its control variate, on one sample or the mean of a mini-batch."""
    rows = reference_rows(constraints, beta * (w[0] - w[1]), features, costs)
    centered = rows - baseline
    gap = centered.T @ np.atleast_2d(features) / centered.shape[0]
    new_baseline = baseline + centered.mean(axis=0) / count
    return np.maximum(w - step * np.stack([gap + slack, slack - gap]), 0.0), new_baseline


@pytest.mark.parametrize("family", ["atom", "cdf"])
@pytest.mark.parametrize("m,k", [(101, 2), (7, 3), (300, 4)])
def test_tracking_step_matches_the_numpy_reference(family, m, k):
    rng, constraints, w, features, costs = random_case(family, m, k, seed=m + k)
    baseline = rng.uniform(0.0, 1.0, constraints.n_rows)
    slack, step, beta, count = rng.uniform(0.0, 0.05, k), 0.3, 1.7, 7
    expected_w, expected_baseline = reference_tracking_step(constraints, w, baseline, slack, step, beta, features[0],
                                                            costs[0], count)
    kernel.tracking_learn(w, baseline, slack, step, beta, family == "cdf", features[0], costs[0], count)
    np.testing.assert_allclose(w, expected_w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(baseline, expected_baseline, rtol=RTOL, atol=ATOL)
    assert expected_w.min() == 0.0 and expected_w.max() > 0.0  # the projection is exercised


@pytest.mark.parametrize("family", ["atom", "cdf"])
def test_tracking_rows_are_single_steps_bit_for_bit(family):
    rng, constraints, w, features, costs = random_case(family, 21, 2, seed=4, n=30)
    baseline, slack = np.zeros(constraints.n_rows), np.full(2, 0.01)
    one, one_baseline = w.copy(), baseline.copy()
    for i in range(30):
        count = min(5 + i + 1, 12)
        kernel.tracking_learn(one, one_baseline, slack, 0.2, 3.0, family == "cdf", features[i], costs[i], count)
    kernel.tracking_learn_rows(w, baseline, slack, 0.2, 3.0, family == "cdf", features, costs, 5, 12)
    assert np.array_equal(w, one) and np.array_equal(baseline, one_baseline)


@pytest.mark.parametrize("family", ["atom", "cdf"])
def test_tracking_mini_batch_step_matches_the_numpy_reference(family):
    rng, constraints, w, features, costs = random_case(family, 31, 3, seed=9, n=40)
    baseline = rng.uniform(0.0, 1.0, constraints.n_rows)
    slack, step, beta, count = np.full(3, 0.02), 0.4, 2.0, 3
    expected_w, expected_baseline = reference_tracking_step(constraints, w, baseline, slack, step, beta, features,
                                                            costs, count)
    kernel.tracking_learn_batch(w, baseline, slack, step, beta, family == "cdf", features, costs, count)
    np.testing.assert_allclose(w, expected_w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(baseline, expected_baseline, rtol=RTOL, atol=ATOL)


def reference_dual_step(constraints, stack, coefficients, beta, features, costs):
    """The paper's generic step (:mod:`streamfair.schedule`) on ``[w, w_ag, c - eps]``, one sample or a mini-batch."""
    qa, qw, k1, k2, b3, avg = coefficients
    query = beta * qw * (stack[0, 0] - stack[0, 1]) + beta * qa * (stack[1, 0] - stack[1, 1])
    rows = reference_rows(constraints, query, features, costs)
    gap = rows.T @ np.atleast_2d(features) / rows.shape[0]
    new_w = np.maximum(k1 * stack[0] + k2 * stack[1] + b3 * stack[2] - b3 * np.stack([gap, -gap]), 0.0)
    return new_w, avg * new_w + (1 - avg) * stack[1]


@pytest.mark.parametrize("family", ["atom", "cdf"])
@pytest.mark.parametrize("n", [1, 25])
def test_paper_optimizer_step_matches_the_numpy_reference(family, n):
    rng, constraints, w, features, costs = random_case(family, 41, 2, seed=5, n=n)
    stack = np.stack([w, np.maximum(w + rng.normal(0, 0.1, w.shape), 0.0), rng.normal(0, 0.1, w.shape)])
    coefficients, beta = (0.6, 0.4, 0.9, 0.05, 0.02, 0.25), 3.0
    expected_w, expected_ag = reference_dual_step(constraints, stack, coefficients, beta, features, costs)
    if n == 1:
        kernel.dual_learn(stack, coefficients, beta, family == "cdf", features[0], costs[0])
    else:
        kernel.dual_learn_batch(stack, coefficients, beta, family == "cdf", features, costs)
    np.testing.assert_allclose(stack[0], expected_w, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(stack[1], expected_ag, rtol=RTOL, atol=ATOL)
    assert expected_w.min() == 0.0 and expected_w.max() > 0.0


@pytest.mark.parametrize("family", ["atom", "cdf"])
@pytest.mark.parametrize("points", [1, 16])
def test_served_coefficients_are_the_constraint_maps_floats(family, points):
    rng, constraints, _, _, _ = random_case(family, 101, 3, seed=points)
    served = np.maximum(rng.normal(0.0, 0.3, (points, 2, constraints.n_rows, 3)), 0.0)
    beta = 7.3
    expected = np.stack([constraints.atoms_of(beta * (point[0] - point[1])).T for point in served])  # (k, K, m)
    out = np.full((points, 3, 101), np.nan)
    kernel.served_coefficients(served, beta, family == "cdf", out)
    assert out.tobytes() == expected.tobytes()  # bit for bit, every entry written


@pytest.mark.parametrize("points", [1, 5])
def test_served_mixture_and_draws_match_the_numpy_reference(points):
    rng = np.random.default_rng(points)
    n, m, k = 500, 21, 3
    coefficients = rng.normal(0, 2.0, (points, m, k))  # C^T of each point; the kernel takes them (k, K, m)
    served = np.ascontiguousarray(coefficients.transpose(0, 2, 1))
    tau = rng.dirichlet(np.ones(k), n)
    features = dual.group_features(tau, tau.mean(axis=0))
    costs = 5.0 * dual.squared_costs(rng.uniform(-1, 1, n), np.linspace(-1, 1, m))
    policies = [dual.policy(np.stack([c, np.zeros_like(c)]), features, costs, 1.0) for c in coefficients]
    expected = np.mean(policies, axis=0)
    proba = np.empty((n, m))
    kernel.served_proba(served, features, costs, proba)
    np.testing.assert_allclose(proba, expected, rtol=RTOL, atol=1e-300)
    u = rng.random(n)
    draws = np.empty(n, dtype=np.int64)
    kernel.served_draws(served, features, costs, u, draws)
    point = np.minimum((u * points).astype(int), points - 1)  # u picks a point, u k - j draws from its policy
    component = np.array([policies[j][i] for i, j in enumerate(point)])
    reference = sample_indices(component, u * points - point)
    assert np.mean(draws != reference) < 0.01  # the reference's draws (ties at the last bits aside)
    if points == 1:
        assert draws.tolist() == sample_indices(proba, u).tolist()  # the inverse CDF of the served row, bit for bit


def test_draws_follow_the_served_mixture():
    """Many draws of one row: their frequencies are the mixture's probabilities (not those of one point)."""
    rng = np.random.default_rng(8)
    coefficients, features = rng.normal(0, 2.0, (4, 2, 5)), np.array([[0.7, -1.2]])
    costs = np.array([[0.5, 0.1, 0.0, 0.3, 0.9]])
    proba = np.empty((1, 5))
    kernel.served_proba(coefficients, features, costs, proba)
    n = 40_000
    draws = np.empty(n, dtype=np.int64)
    kernel.served_draws(coefficients, np.repeat(features, n, 0), np.repeat(costs, n, 0), rng.random(n), draws)
    frequencies = np.bincount(draws, minlength=5) / n
    assert np.abs(frequencies - proba[0]).max() < 4.0 * np.sqrt(0.25 / n)  # 4 standard errors at most
    assert np.abs(proba[0] - np.exp(-costs[0]) / np.exp(-costs[0]).sum()).max() > 0.05  # the points matter


def test_replacing_one_point_changes_only_the_draws_in_its_share_of_the_uniforms():
    rng = np.random.default_rng(9)
    coefficients, features = rng.normal(0, 2.0, (4, 2, 9)), rng.normal(0, 1.0, (2000, 2))
    costs, u = rng.random((2000, 9)) * 4.0, rng.random(2000)
    before, after = np.empty(2000, dtype=np.int64), np.empty(2000, dtype=np.int64)
    kernel.served_draws(coefficients, features, costs, u, before)
    coefficients[2] = rng.normal(0, 2.0, (2, 9))
    kernel.served_draws(coefficients, features, costs, u, after)
    changed = before != after
    assert changed.any() and ((u[changed] >= 0.5) & (u[changed] < 0.75)).all()


@pytest.mark.parametrize("profile", ["anytime", "paper"])
@pytest.mark.parametrize("constraint", ["atom", "cdf"])
def test_post_processors_learn_as_the_numpy_reference(profile, constraint):
    """A post-processor's first step from zero is the reference step of its optimizer (both families, both profiles)."""
    slack = {"eps" if constraint == "atom" else "ks": 0.01}
    fair = FairRegressionPostProcessor(L=6, p=[0.4, 0.6], profile=profile, **slack)
    eta, tau = 0.3, np.array([0.8, 0.2])
    fair.learn_one(eta, tau)
    constraints = fair.constraints
    assert constraints.name == constraint
    features = dual.group_features(tau, fair.p)
    costs = fair.beta * dual.squared_costs(np.array([eta]), fair.atoms)[0]
    zero = np.zeros((2, constraints.n_rows, 2))
    if profile == "anytime":
        expected, _ = reference_tracking_step(constraints, zero, np.zeros(constraints.n_rows), fair.slack,
                                              fair._optimizer.step, fair.beta, features, costs, 1)
        learned = fair._optimizer.w
    else:
        schedule = FairRegressionPostProcessor(L=6, p=[0.4, 0.6], profile=profile, **slack).schedule
        stack = np.stack([zero, zero, -np.broadcast_to(fair.slack, zero.shape)])
        coefficients = schedule.coefficients(schedule.mu)  # the first step of SGD3: its prox weight is mu
        expected, _ = reference_dual_step(constraints, stack, coefficients, fair.beta, features, costs)
        learned = fair._optimizer.w
    np.testing.assert_allclose(learned, expected, rtol=RTOL, atol=ATOL)
    assert learned.max() > 0.0


def test_classification_serves_the_reference_mixture():
    fair = FairClassificationPostProcessor(n_classes=4, n_groups=3, memory=64, seed=2)
    rng = np.random.default_rng(0)
    proba, tau = rng.dirichlet(np.ones(4), 300), rng.dirichlet(np.ones(3), 300)
    fair.learn_many(proba, tau)
    points = fair._optimizer.served_points
    assert points.shape[0] > 1
    features = dual.group_features(tau[:50], fair.p)
    costs = proba[:50] @ fair.cost.cost_matrix
    expected = np.mean([dual.policy(np.stack([fair.constraints.atoms_of(pt[0] - pt[1]), np.zeros((4, 3))]), features,
                                    costs, fair.beta) for pt in points], axis=0)
    np.testing.assert_allclose(fair.proba_many(proba[:50], tau[:50]), expected, rtol=1e-10, atol=1e-300)


def test_the_inline_exponential_is_libms_to_the_last_bits():
    x = np.concatenate([-np.random.default_rng(1).random(20_000) * 60.0, [0.0, -1e-300, -0.5 * np.log(2.0), -700.0]])
    got = x.copy()
    kernel._exp_shifted(got, 0.0, np.empty(x.size))
    # libm's exp itself: numpy's exp takes other code paths by version and CPU, each within an ulp of it
    libm = np.array([math.exp(value) for value in x])
    np.testing.assert_allclose(got, libm, rtol=2.3e-16, atol=0.0)
    edges = np.array([1.0, -799.0])  # exp(0) and an underflow, shifted by 1
    kernel._exp_shifted(edges, 1.0, np.empty(2))
    assert edges.tolist() == [1.0, 0.0]


def test_exp_of_non_positive_entries_is_the_inline_exponential_and_refuses_the_rest():
    x = np.concatenate([-np.random.default_rng(2).random(300) * 40.0, [0.0, -0.0, -800.0, -np.inf]])
    got = x.copy()
    assert kernel.exp_non_positive(got)
    expected = x.copy()
    kernel._exp_shifted(expected, 0.0, np.empty(x.size))
    assert got.tobytes() == expected.tobytes()
    assert got[-3:].tolist() == [1.0, 0.0, 0.0]
    for bad in (1e-300, np.nan, np.inf):
        values = np.array([-1.0, bad, -2.0])
        assert not kernel.exp_non_positive(values)
        assert values[[0, 2]].tolist() == [-1.0, -2.0]  # nothing changed


def test_softmax_takes_the_kernels_exponentials_along_any_axis_and_refuses_nan():
    rng = np.random.default_rng(5)
    scores = rng.normal(0.0, 30.0, (4, 6))
    for axis in (0, 1):
        shifted = scores - scores.max(axis=axis, keepdims=True)
        exps = shifted.reshape(-1).copy()
        kernel._exp_shifted(exps, 0.0, np.empty(exps.size))
        exps = exps.reshape(shifted.shape)
        expected = exps / exps.sum(axis=axis, keepdims=True)
        assert softmax(scores, axis=axis).tobytes() == expected.tobytes()
        strided = np.array(scores.T).T  # not C-contiguous: computed on a copy, written back in place
        assert softmax(strided, axis=axis, overwrite=True) is strided
        assert strided.tobytes() == expected.tobytes()
    assert softmax(np.array([0.0, -np.inf])).tolist() == [1.0, 0.0]
    for bad in ([0.0, np.nan], [np.inf, 0.0], [-np.inf, -np.inf]):
        with pytest.raises(ValueError, match="scores must be finite or -inf"):
            softmax(np.array(bad))


def test_one_draw_is_the_draw_of_its_row():
    rng = np.random.default_rng(6)
    coefficients, features = rng.normal(0, 2.0, (4, 2, 9)), rng.normal(0, 1.0, (30, 2))
    costs, u = rng.random((30, 9)) * 4.0, rng.random(30)
    draws = np.empty(30, dtype=np.int64)
    kernel.served_draws(coefficients, features, costs, u, draws)
    assert [kernel.served_draw(coefficients, features[i], costs[i], u[i]) for i in range(30)] == draws.tolist()


@pytest.mark.parametrize("family", ["atom", "cdf"])
@pytest.mark.parametrize("k", [1, 2, 3, 4, 5])
def test_a_steps_policy_is_the_served_policy_of_its_scores_bit_for_bit(family, k):
    """``_policy_rows`` (groups' running sums two at a time) gives ``_atoms_of`` then ``_policy``'s floats."""
    rng, constraints, _, features, costs = random_case(family, 37, k, seed=k)
    scores = rng.normal(0.0, 3.0, (constraints.n_rows, k))
    coefficients = np.empty((k, 37))
    kernel._atoms_of(scores, family == "cdf", coefficients)
    expected = np.empty(37)
    kernel._policy(coefficients, features[0], costs[0], expected, np.empty(37))
    pi, rows = np.empty(37), np.empty(constraints.n_rows)
    kernel._policy_rows(scores, family == "cdf", features[0], costs[0], pi, rows, np.empty(37))
    assert pi.tobytes() == expected.tobytes()
    assert rows.tobytes() == constraints.rows_of(expected).tobytes()


def test_the_maximum_is_numpys_for_every_length_and_tie():
    rng = np.random.default_rng(4)
    for n in range(1, 12):
        for values in (rng.normal(0.0, 1.0, n), np.full(n, -2.5), rng.integers(-2, 2, n).astype(float)):
            assert kernel._maximum(values) == values.max(), values
    ramp = np.arange(9.0)
    for i in range(9):  # the maximum in each of the four running maxima and in the tail
        assert kernel._maximum(np.roll(ramp, i)) == 8.0


def test_sum_follows_numpys_pairwise_order_bit_for_bit():
    rng = np.random.default_rng(3)
    for n in [1, 7, 8, 9, 101, 128, 129, 300, 1000, 4097]:
        values = rng.random(n) * 10.0 ** rng.uniform(-8, 8, n)
        assert kernel._pairwise_sum(values) == values.sum(), n


def test_every_compiled_function_releases_the_gil_while_it_runs():
    """So that the Kafka client's I/O threads run while a poll's samples are computed (docs/daemon.md)."""
    dispatchers = [value for value in vars(kernel).values() if hasattr(value, "targetoptions")]
    assert len(dispatchers) > len(kernel.__all__) - 1  # the public ones and their helpers
    assert all(dispatcher.targetoptions.get("nogil") is True for dispatcher in dispatchers)


def test_a_function_without_a_cache_location_is_compiled_in_memory():
    namespace: dict = {}
    exec("def twice(x):\n    return 2.0 * x\n", namespace)  # no source file: numba has nowhere to cache it
    with pytest.warns(UserWarning, match="twice"):
        twice = kernel.compiled(namespace["twice"])
    assert twice(1.5) == 3.0 and twice.targetoptions["nogil"] is True


@pytest.mark.parametrize("cache", [pytest.param("nowhere", marks=pytest.mark.slow), "unusable",
                                   pytest.param("absent", marks=pytest.mark.slow)])
def test_without_a_usable_cache_the_kernel_compiles_in_memory_and_gives_the_same_results(tmp_path, cache):
    """A process where no cache directory can be used (read-only everywhere, or an unusable ``NUMBA_CACHE_DIR``).

    "nowhere": numba finds no location at all (as with a read-only installation and home), simulated by
    giving it no locator; the kernel then compiles in memory, with a warning.  "unusable": ``NUMBA_CACHE_DIR``
    lies under a file; numba moves on to another location.  "absent": ``NUMBA_CACHE_DIR`` does not exist
    yet; numba creates it and caches there.  Each way it learns and serves as here.  ("nowhere" and
    "absent" compile every function the subprocess uses: tens of seconds on a loaded machine.)
    """
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    setup = ("import numba.core.caching as c; (getattr(c, 'CacheImpl', None) or c._CacheImpl)._locator_classes = []; "
             if cache == "nowhere" else "")
    code = (setup + "from streamfair import FairRegressionPostProcessor as F; f = F(n_groups=2, memory=32); "
            "f.learn_many([0.1, 0.5] * 40, [[0.3, 0.7], [0.6, 0.4]] * 40); f.learn_one(0.2, [0.1, 0.9]); "
            "print(repr(float(f.proba_one(0.2, [0.5, 0.5])[3])), f.predict_one(0.2, [0.5, 0.5], key='a'))")
    cache_dir = tmp_path / "new" / "cache" if cache == "absent" else blocker / "cache"
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache_dir), "PYTHONPATH": str(REPO)}
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600,
                            cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert ("compiling it in memory" in result.stderr) == (cache == "nowhere")
    if cache == "absent":
        assert any(cache_dir.rglob("kernel.*.nbi"))
    fair = FairRegressionPostProcessor(n_groups=2, memory=32)
    fair.learn_many([0.1, 0.5] * 40, [[0.3, 0.7], [0.6, 0.4]] * 40)
    fair.learn_one(0.2, [0.1, 0.9])
    proba, prediction = result.stdout.split()
    assert float(proba) == float(fair.proba_one(0.2, [0.5, 0.5])[3])
    assert float(prediction) == fair.predict_one(0.2, [0.5, 0.5], key="a")


@pytest.mark.parametrize("low, high", [(-1.0, 1.0), (0.25, 1.0)])
def test_scaled_squared_costs_are_numpys_floats_and_count_the_clipped(low, high):
    rng = np.random.default_rng(4)
    eta, atoms, beta = rng.uniform(-1.5, 1.5, 400), np.linspace(low, high, 21), 37.3
    costs = np.empty((400, 21))
    clipped = kernel.scaled_squared_costs(eta, atoms, low, high, beta, costs)
    expected = beta * dual.squared_costs(np.clip(eta, low, high), atoms)
    assert costs.tobytes() == expected.tobytes()
    assert clipped == np.count_nonzero((eta < low) | (eta > high)) > np.count_nonzero(eta < low) > 0


def test_scaled_expected_costs_of_a_row_do_not_depend_on_the_rows_computed_with_it():
    rng = np.random.default_rng(5)
    proba, cost_matrix, beta = rng.dirichlet(np.ones(7), 600), rng.random((7, 7)), 3.1
    together = np.empty((600, 7))
    kernel.scaled_expected_costs(proba, cost_matrix, beta, together)
    for i in (0, 299, 599):
        alone = np.empty((1, 7))
        kernel.scaled_expected_costs(proba[i : i + 1], cost_matrix, beta, alone)
        assert alone.tobytes() == together[i : i + 1].tobytes()
    np.testing.assert_allclose(together, beta * (proba @ cost_matrix), rtol=1e-14, atol=0.0)
