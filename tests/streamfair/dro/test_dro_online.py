"""Online DRO updaters: arrival-corrected group weights, trackers with known answers, delayed-label corrections."""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamfair.checks import assert_same_state
from streamfair.dro import capped_softmax, chi_square, chi_square_penalized, kl_penalized
from streamfair.dro.group_losses import GroupLosses
from streamfair.dro.online_divergence import ChiSquareTracker, CVaRTracker, KLTracker
from streamfair.dro.online_group import ExponentiatedGroupWeights, SoftmaxGroupWeights
from tests.support.errors import check_error

ARRIVALS = np.array([0.8, 0.15, 0.05])
MEANS = np.array([0.4, 0.3, 0.5])


def bernoulli_stream(seed, n=20_000):
    rng = np.random.default_rng(seed)
    groups = rng.choice(3, size=n, p=ARRIVALS)
    return rng.binomial(1, MEANS[groups]).astype(float), np.eye(3)[groups]


# ---------------------------------------------------------------- the arrival-bias regression test
@pytest.mark.parametrize("p", [None, ARRIVALS.tolist()])
def test_arrival_corrected_update_finds_worst_group_uncorrected_does_not(p):
    for seed in range(20):
        losses, tau = bernoulli_stream(seed)
        corrected = ExponentiatedGroupWeights(3, step=0.01, p=p)
        naive = ExponentiatedGroupWeights(3, step=0.01, correct_arrivals=False)
        corrected.update_many(losses, tau)
        naive.update_many(losses, tau)
        assert corrected.weights[2] >= 0.9, (seed, corrected.weights)  # argmax_g mu_g
        assert naive.weights[0] >= 0.9, (seed, naive.weights)  # argmax_g pi_g mu_g: the pitfall


def test_softmax_weights_find_worst_group_under_imbalance():
    for seed in range(5):
        losses, tau = bernoulli_stream(seed)
        weights = SoftmaxGroupWeights(3, temperature=0.01)
        weights.update_many(losses, tau)
        assert weights.weights[2] >= 0.9
        assert weights.value == pytest.approx(
            0.01 * math.log(np.exp(weights.losses / 0.01).sum()), rel=1e-12
        )
        assert weights.losses.max() <= weights.value <= weights.losses.max() + 0.01 * math.log(3)


def test_batch_updates_equal_sequential_updates():
    losses, tau = bernoulli_stream(0, n=500)
    rng = np.random.default_rng(1)
    soft_tau = rng.dirichlet(np.ones(3), size=500)
    for make in (
        lambda: SoftmaxGroupWeights(3, temperature=0.1, forgetting=0.01),
        lambda: ExponentiatedGroupWeights(3, step=0.05),
        lambda: ExponentiatedGroupWeights(3, step=0.05, correct_arrivals=False),
    ):
        for attribution in (tau, soft_tau):
            one, many = make(), make()
            for loss, row in zip(losses, attribution, strict=True):
                one.update(loss, row)
            many.update_many(losses[:200], attribution[:200])
            many.update_many(losses[200:], attribution[200:])
            np.testing.assert_allclose(one.weights, many.weights, rtol=1e-10)
            np.testing.assert_allclose(one.losses, many.losses, rtol=1e-10)


def test_posterior_attribution_recovers_group_losses_without_seeing_groups():
    # x in {a, b}; P(S = 1 | a) = 0.2, P(S = 1 | b) = 0.9; the loss is a function of x (plus noise)
    rng = np.random.default_rng(3)
    n = 200_000
    x = rng.random(n) < 0.3
    posterior = np.where(x, 0.9, 0.2)
    tau = np.column_stack([1 - posterior, posterior])
    losses = np.where(x, 3.0, 1.0) + rng.normal(0, 0.5, n)
    s = rng.random(n) < posterior  # hidden
    truth = np.array([losses[~s].mean(), losses[s].mean()])
    for weights in (SoftmaxGroupWeights(2, temperature=0.1, prior_weight=0.0), ExponentiatedGroupWeights(2, step=1e-4)):
        weights.update_many(losses, tau)
        np.testing.assert_allclose(weights.losses, truth, atol=0.02)
    p_hat = (tau.sum(axis=0) + 1) / (n + 2)
    exp = ExponentiatedGroupWeights(2, step=1e-4)
    exp.update_many(losses, tau)
    assert exp.tau_sum == pytest.approx(tau.sum(axis=0))
    drift = (losses[:, None] * tau / p_hat).mean(axis=0)  # unbiased for the group losses
    np.testing.assert_allclose(drift, truth, atol=0.03)


# ---------------------------------------------------------------- delayed labels: exact corrections
@pytest.mark.slow
@pytest.mark.parametrize("forgetting", [0.0, 0.002])
def test_delayed_labels_reproduce_on_time_statistics_exactly(forgetting):
    rng = np.random.default_rng(4)
    n = 3000
    tau = rng.dirichlet(np.ones(3), size=n)
    true = rng.exponential(size=n)
    surrogate = true + rng.normal(0, 0.3, n)
    labelled = rng.random(n) < 0.7  # 30% of the labels never arrive
    delays = rng.integers(0, 400, n)
    final = np.where(labelled, true, surrogate)

    for make in (
        lambda: GroupLosses(3, forgetting=forgetting),
        lambda: SoftmaxGroupWeights(3, temperature=0.2, forgetting=forgetting),
        lambda: ExponentiatedGroupWeights(3, step=0.02, forgetting=forgetting),
    ):
        online, on_time = make(), make()
        pending: dict[int, list[int]] = {}
        receipts = {}
        for t in range(n):
            receipts[t] = online.update(surrogate[t], tau[t])
            on_time.update(final[t], tau[t])
            if labelled[t]:
                pending.setdefault(t + int(delays[t]), []).append(t)
            for s in pending.pop(t, []):
                online.correct(receipts[s], true[s])
        for s in sorted(k for due in pending.values() for k in due):  # labels arriving after the end
            online.correct(receipts[s], true[s])
        np.testing.assert_allclose(online.losses, on_time.losses, rtol=1e-11)
        if hasattr(online, "weights") and not isinstance(online, GroupLosses):
            np.testing.assert_allclose(online.weights, on_time.weights, rtol=1e-11)


def test_correction_rejects_unknown_receipt():
    stats = GroupLosses(2)
    receipt = stats.update(1.0, [0.5, 0.5])
    receipt.index = 5
    with pytest.raises(ValueError, match="receipt.index"):
        stats.correct(receipt, 2.0)


GROUP_UPDATERS = [
    lambda: GroupLosses(3, forgetting=0.01),
    lambda: SoftmaxGroupWeights(3, temperature=0.3, forgetting=0.01),
    lambda: ExponentiatedGroupWeights(3, step=0.2),  # arrival frequencies estimated: per-sample scales
]


def test_the_reviewers_repeated_correction_counts_once():
    """The report: the second ``correct(r, 3.0)`` moved group 0's loss from 1.5 to 2.5."""
    updater = SoftmaxGroupWeights(3, 0.3)
    receipt = updater.update(1.0, [1, 0, 0])
    updater.correct(receipt, 3.0)
    updater.correct(receipt, 3.0)
    assert updater.losses.tolist() == [1.5, 0.0, 0.0] and receipt.loss == 3.0


@pytest.mark.parametrize("make", GROUP_UPDATERS)
def test_a_group_correction_delivered_again_changes_nothing_and_a_later_one_replaces_it(make):
    """Labels arrive at least once: the state after two deliveries is the state after one, bit for bit."""
    losses, tau = bernoulli_stream(14, n=300)
    once, twice, revised = make(), make(), make()
    receipts = [updater.update_many(losses[:200], tau[:200]) for updater in (once, twice, revised)]
    singles = [updater.update(losses[200], tau[200]) for updater in (once, twice, revised)]
    for updater in (once, twice, revised):
        updater.update_many(losses[201:], tau[201:])
    for i, (updater, batch, single) in enumerate(zip((once, twice, revised), receipts, singles, strict=True)):
        if i == 2:  # a first (wrong) label, then the right one: the right one is counted, once
            updater.correct(batch.row(7), 5.0)
            updater.correct(single, -2.0)
        updater.correct(batch.row(7), 2.5)  # the receipt of update_many(...).row(i), taken anew
        updater.correct(single, 0.5)
        if i == 1:  # delivered again
            updater.correct(batch.row(7), 2.5)
            updater.correct(single, 0.5)
    assert_same_state(twice.state_dict(), once.state_dict())
    np.testing.assert_allclose(revised.losses, once.losses, rtol=1e-12)
    if not isinstance(once, GroupLosses):
        np.testing.assert_allclose(revised.weights, once.weights, rtol=1e-12)
    assert (receipts[1].row(7).loss, singles[1].loss) == (2.5, 0.5)  # the receipts record what is counted


@pytest.mark.parametrize("make", GROUP_UPDATERS)
def test_a_receipt_of_another_group_updater_is_refused_and_changes_nothing(make):
    losses, tau = bernoulli_stream(15, n=50)
    mine, other = make(), make()
    mine.update_many(losses, tau)
    receipt = other.update_many(losses, tau).row(3)
    before = mine.state_dict()
    check_error(lambda: mine.correct(receipt, 2.0), "receipt", "another updater's", "index=3")
    check_error(lambda: mine.correct(other.update(1.0, [1.0, 0.0, 0.0]), 2.0), "receipt", "another updater's")
    assert_same_state(mine.state_dict(), before)
    assert receipt.loss == losses[3]


# ---------------------------------------------------------------- trackers with known answers
@pytest.mark.slow
def test_cvar_tracker_converges_to_quantile_and_cvar_of_exponential():
    alpha = 0.1
    for seed in range(3):
        losses = np.random.default_rng(seed).exponential(size=200_000)
        tracker = CVaRTracker(alpha)
        weights = tracker.update_many(losses)
        assert tracker.threshold == pytest.approx(math.log(1 / alpha), abs=0.05)  # VaR
        assert tracker.value == pytest.approx(1 + math.log(1 / alpha), abs=0.05)  # CVaR
        assert weights[-100_000:].mean() == pytest.approx(1.0, abs=0.03)  # E_P[w] = 1


@pytest.mark.slow
def test_entropic_cvar_tracker_matches_batch_capped_softmax():
    losses = np.random.default_rng(5).exponential(size=200_000)
    tracker = CVaRTracker(0.1, temperature=0.3)
    tracker.update_many(losses)
    batch = capped_softmax(losses, 0.1, 0.3)
    # the batch value uses the entropy H(q); the density-ratio form uses -KL(q || P) = H(q) - log n
    assert tracker.value == pytest.approx(batch.value - 0.3 * math.log(losses.size), abs=0.03)
    assert tracker.threshold == pytest.approx(batch.dual - 0.3 * math.log(losses.size), abs=0.05)


@pytest.mark.slow
@pytest.mark.parametrize("rho", [0.1, 1.0])
def test_chi_square_constrained_joint_tracker_matches_batch(rho):
    losses = np.random.default_rng(6).uniform(size=200_000)
    tracker = ChiSquareTracker(rho=rho)
    tracker.update_many(losses)
    assert tracker.value == pytest.approx(chi_square(losses, rho).value, rel=0.01)
    assert tracker.threshold == pytest.approx(chi_square(losses, rho).dual, abs=0.02)


@pytest.mark.slow
def test_chi_square_penalized_tracker_matches_batch():
    losses = np.random.default_rng(7).beta(2, 5, size=200_000)
    tracker = ChiSquareTracker(lam=0.2)
    tracker.update_many(losses)
    batch = chi_square_penalized(losses, 0.2)
    assert tracker.value == pytest.approx(batch.value, rel=0.01)
    assert tracker.threshold == pytest.approx(batch.dual, abs=0.02)


def test_chi_square_penalized_tracker_with_a_constant_step_stays_at_its_known_answer():
    # what the constrained form's power check points to for drifting streams: uniform losses and
    # lam = 1/8 solve E[(l - eta)_+] = lam at eta = 1/2; the constant step keeps eta near it
    losses = np.random.default_rng(9).uniform(size=20_000)
    tracker = ChiSquareTracker(lam=0.125, step=0.01, power=0.0)
    thresholds = np.array([(tracker.update(loss), tracker.threshold)[1] for loss in losses])[10_000:]
    assert abs(thresholds.mean() - 0.5) < 0.02 and np.abs(thresholds - 0.5).max() < 0.25


def test_kl_tracker_is_exact_and_overflow_safe():
    losses = np.random.default_rng(8).exponential(size=5000)
    tracker = KLTracker(temperature=0.5)
    weights = tracker.update_many(losses)
    assert tracker.value == pytest.approx(kl_penalized(losses, 0.5).value, rel=1e-12)
    assert np.all(np.isfinite(weights))
    hot = KLTracker(temperature=1e-6)
    hot.update_many(np.array([1.0, 2.0, 3.0]))
    assert hot.value == pytest.approx(3.0 + 1e-6 * math.log(1 / 3), rel=1e-12)


# ---------------------------------------------------------------- tracker corrections
TRACKERS = [
    lambda: CVaRTracker(0.2),
    lambda: CVaRTracker(0.2, temperature=0.5),
    lambda: ChiSquareTracker(rho=0.5),
    lambda: ChiSquareTracker(lam=0.5),
    lambda: KLTracker(0.7),
]


@pytest.mark.parametrize("make", TRACKERS)
def test_immediate_correction_equals_on_time_update(make):
    rng = np.random.default_rng(9)
    losses = rng.uniform(size=300)
    online, on_time = make(), make()
    online.update_many(losses[:150])
    on_time.update_many(losses[:150])
    _, receipt = online.update(losses[150] + 0.4)
    online.correct(receipt, losses[150])
    on_time.update(losses[150])
    for name in ("eta", "lam", "value"):
        assert getattr(online, name) == pytest.approx(getattr(on_time, name), abs=1e-12)


@pytest.mark.parametrize("make", TRACKERS[:4])
def test_late_correction_of_the_value_is_exact_for_the_recorded_duals(make):
    rng = np.random.default_rng(10)
    losses = rng.uniform(size=400)
    surrogate = losses + rng.normal(0, 0.2, 400)
    tracker = make()
    tracker.value_rate = 0.01  # exponential averaging with a floor
    receipts = [tracker.update(loss)[1] for loss in surrogate]
    fixed = rng.choice(400, size=100, replace=False)
    for i in fixed:
        tracker.correct(receipts[i], losses[i])
    reference = 0.0
    for i, receipt in enumerate(receipts):  # the average of v(l_i; eta_i) with the confirmed losses
        tracker_eta, tracker_lam = tracker.eta, tracker.lam
        tracker.lam = receipt.lam
        loss = losses[i] if i in set(fixed.tolist()) else surrogate[i]
        reference += receipt.rate * (tracker.dual_value(loss, receipt.eta) - reference)
        tracker.eta, tracker.lam = tracker_eta, tracker_lam
    assert tracker.value == pytest.approx(reference, abs=1e-12)


@pytest.mark.parametrize("make", TRACKERS)
def test_a_tracker_correction_delivered_again_changes_nothing_and_a_later_one_replaces_it(make):
    losses = np.random.default_rng(16).uniform(size=300)
    once, twice, revised = make(), make(), make()
    receipts = []
    for tracker in (once, twice, revised):
        tracker.update_many(losses[:150])
        receipts.append(tracker.update(losses[150] + 0.4)[1])
        tracker.update_many(losses[151:])
    revised.correct(receipts[2], losses[150] - 0.3)  # a first (wrong) label, then the right one
    for tracker, receipt in zip((once, twice, revised), receipts, strict=True):
        tracker.correct(receipt, losses[150])
    twice.correct(receipts[1], losses[150])  # delivered again
    assert_same_state(twice.state_dict(), once.state_dict())
    assert receipts[1].loss == losses[150]
    for name in ("eta", "lam", "value"):  # the corrections add up: linear in the weights and the dual values
        assert getattr(revised, name) == pytest.approx(getattr(once, name), abs=1e-12)


@pytest.mark.parametrize("make", TRACKERS)
def test_a_receipt_of_another_tracker_is_refused_and_changes_nothing(make):
    losses = np.random.default_rng(17).uniform(size=20)
    mine, other = make(), make()
    mine.update_many(losses)
    other.update_many(losses[:10])
    _, receipt = other.update(losses[10])
    before = mine.state_dict()
    check_error(lambda: mine.correct(receipt, 0.5), "receipt", "another tracker's", "index=10")
    assert_same_state(mine.state_dict(), before)


def test_kl_late_corrections_are_exact():
    rng = np.random.default_rng(11)
    losses = rng.uniform(size=400)
    surrogate = losses + rng.normal(0, 0.2, 400)
    online = KLTracker(0.3, value_rate=0.02)
    receipts = [online.update(loss)[1] for loss in surrogate]
    for i in range(0, 400, 3):
        online.correct(receipts[i], losses[i])
    on_time = KLTracker(0.3, value_rate=0.02)
    on_time.update_many(np.where(np.arange(400) % 3 == 0, losses, surrogate))
    assert online.value == pytest.approx(on_time.value, abs=1e-12)


# ---------------------------------------------------------------- state
@pytest.mark.parametrize("make", TRACKERS)
def test_tracker_state_round_trip(make):
    losses = np.random.default_rng(12).uniform(size=200)
    a = make()
    a.update_many(losses[:100])
    b = type(a).from_state_dict(a.state_dict())
    np.testing.assert_array_equal(a.update_many(losses[100:]), b.update_many(losses[100:]))
    assert (a.eta, a.lam, a.value) == (b.eta, b.lam, b.value)
    with pytest.raises(ValueError, match="expected"):
        CVaRTracker.from_state_dict(KLTracker(1.0).state_dict())


def test_group_weights_state_round_trip():
    losses, tau = bernoulli_stream(13, n=400)
    for make in (lambda: SoftmaxGroupWeights(3, 0.1, forgetting=0.01), lambda: ExponentiatedGroupWeights(3, 0.05)):
        a = make()
        a.update_many(losses[:200], tau[:200])
        b = type(a).from_state_dict(a.state_dict())
        a.update_many(losses[200:], tau[200:])
        b.update_many(losses[200:], tau[200:])
        np.testing.assert_array_equal(a.weights, b.weights)
        np.testing.assert_array_equal(a.losses, b.losses)


def test_online_validation_names_the_argument():
    with pytest.raises(ValueError, match="tau"):
        SoftmaxGroupWeights(2, 0.1).update(1.0, [0.5, 0.6])
    with pytest.raises(ValueError, match="temperature"):
        SoftmaxGroupWeights(2, 0.0)
    with pytest.raises(ValueError, match="forgetting"):
        GroupLosses(2, forgetting=1.0)
    with pytest.raises(ValueError, match="alpha"):
        CVaRTracker(1.5)
    with pytest.raises(ValueError, match="power"):
        ChiSquareTracker(rho=1.0, power=2.0)
    with pytest.raises(ValueError, match="power must be >= 0.5 for the constrained chi-square tracker.*got 0.0"):
        ChiSquareTracker(rho=1.0, power=0.0)
    with pytest.raises(ValueError, match="loss"):
        CVaRTracker(0.5).update(float("inf"))
