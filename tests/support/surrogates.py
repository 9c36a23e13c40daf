"""Helpers shared by the surrogate methods' tests and their River wrappers' tests."""

from __future__ import annotations

import pickle

import numpy as np

from streamfair.surrogates import PublishedWeights


def state(obj) -> bytes:
    """Everything ``obj`` holds, as bytes: equal bytes, an untouched object."""
    return pickle.dumps(vars(obj))


def squared_error(scores, window):
    """A black-box metric for the tuner: the mean squared error of ``scores`` on the window's targets."""
    return float(np.mean((scores - window.y) ** 2))


def published(**kwargs) -> PublishedWeights:
    """Published weights of two cells (``kwargs`` replace fields)."""
    fields = dict(version=1, theta=np.zeros(2), cell_weights=np.array([1.5, 0.5]), cell_shares=np.array([0.25, 0.75]),
                  metric=0.3, n_events=100)
    return PublishedWeights(**{**fields, **kwargs})
