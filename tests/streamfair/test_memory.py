"""The many-sample methods work in pieces of ``CHUNK_ROWS`` rows: the same bits, memory O(chunk)."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor, postprocessor
from tests.support.states import assert_identical
from tests.support.streams import unfair_stream


@pytest.mark.parametrize("profile", ["anytime", "paper"])
@pytest.mark.parametrize("batch_size", [None, 3])
def test_pieces_give_the_same_bits_as_one_piece(monkeypatch, profile, batch_size):
    """Pieces of 10 rows (mini-batches of 3 inside them) against pieces larger than the stream."""
    eta, tau = unfair_stream(437, 2, seed=4)
    kwargs = dict(n_groups=2, profile=profile, L=6, **({"memory": 40} if profile == "anytime" else {"horizon": 60}))
    whole, pieces = FairRegressionPostProcessor(**kwargs), FairRegressionPostProcessor(**kwargs)
    whole.learn_many(eta, tau, batch_size=batch_size)
    monkeypatch.setattr(postprocessor, "CHUNK_ROWS", 10)
    pieces.learn_many(eta, tau, batch_size=batch_size)
    assert_identical(whole.state_dict(), pieces.state_dict())
    monkeypatch.setattr(postprocessor, "CHUNK_ROWS", 1000)
    expected = [whole.proba_many(eta, tau), whole.predict_many(eta, tau, keys=list(range(437))),
                whole.predict_many(eta, tau, mode="mean"), whole.predict_many(eta, tau)]
    monkeypatch.setattr(postprocessor, "CHUNK_ROWS", 10)
    produced = [pieces.proba_many(eta, tau), pieces.predict_many(eta, tau, keys=list(range(437))),
                pieces.predict_many(eta, tau, mode="mean"), pieces.predict_many(eta, tau)]
    for a, b in zip(expected, produced, strict=True):
        np.testing.assert_array_equal(a, b)
    assert whole._draws == pieces._draws == 437


def _peak_bytes(call) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _stream(n: int) -> tuple[np.ndarray, np.ndarray, FairRegressionPostProcessor]:
    rng = np.random.default_rng(0)
    tau = rng.dirichlet([1.0, 1.0], n)
    eta = np.tanh(rng.standard_normal(n))
    fair = FairRegressionPostProcessor(p=[0.5, 0.5])
    fair.learn_many(eta[:10], tau[:10])  # buffers that exist whatever n is
    return eta, tau, fair


def _learning_peaks(n: int) -> list[int]:
    """Bytes allocated at the peak of ``learn_many`` of ``n`` samples, exact and in mini-batches of 64."""
    eta, tau, fair = _stream(n)
    peaks = [_peak_bytes(lambda: fair.learn_many(eta, tau)),
             _peak_bytes(lambda: fair.learn_many(eta, tau, batch_size=64))]
    assert fair.n_samples == 2 * n + 10
    return peaks


def _predicting_peak(n: int) -> int:
    eta, tau, fair = _stream(n)
    return _peak_bytes(lambda: fair.predict_many(eta, tau))


@pytest.mark.slow
def test_what_the_many_sample_methods_allocate_does_not_grow_with_the_stream():
    """Learning 100,000 or 300,000 samples on 101 atoms allocates the same (the whole cost matrix of
    300,000 would be 242 MB): pieces of ``CHUNK_ROWS`` rows, the input checks in pieces too.
    ``predict_many`` of 1,000,000 or 1,500,000 grows by its output alone (8 bytes a sample).
    """
    (exact, batches), (exact_3n, batches_3n) = _learning_peaks(100_000), _learning_peaks(300_000)
    assert max(exact, batches, exact_3n, batches_3n) < 5e6
    assert exact_3n - exact < 2e5 and batches_3n - batches < 2e5
    assert _predicting_peak(1_500_000) - _predicting_peak(1_000_000) < 8 * 500_000 + 5e5


def test_keys_of_the_wrong_length_are_refused_before_any_draw():
    fair = FairClassificationPostProcessor(n_classes=2, n_groups=2)
    with pytest.raises(ValueError, match="keys"):
        fair.predict_many([[0.4, 0.6]] * 3, [[0.5, 0.5]] * 3, keys=["a", "b"])
    assert fair._draws == 0
