"""Synthetic streams shared by the post-processors' tests."""

from __future__ import annotations

import numpy as np


def unfair_stream(n, k, seed):
    """``eta`` depends on a hidden group drawn from ``tau``; ``tau`` is the exact posterior."""
    rng = np.random.default_rng(seed)
    logits = rng.normal(0, 1.2, (n, k))
    tau = np.exp(logits - logits.max(axis=1, keepdims=True))
    tau /= tau.sum(axis=1, keepdims=True)
    s = (rng.random((n, 1)) > np.cumsum(tau, axis=1)).sum(axis=1)
    eta = 0.8 * (s / (k - 1)) - 0.4 + 0.25 * rng.standard_normal(n)
    eta[rng.random(n) < 0.02] *= 5  # a few out of [-1, 1]
    return eta, tau
