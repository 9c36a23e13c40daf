"""The DRO package's public calls refuse bad input with a ``ValueError`` naming the argument and the value.

A refused update leaves the object's state as it was: nothing is half-learned.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from streamfair.dro import (
    ChiSquareTracker,
    CVaRTracker,
    ExponentiatedGroupWeights,
    GroupRobustFairRegressionPostProcessor,
    KLTracker,
    SoftmaxGroupWeights,
    chi_square_divergence,
    kl_divergence,
    log_sum_exp,
    project_capped_simplex,
    project_simplex,
    softmax,
)
from streamfair.dro.problem import CVaRSet, LinearDROProblem, make_synthetic
from tests.support.errors import check_error

NAN, INF = math.nan, math.inf
TRACKERS = {
    "cvar": lambda: CVaRTracker(alpha=0.2),
    "cvar-smooth": lambda: CVaRTracker(alpha=0.2, temperature=0.5),
    "chi-square": lambda: ChiSquareTracker(rho=0.5),
    "chi-square-penalized": lambda: ChiSquareTracker(lam=0.5),
    "kl": lambda: KLTracker(temperature=1.0),
}


def learned(make):
    tracker = make()
    tracker.update_many([0.3, 1.2, 0.7])
    return tracker


# ---------------------------------------------------------------- online trackers
BAD_TRACKER_CALLS = [
    (lambda t: t.update(NAN), ("loss", "nan")),
    (lambda t: t.update("x"), ("loss", "'x'")),
    (lambda t: t.update([1.0, 2.0]), ("loss", "[1.0, 2.0]")),
    (lambda t: t.weight(NAN), ("loss", "nan")),
    (lambda t: t.weight(INF), ("loss", "inf")),
    (lambda t: t.weight(1.0, eta=NAN), ("eta", "nan")),
    (lambda t: t.dual_value("x", 0.0), ("loss", "'x'")),
    (lambda t: t.dual_value(1.0, -INF), ("eta", "-inf")),
    (lambda t: t.correct(None, 1.0), ("receipt", "None")),
    (lambda t: t.correct(t.update(1.0)[1], NAN), ("loss", "nan")),
    (lambda t: t.update_many([1.0, NAN]), ("losses", "entry 1", "nan")),
]


@pytest.mark.parametrize("name", sorted(TRACKERS))
@pytest.mark.parametrize("call,fragments", BAD_TRACKER_CALLS)
def test_tracker_refuses_bad_input(name, call, fragments):
    tracker = learned(TRACKERS[name])
    check_error(lambda: call(tracker), *fragments)


@pytest.mark.parametrize(
    "make,loss",
    [
        (lambda: ChiSquareTracker(rho=0.5), 1e200),  # (l - eta)^2 overflows
        (lambda: ChiSquareTracker(lam=0.5), 1e200),
        (lambda: KLTracker(temperature=1e-10), 1e300),  # l / T overflows
    ],
)
def test_a_loss_beyond_the_floating_point_range_is_refused_and_changes_nothing(make, loss):
    tracker = learned(make)
    before = pickle.dumps(tracker.state_dict())
    check_error(lambda: tracker.update(loss), "loss", "too large", repr(loss))
    assert pickle.dumps(tracker.state_dict()) == before
    _, receipt = tracker.update(1.0)
    before = pickle.dumps(tracker.state_dict())
    check_error(lambda: tracker.correct(receipt, loss), "loss", "too large", repr(loss))
    assert pickle.dumps(tracker.state_dict()) == before
    tracker.update(0.5)  # still usable
    assert all(math.isfinite(tracker.state_dict()[key]) for key in ("eta", "lam", "value"))


def test_a_large_loss_within_the_range_is_accepted():
    """The CVaR weight is bounded: a loss of 1e300 is a valid, if extreme, sample."""
    tracker = learned(lambda: CVaRTracker(alpha=0.2))
    assert tracker.update(1e300)[0] == 5.0


# ---------------------------------------------------------------- group weights and the robust post-processor
GROUP_UPDATERS = [lambda: SoftmaxGroupWeights(2, temperature=1.0), lambda: ExponentiatedGroupWeights(2, step=0.1)]


@pytest.mark.parametrize("make", GROUP_UPDATERS)
@pytest.mark.parametrize(
    "loss,tau,fragments",
    [
        ([1.0, 2.0], [0.5, 0.5], ("loss", "[1.0, 2.0]")),
        ("x", [0.5, 0.5], ("loss", "'x'")),
        (1.0, ["a", "b"], ("tau", "['a', 'b']")),
        (1.0, ["0.5", "0.5"], ("tau", "['0.5', '0.5']")),  # numbers as text, which numpy would read
        (1.0, np.array([b"0.5", b"0.5"]), ("tau", "b'0.5'")),
        (1.0, [NAN, 0.5], ("tau", "nan")),
    ],
)
def test_group_weights_refuse_bad_input_and_change_nothing(make, loss, tau, fragments):
    updater = make()
    updater.update(1.0, [0.5, 0.5])
    before = pickle.dumps(updater.state_dict())
    check_error(lambda: updater.update(loss, tau), *fragments)
    assert pickle.dumps(updater.state_dict()) == before


def test_prior_weight_must_be_finite():
    check_error(lambda: SoftmaxGroupWeights(2, temperature=1.0, prior_weight=INF), "prior_weight", "inf")


def test_robust_post_processor_checks_its_public_hooks():
    robust = GroupRobustFairRegressionPostProcessor(L=10, p=[0.75, 0.25])
    check_error(lambda: robust.sample_weights(np.array([[NAN, 0.5]])), "tau", "row 0", "nan")
    check_error(lambda: robust.sample_weights(np.array([0.5, 0.5])), "tau", "(n, 2)", "(2,)")
    robust.learn_one(0.1, [0.5, 0.5], key="a")
    check_error(lambda: robust.learn_label("a", "x"), "y", "'x'")


@pytest.mark.parametrize("call", [
    lambda robust: robust.learn_one(0.3, [0.5, 0.5], key=[1]),
    lambda robust: robust.learn_many([0.3, 0.2], [[0.5, 0.5]] * 2, keys=["a", [1]]),
    lambda robust: robust.proba_learn_one(0.3, [0.5, 0.5], key=[1]),
    lambda robust: robust.predict_learn_one(0.3, [0.5, 0.5], key=[1]),
    lambda robust: robust.learn_label([1], 0.3),
])
def test_an_unhashable_key_is_refused_before_anything_is_learned(call):
    """It was a TypeError after the step: the sample learned, but missing from the block of the DRO weights."""
    robust = GroupRobustFairRegressionPostProcessor(L=5, p=[0.5, 0.5], seed=0)
    robust.learn_one(0.1, [0.5, 0.5], key="a")
    before = pickle.dumps(robust.state_dict())
    check_error(lambda: call(robust), "key", "[1]")
    assert pickle.dumps(robust.state_dict()) == before


# ---------------------------------------------------------------- primitives and problems
@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: chi_square_divergence([0.7, 0.7]), ("q", "1.4")),
        (lambda: chi_square_divergence([]), ("q", "[]", "sum 0")),
        (lambda: chi_square_divergence([0.5, NAN]), ("q", "nan")),
        (lambda: kl_divergence([1.5, -0.5]), ("q", "-0.5")),
        (lambda: log_sum_exp(np.array([1.0, NAN])), ("values", "nan")),
        (lambda: log_sum_exp(np.array([1.0, INF])), ("values", "inf")),
        (lambda: log_sum_exp(np.array([[1.0, 2.0]])), ("values", "(1, 2)")),
        (lambda: log_sum_exp(np.array([])), ("values", "(0,)")),
        (lambda: softmax([]), ("scores", "at least one entry", "(0,)")),  # was numpy's "zero-size array ..."
        (lambda: softmax(np.zeros((2, 0))), ("scores", "(2, 0)")),
        (lambda: softmax(np.zeros((0, 2)), axis=0), ("scores", "axis 0", "(0, 2)")),
        (lambda: softmax(np.array([1.0, NAN])), ("scores", "nan")),
        (lambda: project_simplex(np.array([1.0, NAN])), ("v", "nan")),
        (lambda: project_simplex(np.array([])), ("v", "(0,)")),
        (lambda: project_capped_simplex(np.array([1.0, 2.0]), NAN), ("cap", "nan")),
        (lambda: project_capped_simplex(np.array([]), 0.5), ("v", "(0,)")),
        (lambda: CVaRSet(1.5), ("alpha", "(0, 1]", "1.5")),
        (lambda: make_synthetic(10, 2, CVaRSet(0.5), seed=0, flip=1.5), ("flip", "1.5")),
        (lambda: make_synthetic(10, 2, None, seed=0), ("robust", "CVaRSet", "None")),
        (lambda: LinearDROProblem(np.eye(2), [1.0, -1.0], "cvar"), ("robust", "'cvar'")),
    ],
)
def test_primitives_refuse_bad_input(call, fragments):
    check_error(call, *fragments)


def test_softmax_of_no_score_along_another_axis_is_an_empty_result():
    """Only an empty slice has no maximum: zero slices of two scores give zero rows of probabilities."""
    assert softmax(np.zeros((0, 2))).shape == (0, 2)


def test_log_sum_exp_keeps_minus_infinity():
    """``-inf`` exponents are zero terms, not errors."""
    assert log_sum_exp(np.array([-INF, 0.0])) == 0.0
    assert log_sum_exp(np.array([-INF, -INF])) == -INF
