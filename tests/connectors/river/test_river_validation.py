"""The River wrappers reject bad input with a ``ValueError`` naming the argument and the offending value.

A rejected call leaves the wrapper, its base models and its post-processor untouched (nothing half-learned).
The wrappers check what they are given (``x``, ``y``, ``w``) and what their base models give back (``eta``,
class probabilities, ``tau``), never the features one by one: a NaN feature is reported through the NaN output
it gives.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from river import base, linear_model

from connectors.river import FairClassifier, FairRegressor, friedman_with_group, logistic_with_group
from tests.support.errors import check_error

NAN, INF = math.nan, math.inf


def regressor(**params) -> FairRegressor:
    return FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(),
                         **{"B": (0, 30), "seed": 0, **params})


def classifier(**params) -> FairClassifier:
    return FairClassifier(linear_model.LogisticRegression(), linear_model.LogisticRegression(),
                          **{"classes": (0, 1), "seed": 0, **params})


def trained_regressor() -> FairRegressor:
    model = regressor()
    for x, y in friedman_with_group(50, seed=1):
        model.learn_one(x, y)
    return model


def trained_classifier() -> FairClassifier:
    model = classifier()
    for x, y in logistic_with_group(50, seed=1):
        model.learn_one(x, y)
    return model


X, Y = next(iter(friedman_with_group(1, seed=5)))  # features 0 .. 9 and "group"
CX, CY = next(iter(logistic_with_group(1, seed=5)))  # features 0 .. 4 and "group"


def check_rejected_and_unchanged(model, call, fragments):
    """``call(model)`` is rejected and the model's state (base models and post-processor included) is as it was."""
    before = pickle.dumps(model)
    check_error(lambda: call(model), *fragments)
    assert pickle.dumps(model) == before


# ---------------------------------------------------------------- constructor
@pytest.mark.parametrize(
    "make,params,fragments",
    [
        # a per-group parameter is checked against `groups`, not against the post-processor's n_groups
        (regressor, dict(ks=[0.1, 0.1, 0.1]), ("ks", "groups=(0, 1)", "[0.1, 0.1, 0.1]")),
        (regressor, dict(p=(0.2, 0.3, 0.5)), ("p", "groups=(0, 1)", "(0.2, 0.3, 0.5)")),
        (regressor, dict(p=(1.0,)), ("p", "groups=(0, 1)", "(1.0,)")),
        (regressor, dict(eps=(0.01, 0.01, 0.01)), ("eps", "groups=(0, 1)", "(0.01, 0.01, 0.01)")),
        (classifier, dict(eps=(0.1, 0.1, 0.1)), ("eps", "groups=(0, 1)", "(0.1, 0.1, 0.1)")),
        (classifier, dict(groups=("a", "b", "c"), p=(0.5, 0.5)), ("p", "groups=('a', 'b', 'c')", "(0.5, 0.5)")),
    ],
)
def test_constructor_rejects(make, params, fragments):
    check_error(lambda: make(**params), *fragments)


# ---------------------------------------------------------------- learning and prediction
BAD_REGRESSOR_CALLS = [
    (lambda m: m.learn_one(X, NAN), ("y must be a finite number", "nan")),
    (lambda m: m.learn_one(X, INF), ("y must be a finite number", "inf")),
    (lambda m: m.learn_one(X, -INF), ("y must be a finite number", "-inf")),
    (lambda m: m.learn_one(X, "a"), ("y must be a finite number", "'a'")),
    (lambda m: m.learn_one(X, [1.0]), ("y must be a finite number", "[1.0]")),
    (lambda m: m.learn_one(X, Y, w=NAN), ("w must be a finite number >= 0", "nan")),
    (lambda m: m.learn_one(X, Y, w=-1.0), ("w must be a finite number >= 0", "-1.0")),
    (lambda m: m.learn_one(X, Y, w=INF), ("w must be a finite number >= 0", "inf")),
    (lambda m: m.learn_one(X, Y, w="a"), ("w must be a finite number >= 0", "'a'")),
    (lambda m: m.learn_one(None, Y), ("x must be a dict", "None")),
    (lambda m: m.learn_one([1.0, 2.0], Y), ("x must be a dict", "[1.0, 2.0]")),
    (lambda m: m.learn_unlabeled_one(None), ("x must be a dict", "None")),
    (lambda m: m.predict_one("abc"), ("x must be a dict", "'abc'")),
    # a NaN or infinite feature: a model that has not learned yet gives a finite output for it, and learns it
    # into weights every later output is NaN from
    (lambda m: m.learn_one({**X, 0: NAN}, Y), ("x[0] must be a finite number", "nan")),
    (lambda m: m.learn_one({**X, 0: INF}, Y), ("x[0] must be a finite number", "inf")),
    (lambda m: m.learn_one({**X, "a": np.float32("nan")}, Y), ("x['a'] must be a finite number", "nan")),
    (lambda m: m.learn_unlabeled_one({**X, 0: NAN}), ("x[0] must be a finite number", "nan")),
    (lambda m: m.predict_one({**X, 0: NAN}), ("x[0] must be a finite number", "nan")),
    (lambda m: m.proba_one({**X, 0: NAN}), ("x[0] must be a finite number", "nan")),
    (lambda m: m.debug_one(X, top=0), ("top", "0")),
    (lambda m: m.debug_one(X, top=2.5), ("top", "2.5")),
    (lambda m: m.debug_one(X, n_decimals=-1), ("n_decimals", "-1")),
]


@pytest.mark.parametrize("call,fragments", BAD_REGRESSOR_CALLS)
@pytest.mark.parametrize("make", [regressor, trained_regressor], ids=["fresh", "trained"])
def test_regressor_rejects_and_learns_nothing(make, call, fragments):
    check_rejected_and_unchanged(make(), call, fragments)


BAD_CLASSIFIER_CALLS = [
    (lambda m: m.learn_one(CX, CY, w=NAN), ("w must be a finite number >= 0", "nan")),
    (lambda m: m.learn_one(CX, CY, w=-1.0), ("w must be a finite number >= 0", "-1.0")),
    (lambda m: m.learn_one(None, CY), ("x must be a dict", "None")),
    # a NaN feature turned River's LogisticRegression's weights NaN
    (lambda m: m.learn_one({**CX, 0: NAN}, CY), ("x[0] must be a finite number", "nan")),
    (lambda m: m.learn_unlabeled_one({**CX, 0: NAN}), ("x[0] must be a finite number", "nan")),
    (lambda m: m.predict_proba_one({**CX, 0: NAN}), ("x[0] must be a finite number", "nan")),
    (lambda m: m.predict_one({**CX, 0: NAN}), ("x[0] must be a finite number", "nan")),
]


@pytest.mark.parametrize("call,fragments", BAD_CLASSIFIER_CALLS)
@pytest.mark.parametrize("make", [classifier, trained_classifier], ids=["fresh", "trained"])
def test_classifier_rejects_and_learns_nothing(make, call, fragments):
    check_rejected_and_unchanged(make(), call, fragments)


# ---------------------------------------------------------------- base models with bad outputs
class ConstantRegressor(base.Regressor):
    """A fake regressor whose prediction is ``value`` whatever ``x`` (unit tests only)."""

    def __init__(self, value=0.0):
        self.value = value

    def learn_one(self, x, y):
        pass

    def predict_one(self, x):
        return self.value


class ConstantClassifier(base.Classifier):
    """A fake classifier whose ``predict_proba_one`` is ``value`` whatever ``x`` (unit tests only)."""

    def __init__(self, value=None):
        self.value = value

    def learn_one(self, x, y):
        pass

    def predict_proba_one(self, x):
        return self.value


@pytest.mark.parametrize(
    "eta,fragments",
    [
        (None, ("regressor.predict_one(x) must give a finite number", "None")),
        (NAN, ("regressor.predict_one(x) must give a finite number", "nan")),
        ("a", ("regressor.predict_one(x) must give a finite number", "'a'")),
        ([1.0], ("regressor.predict_one(x) must give a finite number", "[1.0]")),
    ],
)
@pytest.mark.parametrize("method", ["learn_one", "learn_unlabeled_one", "predict_one", "proba_one"])
def test_a_regressor_output_that_is_not_a_finite_number_is_named(eta, fragments, method):
    model = FairRegressor(ConstantRegressor(eta), linear_model.LogisticRegression(), B=(0, 30), seed=0)
    check_rejected_and_unchanged(model, lambda m: getattr(m, method)(X), fragments)


BAD_PROBA = [
    (None, ("must give a dict of probabilities", "None")),
    ([0.5, 0.5], ("must give a dict of probabilities", "[0.5, 0.5]")),
    ({0: "a", 1: 0.5}, ("must give a dict of probabilities", "'a'")),
    ({0: "0.5", 1: 0.5}, ("must give a dict of probabilities", "'0.5'")),  # a number as text, which float() reads
    ({0: NAN, 1: 0.5}, ("must give probabilities in [0, 1]", "nan")),
    ({0: INF, 1: 0.5}, ("must give probabilities in [0, 1]", "inf")),
    ({0: -0.5, 1: 0.5}, ("must give probabilities in [0, 1]", "-0.5")),  # summing to 0: used to fall back
    ({0: 1e308, 1: 1e308}, ("must give probabilities in [0, 1]", "1e+308")),  # used to overflow in fsum
]


@pytest.mark.parametrize("proba,fragments", BAD_PROBA)
@pytest.mark.parametrize("method", ["learn_one", "predict_proba_one"])
def test_class_probabilities_outside_0_1_are_named(proba, fragments, method):
    model = FairClassifier(ConstantClassifier(proba), linear_model.LogisticRegression(), classes=(0, 1), seed=0)
    call = (lambda m: m.learn_one(CX, CY)) if method == "learn_one" else (lambda m: m.predict_proba_one(CX))
    check_rejected_and_unchanged(model, call, ("classifier.predict_proba_one(x)", *fragments))


@pytest.mark.parametrize("proba,fragments", BAD_PROBA)
@pytest.mark.parametrize("method", ["learn_one", "predict_one"])
def test_group_probabilities_outside_0_1_are_named(proba, fragments, method):
    model = FairRegressor(linear_model.LinearRegression(), ConstantClassifier(proba), B=(0, 30), seed=0)
    call = (lambda m: m.learn_one(X, Y)) if method == "learn_one" else (lambda m: m.predict_one(X))
    check_rejected_and_unchanged(model, call, ("group_classifier.predict_proba_one(x)", *fragments))


# ---------------------------------------------------------------- the synthetic streams
@pytest.mark.parametrize("stream", [friedman_with_group, logistic_with_group])
@pytest.mark.parametrize(
    "args,params,fragments",
    [
        ((-1, 0), {}, ("n", "-1")),
        ((1.5, 0), {}, ("n", "1.5")),
        (("3", 0), {}, ("n", "'3'")),
        ((3, 1.5), {}, ("seed", "1.5")),
        ((3, None), {}, ("seed", "None")),
        ((3, 0), dict(sensitive=["group"]), ("sensitive", "['group']")),
        ((3, 0), dict(sensitive=0), ("sensitive", "feature", "0")),  # S would overwrite feature 0
        ((3, 0), dict(sensitive=4.0), ("sensitive", "feature", "4.0")),  # equal to the key 4
    ],
)
def test_streams_reject(stream, args, params, fragments):
    check_error(lambda: list(stream(*args, **params)), *fragments)
