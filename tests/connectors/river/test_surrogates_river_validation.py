"""The River wrappers of the surrogate methods refuse bad input with a ``ValueError`` naming the argument and value.

A rejected call leaves the River model, the wrapper's counters and its tuner untouched (no half-learned sample).
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from river import linear_model

from connectors.river.surrogates import RiverSSO, WeightedLinearLearner, feature_vector, set_linear_parameters
from streamfair.surrogates import MetricWeightTuner
from tests.support.errors import check_error
from tests.support.surrogates import published, squared_error, state

NAN, INF = math.nan, math.inf


def river_state(wrapper) -> bytes:
    model = wrapper.model
    counters = {k: v for k, v in vars(wrapper).items() if k not in ("model", "tuner")}
    tuned = None if getattr(wrapper, "tuner", None) is None else state(wrapper.tuner)
    return pickle.dumps((dict(model.weights), model.intercept, counters, tuned))


def river_sso(kind: str):
    glm = linear_model.LinearRegression() if kind == "regression" else linear_model.LogisticRegression()
    model = RiverSSO(glm, m=2)
    model.learn_one({"a": 1.0, "b": 2.0}, 1.0 if kind == "regression" else True)
    return model


@pytest.mark.parametrize(
    "kind,call,fragments",
    [
        ("regression", lambda s: s.learn_one({"a": NAN}, 1.0), ("x['a']", "nan")),
        ("regression", lambda s: s.learn_one({"a": INF}, 1.0), ("x['a']", "inf")),
        ("regression", lambda s: s.learn_one({"a": "z"}, 1.0), ("x['a']", "'z'")),
        ("regression", lambda s: s.learn_one([1.0], 1.0), ("x", "[1.0]")),
        ("regression", lambda s: s.learn_one({"a": 1.0}, NAN), ("y", "nan")),
        ("regression", lambda s: s.learn_one({"a": 1.0}, "a"), ("y", "'a'")),
        ("regression", lambda s: s.learn_one({"a": 1.0}, None), ("y", "None")),
        ("classification", lambda s: s.learn_one({"a": 1.0}, 2), ("y", "2")),
        ("classification", lambda s: s.learn_one({"a": 1.0}, NAN), ("y", "nan")),
        ("regression", lambda s: s.learn_batch([{"a": 1.0}, {"a": NAN}], ys=[1.0, 1.0]), ("xs[1]", "nan")),
        ("regression", lambda s: s.learn_batch([{"a": 1.0}, {"a": 1.0}], ys=[1.0, NAN]), ("ys[1]", "nan")),
        ("regression", lambda s: s.learn_batch([{"a": 1.0}], ys=1.0), ("ys", "1.0")),
        ("regression", lambda s: s.learn_batch([{"a": 1.0}], gradients=["a"]), ("gradients", "'a'")),
        ("regression", lambda s: s.learn_batch([{"a": 1.0}], gradients=[INF]), ("gradients", "entry 0", "inf")),
        ("regression", lambda s: s.raw_one({"a": NAN}), ("x['a']", "nan")),
    ],
)
def test_river_sso_rejects_bad_samples_untouched(kind, call, fragments):
    model = river_sso(kind)
    before = river_state(model)
    check_error(lambda: call(model), *fragments)
    assert river_state(model) == before


def learner(kind: str, with_tuner: bool, loss: str = "squared"):
    model = linear_model.LinearRegression() if kind == "regression" else linear_model.LogisticRegression()
    tuned = MetricWeightTuner(3, 2, squared_error, every=4, window=8, loss=loss) if with_tuner else None
    wrapped = WeightedLinearLearner(model, ["a", "b"], tuned)
    if not with_tuner:
        wrapped.apply(published(theta=np.zeros(3)))
    wrapped.learn_one({"a": 1.0, "b": 2.0}, 1.0 if kind == "regression" else True, 0)
    return wrapped


LEARNER_CALLS = [
    (lambda w: w.learn_one({"a": NAN}, 1.0, 0), ("x['a']", "nan")),
    (lambda w: w.learn_one({"a": 1.0, "other": INF}, 1.0, 0), ("x['other']", "inf")),
    (lambda w: w.learn_one({"a": 1.0}, NAN, 0), ("y", "nan")),
    (lambda w: w.learn_one({"a": 1.0}, None, 0), ("y", "None")),
    (lambda w: w.predict_one({"a": NAN}), ("x['a']", "nan")),
    (lambda w: w.apply("version 2"), ("weights", "'version 2'")),
]
# the tuner already refused a cell it does not have; a version used alone did not
WITHOUT_TUNER = [
    (lambda w: w.learn_one({"a": 1.0}, 1.0, 2), ("cell", "2")),
    (lambda w: w.learn_one({"a": 1.0}, 1.0, -1), ("cell", "-1")),
]


@pytest.mark.parametrize(
    "with_tuner,call,fragments",
    [(True, *row) for row in LEARNER_CALLS] + [(False, *row) for row in LEARNER_CALLS + WITHOUT_TUNER],
)
def test_weighted_learner_rejects_bad_samples_untouched(with_tuner, call, fragments):
    wrapped = learner("regression", with_tuner)
    before = river_state(wrapped)
    check_error(lambda: call(wrapped), *fragments)
    assert river_state(wrapped) == before


def test_river_helpers_reject():
    check_error(lambda: feature_vector({"a": NAN}, ["a"]), "x['a']", "nan")
    check_error(lambda: set_linear_parameters(linear_model.LinearRegression(), ["a"], [NAN, 0.0]), "theta", "nan")
    check_error(lambda: set_linear_parameters(linear_model.LinearRegression(), ["a"], ["x", 0.0]), "theta", "'x'")
    check_error(lambda: WeightedLinearLearner(linear_model.LinearRegression(), ["a"], "tuner"), "tuner", "'tuner'")


@pytest.mark.parametrize("loss", ["logistic", "hinge"])
def test_a_classifier_feeds_a_plus_minus_one_tuner_its_labels_as_plus_minus_one(loss):
    """A LogisticRegression's bool labels reach a logistic or hinge tuner as +1 and -1 (0 used to fail its step)."""
    wrapped = learner("classification", with_tuner=True, loss=loss)
    for i in range(1, 12):
        wrapped.learn_one({"a": float(i), "b": 1.0}, bool(i % 2), i % 2)
    assert set(wrapped.tuner._y.tolist()) == {-1.0, 1.0}
    assert wrapped.tuner.outer_iterations == 3
