"""Streaming modes A, B, C (derived, not in the paper; so are the targets below).

Mode A with a window holding the whole stream reproduces the batch fit bit for bit; modes B and C,
after one pass over 10^5 i.i.d. samples of the synthetic distribution, come within 0.01 of the batch
objective (and of eps + 0.01 of the constraint); mode C learns demographic parity without labels.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamfair.complex_metrics import (
    Coverage,
    DemographicParity,
    Problem,
    QMean,
    Sample,
    ZeroOneError,
    constrained_ellipsoid,
    constrained_gda,
    frank_wolfe,
)
from streamfair.complex_metrics.streaming import OnlinePrimalDual, StreamingFrankWolfe, WindowedRefit
from streamfair.complex_metrics.synthetic import posterior, sample_three_class, sample_two_groups


@pytest.fixture(scope="module")
def stream():
    x, y = sample_three_class(100_000, seed=5)
    return posterior(x), y


@pytest.mark.slow
def test_mode_a_with_the_whole_stream_in_the_window_is_the_batch_fit_bit_for_bit():
    x, y = sample_three_class(3000, seed=1)
    proba = posterior(x)

    def fit(problem):
        return constrained_gda(problem, 300, 0.1, 0.1)

    refit = WindowedRefit(fit, QMean(), [Coverage(0.02)], n_classes=3, window=3000, refit_every=3000, seed=4)
    before = refit.predict_one(proba[0], key="k")
    assert before == int(proba[0].argmax())  # before the first refit: argmax eta_hat
    for row, label in zip(proba, y, strict=True):
        refit.learn_one(row, int(label))
    batch = fit(Problem(QMean(), Sample(proba, y), [Coverage(0.02)]))
    assert np.array_equal(refit.classifier.weights, batch.classifier.weights)
    assert np.array_equal(refit.classifier.scores, batch.classifier.scores)
    assert refit.last_fit.objective == batch.objective
    keys = [f"m{i}" for i in range(200)]
    served = [refit.predict_one(proba[i], key=keys[i]) for i in range(200)]
    batch.classifier.seed = 4
    assert served == batch.classifier.predict_many(proba[:200], keys=keys).tolist()
    # a sliding window: after 1000 more arrivals and a refit, the window is the last 3000 tuples
    more_x, more_y = sample_three_class(1000, seed=2)
    for row, label in zip(posterior(more_x), more_y, strict=True):
        refit.learn_one(row, int(label))
    refit.refit()
    window = Sample(np.vstack([proba[1000:], posterior(more_x)]), np.concatenate([y[1000:], more_y]))
    assert refit.last_fit.objective == fit(Problem(QMean(), window, [Coverage(0.02)])).objective


@pytest.mark.slow
def test_mode_b_streaming_frank_wolfe_reaches_the_batch_objective(stream):
    proba, y = stream
    batch = frank_wolfe(Problem(QMean(), Sample(proba, y)), iterations=500)
    online = StreamingFrankWolfe(QMean(), n_classes=3)
    predictions = online.run(proba, y)
    realized = QMean()(Sample(proba, y).confusion(predictions))
    assert online.objective() == pytest.approx(realized, abs=1e-3)  # 1/t steps: the predictions' own confusion
    assert realized <= batch.objective + 0.01
    argmax = QMean()(Sample(proba, y).confusion(proba.argmax(axis=1)))
    assert argmax > 0.75  # far from it at the start


@pytest.mark.slow
def test_mode_b_tolerates_delayed_labels_and_round_trips_its_state(stream):
    proba, y = stream
    proba, y = proba[:50_000], y[:50_000]
    batch = frank_wolfe(Problem(QMean(), Sample(proba, y)), iterations=500)
    online = StreamingFrankWolfe(QMean(), n_classes=3, refresh_every=10)
    first = online.run(proba[:20_000], y[:20_000], delay=500)
    copy = StreamingFrankWolfe(QMean(), n_classes=3, refresh_every=10)
    copy.load_state_dict(online.state_dict())
    rest = online.run(proba[20_000:], y[20_000:], delay=500)
    assert np.array_equal(copy.run(proba[20_000:], y[20_000:], delay=500), rest)
    realized = QMean()(Sample(proba, y).confusion(np.concatenate([first, rest])))
    assert realized <= batch.objective + 0.01


@pytest.mark.slow
def test_mode_c_online_primal_dual_meets_coverage_at_the_batch_objective(stream):
    proba, y = stream
    eps = 0.01
    batch = constrained_ellipsoid(Problem(QMean(), Sample(proba, y), [Coverage(eps)]), iterations=500)
    assert batch.violation <= 1e-9
    online = OnlinePrimalDual(QMean(), [Coverage(eps)], n_classes=3, dual_step=1.0, refresh_every=10)
    predictions = online.run(proba, y)
    confusion = Sample(proba, y).confusion(predictions)
    assert Coverage(eps)(confusion) <= 0.01  # max |coverage - prior| <= eps + 0.01
    assert QMean()(confusion) <= batch.objective + 0.01
    assert online.multipliers.max() > 0  # the constraint was active
    unconstrained = StreamingFrankWolfe(QMean(), n_classes=3, refresh_every=10)
    assert (
        Coverage(eps)(Sample(proba[:30_000], y[:30_000]).confusion(unconstrained.run(proba[:30_000], y[:30_000])))
        > 0.05
    )


@pytest.mark.slow
def test_mode_c_learns_demographic_parity_without_labels():
    eps = 0.02
    train, test = sample_two_groups(40_000, seed=31), sample_two_groups(100_000, seed=32)
    config = dict(n_classes=3, n_groups=2, grouping="aware", dual_step=1.0, snapshot_every=200)
    online = OnlinePrimalDual(ZeroOneError(), [DemographicParity(eps)], **config)
    predictions = online.run(train["eta_aware"], None, train["a"])  # no labels
    with_labels = OnlinePrimalDual(ZeroOneError(), [DemographicParity(eps)], **config)
    assert np.array_equal(with_labels.run(train["eta_aware"], train["y"], train["a"]), predictions)
    np.testing.assert_allclose(with_labels.multipliers, online.multipliers, rtol=1e-9, atol=1e-12)  # y is never used
    held_out = Sample(test["eta_aware"], test["y"], test["a"])
    confusion = online.classifier(last=50).confusion(held_out)  # the time average of the last 10k steps
    rates = confusion.sum(axis=1) / confusion.sum(axis=(1, 2))[:, None]
    gap = np.abs(rates - confusion.sum(axis=(0, 1))).max()
    base = held_out.confusion(held_out.predict(np.tile(1 - np.eye(3), (2, 1))))
    base_rates = base.sum(axis=1) / base.sum(axis=(1, 2))[:, None]
    assert np.abs(base_rates - base.sum(axis=(0, 1))).max() > 0.1
    assert gap <= eps + 3 / math.sqrt(np.bincount(test["a"]).min())
    assert ZeroOneError()(confusion) < 1 - confusion.sum(axis=(0, 2)).max()  # beats the best constant


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3, step=1.5), r"step must be None or in \(0, 1\]"),
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3, n_groups=2), "grouping 'none' does not fit n_groups=2"),
        (lambda: OnlinePrimalDual(QMean(), [], n_classes=3), "needs at least one constraint"),
        (
            lambda: StreamingFrankWolfe(QMean(), n_classes=3).learn_one([0.5, 0.5, 0.5], 0),
            "proba must be 3 class probabilities",
        ),
        (
            lambda: StreamingFrankWolfe(QMean(), n_classes=3).learn_one([0.2, 0.3, 0.5], 3),
            r"prediction must be a class in 0..2",
        ),
        (lambda: StreamingFrankWolfe(QMean(), n_classes=3).learn_one([0.2, 0.3, 0.5], 1, y=-1), r"y must be a class"),
        (
            lambda: OnlinePrimalDual(
                ZeroOneError(), [DemographicParity(0.1)], n_classes=3, n_groups=2, grouping="aware"
            ).predict_one([0.2, 0.3, 0.5]),
            "needs its group",
        ),
        (lambda: WindowedRefit(frank_wolfe, QMean(), n_classes=3, window=0), "window must be an integer >= 1"),
    ],
)
def test_streaming_objects_refuse_bad_inputs(build, message):
    with pytest.raises(ValueError, match=message):
        build()
