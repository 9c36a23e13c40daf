"""Every invalid argument of the surrogate methods raises ``ValueError`` naming the argument and the value.

A rejected call must also leave the optimiser or the tuner untouched (no half-learned event), and no call may
return or keep a non-finite value silently.  The River wrappers' refusals are in
``tests/connectors/river/test_surrogates_river_validation.py``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamfair.surrogates import (
    SGD,
    SSO,
    BlackBoxProblem,
    CellSurrogates,
    ExactGradient,
    FeedbackWindow,
    FiniteDifference,
    GradientEstimate,
    LinearInterpolation,
    MetricWeightTuner,
    StepConfig,
    SurrogatePGD,
    TargetLoss,
    TargetSurrogate,
    TwoStepFiniteDifference,
    check_surrogate_kinds,
    pgd_step,
    project,
    target_loss,
)
from tests.support.errors import check_error
from tests.support.surrogates import published, squared_error, state

NAN, INF = math.nan, math.inf
X3 = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])


# ------------------------------------------------------------------------------- SSO and SGD
def sso(**kwargs) -> SSO:
    model = SSO(2, **{"batch_size": 3, **kwargs})
    model.step(np.eye(2), [1.0, 2.0])
    model.learn_one([1.0, 1.0], 1.0)  # one buffered event
    return model


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: target_loss(["squared"]), ("loss", "['squared']")),
        (lambda: TargetLoss("hinge", 1.0), ("name", "'hinge'")),
        (lambda: TargetLoss("squared", -1.0), ("smoothness", "-1.0")),
        (lambda: TargetLoss("squared", NAN), ("smoothness", "nan")),
        (lambda: target_loss("squared").value([NAN], [0.0]), ("z", "nan")),
        (lambda: target_loss("squared").value([0.0, 0.0], [0.0, 0.0, 0.0]), ("y", "(3,)")),
        (lambda: target_loss("logistic").derivative([0.0], [INF]), ("y", "inf")),
        (lambda: SGD(2, loss=["squared"]), ("loss", "['squared']")),
        (lambda: SSO(2, decay=-1.0), ("decay", "-1.0")),  # checked whatever the schedule
        (lambda: SSO(2, decay="fast"), ("decay", "'fast'")),
        (lambda: SSO(2, horizon=0), ("horizon", "0")),
        (lambda: SSO(2, horizon=2.5), ("horizon", "2.5")),
    ],
)
def test_losses_and_constructors_reject(call, fragments):
    check_error(call, *fragments)


def test_a_zero_l2_of_any_number_type_is_accepted():
    assert SSO(2, l2=np.int64(0)).l2 == 0.0 and SGD(2, l2=np.float32(0.0)).l2 == 0.0


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda s: s.step([[NAN, 0.0], [0.0, 1.0]], [1.0, 2.0]), ("X", "entry (0, 0)", "nan")),
        (lambda s: s.step([[1.0, INF]], [1.0]), ("X", "entry (0, 1)", "inf")),
        (lambda s: s.step([[10**400, 0.0]], [1.0]), ("X", "10000")),
        (lambda s: s.learn_one([0.0, 1.0], NAN), ("y", "nan")),
        (lambda s: s.learn_one([0.0, 1.0], INF), ("y", "inf")),
        (lambda s: s.learn_one([0.0, 1.0], "a"), ("y", "'a'")),
        (lambda s: s.learn_one([0.0, 1.0], None), ("y", "None")),
        (lambda s: s.learn_one([0.0, 1.0], [1.0, 2.0]), ("y", "[1.0, 2.0]")),
        (lambda s: s.learn_one([0.0, 1.0], True), ("y", "True")),
    ],
)
def test_sso_rejects_bad_events_and_batches_untouched(call, fragments):
    model = sso()
    before = state(model)
    check_error(lambda: call(model), *fragments)
    assert state(model) == before


def test_a_bad_label_is_refused_when_buffered_not_when_the_batch_is_full():
    """A logistic label 0 used to be buffered, then failed the batch's step and lost the good events."""
    model = SSO(2, loss="logistic", batch_size=2)
    model.learn_one([0.0, 1.0], 1.0)
    before = state(model)
    check_error(lambda: model.learn_one([1.0, 0.0], 0.0), "y", "-1 or +1", "0.0")
    assert state(model) == before and len(model._buffer) == 1


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("make", [lambda: SGD(2, alpha=10.0), lambda: SSO(2, alpha=10.0, m=5)])
def test_a_diverging_step_is_refused_and_theta_stays_finite(make):
    model, x, y = make(), np.array([[3.0, 1.0]]), np.array([1.0])
    with pytest.raises(ValueError) as info:
        for _ in range(1000):
            before = state(model)
            model.step(x, y)
    assert "diverged" in str(info.value) and "alpha" in str(info.value) and "10.0" in str(info.value)
    assert state(model) == before and np.all(np.isfinite(model.theta))


@pytest.mark.filterwarnings("ignore:overflow:RuntimeWarning")
def test_a_failed_batch_step_keeps_the_buffer_and_drops_the_new_event():
    model = SSO(2, batch_size=3)
    model.learn_one([3.0, 1.0], -1e300)  # its squared loss overflows
    model.learn_one([1.0, 1.0], 1.0)
    before = state(model)
    check_error(lambda: model.learn_one([3.0, 1.0], 1.0), "diverged", "batch loss", "eta")
    assert state(model) == before and len(model._buffer) == 2
    check_error(model.flush, "diverged")
    assert state(model) == before


def surrogate(**kwargs) -> TargetSurrogate:
    fields = dict(X=np.eye(2), z=np.zeros(2), gradient_z=np.ones(2), eta=1.0, loss_at_z=0.5, l2=0.0)
    return TargetSurrogate(**{**fields, **kwargs})


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: surrogate(eta=0.0), ("eta", "0.0")),
        (lambda: surrogate(eta=NAN), ("eta", "nan")),
        (lambda: surrogate(l2=-1.0), ("l2", "-1.0")),
        (lambda: surrogate(z=np.zeros(3)), ("z", "(3,)")),
        (lambda: surrogate(gradient_z=np.array([NAN, 0.0])), ("gradient_z", "nan")),
        (lambda: surrogate(X=np.ones(2)), ("X", "(2,)")),
        (lambda: surrogate().value(np.zeros(1)), ("theta", "(1,)")),
        (lambda: surrogate().value(np.array([NAN, 0.0])), ("theta", "nan")),
        (lambda: surrogate().gradient(np.zeros(3)), ("theta", "(3,)")),
        (lambda: surrogate().minimize(np.array([0.0, INF])), ("theta", "inf")),
    ],
)
def test_target_surrogate_rejects(call, fragments):
    check_error(call, *fragments)


def test_the_loss_at_the_query_point_may_be_unknown_but_not_infinite():
    """An external oracle gives no loss value (nan); an infinite one is an overflow."""
    assert math.isnan(surrogate(loss_at_z=NAN).loss_at_z)
    check_error(lambda: surrogate(loss_at_z=INF), "loss_at_z", "inf")


# ------------------------------------------------------------------------------- cell surrogates and problem
CELLS = dict(X=X3, y=[1, -1, 1], cells=[0, 1, 1])


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(X=[["a", "b"]] * 3), ("X", "'a'")),
        (dict(X=[[1.0, 0.0], [NAN, 1.0], [1.0, 1.0]]), ("X", "entry (1, 0)", "nan")),
        (dict(X=[[10**400, 0.0]] * 3), ("X", "10000")),
        (dict(cells=[0.0, 1.0, 1.0]), ("cells", "0.0")),
        (dict(cells=[0, -1, 1]), ("cells", "entry 1", "-1")),
        (dict(cells=[[0], [1, 1]]), ("cells",)),
    ],
)
def test_cell_surrogates_reject(kwargs, fragments):
    check_error(lambda: CellSurrogates(**{**CELLS, **kwargs}), *fragments)


CELL_CALLS = [
    (lambda c: c.values(np.zeros(1)), ("theta", "(1,)")),
    (lambda c: c.values([NAN, 0.0]), ("theta", "nan")),
    (lambda c: c.values(["a", "b"]), ("theta", "'a'")),
    (lambda c: c.values_from_scores(np.zeros(2)), ("scores", "(2,)")),
    (lambda c: c.values_from_scores([NAN, 0.0, 0.0]), ("scores", "nan")),
    (lambda c: c.pointwise(np.zeros(2)), ("scores", "(2,)")),
    (lambda c: c.gradient(np.zeros(2), np.ones(1)), ("weights", "(1,)")),
    (lambda c: c.gradient(np.zeros(2), np.array([NAN, 1.0])), ("weights", "nan")),
    (lambda c: c.gradient(np.zeros(1), np.ones(2)), ("theta", "(1,)")),
    (lambda c: c.gradient_from_scores(np.zeros(2), np.ones(2)), ("scores", "(2,)")),
    (lambda c: c.perturb_scores(np.zeros(3), [NAN, 0.5]), ("targets", "nan")),
    (lambda c: c.perturb_scores(np.zeros(3), ["a", "b"]), ("targets", "'a'")),
    (lambda c: c.perturb_scores([NAN, 0.0, 0.0], [0.3, 0.5]), ("scores", "nan")),
    (lambda c: c.perturb_scores([INF, 0.0, 0.0], [0.3, 0.5]), ("scores", "inf")),
    (lambda c: c.perturb_scores([0.0, 0.0], [0.3, 0.5]), ("scores", "(2,)")),
]


@pytest.mark.parametrize("call,fragments", CELL_CALLS)
def test_cell_surrogate_methods_reject(call, fragments):
    check_error(lambda: call(CellSurrogates(**CELLS)), *fragments)


def test_cell_methods_take_lists_like_arrays():
    cells = CellSurrogates(**CELLS)
    assert cells.pointwise([0.0, 0.0, 0.0]).tolist() == cells.pointwise(np.zeros(3)).tolist()


@pytest.mark.timeout(5)  # fails instead of searching forever
@pytest.mark.parametrize("loss", ["logistic", "hinge", "squared"])
def test_an_infinite_target_is_refused_instead_of_searched_forever(loss):
    cells = CellSurrogates(X3, [1.0, -1.0, 1.0], [0, 1, 1], loss=loss)
    check_error(lambda: cells.perturb_scores(np.zeros(3), [INF, 0.5]), "targets", "inf")


def test_a_zero_squared_cell_loss_names_the_scores():
    cells = CellSurrogates(X3, [1.0, 2.0, 3.0], [0, 1, 1], loss="squared")
    check_error(lambda: cells.perturb_scores([1.0, 2.0, 3.0], [0.3, 0.5]), "scores", "cell 0", "loss > 0")


def metric_sum(cells: CellSurrogates):
    return lambda scores: float(cells.values_from_scores(scores).sum())


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda c: BlackBoxProblem("cells", np.mean), ("surrogates", "'cells'")),
        (lambda c: BlackBoxProblem(c, np.mean, [["a", "b"]]), ("metric_features", "'a'")),
        (lambda c: BlackBoxProblem(c, np.mean, [[NAN, 0.0]]), ("metric_features", "nan")),
        (lambda c: BlackBoxProblem(c, np.mean, np.zeros((0, 2))), ("metric_features", "(0, 2)")),
    ],
)
def test_problem_constructor_rejects(call, fragments):
    check_error(lambda: call(CellSurrogates(**CELLS)), *fragments)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda p: p.metric_at(np.zeros(1)), ("theta", "(1,)")),
        (lambda p: p.metric_at(np.array([NAN, 0.0])), ("theta", "nan")),
        (lambda p: p.metric_of_scores(np.zeros(2)), ("scores", "(2,)")),
        (lambda p: p.metric_of_scores(np.array([0.0, INF, 0.0])), ("scores", "inf")),
    ],
)
def test_problem_rejects_bad_parameters_before_calling_the_metric(call, fragments):
    problem = BlackBoxProblem(CellSurrogates(**CELLS), np.mean)
    check_error(lambda: call(problem), *fragments)
    assert problem.metric_calls == 0


@pytest.mark.parametrize("value,shown", [("abc", "'abc'"), (None, "None"), (np.ones(3), "[1.0, 1.0, 1.0]")])
def test_a_metric_value_that_is_not_a_number_is_named(value, shown):
    problem = BlackBoxProblem(CellSurrogates(**CELLS), lambda scores: value)
    check_error(lambda: problem.metric_at(np.zeros(2)), "metric", "finite number", shown)


def test_project_rejects_surrogates_of_another_type():
    check_error(lambda: project("cells", [0.1, 0.1], np.zeros(2)), "surrogates", "'cells'")


# ------------------------------------------------------------------------------- gradient estimates and Algorithm 1
@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(sigma_growth=INF), ("sigma_growth", "inf")),
        (dict(sigma_growth="2"), ("sigma_growth", "'2'")),
        (dict(sigma_growth=None), ("sigma_growth", "None")),
        (dict(clip_negative="yes"), ("clip_negative", "'yes'")),
        (dict(clip_negative=1), ("clip_negative", "1")),
    ],
)
def test_step_config_rejects(kwargs, fragments):
    check_error(lambda: StepConfig(**kwargs), *fragments)
    check_error(lambda: SurrogatePGD(problem(), LinearInterpolation(3), **kwargs), *fragments)


@pytest.mark.parametrize(
    "coordinates,fragments",
    [([0.5], ("coordinates", "[0.5]")), ([0, 0], ("coordinates", "[0, 0]")), ([-1], ("coordinates", "[-1]")),
     ([], ("coordinates", "[]")), ("x", ("coordinates", "'x'")), ([[0]], ("coordinates", "[[0]]")),
     (NAN, ("coordinates", "nan")), (INF, ("coordinates", "inf"))],
)
def test_coordinates_must_be_distinct_indices(coordinates, fragments):
    check_error(lambda: LinearInterpolation(3, coordinates=coordinates), *fragments)


def problem() -> BlackBoxProblem:
    cells = CellSurrogates(**CELLS)
    return BlackBoxProblem(cells, metric_sum(cells))


RNG = np.random.default_rng(0)
SAMPLING = [LinearInterpolation(3), FiniteDifference(3), TwoStepFiniteDifference(3)]
ALL = [*SAMPLING, ExactGradient(lambda u: np.ones(2))]


@pytest.mark.parametrize(
    "estimators,call,fragments",
    [
        (ALL, lambda e, p: e.estimate(p, np.zeros(1), RNG), ("theta", "(1,)")),
        (ALL, lambda e, p: e.estimate(p, np.array([NAN, 0.0]), RNG), ("theta", "nan")),
        (ALL, lambda e, p: e.estimate("problem", np.zeros(2), RNG), ("problem", "'problem'")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), RNG, -1.0), ("sigma", "-1.0")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), RNG, 0.0), ("sigma", "0.0")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), RNG, NAN), ("sigma", "nan")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), RNG, INF), ("sigma", "inf")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), None), ("rng", "None")),
        (SAMPLING, lambda e, p: e.estimate(p, np.zeros(2), 3), ("rng", "3")),
    ],
)
def test_estimates_reject_bad_arguments_before_calling_the_metric(estimators, call, fragments):
    for estimator in estimators:
        p = problem()
        check_error(lambda e=estimator, p=p: call(e, p), *fragments)
        assert p.metric_calls == 0


def test_an_exact_gradient_must_be_finite():
    estimator = ExactGradient(lambda u: np.array([NAN, 1.0]))
    check_error(lambda: estimator.estimate(problem(), np.zeros(2), RNG), "psi_gradient", "nan")


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_sigma_that_overflows_the_perturbed_surrogates_is_named():
    flat = BlackBoxProblem(CellSurrogates(**CELLS), lambda scores: 1.0)
    check_error(lambda: LinearInterpolation(3, sigma=1e308).estimate(flat, np.zeros(2), RNG), "sigma", "1e+308")


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda p, e, c: pgd_step(p, np.array([NAN, 0.0]), e, c, RNG, 0.1), ("theta", "nan")),
        (lambda p, e, c: pgd_step(p, np.zeros(1), e, c, RNG, 0.1), ("theta", "(1,)")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, RNG, -1.0), ("sigma", "-1.0")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, RNG, NAN), ("sigma", "nan")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, RNG, INF), ("sigma", "inf")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, RNG, 0.1, -1), ("iteration", "-1")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, RNG, 0.1, 1.5), ("iteration", "1.5")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, {}, RNG, 0.1), ("config", "{}")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), e, c, None, 0.1), ("rng", "None")),
        (lambda p, e, c: pgd_step(p, np.zeros(2), "e", c, RNG, 0.1), ("estimator", "'e'")),
        (lambda p, e, c: pgd_step("p", np.zeros(2), e, c, RNG, 0.1), ("problem", "'p'")),
        (lambda p, e, c: SurrogatePGD("p", e), ("problem", "'p'")),
        (lambda p, e, c: SurrogatePGD(p, 3), ("estimator", "3")),
    ],
)
def test_algorithm_1_rejects_bad_arguments_before_calling_the_metric(call, fragments):
    p = problem()
    check_error(lambda: call(p, LinearInterpolation(3), StepConfig()), *fragments)
    assert p.metric_calls == 0


class AlwaysDeadZone:
    """An estimator whose every estimate is a dead zone."""

    def __init__(self, sigma: float):
        self.sigma = sigma

    def estimate(self, problem, theta, rng, sigma=None):
        return GradientEstimate(np.zeros(problem.n_cells), sigma, 0, 1.0, 0.0, NAN, 0)


def test_dead_zones_never_raise_sigma_to_infinity():
    p = problem()
    _, report = pgd_step(p, np.zeros(2), AlwaysDeadZone(1e308), StepConfig(), RNG, 1e308)
    assert report.sigma == 1e308 and report.sigma_raises == 0 and report.skipped


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_a_flat_metric_ends_with_an_error_naming_sigma_and_the_state_kept():
    cells = CellSurrogates(**CELLS)
    pgd = SurrogatePGD(BlackBoxProblem(cells, lambda scores: 1.0), LinearInterpolation(2))
    with pytest.raises(ValueError) as info:
        for _ in range(1000):
            before = (len(pgd.history), pgd.sigma, pgd.theta.tolist())
            pgd.step()
    assert "sigma" in str(info.value)
    assert (len(pgd.history), pgd.sigma, pgd.theta.tolist()) == before and math.isfinite(pgd.sigma)


# ------------------------------------------------------------------------------- the tuner
def tuner(n_events: int = 3, **kwargs) -> MetricWeightTuner:
    tuned = MetricWeightTuner(2, 2, squared_error, **{"every": 4, "window": 8, **kwargs})
    rng = np.random.default_rng(1)
    for i in range(n_events):
        tuned.observe(rng.standard_normal(2), float(np.sign(rng.standard_normal())), i % 2)
    return tuned


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: check_surrogate_kinds(None), ("surrogate_kinds", "None")),
        (lambda: check_surrogate_kinds(5), ("surrogate_kinds", "5")),
        (lambda: check_surrogate_kinds("loss"), ("surrogate_kinds", "got 'loss'")),
        (lambda: check_surrogate_kinds(["fairness_violation"], "no"), ("assume_monotone", "'no'")),
        (lambda: tuner(0, metric_fraction="0.5"), ("metric_fraction", "'0.5'")),
        (lambda: tuner(0, metric_fraction=None), ("metric_fraction", "None")),
        (lambda: tuner(0, coordinates=[5]), ("coordinates", "[5]")),
        (lambda: tuner(0, coordinates=[0.5]), ("coordinates", "[0.5]")),
        (lambda: tuner(0, sigma_growth=INF), ("sigma_growth", "inf")),
        (lambda: tuner(0, clip_negative="x"), ("clip_negative", "'x'")),
        (lambda: tuner(0, surrogate_kinds=3), ("surrogate_kinds", "3")),
    ],
)
def test_tuner_configuration_rejects(call, fragments):
    check_error(call, *fragments)


OBSERVE = [
    (lambda t: t.observe([0.0, 0.0], NAN, 0), ("y", "nan")),
    (lambda t: t.observe([0.0, 0.0], INF, 0), ("y", "inf")),
    (lambda t: t.observe([0.0, 0.0], "a", 0), ("y", "'a'")),
    (lambda t: t.observe([0.0, 0.0], None, 0), ("y", "None")),
    (lambda t: t.observe([0.0, 0.0], 1.0, 0, ["a"]), ("extra", "'a'")),
    (lambda t: t.observe([0.0, 0.0], 1.0, 0, [[1.0, 2.0]]), ("extra", "[[1.0, 2.0]]")),
    (lambda t: t.observe_many([[0.0, 0.0], [NAN, 0.0]], [1.0, 1.0], [0, 1]), ("X", "entry (1, 0)", "nan")),
    (lambda t: t.observe_many([0.0, 0.0], [1.0, 1.0], [0, 1]), ("X", "(2,)")),
    (lambda t: t.observe_many([["a", "b"]], [1.0], [0]), ("X", "'a'")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], [0, 2]), ("cells", "entry 1", "2")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], [0, 1.7]), ("cells", "1.7")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], [False, True]), ("cells", "False")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], 0), ("cells", "0")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], [0, 1], [None, [1.0]]), ("extra", "first event")),
    (lambda t: t.observe_many(np.zeros((2, 2)), [1.0, 1.0], [0, 1], 5), ("extra", "5")),
    # a bad last row is found before the rows before it reach an outer step
    (lambda t: t.observe_many(np.r_[np.ones((4, 2)), [[NAN, 0.0]]], np.ones(5), [0, 1, 0, 1, 0]), ("X", "(4, 0)")),
]


@pytest.mark.parametrize("n_events", [0, 3])
@pytest.mark.parametrize("call,fragments", OBSERVE)
def test_a_rejected_event_is_not_recorded(n_events, call, fragments):
    tuned = tuner(n_events)
    before = state(tuned)
    check_error(lambda: call(tuned), *fragments)
    assert state(tuned) == before


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_a_label_other_than_plus_or_minus_one_is_refused_when_observed(loss):
    tuned = tuner(3, loss=loss)
    before = state(tuned)
    check_error(lambda: tuned.observe([0.0, 0.0], 0.0, 0), "y", "-1 or +1", "0.0")
    check_error(lambda: tuned.observe_many(np.zeros((2, 2)), [1.0, 0.5], [0, 1]), "y", "0.5")
    assert state(tuned) == before


WINDOW = dict(X=np.ones((3, 1)), y=np.zeros(3), cells=np.zeros(3, dtype=int), extra=np.zeros((3, 0)))


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(y=np.zeros(2)), ("y", "(2,)")),
        (dict(y=np.full(3, NAN)), ("y", "nan")),
        (dict(cells=np.zeros(2, dtype=int)), ("cells", "[0, 0]")),
        (dict(cells=np.zeros(3)), ("cells", "0.")),
        (dict(X=np.zeros(3)), ("X", "(3,)")),
        (dict(X=np.full((3, 1), INF)), ("X", "inf")),
        (dict(extra=np.zeros(3)), ("extra", "(3,)")),
        (dict(extra=np.zeros((2, 0))), ("extra", "(2, 0)")),
    ],
)
def test_feedback_window_rejects(kwargs, fragments):
    check_error(lambda: FeedbackWindow(**{**WINDOW, **kwargs}), *fragments)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda: published().sample_weight(2), ("cell", "2")),
        (lambda: published().sample_weight(-1), ("cell", "-1")),
        (lambda: published().sample_weight(1.5), ("cell", "1.5")),
        (lambda: published().sample_weight(None), ("cell", "None")),
        (lambda: published().sample_weights([0, 2]), ("cells", "entry 1", "2")),
        (lambda: published().sample_weights([-1]), ("cells", "-1")),
        (lambda: published().sample_weights([0.5]), ("cells", "0.5")),
        (lambda: published(cell_shares=np.array([0.0, 1.0])), ("cell_shares", "0.0")),
        (lambda: published(cell_shares=np.array([0.5, 0.6])), ("cell_shares", "[0.5, 0.6]", "sum 1.1")),
        (lambda: published(cell_weights=np.array([NAN, 1.0])), ("cell_weights", "nan")),
        (lambda: published(cell_weights=np.array([-1.0, 3.0])), ("cell_weights", "-1.0")),
        (lambda: published(cell_weights=np.array([1.0])), ("cell_shares", "(1,)")),
        (lambda: published(theta=np.array([NAN, 0.0])), ("theta", "nan")),
        (lambda: published(version=-1), ("version", "-1")),
        (lambda: published(n_events=-5), ("n_events", "-5")),
        (lambda: published(metric=INF), ("metric", "inf")),
    ],
)
def test_published_weights_reject(call, fragments):
    check_error(call, *fragments)
