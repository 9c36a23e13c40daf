"""The black-box metric experiment's data and baselines (the full experiment is a command, not a test)."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.experiments.surrogates import load, logistic_regression, macro_f1, post_shift, split


def test_macro_f1_by_hand():
    y = np.array([1.0, 1.0, -1.0, 1.0, -1.0, -1.0])
    group = np.array([0, 0, 0, 1, 1, 1])
    scores = np.array([1.0, -1.0, 1.0, 1.0, 1.0, -1.0])
    # group 0: tp 1, predicted 2, actual 2 -> F1 0.5; group 1: tp 1, predicted 2, actual 1 -> 2/3
    assert macro_f1(scores, y, group) == pytest.approx((0.5 + 2 / 3) / 2)


@pytest.fixture(scope="module")
def compas():
    return load("compas")


def test_compas_is_read_from_the_wheel_and_split_as_in_the_paper(compas):
    data = compas
    assert data.X.shape[0] == data.y.size == 6167 and set(np.unique(data.y)) == {-1.0, 1.0}
    assert set(np.unique(data.group)) == {0, 1}
    train, val, test = split(data, seed=0)
    sizes = np.array([part[1].size for part in (train, val, test)]) / data.y.size
    assert np.allclose(sizes, [4 / 9, 2 / 9, 1 / 3], atol=1e-3)
    assert np.allclose(train[0][:, :-3].mean(axis=0), 0.0, atol=1e-9)  # standardised on train
    assert np.array_equal(train[0][:, -3], train[2]) and np.all(train[0][:, -1] == 1.0)


def test_post_shift_never_lowers_validation_macro_f1(compas):
    train, val, _ = split(compas, seed=0)
    base = logistic_regression(train[0], train[1])
    shifted = post_shift(base, *val)
    assert macro_f1(val[0] @ shifted, val[1], val[2]) >= macro_f1(val[0] @ base, val[1], val[2]) + 0.02
    assert np.array_equal(shifted[:-3], base[:-3]) and shifted[-1] == base[-1]  # only group thresholds move
    with pytest.raises(ValueError, match="dataset must be 'compas' or 'adult'"):
        load("german")
