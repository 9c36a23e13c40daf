"""The River estimator ``connectors.river.FairRegressor``: River's conventions, S handling, fairness."""

from __future__ import annotations

import copy
import inspect
import itertools
import math
import pickle
import warnings

import numpy as np
import pytest
from river import (
    base,
    checks,
    compose,
    dummy,
    evaluate,
    linear_model,
    metrics,
    multiclass,
    naive_bayes,
    neighbors,
    preprocessing,
    stats,
)

from connectors.experiments.datasets import load_law_held_out
from connectors.river import FairClassifier, FairRegressor, friedman_with_group
from streamfair import FairRegressionPostProcessor, evaluate_deterministic
from streamfair import evaluate as audit
from tests.support.river_data_checks import COMMON_DATA_CHECKS, NOTHING_TO_CORRECT, scaler_that_skips_the_group


def without_group(x: dict) -> dict:
    return {k: v for k, v in x.items() if k != "group"}


def scaled(model):
    return preprocessing.StandardScaler() | model


def make(**params) -> FairRegressor:
    """A fair regressor for the grouped Friedman stream, whose target is in ``[0, 30]``."""
    return FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(), **{"B": (0, 30), **params})


def trained(n: int = 600, **params) -> tuple[FairRegressor, list]:
    model = make(seed=7, **params)
    data = list(friedman_with_group(n, seed=1))
    for x, y in data:
        model.learn_one(x, y)
    return model, data


class SilentClassifier(base.Classifier):
    """A fake classifier with no opinion: ``predict_proba_one`` returns ``{}`` (unit tests only)."""

    def learn_one(self, x, y):
        pass

    def predict_proba_one(self, x):
        return {}

    def predict_one(self, x):
        return None


# ---------------------------------------------------------------- River's own checks
@pytest.mark.slow
@NOTHING_TO_CORRECT
@pytest.mark.parametrize("index", [0, 1], ids=["default", "non-default"])
def test_check_estimator(index):
    params = list(FairRegressor._unit_test_params())[index]
    checks.check_estimator(FairRegressor(**params))


@pytest.mark.slow
@NOTHING_TO_CORRECT
def test_check_estimator_behind_a_scaler():
    checks.check_estimator(preprocessing.StandardScaler() | make())


@pytest.mark.parametrize(
    "check",
    COMMON_DATA_CHECKS,
    ids=lambda check: check.__name__,
)
def test_river_data_checks_on_a_stream_with_the_group(check):
    """River's data-driven checks again, on data that carries S (TrumpApproval has none)."""
    check(make(), dataset=list(friedman_with_group(200, seed=3)))


@pytest.mark.parametrize(
    "params,sensitive_key,fragments",
    [
        ({}, "sex", ["tau(x) = [0.5, 0.5]", "corrects nothing", "sensitive='group'", "'sex'"]),  # S under another key
        ({"B": 1.0}, "group", ["of the first 1000 base predictions were outside the target range B=1.0"]),
    ],
    ids=["S not found", "B not given"],
)
def test_a_wrapper_that_corrects_nothing_says_why_once(params, sensitive_key, fragments):
    model = make(**params)
    stream = [({sensitive_key if k == "group" else k: v for k, v in x.items()}, y)
              for x, y in friedman_with_group(2000, seed=1)]
    with pytest.warns(UserWarning) as caught:
        for x, y in stream:
            model.learn_one(x, y)
    [warning] = caught
    for fragment in fragments:
        assert fragment in str(warning.message)


def test_a_wrapper_that_corrects_says_nothing():
    model = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, y in friedman_with_group(1500, seed=1):
            model.learn_one(x, y)


def test_defaults_are_the_core_defaults():
    ours = inspect.signature(FairRegressor).parameters
    core = inspect.signature(FairRegressionPostProcessor).parameters
    shared = set(ours) & set(core) - {"seed"}
    assert shared == {"B", "L", "ks", "eps", "beta", "p", "profile", "memory", "horizon", "optimizer", "inner", "mu",
                      "window", "serve"}
    assert {name: ours[name].default for name in shared} == {name: core[name].default for name in shared}


# ---------------------------------------------------------------- the sensitive attribute
@pytest.mark.slow
def test_sensitive_attribute_never_changes_a_prediction():
    for mode in ("sample", "mean", "mode"):
        model, _ = trained(mode=mode)
        for x, _ in friedman_with_group(100, seed=5):
            bare = without_group(x)
            expected = model.predict_one(bare)
            assert model.predict_one({**bare, "group": 0}) == expected
            assert model.predict_one({**bare, "group": 1}) == expected
            np.testing.assert_array_equal(model.proba_one({**bare, "group": 1}), model.proba_one(bare))


def test_base_models_never_see_the_sensitive_attribute():
    model, _ = trained()
    assert "group" not in model.regressor.weights and "group" not in model.group_classifier.weights
    assert len(model.regressor.weights) == 10  # Friedman's ten features, S removed
    assert model.group_counts[0] + model.group_counts[1] == 600


def test_predictions_are_pure_and_lie_on_the_grid():
    model, _ = trained()
    before = pickle.dumps(model)
    for x, _ in friedman_with_group(50, seed=6):
        assert model.predict_one(x) in model.atoms
        model.proba_one(x)
        model.diagnostics()
    assert pickle.dumps(model) == before


@pytest.mark.slow
def test_sampled_predictions_follow_pi_and_depend_on_the_seed():
    model, _ = trained(n=1500)
    test = [without_group(x) for x, _ in friedman_with_group(3000, seed=8)]
    proba = np.array([model.proba_one(x) for x in test])
    draws = np.array([model.predict_one(x) for x in test])
    index = np.searchsorted(model.atoms, draws)
    np.testing.assert_array_equal(model.atoms[index], draws)
    # Each draw is an independent-looking sample of pi(. | x): its mean matches the mean of pi.
    expected = proba @ model.atoms
    spread = np.sqrt(np.sum(proba @ model.atoms**2 - expected**2)) / len(test)
    assert abs(draws.mean() - expected.mean()) < 4 * spread
    reseeded = pickle.loads(pickle.dumps(model))
    assert [reseeded.predict_one(x) for x in test[:200]] == draws[:200].tolist()
    other = model.clone({"seed": 8})
    twin = model.clone({"seed": 7})
    for x, y in friedman_with_group(1500, seed=1):
        other.learn_one(x, y)
        twin.learn_one(x, y)
    assert [twin.predict_one(x) for x in test[:200]] == draws[:200].tolist()
    assert [other.predict_one(x) for x in test[:200]] != draws[:200].tolist()
    np.testing.assert_array_equal(other.proba_one(test[0]), proba[0])


def test_unknown_group_raises_before_anything_is_learned():
    model, data = trained(n=50)
    before = pickle.dumps(model)
    x, y = data[0]
    with pytest.raises(ValueError, match=r"x\['group'\] must be one of groups=\(0, 1\), got 2"):
        model.learn_one({**x, "group": 2}, y)
    scaled_pipeline = preprocessing.StandardScaler() | make()
    with pytest.raises(ValueError, match="docs/river.md"):  # the scaler rewrites S
        for x, y in data:
            scaled_pipeline.learn_one(x, y)
    assert pickle.dumps(model) == before


# ---------------------------------------------------------------- the group posterior tau
def test_tau_reads_groups_in_order_and_renormalizes():
    model = FairRegressor(linear_model.LinearRegression(), naive_bayes.GaussianNB(), groups=("c", "a", "b"), seed=1)
    reference = FairRegressionPostProcessor(n_groups=3, seed=1)
    x = {"u": 0.3, "v": -1.0}
    np.testing.assert_array_equal(model.proba_one(x), reference.proba_one(0.0, [1 / 3, 1 / 3, 1 / 3]))
    model.learn_one({**x, "group": "a"}, 0.5)
    reference.learn_one(0.0, [1 / 3, 1 / 3, 1 / 3])  # an untrained GaussianNB has no opinion
    eta = model.regressor.predict_one(x)
    # The classifier knows only "a": tau puts all the mass there, in the position of "a".
    np.testing.assert_array_equal(model.proba_one(x), reference.proba_one(eta, [0.0, 1.0, 0.0]))


def test_tau_falls_back_to_smoothed_group_frequencies():
    model = FairRegressor(dummy.StatisticRegressor(stats.Mean()), SilentClassifier(), L=5, seed=2)
    reference = FairRegressionPostProcessor(L=5, n_groups=2, seed=2)
    mean = stats.Mean()
    for i, (s, y) in enumerate([(0, 0.4), (0, -0.2), (1, 0.6), (0, 0.1)]):
        counts = [[0, 0], [1, 0], [2, 0], [2, 1]][i]
        reference.learn_one(mean.get(), [(c + 1) / (i + 2) for c in counts])
        model.learn_one({"f": float(i), "group": s}, y)
        mean.update(y)
    assert model.group_counts == {0: 3, 1: 1}
    np.testing.assert_array_equal(model.proba_one({"f": 9.0}), reference.proba_one(mean.get(), [4 / 6, 2 / 6]))
    assert pickle.dumps(model._postprocessor.state_dict()) == pickle.dumps(reference.state_dict())


# ---------------------------------------------------------------- what learns from what
def snapshot(*models) -> list[bytes]:
    return [pickle.dumps(m) for m in models]


def assert_same_state(a, b) -> None:
    """Equal values all the way down (pickles of unpickled objects may differ in sharing only)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            assert_same_state(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for u, v in zip(a, b, strict=True):
            assert_same_state(u, v)
    elif isinstance(a, np.ndarray) or a is None:
        np.testing.assert_array_equal(a, b)
    else:
        assert a == b


def test_unlabeled_samples_feed_only_the_post_processor():
    model, data = trained(n=100)
    frozen = snapshot(model.regressor, model.group_classifier)
    n = model.diagnostics().n_samples
    for x, _ in data[:30]:
        model.learn_unlabeled_one(x)
    assert snapshot(model.regressor, model.group_classifier) == frozen
    assert model.diagnostics().n_samples == n + 30


def test_learn_one_without_a_label_leaves_the_regressor_alone():
    model, data = trained(n=100)
    regressor, classifier = snapshot(model.regressor), snapshot(model.group_classifier)
    model.learn_one(data[0][0])
    assert snapshot(model.regressor) == regressor and snapshot(model.group_classifier) != classifier
    pipeline = preprocessing.StandardScaler() | make()
    pipeline.learn_one(without_group(data[0][0]))  # River pipelines pass y=None along
    assert pipeline["FairRegressor"].diagnostics().n_samples == 1


def test_sample_weight_goes_to_the_regressor_only():
    model = make(seed=0)
    regressor, classifier = linear_model.LinearRegression(), linear_model.LogisticRegression()
    for i, (x, y) in enumerate(friedman_with_group(50, seed=4)):
        w = 0.5 + i % 3
        model.learn_one(x, y, w=w)
        regressor.learn_one(without_group(x), y, w=w)
        classifier.learn_one(without_group(x), x["group"])
    assert model.regressor.weights == regressor.weights and model.regressor.intercept == regressor.intercept
    assert model.group_classifier.weights == classifier.weights
    unweighted = FairRegressor(neighbors.KNNRegressor(), linear_model.LogisticRegression(), seed=0)
    unweighted.learn_one({"a": 1.0, "group": 0}, 0.2)
    with pytest.raises(ValueError, match="w must be 1"):
        unweighted.learn_one({"a": 1.0, "group": 0}, 0.2, w=2.0)
    # ... and behind a scaler, whose pipeline takes any keyword but gives w to no step that uses it
    unweighted = FairRegressor(scaled(neighbors.KNNRegressor()), linear_model.LogisticRegression(), seed=0)
    with pytest.raises(ValueError, match="w must be 1"):
        unweighted.learn_one({"a": 1.0, "group": 0}, 0.2, w=2.0)
    weighted = FairRegressor(scaled(linear_model.LinearRegression()), linear_model.LogisticRegression(), seed=0)
    weighted.learn_one({"a": 1.0, "group": 0}, 0.2, w=2.0)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"groups": (0,)}, "groups must be a tuple of at least 2"),
        ({"groups": [0, 1]}, "groups must be a tuple"),
        ({"groups": (0, 0)}, "distinct"),
        ({"groups": ([0], [1])}, "hashable"),
        ({"sensitive": ["g"]}, "sensitive must be a hashable"),
        ({"mode": "median"}, "mode must be one of"),
        ({"eps": -0.1}, "eps"),
        ({"eps": (0.1, 0.1, 0.1)}, "eps"),
        ({"seed": -1}, "seed"),
        ({"B": 0.0}, "B must be"),
    ],
)
def test_invalid_parameters_raise(params, message):
    with pytest.raises(ValueError, match=message):
        make(**params)


def test_base_models_must_be_river_models():
    with pytest.raises(ValueError, match="regressor must be a River regressor"):
        FairRegressor(linear_model.LogisticRegression(), linear_model.LogisticRegression())
    with pytest.raises(ValueError, match="classifier must be a River classifier"):
        FairRegressor(linear_model.LinearRegression(), linear_model.LinearRegression())


# ---------------------------------------------------------------- debugging and diagnostics
def test_debug_one_shows_eta_tau_pi_and_the_prediction_and_learns_nothing():
    model, data = trained(L=5, horizon=200, profile="paper")
    x, _ = data[0]
    frozen = snapshot(model)
    text = model.debug_one(x, n_decimals=6, top=3)
    assert snapshot(model) == frozen
    features = without_group(x)
    eta = model.regressor.predict_one(features)
    tau = model.group_classifier.predict_proba_one(features)
    pi = model.proba_one(x)
    lines = text.splitlines()
    assert lines[0] == f"eta (base regressor): {eta:.6f}"
    assert lines[1] == f"tau = P(S | x): 0: {tau[False]:.6f}, 1: {tau[True]:.6f}"
    top = np.argsort(-pi, kind="stable")[:3]
    assert lines[2] == "pi(. | x), 3 likeliest of 11: " + ", ".join(
        f"{model.atoms[i]:.6f}: {pi[i]:.6f}" for i in top)
    assert lines[3] == f"prediction (mode='sample'): {model.predict_one(x)}"
    assert lines[4] == f"S = {x['group']!r} is in x and was not read"
    assert len(model.debug_one(features).splitlines()) == 4
    pipeline = compose.Discard("unused") | model  # River's Pipeline.debug_one prints it as the last step
    assert model.debug_one(features) in pipeline.debug_one(features)


def test_diagnostics_by_group_are_keyed_by_group_not_column_order():
    model = FairRegressor(linear_model.LinearRegression(), naive_bayes.GaussianNB(), groups=("c", "a", "b"),
                          L=4, horizon=100, seed=1, profile="paper", eps=(0.01, 0.02, 0.03))
    rng = np.random.default_rng(0)
    for _ in range(300):
        group = ("c", "a", "b")[rng.integers(3)]
        x = {"u": rng.normal({"a": -1.0, "b": 0.0, "c": 1.0}[group]), "s": group}
        model.learn_one({"u": x["u"], "group": group}, x["u"] / 3)
    d, by_group = model.diagnostics(), model.diagnostics_by_group()
    assert list(by_group) == ["c", "a", "b"]
    for s, group in enumerate(("c", "a", "b")):
        assert by_group[group]["ks"] == d.group_ks[s] and by_group[group]["gap"] == d.group_unfairness[s]
        assert by_group[group]["mean"] == d.group_mean[s] and by_group[group]["present"] is True
        assert by_group[group]["target"] == {"c": 0.01, "a": 0.02, "b": 0.03}[group]  # next to its measure
        assert list(by_group[group]["proba"]) == model.atoms.tolist()
        assert list(by_group[group]["proba"].values()) == d.group_proba[:, s].tolist()
    assert by_group["a"]["mean"] < by_group["b"]["mean"] < by_group["c"]["mean"]  # the groups' own means


def test_the_group_classifier_has_one_name_and_the_old_one_warns():
    data = list(friedman_with_group(300, seed=4))
    with pytest.warns(DeprecationWarning, match="group_classifier"):
        old = FairRegressor(linear_model.LinearRegression(), classifier=linear_model.LogisticRegression(), seed=2)
    new = FairRegressor(linear_model.LinearRegression(), group_classifier=linear_model.LogisticRegression(), seed=2)
    for x, y in data:
        old.learn_one(x, y)
        new.learn_one(x, y)
    assert [old.predict_one(x) for x, _ in data] == [new.predict_one(x) for x, _ in data]
    with pytest.raises(ValueError, match="not both"):
        FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(),
                      classifier=linear_model.LogisticRegression())
    assert "group_classifier" in inspect.signature(FairClassifier).parameters


# ---------------------------------------------------------------- state, clone, pipelines
@pytest.mark.slow
def test_pickling_mid_stream_continues_exactly():
    model, _ = trained(n=400)
    copy_ = pickle.loads(pickle.dumps(model))
    for x, y in itertools.islice(friedman_with_group(1200, seed=9), 400, None):
        assert copy_.predict_one(x) == model.predict_one(x)
        model.learn_one(x, y)
        copy_.learn_one(x, y)
    assert snapshot(copy_.regressor, copy_.group_classifier) == snapshot(model.regressor, model.group_classifier)
    assert_same_state(copy_._postprocessor.state_dict(), model._postprocessor.state_dict())
    assert copy_.group_counts == model.group_counts and copy_.diagnostics().n_samples == 1200


def test_clone_is_fresh_and_learns_the_same():
    model, data = trained(n=300)
    fresh = make(seed=7)
    clone = model.clone()
    assert repr(clone) == repr(model) and clone.diagnostics().n_samples == 0
    assert snapshot(clone) == snapshot(fresh)
    for x, y in data:
        clone.learn_one(x, y)
    assert snapshot(clone) == snapshot(model)
    assert [clone.predict_one(x) for x, _ in data[:100]] == [model.predict_one(x) for x, _ in data[:100]]


@pytest.mark.slow
def test_pipeline_with_a_scaler_that_skips_the_group():
    """The docs' recipe in front of FairRegressor equals scaling by hand, in progressive validation."""
    pipeline = scaler_that_skips_the_group() | make(seed=3)
    scaler, model = preprocessing.StandardScaler(), make(seed=3)
    data = list(friedman_with_group(800, seed=10))
    metric = evaluate.progressive_val_score(data, pipeline, metrics.MAE())
    expected = metrics.MAE()
    for x, y in data:
        features = without_group(x)
        scaled_x = {**scaler.transform_one(features), "group": x["group"]}
        expected.update(y, model.predict_one(scaled_x))
        scaler.learn_one(features)
        model.learn_one({**scaler.transform_one(features), "group": x["group"]}, y)
    assert metric.get() == expected.get()
    assert snapshot(pipeline["FairRegressor"]) == snapshot(model)
    fresh = list(friedman_with_group(3000, seed=11))  # S absent at prediction time: same predictions
    assert [pipeline.predict_one(without_group(x)) for x, _ in fresh] == [pipeline.predict_one(x) for x, _ in fresh]


@pytest.mark.parametrize("check", COMMON_DATA_CHECKS, ids=lambda check: check.__name__)
def test_river_data_checks_on_the_docs_pipeline(check):
    check(scaler_that_skips_the_group() | make(), dataset=list(friedman_with_group(200, seed=3)))


def test_pipeline_routes_the_sample_weight():
    pipeline = preprocessing.StandardScaler() | make(seed=0)
    reference = linear_model.LinearRegression()
    scaler = preprocessing.StandardScaler()
    for x, y in friedman_with_group(30, seed=11):
        x = without_group(x)
        pipeline.learn_one(x, y, w=3.0)
        scaler.learn_one(x)
        reference.learn_one(scaler.transform_one(x), y, w=3.0)
    assert pipeline["FairRegressor"].regressor.weights == reference.weights


# ---------------------------------------------------------------- fairness on a stream
@pytest.mark.slow
def test_fair_model_is_much_fairer_than_the_base_model_at_a_bounded_risk_cost():
    """7,500 samples of the grouped Friedman stream (y in [0, 30], Var(y) ~ 25), the range given.

    Stated bound: the fair model's KS unfairness (audited with the true S, on fresh data) is at
    most half the base model's, and its risk at most 5 above the base model's (7.2) -- far below
    the risk Var(y) of the trivially fair constant prediction.
    """
    base_model = scaled(linear_model.LinearRegression())
    fair = FairRegressor(
        scaled(linear_model.LinearRegression()), scaled(linear_model.LogisticRegression()), B=(0, 30), L=10, seed=0
    )
    for x, y in friedman_with_group(7500, seed=1):
        fair.learn_one(x, y)
        base_model.learn_one(without_group(x), y)
    test = list(friedman_with_group(3000, seed=2))
    y = np.array([y for _, y in test])
    s = np.array([x.pop("group") for x, _ in test])
    before = evaluate_deterministic([base_model.predict_one(x) for x, _ in test], y, s)
    after = audit([fair.proba_one(x) for x, _ in test], fair.atoms, y, s)
    drawn = evaluate_deterministic([fair.predict_one(x) for x, _ in test], y, s)
    assert before.max_ks > 0.15  # the base model is clearly unfair
    assert after.max_ks < 0.5 * before.max_ks
    assert drawn.max_ks < 0.5 * before.max_ks  # the served draws too, not only their law
    assert after.risk < before.risk + 5 < y.var()
    diagnostics = fair.diagnostics()
    assert diagnostics.n_samples == 7500 and diagnostics.epoch == 3  # windows of 2,000 samples
    assert np.all(diagnostics.group_ks < 0.5 * before.max_ks)  # the S-free estimate agrees


@pytest.mark.parametrize("p", [None, (0.5, 0.45, 0.05)])
def test_a_group_declared_but_never_seen_costs_the_others_nothing(p):
    """``groups=(0, 1, 2)`` on a stream where S is only ever 0 or 1: the classifier never gives group 2
    any probability, so the post-processor treats it as absent.  After 2,000 samples the audited risk
    is within 10% of the two-group model's (measured: 14.7 with ``p`` estimated and 14.3 with it given,
    against 15.1; it was 27.7 and 18.3 while the absent group was constrained)."""
    def risk(groups, p):
        classifier = linear_model.SoftmaxRegression() if len(groups) > 2 else linear_model.LogisticRegression()
        fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(classifier), B=(0, 30),
                             groups=groups, p=p, seed=0)
        for x, y in friedman_with_group(2000, seed=1):
            fair.learn_one(x, y)
        assert [group["present"] for group in fair.diagnostics_by_group().values()] == [True, True, False][:len(groups)]
        test = list(friedman_with_group(1000, seed=2))
        s = np.array([x.pop("group") for x, _ in test])
        return audit([fair.proba_one(x) for x, _ in test], fair.atoms, np.array([y for _, y in test]), s).risk
    assert risk((0, 1, 2), p) < 1.1 * risk((0, 1), None)


def test_a_classifier_that_knows_nothing_yet_gives_the_given_shares():
    """Before the group classifier has learned (River's ``{}``), ``tau`` is the given ``p``, not the
    uniform law: a declared group the stream never shows is then found absent after 250 samples
    (875 when a third of the first sample's mass went to it, with the step 4.6 times smaller until then)."""
    p = (0.5, 0.45, 0.05)
    fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(linear_model.SoftmaxRegression()),
                         B=(0, 30), groups=(0, 1, 2), p=p, seed=0)
    stream = list(friedman_with_group(400, seed=1))
    assert "tau = P(S | x): 0: 0.5000, 1: 0.4500, 2: 0.0500" in fair.debug_one(stream[0][0])
    for x, y in stream:
        fair.learn_one(x, y)
    assert [group["present"] for group in fair.diagnostics_by_group().values()] == [True, True, False]


@pytest.mark.slow
def test_models_learning_from_scratch_are_served_fairer_from_the_start():
    """Law School, base models and post-processor all starting from nothing, only ``B`` and ``p`` given.

    The group classifier takes about a thousand samples to learn its intercept (its mean ``tau`` of
    the smaller group goes from 0.43 to 0.2 against a share of 0.15); the post-processor corrects
    ``tau`` to ``p`` meanwhile.  Prequential (predict, then learn) over the first 2,000 people, with
    the true S: the served draws' KS is under 0.7 of the base model's, at under 1.25 times its
    squared error (measured: 0.08 against 0.28, at 1.07 times; uncorrected: 0.26, at 2.2 times).
    """
    data = load_law_held_out()
    order = np.random.default_rng(0).permutation(data.y.size)[:2000]
    p = tuple(np.bincount(data.s) / data.s.size)
    fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(linear_model.LogisticRegression()),
                         B=(0, 1), p=p, sensitive="S", groups=(0, 1), seed=0)
    base_model = scaled(linear_model.LinearRegression())
    served, raw = [], []
    for i in order:
        x, y = dict(zip(data.feature_names, data.X[i].tolist(), strict=True)), float(data.y[i])
        served.append(fair.predict_one(x))
        raw.append(base_model.predict_one(x))
        fair.learn_one({**x, "S": int(data.s[i])}, y)
        base_model.learn_one(x, y)
    after = evaluate_deterministic(served, data.y[order], data.s[order])
    before = evaluate_deterministic(raw, data.y[order], data.s[order])
    assert before.max_ks > 0.2
    assert after.max_ks < 0.7 * before.max_ks
    assert after.risk < 1.25 * before.risk


def test_progressive_val_score_runs_with_the_wrapper_alone():
    data = list(friedman_with_group(300, seed=12))
    model = make(seed=1)
    metric = evaluate.progressive_val_score(data, model, metrics.MSE())
    expected, twin = metrics.MSE(), make(seed=1)
    for x, y in data:
        expected.update(y, twin.predict_one(copy.deepcopy(x)))
        twin.learn_one(x, y)
    assert metric.get() == expected.get() and math.isfinite(metric.get())


@pytest.mark.parametrize("groups", [(1, 2), ("a", "b"), (0, 1, 2)])
def test_a_binary_group_classifier_needs_groups_0_and_1(groups):
    """A binary classifier learns S as False/True: with groups (1, 2) both were True, tau always (1, 0), and every
    sample was read as group 1 (no correction); with ("a", "b") learning failed after the post-processor learned."""
    with pytest.raises(ValueError, match=r"group_classifier is a binary classifier.*groups must then be \(0, 1\)"):
        FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(), groups=groups)
    one_vs_rest = multiclass.OneVsRestClassifier(linear_model.LogisticRegression())
    fair = FairRegressor(linear_model.LinearRegression(), one_vs_rest, groups=groups, seed=0)
    fair.learn_one({"x": 1.0, "group": groups[1]}, 0.5)
    assert fair.diagnostics().n_samples == 1
