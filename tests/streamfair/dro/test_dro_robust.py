"""The group-robust DP regression post-processor (DRO weights wired into the cost hook)."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from streamfair import FairRegressionPostProcessor, evaluate
from streamfair.dro.robust_regression import GroupRobustFairRegressionPostProcessor
from tests.streamfair.dro import load_benchmark

#: The scenario of the table measured in docs/dro.md (``python benchmarks/bench_dro_robust.py``): group 1 (15%)
#: sits far from the majority, so the plain fair solution moves it most.
_scenario = load_benchmark("bench_dro_robust")
minority_stream, CONFIG = _scenario.minority_stream, _scenario.CONFIG


@pytest.mark.slow
def test_lowers_worst_group_risk_at_equal_fairness():
    """Seed 0 of the table measured in docs/dro.md: 30 000 samples, 4 000 held out, risk measured against ``eta``."""
    results = _scenario.measure(0)
    plain = results["plain post-processor"]
    assert plain.group_risk.argmax() == 1  # the minority is poorly served by the average-risk solution
    for name in ("robust, softmax (T = 0.01)", "robust, exponentiated (step 0.05)"):
        robust = results[name]
        assert robust.group_risk.max() <= 0.5 * plain.group_risk.max(), name
        assert robust.risk >= plain.risk, name  # the price: a higher average risk
        assert robust.max_ks <= plain.max_ks + 0.05, name  # at (statistically) equal fairness
        # This run is chaotic: moving half the inputs by one ulp moves the difference of the two maxima over
        # [-0.02, 0.031] (24 draws, softmax); the margin holds that much on top of statistical equality.
        assert robust.max_atom_gap <= plain.max_atom_gap + 0.05, name


@pytest.mark.slow
def test_tracked_group_risks_follow_the_learned_policy():
    s, tau, eta = minority_stream(20_000, 1)
    model = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, forgetting=1e-3)
    model.learn_many(eta, tau)
    proba = model.learning_proba(eta[-3000:], tau[-3000:])
    report = evaluate(proba, model.atoms, eta[-3000:], s[-3000:])
    np.testing.assert_allclose(model.dro_diagnostics().group_risks, report.group_risk, rtol=0.15)
    assert model.dro_diagnostics().weights[1] > 0.5


def test_the_group_losses_use_the_policy_being_learned_not_the_served_one():
    """``learning_proba`` is the policy of the optimizer's running output (``w_ag``): what ``serve="live"`` serves.

    With ``serve="epoch"`` the served policy is the last completed epoch's, which differs mid-epoch.
    """
    rng = np.random.default_rng(3)
    tau = rng.dirichlet([1.0, 1.0], 600)
    eta = np.clip(0.6 * (tau[:, 1] - 0.5) + 0.2 * rng.standard_normal(600), -1, 1)
    config = {"profile": "paper", "L": 8, "p": [0.5, 0.5], "horizon": 2000, "refresh": 50, "eps": 0.0}
    epoch = GroupRobustFairRegressionPostProcessor(**config, serve="epoch")
    live = GroupRobustFairRegressionPostProcessor(**config, serve="live")
    epoch.learn_many(eta, tau)
    live.learn_many(eta, tau)
    learned = epoch.learning_proba(eta[:100], tau[:100])
    np.testing.assert_allclose(learned, live.proba_many(eta[:100], tau[:100]), rtol=1e-12, atol=1e-300)
    assert np.abs(learned - epoch.proba_many(eta[:100], tau[:100])).max() > 1e-3


def test_the_learning_policy_with_ks_constraints_is_the_served_one_before_the_first_snapshot():
    """Before the first snapshot the mixture is the one point learned: numpy's ``C^T`` against the kernel's."""
    rng = np.random.default_rng(4)
    tau = rng.dirichlet([1.0, 1.0], 200)
    eta = np.clip(0.8 * (tau[:, 1] - 0.5) + 0.1 * rng.standard_normal(200), -1, 1)
    model = GroupRobustFairRegressionPostProcessor(L=6, p=[0.5, 0.5], ks=0.0, memory=320)  # a snapshot every 20
    model.learn_many(eta[:15], tau[:15])
    assert model.constraints.name == "cdf" and model._optimizer.n_snapshots == 0 and model.dual.max() > 0
    np.testing.assert_allclose(model.learning_proba(eta, tau), model.proba_many(eta, tau), rtol=1e-12, atol=1e-300)


def test_weights_equal_to_p_give_the_plain_post_processor():
    """Derivation check: q = p makes omega(x) = 1, i.e. the average-risk post-processor."""
    s, tau, eta = minority_stream(3000, 2)
    plain = FairRegressionPostProcessor(**{"profile": "paper", **CONFIG})
    robust = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, refresh=10**6)
    robust._q = np.array(CONFIG["p"])
    np.testing.assert_allclose(robust.sample_weights(tau), 1.0, rtol=1e-14)
    plain.learn_many(eta, tau)
    robust.learn_many(eta, tau)
    np.testing.assert_allclose(robust.proba_many(eta[:50], tau[:50]), plain.proba_many(eta[:50], tau[:50]), rtol=1e-10)
    np.testing.assert_allclose(robust._optimizer.w_ag, plain._optimizer.w_ag, rtol=1e-10, atol=1e-14)


def test_sample_weights_have_mean_one_under_p():
    model = GroupRobustFairRegressionPostProcessor(profile="paper", L=5, p=[0.6, 0.3, 0.1])
    model._q = np.array([0.2, 0.3, 0.5])
    onehot = np.eye(3)
    assert np.array([0.6, 0.3, 0.1]) @ model.sample_weights(onehot) == pytest.approx(1.0, abs=1e-15)
    np.testing.assert_allclose(model.sample_weights(onehot), [0.2 / 0.6, 1.0, 5.0])


def test_learn_one_equals_learn_many_bit_for_bit():
    s, tau, eta = minority_stream(700, 3)
    keys = [f"m{i}" if i % 3 else None for i in range(700)]
    one = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, refresh=64)
    many = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, refresh=64)
    for i in range(700):
        one.learn_one(eta[i], tau[i], key=keys[i])
    many.learn_many(eta[:300], tau[:300], keys=keys[:300])
    many.learn_many(eta[300:], tau[300:], keys=keys[300:])
    np.testing.assert_array_equal(one._optimizer.w_ag, many._optimizer.w_ag)
    np.testing.assert_array_equal(one.dro.losses, many.dro.losses)
    assert one.dro_diagnostics().n_pending == many.dro_diagnostics().n_pending == 426  # keyed among 640 folded


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
def test_late_labels_correct_exactly_like_labels_before_the_refresh(updater):
    """Labels applied before their block is folded in, or after: the same group risks and weights."""
    s, tau, eta = minority_stream(200, 4)
    y = eta + np.random.default_rng(5).normal(0, 0.3, 200)
    keys = [str(i) for i in range(200)]
    early = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, updater=updater, refresh=200)
    late = GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, updater=updater, refresh=200)
    early.learn_many(eta[:199], tau[:199], keys=keys[:199])
    for i in range(0, 199, 2):
        assert early.learn_label(keys[i], y[i])  # the block is still open: the true loss is folded in
    early.learn_many(eta[199:], tau[199:], keys=keys[199:])  # completes the block: refresh
    late.learn_many(eta, tau, keys=keys)  # refresh with surrogate losses ...
    for i in range(0, 199, 2):
        assert late.learn_label(keys[i], y[i])  # ... corrected afterwards
    np.testing.assert_allclose(early.dro.losses, late.dro.losses, rtol=1e-12)
    np.testing.assert_allclose(early.dro.weights, late.dro.weights, rtol=1e-12)
    assert not np.allclose(
        early.dro.losses,
        GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}, refresh=200).dro.losses,
    )
    for model in (early, late):
        diagnostics = model.dro_diagnostics()
        assert diagnostics.n_labels == 100 and diagnostics.label_coverage == pytest.approx(0.5)
        assert diagnostics.n_pending == 100
    assert not late.learn_label("0", 1.0)  # already labelled
    assert not late.learn_label("unknown", 1.0)


def test_a_shifted_target_range_gives_the_same_group_risks_and_weights_with_labels_in_its_units():
    s, tau, eta = minority_stream(400, 6)
    eta[::50] = 1.5  # outside the range: clipped in the costs and in the group risks alike
    y = eta + np.random.default_rng(7).normal(0, 0.3, 400)
    keys = [str(i) for i in range(400)]
    config = dict(L=10, p=[0.85, 0.15], refresh=100)
    unit, shifted = (GroupRobustFairRegressionPostProcessor(B=B, **config) for B in (1.0, (2.0, 4.0)))
    unit.learn_many(eta, tau, keys=keys)
    shifted.learn_many(eta + 3.0, tau, keys=keys)
    for i in range(0, 400, 3):
        assert unit.learn_label(keys[i], y[i]) and shifted.learn_label(keys[i], y[i] + 3.0)
    np.testing.assert_allclose(shifted.dro.losses, unit.dro.losses, rtol=1e-9)
    np.testing.assert_allclose(shifted.dro.weights, unit.dro.weights, rtol=1e-9)
    np.testing.assert_allclose(shifted.proba_many(eta + 3.0, tau), unit.proba_many(eta, tau), rtol=0, atol=1e-8)


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
def test_a_scaled_target_range_gives_the_same_weights_with_group_risks_in_its_units(updater):
    """``temperature`` and ``step`` are shares of the cost scale: the weights do not depend on the target's units."""
    s, tau, eta = minority_stream(1000, 8)
    y = eta + np.random.default_rng(9).normal(0, 0.3, 1000)
    keys = [str(i) for i in range(1000)]
    config = dict(p=[0.85, 0.15], updater=updater)
    unit, scaled = (GroupRobustFairRegressionPostProcessor(B=B, **config) for B in (1.0, (10.0, 40.0)))  # x 15
    unit.learn_many(eta, tau, keys=keys)
    scaled.learn_many(25.0 + 15.0 * eta, tau, keys=keys)
    for i in range(0, 1000, 3):
        assert unit.learn_label(keys[i], y[i]) and scaled.learn_label(keys[i], 25.0 + 15.0 * y[i])
    assert unit.dro.weights[1] > 2 * 0.15  # the minority, worst off, weighs more than twice its share
    np.testing.assert_allclose(scaled.dro.losses, 225.0 * unit.dro.losses, rtol=1e-9)
    np.testing.assert_allclose(scaled.dro.weights, unit.dro.weights, rtol=1e-9)
    np.testing.assert_allclose(scaled.proba_many(25.0 + 15.0 * eta, tau), unit.proba_many(eta, tau), rtol=0, atol=1e-8)
    report = scaled.dro_diagnostics()  # reported in the target's units
    np.testing.assert_allclose(report.group_risks, 225.0 * unit.dro_diagnostics().group_risks, rtol=1e-9)
    np.testing.assert_allclose(report.robust_value, 225.0 * unit.dro_diagnostics().robust_value, rtol=1e-9)


@pytest.mark.parametrize("updater, path", [("softmax", ("temperature",)), ("exponentiated", ("config", "step"))])
def test_a_checkpoint_with_the_unscaled_constant_restores_with_the_configured_one(updater, path):
    """A checkpoint written while ``temperature`` / ``step`` were in the losses' units continues in the cost scale's."""
    s, tau, eta = minority_stream(600, 10)
    written = GroupRobustFairRegressionPostProcessor(B=(10.0, 40.0), p=[0.85, 0.15], updater=updater)
    written.learn_many(25.0 + 15.0 * eta[:300], tau[:300])
    state = written.state_dict()
    holder = state["dro"]["updater"]
    for name in path[:-1]:
        holder = holder[name]
    assert holder[path[-1]] != 0.01  # this version stores the constant in the losses' units ...
    holder[path[-1]] = 0.01  # ... an older one stored the setting itself
    restored = GroupRobustFairRegressionPostProcessor.from_state_dict(state)
    for model in (written, restored):
        model.learn_many(25.0 + 15.0 * eta[300:], tau[300:])
    np.testing.assert_array_equal(restored.dro.weights, written.dro.weights)
    np.testing.assert_array_equal(restored.proba_many(eta[:20] * 15.0 + 25.0, tau[:20]),
                                  written.proba_many(eta[:20] * 15.0 + 25.0, tau[:20]))


def test_label_changes_group_risk_by_the_base_models_error():
    model = GroupRobustFairRegressionPostProcessor(profile="paper", L=5, p=[0.5, 0.5], refresh=1, forgetting=0.0)
    model.learn_one(0.2, [1.0, 0.0], key="a")
    before = model.dro.losses.copy()
    proba = model._learning_proba(np.array([0.2]), np.array([[1.0, 0.0]]))  # same dual: no step since
    model.learn_label("a", 0.7)
    true_loss = float(proba[0] @ (model.atoms - 0.7) ** 2)
    surrogate = float(proba[0] @ (model.atoms - 0.2) ** 2)
    weight = model.dro.stats.weights[0]
    assert model.dro.losses[0] - before[0] == pytest.approx((true_loss - surrogate) / weight, rel=1e-12)
    assert model.dro.losses[1] == before[1]


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
def test_a_label_outside_the_target_range_is_clipped_to_it_and_counted(updater):
    """A label of 100 with B = 1, counted as 100, moved all the softmax weight to its group; clipped, it counts as 1."""
    s, tau, eta = minority_stream(300, 11)
    keys = [str(i) for i in range(300)]
    config = dict(L=10, p=[0.85, 0.15], refresh=100, updater=updater)
    wild, tame = (GroupRobustFairRegressionPostProcessor(**config) for _ in range(2))
    for model in (wild, tame):
        model.learn_many(eta[:250], tau[:250], keys=keys[:250])
    majority = int(np.flatnonzero(s[:200] == 0)[0])
    assert wild.learn_label(keys[majority], 100.0) and tame.learn_label(keys[majority], 1.0)  # folded: corrected
    assert wild.learn_label(keys[210], -100.0) and tame.learn_label(keys[210], -1.0)  # early: the block is open
    assert wild.learn_label(keys[5], 0.3) and tame.learn_label(keys[5], 0.3)  # in range: as it is
    for model in (wild, tame):
        model.learn_many(eta[250:], tau[250:], keys=keys[250:])
    np.testing.assert_array_equal(wild.dro.losses, tame.dro.losses)
    np.testing.assert_array_equal(wild.dro.weights, tame.dro.weights)
    assert wild.dro.weights[1] > 0.5  # the minority stays the worst off (with 100 the softmax weights were (1, 0))
    assert (wild.dro_diagnostics().n_labels_clipped, tame.dro_diagnostics().n_labels_clipped) == (2, 0)
    assert wild.dro_diagnostics().n_labels == 3
    assert not wild.learn_label("unknown", 100.0) and wild.dro_diagnostics().n_labels_clipped == 2  # not used


def test_a_label_is_clipped_to_a_shifted_target_range():
    s, tau, eta = minority_stream(100, 12)
    wild, tame = (GroupRobustFairRegressionPostProcessor(B=(2.0, 4.0), L=10, p=[0.85, 0.15], refresh=50)
                  for _ in range(2))
    for model in (wild, tame):
        model.learn_many(eta + 3.0, tau, keys=list(range(100)))
    assert wild.learn_label(7, 10.0) and tame.learn_label(7, 4.0)
    assert wild.learn_label(8, 3.9) and tame.learn_label(8, 3.9)
    np.testing.assert_array_equal(wild.dro.losses, tame.dro.losses)
    assert wild.dro_diagnostics().n_labels_clipped == 1


def test_the_clipped_label_count_round_trips_and_a_state_from_before_it_loads():
    s, tau, eta = minority_stream(150, 13)
    model = GroupRobustFairRegressionPostProcessor(L=10, p=[0.85, 0.15], refresh=100)
    model.learn_many(eta, tau, keys=list(range(150)))
    assert len(model.state_dict()["dro"]["counters"]) == 2  # none clipped: the format of before the count
    assert model.learn_label(3, 7.0) and model.learn_label(120, 0.2)  # one late, one early in the open block
    state = model.state_dict()
    assert state["dro"]["counters"] == [1, 0, 1]  # the early label counts as applied when its block is folded
    assert GroupRobustFairRegressionPostProcessor.from_state_dict(state).dro_diagnostics().n_labels_clipped == 1
    assert pickle.loads(pickle.dumps(model)).dro_diagnostics().n_labels_clipped == 1
    # a state written before labels were clipped: two counters, and an early label kept as it came
    state["dro"]["counters"] = [1, 0]
    state["dro"]["early_labels"] = [[120, 5.0]]
    old = GroupRobustFairRegressionPostProcessor.from_state_dict(state)
    assert old.dro_diagnostics().n_labels_clipped == 1 and old._early_labels == {120: 1.0}  # clipped, counted
    state["dro"]["early_labels"] = [[120, 0.2]]
    assert GroupRobustFairRegressionPostProcessor.from_state_dict(state).dro_diagnostics().n_labels_clipped == 0


def test_pending_labels_are_bounded():
    model = GroupRobustFairRegressionPostProcessor(profile="paper", L=5, p=[0.5, 0.5], refresh=10, max_pending=25)
    s, tau, eta = minority_stream(60, 6)
    model.learn_many(eta, tau, keys=list(range(60)))
    diagnostics = model.dro_diagnostics()
    assert diagnostics.n_pending == 25 and diagnostics.n_expired == 35
    assert not model.learn_label(0, 0.0) and model.learn_label(59, 0.0)


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
def test_state_round_trip_mid_block_with_pending_labels(updater):
    s, tau, eta = minority_stream(900, 7)
    keys = [f"k{i}" for i in range(900)]
    a = GroupRobustFairRegressionPostProcessor(
        **{"profile": "paper", **CONFIG}, updater=updater, refresh=50, forgetting=1e-3
    )
    a.learn_many(eta[:430], tau[:430], keys=keys[:430])
    a.learn_label("k420", 0.3)  # an early label in the open block
    a.learn_label("k10", 0.1)  # a late label
    b = GroupRobustFairRegressionPostProcessor.from_state_dict(a.state_dict())
    c = pickle.loads(pickle.dumps(a))
    for model in (b, c):
        model.learn_many(eta[430:], tau[430:], keys=keys[430:])
        assert model.learn_label("k20", 0.5)
        assert model.dro_diagnostics().n_labels == 3
    a.learn_many(eta[430:], tau[430:], keys=keys[430:])
    a.learn_label("k20", 0.5)
    for model in (b, c):
        np.testing.assert_array_equal(a.dro.weights, model.dro.weights)
        np.testing.assert_array_equal(a.dro.losses, model.dro.losses)
        np.testing.assert_array_equal(a._optimizer.w_ag, model._optimizer.w_ag)
        np.testing.assert_array_equal(a.proba_many(eta[:20], tau[:20]), model.proba_many(eta[:20], tau[:20]))


def test_validation_names_the_argument():
    with pytest.raises(ValueError, match="updater"):
        GroupRobustFairRegressionPostProcessor(profile="paper", p=[0.5, 0.5], updater="max")
    with pytest.raises(ValueError, match="temperature"):
        GroupRobustFairRegressionPostProcessor(profile="paper", p=[0.5, 0.5], temperature=0.0)
    with pytest.raises(ValueError, match="refresh"):
        GroupRobustFairRegressionPostProcessor(profile="paper", p=[0.5, 0.5], refresh=0)
    model = GroupRobustFairRegressionPostProcessor(profile="paper", p=[0.5, 0.5])
    with pytest.raises(ValueError, match="keys"):
        model.learn_many([0.1, 0.2], [[0.5, 0.5]] * 2, keys=["a"])
    with pytest.raises(ValueError, match="y"):
        model.learn_label("a", float("nan"))
