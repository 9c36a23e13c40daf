"""River adapters of the surrogate methods: SSO on River linear models, tuner weights as sample weights."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from river import linear_model, optim

from connectors.river.surrogates import (
    RiverSSO,
    WeightedLinearLearner,
    feature_vector,
    linear_parameters,
    set_linear_parameters,
)
from streamfair.surrogates import MetricWeightTuner, PublishedWeights

FEATURES = ["a", "b", "c"]


def samples(seed: int, n: int, classification: bool):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        v = rng.standard_normal(3)
        x = dict(zip(FEATURES, v, strict=True))
        target = v @ [1.0, -2.0, 0.5] + 0.3
        if classification:
            yield x, bool(target + 0.5 * rng.standard_normal() > 0)
        else:
            yield x, target + 0.1 * rng.standard_normal()


def state(model):
    return model.weights, model.intercept


@pytest.mark.parametrize("make", [
    lambda: linear_model.LinearRegression(optimizer=optim.SGD(0.02), intercept_lr=0.02, l2=0.01),
    lambda: linear_model.LogisticRegression(optimizer=optim.SGD(0.1)),
    lambda: linear_model.LinearRegression(optimizer=optim.Adam(0.01)),
])
def test_m1_single_samples_reproduce_learn_one_bit_for_bit(make):
    plain, wrapped = make(), make()
    sso = RiverSSO(wrapped, m=1)
    classification = isinstance(plain, linear_model.LogisticRegression)
    for x, y in samples(0, 100, classification):
        plain.learn_one(x, y)
        sso.learn_one(x, y)
        assert state(plain) == state(wrapped)
    assert plain.intercept != 0.0
    assert (sso.n_oracle_calls, sso.n_inner_steps) == (100, 100)
    assert wrapped.loss is not None and type(wrapped.loss) is type(plain.loss)  # the loss is restored


def test_more_passes_move_the_target_to_the_target_space_sgd_step():
    """Single sample, many passes: the new raw score is z - eta dl/dz (Lemma 4.1 / NLMS)."""
    model = linear_model.LinearRegression(optimizer=optim.SGD(0.05), intercept_lr=0.05)
    set_linear_parameters(model, FEATURES, [0.2, 0.1, -0.3, 0.05])
    sso = RiverSSO(model, m=400, eta=0.25)
    x, y = {"a": 0.7, "b": -1.1, "c": 0.4}, 2.0
    z = sso.raw_one(x)
    gradient = model.loss.gradient(y_true=y, y_pred=z)
    sso.learn_one(x, y)
    assert sso.raw_one(x) == pytest.approx(z - 0.25 * gradient, abs=1e-10)
    assert sso.last_target_step_norm == pytest.approx(0.25 * abs(gradient), rel=1e-8)


def test_external_gradients_equal_labelled_batches():
    make = lambda: linear_model.LinearRegression(optimizer=optim.SGD(0.02))  # noqa: E731
    batch = list(samples(1, 25, False))
    labelled, external = RiverSSO(make(), m=5), RiverSSO(make(), m=5)
    for start in (0, 5, 10, 15, 20):
        xs, ys = zip(*batch[start:start + 5], strict=True)
        labelled.learn_batch(xs, ys=ys)
        gradients = [2 * (external.raw_one(x) - y) for x, y in zip(xs, ys, strict=True)]
        external.learn_batch(xs, gradients=gradients)
    assert state(labelled.model) == state(external.model)
    assert labelled.n_oracle_calls == 5 and labelled.n_inner_steps == 125


def test_sso_on_river_needs_fewer_batches_than_sgd_near_interpolation():
    stream = list(samples(2, 1500, False))
    test = stream[1000:]
    mse = lambda model: np.mean([(model.predict_one(x) - y) ** 2 for x, y in test])  # noqa: E731
    make = lambda: linear_model.LinearRegression(optimizer=optim.SGD(0.005), intercept_lr=0.005)  # noqa: E731
    sgd, sso = make(), RiverSSO(make(), m=10, eta=0.25)
    sgd_curve, sso_curve = [], []
    for start in range(0, 500, 25):
        xs, ys = zip(*stream[start:start + 25], strict=True)
        sso.learn_batch(xs, ys=ys)
        for x, y in zip(xs, ys, strict=True):
            sgd.learn_one(x, y)
        sgd_curve.append(mse(sgd))
        sso_curve.append(mse(sso.model))
    batches_needed = 1 + next(i for i, value in enumerate(sso_curve) if value <= sgd_curve[-1])
    assert batches_needed <= len(sgd_curve) // 2
    assert sso.n_oracle_calls == 20


def test_tuner_weights_drive_a_river_model_to_the_weighted_solution():
    rng = np.random.default_rng(3)
    rows = []
    for _ in range(1500):
        group = int(rng.random() < 0.3)
        x = {"a": rng.standard_normal(), "b": float(group)}
        y = (1.5 if group else 0.5) * x["a"] + 0.1 * rng.standard_normal()  # groups disagree on the slope
        rows.append((x, y, group))
    weights = PublishedWeights(1, np.zeros(3), np.array([0.2, 1.8]), np.array([0.7, 0.3]), 0.0, 0)
    model = linear_model.LinearRegression(optimizer=optim.SGD(0.005), intercept_lr=0.005)
    learner = WeightedLinearLearner(model, ["a", "b"])
    learner.apply(weights)
    for _ in range(15):
        for x, y, group in rows:
            learner.learn_one(x, y, group)
    X = np.array([feature_vector(x, ["a", "b"]) for x, _, _ in rows])
    y = np.array([label for _, label, _ in rows])
    root = np.sqrt(weights.sample_weights([group for _, _, group in rows]))
    weighted = np.linalg.lstsq(X * root[:, None], y * root, rcond=None)[0]
    unweighted = np.linalg.lstsq(X, y, rcond=None)[0]
    river = linear_parameters(learner.model, ["a", "b"])
    assert np.max(np.abs(river - weighted)) < 0.05
    assert np.max(np.abs(unweighted - weighted)) > 0.3  # the weights matter here
    assert learner.trained_by_version == {1: 15 * 1500}


def test_weighted_learner_feeds_the_tuner_and_adopts_new_versions():
    mse = lambda scores, w: float(np.mean((scores - w.y) ** 2))  # noqa: E731
    tuner = MetricWeightTuner(4, 2, mse, every=200, window=400, seed=0)
    learner = WeightedLinearLearner(linear_model.LinearRegression(), FEATURES, tuner)
    for i, (x, y) in enumerate(samples(4, 600, False)):
        learner.learn_one(x, y, i % 2)
    assert learner.weights is tuner.weights and tuner.weights.version == 3
    assert learner.trained_by_version == {0: 199, 1: 200, 2: 200, 3: 1}
    older = copy.copy(learner.weights)
    learner.apply(PublishedWeights(1, np.zeros(4), np.ones(2), np.full(2, 0.5), 0.0, 0))
    assert learner.weights.version == older.version  # an older version is ignored


def test_invalid_inputs():
    from river import tree

    with pytest.raises(ValueError, match="model must be a river LinearRegression or LogisticRegression"):
        RiverSSO(tree.HoeffdingTreeRegressor())
    sso = RiverSSO(linear_model.LinearRegression())
    with pytest.raises(ValueError, match="give exactly one of ys and gradients"):
        sso.learn_batch([{"a": 1.0}])
    with pytest.raises(ValueError, match="gradients must be 1 finite numbers"):
        sso.learn_batch([{"a": 1.0}], gradients=[np.nan])
    with pytest.raises(ValueError, match="eta must be given for the loss Huber"):
        RiverSSO(linear_model.LinearRegression(loss=optim.losses.Huber()))
    with pytest.raises(ValueError, match="tuner must have n_features = 4"):
        WeightedLinearLearner(linear_model.LinearRegression(), FEATURES, MetricWeightTuner(3, 2, lambda s, w: 0.0))
    with pytest.raises(ValueError, match=r"theta must have shape \(4,\)"):
        set_linear_parameters(linear_model.LinearRegression(), FEATURES, [1.0])
