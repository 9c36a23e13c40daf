"""``streamfair.linear_models.fit_logistic`` against scikit-learn's ``LogisticRegression``: the
documented correspondence between ``l2`` and ``C`` (``l2 = 2 / C`` for two classes, ``1 / C`` for more)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from streamfair.linear_models import fit_logistic


def softmax_data(n_classes: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((400, 3))
    logits = X @ rng.standard_normal((3, n_classes))
    proba = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    labels = (rng.random(400)[:, None] > np.cumsum(proba, axis=1)).sum(axis=1)
    return X, labels


def documented_l2(C: float, n_classes: int) -> float:
    return (2.0 if n_classes == 2 else 1.0) / C


@pytest.mark.parametrize("n_classes", [2, 3, 4])
@pytest.mark.parametrize("C", [0.25, 1.0, 4.0])
def test_l2_matches_scikit_learn_C(n_classes, C):
    X, labels = softmax_data(n_classes, seed=n_classes)
    reference = LogisticRegression(C=C, tol=1e-12, max_iter=10_000).fit(X, labels).predict_proba(X)
    ours = fit_logistic(X, labels, l2=documented_l2(C, n_classes)).predict_proba(X)
    np.testing.assert_allclose(ours, reference, atol=1e-6)
    # the other mapping is measurably different: the test can tell them apart
    other = fit_logistic(X, labels, l2=(1.0 if n_classes == 2 else 2.0) / C).predict_proba(X)
    assert np.abs(other - reference).max() > 1e-3
