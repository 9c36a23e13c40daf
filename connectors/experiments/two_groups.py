"""A stationary population of two groups of any sizes, with exact group posteriors.

Used to measure how the served fairness depends on the size of the smallest group: each sample's
feature ``x`` is drawn around its group's mean (-0.4 or 0.4, standard deviation 0.25); ``tau`` is
the posterior of the group given ``x``; ``eta`` is ``x`` plus noise, in ``[-1, 1]``.
"""

from __future__ import annotations

import numpy as np


def two_groups(share: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``eta, tau, p`` of ``n`` samples of two groups, the second with ``share`` of them, and exact posteriors.

    >>> eta, tau, p = two_groups(0.05, 1000, seed=0)
    >>> p.tolist(), bool(tau[eta > 0.5, 1].mean() > 0.5 > tau[eta < 0, 1].mean())
    ([0.95, 0.05], True)
    """
    rng = np.random.default_rng(seed)
    p, means = np.array([1 - share, share]), np.array([-0.4, 0.4])
    x = means[(rng.random(n) < share).astype(int)] + 0.25 * rng.standard_normal(n)
    likelihood = p * np.exp(-0.5 * ((x[:, None] - means) / 0.25) ** 2)
    return np.clip(x + 0.1 * rng.standard_normal(n), -1, 1), likelihood / likelihood.sum(axis=1, keepdims=True), p
