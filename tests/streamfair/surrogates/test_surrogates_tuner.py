"""The streaming metric-weight tuner: versioning, common random numbers, KKT weights."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from streamfair import FairRegressionPostProcessor, evaluate
from streamfair.evaluation import to_grid
from streamfair.keyed_random import keyed_uniform
from streamfair.surrogates.cells import CellSurrogates
from streamfair.surrogates.tuner import MetricWeightTuner, PublishedWeights, check_surrogate_kinds


def stream(seed: int, n: int):
    """Regression stream: features (z1, z2, s, 1), group s with P(s = 1) = 0.4."""
    rng = np.random.default_rng(seed)
    s = (rng.random(n) < 0.4).astype(int)
    Z = rng.standard_normal((n, 2))
    y = np.tanh(0.5 * Z[:, 0] + 0.3 * Z[:, 1] ** 2 + 0.3 * s - 0.2) + 0.1 * rng.standard_normal(n)
    return np.c_[Z, s, np.ones(n)], y, s


def rewards_unfairness(scores, window):
    """A business metric (lower is better) that pays for a gap between the groups' mean scores."""
    group = window.cells
    return float(np.mean((scores - window.y) ** 2) - (scores[group == 1].mean() - scores[group == 0].mean()))


# ----------------------------------------------------------------------------------- A-T8
def test_at8_fairness_violation_surrogates_are_rejected_with_an_explanation():
    explained = r"surrogate_kinds\[1\] is 'fairness_violation'.*non-decreasing.*post-processor"
    with pytest.raises(ValueError, match=explained):
        check_surrogate_kinds(["loss", "fairness_violation"])
    with pytest.raises(ValueError, match="fairness violation cannot be a coordinate"):
        MetricWeightTuner(4, 2, rewards_unfairness, surrogate_kinds=["loss", "fairness_violation"])
    assert check_surrogate_kinds(["loss", "fairness_violation"], assume_monotone=True) == ("loss", "fairness_violation")
    with pytest.raises(ValueError, match=r"surrogate_kinds\[0\] must be one of"):
        check_surrogate_kinds(["accuracy"])


@pytest.mark.slow
def test_at8_fairness_is_never_traded_in_a_streaming_simulation():
    """Tuner upstream against a metric rewarding unfairness; DP post-processor downstream.

    At each published version the downstream duals are re-solved on a frozen unlabeled buffer, then
    keep learning online.  The served output's DP violation (the
    post-processor's per-atom gap, measured exactly over the randomisation on a large independent
    sample) stays within eps_max + 0.01 in every window, while the tuned upstream model alone does not.
    """
    eps_max, every, n = 0.015, 4000, 24000
    X, y, s = stream(0, n)
    X_ref, y_ref, s_ref = stream(99, 100_000)
    tau, tau_ref = np.eye(2)[s], np.eye(2)[s_ref]
    tuner = MetricWeightTuner(4, 2, rewards_unfairness, every=every, window=every, eta=0.05, sigma=0.05, seed=0)

    def downstream(theta, rows):
        post = FairRegressionPostProcessor(profile="paper", B=1.0, L=5, eps=0.005, p=[0.6, 0.4], horizon=1000, seed=0)
        post.learn_many(np.tile(np.clip(X[rows] @ theta, -1, 1), 5), np.tile(tau[rows], (5, 1)), batch_size=10)
        return post

    served, upstream, theta = [], [], None
    for start in range(0, n, every):
        if tuner.weights.theta is not theta:
            theta = tuner.weights.theta
            post = downstream(theta, slice(max(0, start - 6000), max(start, 6000)))
        rows = slice(start, start + every)
        post.learn_many(np.clip(X[rows] @ theta, -1, 1), tau[rows], batch_size=10)
        eta_ref = np.clip(X_ref @ theta, -1, 1)
        served.append(evaluate(post.proba_many(eta_ref, tau_ref), post.atoms, y_ref, s_ref).atom_unfairness.max())
        upstream.append(evaluate(to_grid(eta_ref, post.atoms), post.atoms, y_ref, s_ref).atom_unfairness.max())
        tuner.observe_many(X[rows], y[rows], s[rows])
    assert tuner.weights.version == n // every
    assert max(served) <= eps_max + 0.01
    assert max(upstream[1:]) > eps_max + 0.01  # the tuned upstream alone would break the bound


# ----------------------------------------------------------------------------------- A-1 mechanics
def test_versions_are_immutable_and_published_every_n_events():
    X, y, s = stream(1, 2500)
    tuner = MetricWeightTuner(4, 2, rewards_unfairness, every=1000, window=2000, seed=0)
    first = tuner.weights
    assert first.version == 0 and np.array_equal(first.sample_weights([0, 1]), [1.0, 1.0])
    published = tuner.observe_many(X, y, s)
    assert [w.version for w in published] == [1, 2] and [w.n_events for w in published] == [1000, 2000]
    assert tuner.weights is published[-1] and tuner.outer_iterations == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        tuner.weights.version = 7  # type: ignore[misc]
    assert first.version == 0  # readers holding an old version keep a consistent snapshot


def test_common_random_numbers_one_frozen_window_per_step():
    X, y, s = stream(2, 1000)
    seen = []

    def recording(scores, window):
        seen.append(window)
        return rewards_unfairness(scores, window)

    tuner = MetricWeightTuner(4, 2, recording, every=1000, window=1000, n_perturbations=7, seed=3)
    tuner.observe_many(X, y, s)
    assert len(seen) == 2 * 7 + 1  # M(theta_t) and 2m perturbed evaluations
    assert all(window is seen[0] for window in seen)
    assert 0.25 < seen[0].y.size / 1000 < 0.42  # the metric slice (metric_fraction = 1/3)
    twin = MetricWeightTuner(4, 2, rewards_unfairness, every=1000, window=1000, n_perturbations=7, seed=3)
    twin.observe_many(X, y, s)
    assert np.array_equal(twin.weights.theta, tuner.weights.theta)


def test_published_weights_make_the_parameters_stationary_for_the_weighted_loss():
    """KKT reading: theta_{t+1} minimises sum_k w_k l_k, so an upstream trained with the weights agrees."""
    X, y, s = stream(3, 3000)
    tuner = MetricWeightTuner(
        4, 2, rewards_unfairness, every=3000, window=3000, projection_steps=3000, projection_lr=0.5
    )
    published = tuner.observe_many(X, y, s)[0]
    assert tuner.last_report.projection.residual > 0 and published.cell_weights.mean() == pytest.approx(1.0)
    surrogate_rows = np.array([keyed_uniform(tuner.seed, i) >= tuner.metric_fraction for i in range(3000)])
    cells = CellSurrogates(X[surrogate_rows], y[surrogate_rows], s[surrogate_rows], loss="squared")
    assert np.allclose(cells.counts / cells.counts.sum(), published.cell_shares)
    gradient = cells.gradient(published.theta, published.cell_weights)
    assert np.linalg.norm(gradient) <= 1e-3 * np.linalg.norm(cells.gradient(np.zeros(4), published.cell_weights))
    # and per-sample weighted least squares on that slice fits the same values where weights are > 0
    weights = published.sample_weights(s[surrogate_rows])
    root = np.sqrt(weights)
    weighted = np.linalg.lstsq(X[surrogate_rows] * root[:, None], y[surrogate_rows] * root, rcond=None)[0]
    used = X[surrogate_rows][weights > 0]
    assert np.max(np.abs(used @ weighted - used @ published.theta)) <= 1e-3


def test_sample_weights_reproduce_the_weighted_cell_objective():
    weights = PublishedWeights(3, np.zeros(2), np.array([0.5, 1.5]), np.array([0.8, 0.2]), 0.0, 10)
    cells = np.array([0, 0, 0, 0, 1])
    losses = np.array([1.0, 2.0, 3.0, 4.0, 10.0])
    per_sample = np.mean(weights.sample_weights(cells) * losses)
    per_cell = (0.5 * losses[:4].mean() + 1.5 * losses[4]) / 2
    assert per_sample == pytest.approx(per_cell)
    assert weights.sample_weight(1) == pytest.approx(1.5 / (2 * 0.2))


def test_dead_zone_is_reported_and_nothing_is_published():
    X, y, s = stream(4, 1000)
    tuner = MetricWeightTuner(4, 2, lambda scores, window: 1.0, every=500, window=1000, max_sigma_raises=2)
    assert tuner.observe_many(X, y, s) == []
    assert tuner.weights.version == 0 and tuner.skipped_steps == 2
    assert tuner.last_report.dead_zone and tuner.last_report.sigma_raises == 2
    assert tuner.last_report.estimate.zero_diff_fraction == 1.0


def test_invalid_events_and_configuration():
    tuner = MetricWeightTuner(3, 2, rewards_unfairness)
    with pytest.raises(ValueError, match=r"cell must be an integer in 0\.\.1, got 2"):
        tuner.observe([0.0, 1.0, 1.0], 1.0, 2)
    with pytest.raises(ValueError, match=r"x must have shape \(3,\)"):
        tuner.observe([0.0, 1.0], 1.0, 0)
    tuner.observe([0.0, 1.0, 1.0], 1.0, 0, extra=[5.0])
    with pytest.raises(ValueError, match="extra must have 1 entries"):
        tuner.observe([0.0, 1.0, 1.0], 1.0, 0)
    with pytest.raises(ValueError, match="metric_fraction must be in"):
        MetricWeightTuner(3, 2, rewards_unfairness, metric_fraction=1.0)
    with pytest.raises(ValueError, match="loss must be one of"):
        MetricWeightTuner(3, 2, rewards_unfairness, loss="cubic")
    with pytest.raises(ValueError, match="surrogate_kinds must have 2 entries"):
        MetricWeightTuner(3, 2, rewards_unfairness, surrogate_kinds=["loss"])
