"""Every invalid argument of the complex-metric package raises ``ValueError`` naming it and its value.

A rejected call must also leave a stateful object untouched: a randomized classifier's draw
counter, a streaming learner's confusion, multipliers and snapshots, a refit's window.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

from streamfair.complex_metrics import (
    CostSensitive,
    Coverage,
    DemographicParity,
    EqualOpportunity,
    MicroF1,
    OnlinePrimalDual,
    Precision,
    Problem,
    QMean,
    RandomizedClassifier,
    Sample,
    SoftmaxRegression,
    StreamingFrankWolfe,
    WindowedRefit,
    ZeroOneError,
    best_mixture,
    bisection,
    constrained_bisection,
    constrained_ellipsoid,
    constrained_gda,
    ellipsoid,
    frank_wolfe,
    gradient_descent_ascent,
    prune,
    select,
    sparsify,
    split_frank_wolfe,
)
from tests.support.errors import check_error

NAN, INF = math.nan, math.inf
RNG = np.random.default_rng(0)
PROBA = RNG.dirichlet([1.0, 1.0, 1.0], 20)
Y = np.arange(20) % 3
GROUPS = np.arange(20) % 2
TAU = RNG.dirichlet([1.0, 1.0], 20)
C = np.array([[0.4, 0.1], [0.2, 0.3]])  # a 2-class confusion matrix (a distribution)
T = np.array([[[0.3, 0.1], [0.1, 0.0]], [[0.1, 0.2], [0.0, 0.2]]])  # two groups
P3 = [0.2, 0.3, 0.5]


def sample():
    return Sample(PROBA, Y)


def aware_sample():
    return Sample(PROBA, Y, GROUPS)


def problem():
    return Problem(QMean(), sample(), [Coverage(0.3)])  # d = 3 recalls + 3 rates = 6


# ---------------------------------------------------------------- metrics and constraints
@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: CostSensitive("abc"), ("costs", "'abc'")),
        (lambda: CostSensitive(np.ones((1, 1))), ("costs", "n >= 2", "(1, 1)")),
        (lambda: CostSensitive(np.empty((0, 0))), ("costs", "(0, 0)")),
        (lambda: CostSensitive([[0.0, NAN], [1.0, 0.0]]), ("costs", "entry (0, 1) is nan")),
        (lambda: Coverage(0.1, target=[NAN, 0.5]), ("target", "nan")),
        (lambda: Coverage(0.1, target=[1.5, -0.5]), ("target", "[1.5, -0.5]")),
        (lambda: Coverage(0.1, target=[0.5]), ("target", "(1,)")),
        (lambda: Coverage(0.1, target="ab"), ("target", "'ab'")),
        (lambda: EqualOpportunity(0.1, positive=-1), ("positive", "-1")),
        (lambda: EqualOpportunity(0.1, positive=1.5), ("positive", "1.5")),
        (lambda: EqualOpportunity(0.1, positive=None), ("positive", "None")),
        (lambda: Precision(1.5, 0.8), ("cls", "1.5")),
        (lambda: Precision(-1, 0.8), ("cls", "-1")),
        (lambda: Precision(None, 0.8), ("cls", "None")),
        (lambda: Precision(1, "a"), ("minimum", "'a'")),
        (lambda: Precision(1, True), ("minimum", "True")),
        (lambda: Precision(1, np.array([0.5, 0.6])), ("minimum", "0.6")),
    ],
)
def test_metric_and_constraint_constructors_reject(call, fragments):
    check_error(call, *fragments)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: QMean()(C * 100), ("confusion", "sum", "100")),  # counts, not a distribution
        (lambda: ZeroOneError()(C / 2), ("confusion", "sum", "0.5")),
        (lambda: CostSensitive([[0.0, 1.0], [5.0, 0.0]])(C * 100), ("confusion", "100")),
        (lambda: DemographicParity(0.1)(T * 100), ("confusion", "100")),
        (lambda: Precision(1, 0.5)(np.zeros((2, 2))), ("confusion", "summing to 0")),
        (lambda: MicroF1()(np.zeros((2, 2))), ("confusion", "summing to 0")),
        (lambda: QMean()("abc"), ("confusion", "'abc'")),
        (lambda: QMean()(np.empty((0, 2, 2))), ("confusion", "(0, 2, 2)")),
        (lambda: QMean()([[0.4, NAN], [0.2, 0.3]]), ("confusion", "entry (0, 0, 1) is nan")),
        (lambda: Coverage(0.1)([[0.4, 0.2], [-0.1, 0.5]]), ("confusion", "entry (0, 1, 0) is -0.1")),
    ],
)
def test_a_confusion_must_be_a_distribution(call, fragments):
    check_error(call, *fragments)


def test_confusion_sum_tolerance_is_documented_and_applied():
    QMean()(C + 2.5e-5)  # sums to 1 + 1e-4: accepted
    check_error(lambda: QMean()(C + 2.5e-4), "confusion", "1.001")


# ---------------------------------------------------------------- samples
@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: Sample("abc"), ("proba", "'abc'")),
        (lambda: Sample([[0.5, 0.5], [1.0]]), ("proba", "[[0.5, 0.5], [1.0]]")),
        (lambda: Sample(PROBA, Y, ["a"] * 20), ("groups", "<U1")),
        (lambda: Sample(PROBA, Y, [None] * 20), ("groups", "object")),
        (lambda: Sample(PROBA, Y, np.where(GROUPS == 1, NAN, 0.0)), ("groups", "float64")),
        (lambda: Sample(PROBA, Y, n_groups=3), ("n_groups=3", "groups or tau")),
        (lambda: Sample(PROBA, Y, tau=TAU, n_groups=3), ("n_groups=3", "tau", "2 columns")),
        (lambda: Sample(PROBA, Y, tau="x"), ("tau", "'x'")),
        (lambda: aware_sample().predict(np.full((6, 3), NAN)), ("scores", "nan")),
        (lambda: aware_sample().predict(np.ones((3, 3))), ("scores", "(6, 3)", "(3, 3)")),
        (lambda: aware_sample().predict("x"), ("scores", "'x'")),
        (lambda: sample().confusion(np.r_[Y[:-1], 3]), ("predictions", "0..3")),  # was counted in a wrong cell
        (lambda: sample().confusion(np.r_[-1, Y[1:]]), ("predictions", "-1..2")),
        (lambda: sample().confusion(Y + 0.5), ("predictions", "float64")),
        (lambda: sample().confusion(Y[:5]), ("predictions", "(5,)")),
        (lambda: Sample(PROBA, Y, tau=TAU).confusion(np.r_[Y[:-1], 3]), ("predictions", "0..3")),
        (lambda: sample().subset([0, 20]), ("rows", "[0, 20]")),
        (lambda: sample().subset([]), ("rows", "[]")),
        (lambda: sample().subset([0.5, 1.5]), ("rows", "[0.5, 1.5]")),
        (lambda: sample().subset([True, False]), ("rows", "[True, False]")),
        (lambda: sample().subset(np.zeros(20, dtype=bool)), ("rows", "at least one row")),
    ],
)
def test_sample_rejects(call, fragments):
    check_error(call, *fragments)


# ---------------------------------------------------------------- problems
@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: Problem(None, sample()), ("metric", "NoneType")),
        (lambda: Problem(QMean, sample()), ("metric", "type")),
        (lambda: Problem(QMean(), PROBA), ("sample", "ndarray")),
        (lambda: Problem(QMean(), sample(), Coverage(0.1)), ("constraints", "Coverage(eps=0.1")),
        (lambda: Problem(QMean(), sample(), [QMean()]), ("constraints", "QMean")),
        (lambda: Problem(QMean(), sample(), None), ("constraints", "None")),
        (lambda: problem().with_metric(None), ("metric", "NoneType")),
        (lambda: problem().objective(np.full(6, NAN)), ("v", "entry 0 is nan")),
        (lambda: problem().objective(np.ones(5)), ("v", "(6,)", "(5,)")),
        (lambda: problem().objective_gradient(np.full(6, INF)), ("v", "inf")),
        (lambda: problem().constraint_values(np.ones((6, 1))), ("v", "(6, 1)")),
        (lambda: problem().violation(np.full(6, NAN)), ("v", "nan")),
        (lambda: problem().conjugate_argmin(np.full(6, NAN)), ("g", "nan")),
        (lambda: problem().scores(np.full(6, NAN)), ("w", "nan")),
        (lambda: problem().lmo(np.full(6, NAN)), ("w", "nan")),
        (lambda: problem().lmo("x"), ("w", "'x'")),
        (lambda: problem().point(np.ones((1, 3, 3))), ("confusion", "summing to 9")),
        (lambda: problem().point(np.full((1, 3, 3), NAN)), ("confusion", "nan")),
        (lambda: problem().point(np.ones((2, 3, 3)) / 18), ("confusion", "(1, 3, 3)", "(2, 3, 3)")),
        (lambda: problem().oracle(np.full((3, 3), NAN)), ("scores", "nan")),
        (lambda: problem().oracle(np.ones(3)), ("scores", "(3,)")),
        (lambda: problem().constant(-1), ("j", "-1")),
        (lambda: problem().constant(3), ("j", "0..2", "3")),
        (lambda: problem().constant(None), ("j", "None")),
    ],
)
def test_problem_rejects(call, fragments):
    check_error(call, *fragments)


# ---------------------------------------------------------------- batch solvers and re-weighting
SOLVERS = [frank_wolfe, split_frank_wolfe, gradient_descent_ascent, constrained_gda, ellipsoid,
           constrained_ellipsoid, bisection, constrained_bisection]


@pytest.mark.parametrize("solver", SOLVERS, ids=lambda solver: solver.__name__)
def test_solvers_need_a_problem(solver):
    check_error(lambda: solver(None), "problem", "NoneType")


def ratio_problem():
    return Problem(MicroF1(), sample(), [Coverage(0.3)])


def components():
    p = problem()
    return [p.baseline()] + [p.constant(j) for j in range(3)]


POINTS = np.array([[0.0], [1.0], [2.0]])


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: split_frank_wolfe(problem(), 3, steps=(NAN, 0.1, 0.1)), ("steps", "nan")),
        (lambda: split_frank_wolfe(problem(), 3, steps=(0.5, -0.1, 0.1)), ("steps", "-0.1")),
        (lambda: split_frank_wolfe(problem(), 3, steps=(0.5, 0.1)), ("steps", "(0.5, 0.1)")),
        (lambda: split_frank_wolfe(problem(), 3, steps=None), ("steps", "None")),
        (lambda: split_frank_wolfe(problem(), 3, pruning="yes"), ("pruning", "'yes'")),
        (lambda: constrained_gda(problem(), 3, pruning=None), ("pruning", "None")),
        (lambda: constrained_bisection(ratio_problem(), 2, inner_iterations=0), ("inner_iterations", "0")),
        (lambda: constrained_bisection(ratio_problem(), 2, 3, bogus=1), ("congda", "bogus")),
        (lambda: prune(problem(), []), ("components", "[]")),
        (lambda: prune(problem(), [None]), ("components", "NoneType")),
        (lambda: prune(None, components()), ("problem", "NoneType")),
        (lambda: prune(problem(), [Problem(QMean(), sample()).baseline()]), ("components", "(6,)", "(3,)")),
        (lambda: best_mixture(problem(), []), ("components", "[]")),
        (lambda: best_mixture(problem(), components(), iterations=-1), ("iterations", "-1")),
        (lambda: best_mixture(problem(), components(), iterations=1.5), ("iterations", "1.5")),
        (lambda: best_mixture(problem(), components(), tolerance=NAN), ("tolerance", "nan")),
        (lambda: best_mixture(problem(), components(), tolerance=-1.0), ("tolerance", "-1.0")),
        (lambda: sparsify(POINTS, [NAN, 0.5, 0.5]), ("weights", "nan")),
        (lambda: sparsify(POINTS, [-0.5, 1.0, 0.5]), ("weights", "-0.5")),
        (lambda: sparsify(POINTS, [0.5, 0.5, 0.5]), ("weights", "sum 1.5")),
        (lambda: sparsify(POINTS, [0.0, 0.0, 0.0]), ("weights", "sum 0")),
        (lambda: sparsify(POINTS, [0.5, 0.5]), ("weights", "(2,)")),
        (lambda: sparsify([[NAN], [1.0], [2.0]], [1 / 3] * 3), ("points", "entry (0, 0) is nan")),
        (lambda: sparsify([0.0, 1.0, 2.0], [1 / 3] * 3), ("points", "(3,)")),
        (lambda: sparsify(np.empty((0, 1)), []), ("points", "(0, 1)")),
        (lambda: select([frank_wolfe(problem(), 2)], tolerance=NAN), ("tolerance", "nan")),
        (lambda: select([None]), ("fits", "NoneType")),
        (lambda: select([]), ("fits", "[]")),
    ],
)
def test_solver_arguments_are_checked(call, fragments):
    check_error(call, *fragments)


# ---------------------------------------------------------------- randomized classifiers
ALWAYS = [np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])]


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: RandomizedClassifier([0.5, 0.5], [np.full((2, 2), NAN)] * 2), ("scores", "nan")),
        (lambda: RandomizedClassifier([0.5, 0.5], [np.full((2, 2), INF)] * 2), ("scores", "inf")),
        (lambda: RandomizedClassifier([1.0], "x"), ("scores", "'x'")),
        (lambda: RandomizedClassifier([], np.zeros((0, 2, 2))), ("scores", "(0, 2, 2)")),
        (lambda: RandomizedClassifier("ab", ALWAYS), ("weights", "'ab'")),
        (lambda: SoftmaxRegression(l2="a"), ("l2", "'a'")),
        (lambda: SoftmaxRegression(l2=None), ("l2", "None")),
        (lambda: SoftmaxRegression(l2=True), ("l2", "True")),
    ],
)
def test_classifier_constructors_reject(call, fragments):
    check_error(call, *fragments)


def classifiers():
    rng = np.random.default_rng(1)
    return {
        "none": RandomizedClassifier([0.5, 0.5], ALWAYS, seed=3),
        "aware": RandomizedClassifier([0.5, 0.5], rng.normal(size=(2, 4, 2)), "aware", 1),
        "unaware": RandomizedClassifier([0.5, 0.5], rng.normal(size=(2, 4, 2)), "unaware", 1),
    }


FOUR = np.full((4, 2), 0.5)


@pytest.mark.parametrize(
    "grouping,call,fragments",
    [
        ("aware", lambda h: h.predict_one([0.5, 0.5], [0, 1]), ("group", "[0, 1]")),
        ("none", lambda h: h.predict_one([0.5, 0.5], 5), ("group", "0..0", "5")),  # was ignored
        ("none", lambda h: h.predict_one([0.5, 0.5], tau=[0.2, 0.9]), ("tau", "(1, 1)")),
        ("aware", lambda h: h.predict_many(FOUR, groups=[0, 1]), ("groups", "(2,)")),
        ("aware", lambda h: h.predict_many(FOUR, groups=[[0, 1], [0, 1]]), ("groups", "(2, 2)")),  # was flattened
        ("aware", lambda h: h.predict_many(FOUR), ("group", "groups")),
        ("unaware", lambda h: h.predict_many(FOUR, tau=np.full(8, 0.5)), ("tau", "(8,)")),  # was reshaped
        ("unaware", lambda h: h.predict_one([0.5, 0.5], tau=["0.5", "0.5"]), ("tau", "'0.5'")),  # text, not numbers
        ("unaware", lambda h: h.predict_many(FOUR, tau=np.full((2, 4), 0.25)), ("tau", "(2, 4)")),
        ("none", lambda h: h.predict_many(FOUR, keys="abcd"), ("keys", "'abcd'")),
        ("none", lambda h: h.predict_many(FOUR, keys=5), ("keys", "5")),
        ("none", lambda h: h.confusion(None), ("sample", "NoneType")),
        ("none", lambda h: h.component_predictions(FOUR), ("sample", "ndarray")),
    ],
)
def test_rejected_prediction_leaves_the_classifier_untouched(grouping, call, fragments):
    h = classifiers()[grouping]
    groups, tau = [0, 1, 0, 1], np.full((4, 2), 0.5)
    h.predict_many(FOUR, groups if grouping == "aware" else None, tau if grouping == "unaware" else None)  # 4 draws
    before = pickle.dumps(h.state_dict())
    check_error(lambda: call(h), *fragments)
    assert pickle.dumps(h.state_dict()) == before


@pytest.mark.parametrize(
    "change,fragments",
    [
        (lambda state: state.pop("draws"), ("draws",)),
        (lambda state: state.update(draws=-1), ("draws", "-1")),
        (lambda state: state.update(draws=1.5), ("draws", "1.5")),
    ],
)
def test_bad_classifier_state_is_rejected(change, fragments):
    state = classifiers()["none"].state_dict()
    change(state)
    check_error(lambda: RandomizedClassifier.from_state_dict(state), *fragments)


def test_classifier_state_must_be_a_dict():
    check_error(lambda: RandomizedClassifier.from_state_dict(None), "state", "NoneType")


# ---------------------------------------------------------------- streaming: modes B and C
@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3, step="a"), ("step", "'a'")),
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3, step=True), ("step", "True")),
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3, step=np.array([0.5])), ("step", "0.5")),
        (lambda: StreamingFrankWolfe(None, n_classes=3), ("metric", "NoneType")),
        (lambda: StreamingFrankWolfe(Coverage(0.1), n_classes=3), ("metric", "Coverage")),
        (lambda: OnlinePrimalDual(QMean(), [None], n_classes=3), ("constraints", "NoneType")),
        (lambda: OnlinePrimalDual(QMean(), Coverage(0.1), n_classes=3), ("constraints", "Coverage(eps=0.1")),
        (lambda: OnlinePrimalDual(QMean(), [QMean()], n_classes=3), ("constraints", "QMean")),
    ],
)
def test_streaming_constructors_reject(call, fragments):
    check_error(call, *fragments)


def streaming(grouping):
    if grouping == "none":
        return StreamingFrankWolfe(QMean(), n_classes=3, snapshot_every=2)
    return OnlinePrimalDual(
        ZeroOneError(), [DemographicParity(0.1)], n_classes=3, n_groups=2, grouping=grouping, snapshot_every=2
    )


def with_row(array, row, value):
    array = np.array(array, dtype=float)
    array[row] = value
    return array


STREAMING_CALLS = [
    ("none", lambda o: o.learn_one(P3, 0, 1, group=5), ("group", "0..0", "5")),  # was ignored
    ("none", lambda o: o.learn_one(P3, 0, 1, tau=[0.3, 0.9]), ("tau", "[0.3, 0.9]")),
    ("none", lambda o: o.learn_one("abc", 0, 1), ("proba", "'abc'")),
    ("none", lambda o: o.predict_one(P3, 5), ("group", "5")),
    ("unaware", lambda o: o.predict_one(P3, 2), ("group", "0..1", "2")),
    ("unaware", lambda o: o.learn_one(P3, 0, 1, tau="ab"), ("tau", "'ab'")),
    ("unaware", lambda o: o.learn_one(P3, 0, 1, tau=["0.5", "0.5"]), ("tau", "['0.5', '0.5']")),  # text, not numbers
    ("none", lambda o: o.predict_one(["0.2", "0.3", "0.5"]), ("proba", "'0.2'")),
    # run: every argument is checked before the first sample is served
    ("none", lambda o: o.run(PROBA, Y[:10]), ("y", "(10,)")),
    ("none", lambda o: o.run(PROBA, np.r_[Y[:10], 5, Y[11:]]), ("y", "0..5")),
    ("none", lambda o: o.run(PROBA, Y + 0.5), ("y", "float64")),
    ("none", lambda o: o.run(PROBA, Y.astype(float)), ("y", "float64")),  # learn_one refuses y=1.0 too
    ("none", lambda o: o.run(PROBA, np.eye(3)[Y]), ("y", "(20, 3)")),
    ("none", lambda o: o.run(with_row(PROBA, 5, [NAN, 0.5, 0.5]), Y), ("proba", "row 5", "nan")),
    ("none", lambda o: o.run(PROBA[0], Y), ("proba", "(3,)")),
    ("none", lambda o: o.run(PROBA, Y, np.full(20, 5)), ("groups", "5..5")),
    ("aware", lambda o: o.run(PROBA, Y, GROUPS[:10]), ("groups", "(10,)")),
    ("aware", lambda o: o.run(PROBA, Y, GROUPS + 0.5), ("groups", "float64")),
    ("aware", lambda o: o.run(PROBA, Y, np.r_[GROUPS[:10], 2, GROUPS[11:]]), ("groups", "0..2")),
    ("unaware", lambda o: o.run(PROBA, Y, None, TAU[:10]), ("tau", "(10, 2)")),
    ("unaware", lambda o: o.run(PROBA, Y, None, with_row(TAU, 3, [0.5, 0.6])), ("tau", "row 3", "[0.5, 0.6]")),
    ("none", lambda o: o.classifier(-1), ("last", "-1")),
    ("none", lambda o: o.classifier(1.5), ("last", "1.5")),
    ("none", lambda o: o.classifier("a"), ("last", "'a'")),
]


@pytest.mark.parametrize("grouping,call,fragments", STREAMING_CALLS)
def test_rejected_streaming_call_leaves_the_learner_untouched(grouping, call, fragments):
    o = streaming(grouping)
    o.run(PROBA, Y, GROUPS if grouping == "aware" else None, TAU if grouping == "unaware" else None)
    before = pickle.dumps(o.state_dict())
    check_error(lambda: call(o), *fragments)
    assert pickle.dumps(o.state_dict()) == before


@pytest.mark.parametrize(
    "change,fragments",
    [
        (lambda state: state.pop("joint"), ("missing", "joint")),
        (lambda state: state.update(version=9), ("version", "9")),
        (lambda state: state.update(confusion=np.full((1, 3, 3), NAN)), ("confusion", "nan")),
        (lambda state: state.update(confusion=np.ones((1, 3, 3))), ("confusion", "summing to 9")),
        (lambda state: state.update(joint=np.full((1, 2), 0.5)), ("joint", "(1, 2)")),
        (lambda state: state.update(joint=np.full((1, 3), NAN)), ("joint", "nan")),
        (lambda state: state.update(joint=np.array([[1.0, 0.0, 0.0]])), ("class priors", "0.0")),
        (lambda state: state.update(n_labels=-1), ("n_labels", "-1")),
        (lambda state: state.update(n_labels=1.5), ("n_labels", "1.5")),
        (lambda state: state.update(multipliers=np.ones(5)), ("multipliers", "(5,)")),
        (lambda state: state.update(scores=np.ones((2, 2))), ("scores", "(2, 2)")),
        (lambda state: state.update(snapshots=[np.ones((1, 1))]), ("snapshots", "(1, 1)")),
        (lambda state: state.update(snapshots=None), ("snapshots", "NoneType")),
    ],
)
def test_bad_streaming_state_is_rejected_and_nothing_is_loaded(change, fragments):
    state = streaming("none").state_dict()
    change(state)
    o = streaming("none")
    o.run(PROBA, Y)
    before = pickle.dumps(o.state_dict())
    check_error(lambda: o.load_state_dict(state), *fragments)
    assert pickle.dumps(o.state_dict()) == before


def test_streaming_state_must_be_a_dict():
    check_error(lambda: streaming("none").load_state_dict(None), "state", "NoneType")


# ---------------------------------------------------------------- streaming: mode A
def refit(grouping="none", fit=None, **kwargs):
    config = dict(n_classes=3, window=10, refit_every=5)
    if grouping != "none":
        config.update(n_groups=2, grouping=grouping)
    config.update(kwargs)
    return WindowedRefit(fit or (lambda p: frank_wolfe(p, 5)), ZeroOneError(), **config)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: WindowedRefit(None, QMean(), n_classes=3), ("fit", "None")),
        (lambda: WindowedRefit(frank_wolfe, None, n_classes=3), ("metric", "NoneType")),
        (lambda: WindowedRefit(frank_wolfe, QMean(), [None], n_classes=3), ("constraints", "NoneType")),
        (lambda: refit(n_groups=2), ("grouping", "'none'", "n_groups=2")),
        (lambda: refit(grouping="aware", n_groups=1), ("grouping", "'aware'", "n_groups=1")),
        (lambda: refit().refit(), ("window", "learn_one")),
    ],
)
def test_refit_constructor_rejects(call, fragments):
    check_error(call, *fragments)


def refit_state(r):
    return pickle.dumps((r.n_arrivals, list(r._buffer), r.classifier.state_dict(), r.last_fit))


@pytest.mark.parametrize(
    "grouping,call,fragments",
    [
        ("none", lambda r: r.learn_one(P3, 5), ("y", "0..2", "5")),  # was stored, and failed every refit
        ("none", lambda r: r.learn_one(P3, -1), ("y", "-1")),
        ("none", lambda r: r.learn_one(P3, 1.0), ("y", "1.0")),
        ("none", lambda r: r.learn_one(P3, True), ("y", "True")),
        ("none", lambda r: r.learn_one(P3, "1"), ("y", "'1'")),
        ("none", lambda r: r.learn_one(P3, 1, group=3), ("group", "3")),
        ("none", lambda r: r.learn_one(P3, 1, tau=[0.5, 0.5]), ("tau", "[0.5, 0.5]")),
        ("aware", lambda r: r.learn_one(P3, 1, tau=[0.5, 0.5]), ("group-aware", "group")),  # was stored, then failed
    ],
)
def test_rejected_tuple_leaves_the_window_untouched(grouping, call, fragments):
    r = refit(grouping)
    for i in range(3):
        r.learn_one(P3, i, i % 2 if grouping != "none" else None, [0.5, 0.5] if grouping == "unaware" else None)
    before = refit_state(r)
    check_error(lambda: call(r), *fragments)
    assert refit_state(r) == before


def test_a_fit_that_returns_no_fit_is_refused_and_nothing_is_served():
    r = refit(fit=lambda problem: None, refit_every=100)
    r.learn_one(P3, 0)
    before = refit_state(r)
    check_error(r.refit, "fit", "NoneType")
    assert refit_state(r) == before


def test_unaware_refit_uses_the_groups_only_when_every_tuple_has_one():
    """The group is optional with "unaware": a window where only some tuples have it is refitted on tau."""
    r = refit("unaware", refit_every=4)
    r.learn_one(P3, 0, 0, [0.5, 0.5])
    r.learn_one(P3, 1, None, [0.4, 0.6])  # the group of this tuple is not known
    r.learn_one(P3, 2, 1, [0.3, 0.7])
    r.learn_one(P3, 0, 1, [0.5, 0.5])  # the refit: was an error, the window mixing known and unknown groups
    assert r.last_fit is not None and r.classifier.grouping == "unaware"


def test_aware_refit_serves_a_group_aware_classifier_even_if_tau_is_given():
    r = refit("aware", refit_every=4)
    for i in range(4):
        r.learn_one(P3, i % 3, i % 2, [0.5, 0.5])  # tau is not used by an aware refit
    assert r.classifier.grouping == "aware"  # was "unaware": the refit used tau
