"""Synthetic drifting streams with exact group posteriors, for measuring how a post-processor tracks.

Each sample has a group posterior ``tau1 = P(S = 1 | x)`` drawn from ``Beta(2, 3)`` (so
``P(S = 1) = 0.4``), its group ``S ~ Bernoulli(tau1)`` (the posterior is exact), and a base
prediction ``eta = bias(i) (2 tau1 - 1) + offset(i) + 0.25 xi`` that favours one group by an
amount that changes along the stream (sample index ``i``):

========== ===================================================================================
kind       change after ``change_at`` samples
========== ===================================================================================
flip       the bias flips sign (``+0.4`` to ``-0.4``): the favoured group becomes the other one
shift      every prediction moves up by ``0.5`` (the bias stays): the fair prices move to
           other thresholds
rotation   no single change: the bias turns as ``0.4 cos(2 pi i / period)`` all along
========== ===================================================================================

>>> eta, tau, s = drift_stream("flip", 1000, change_at=500, seed=0)
>>> eta.shape, tau.shape, bool(abs(tau.mean(axis=0)[1] - 0.4) < 0.05)
((1000,), (1000, 2), True)
"""

from __future__ import annotations

import numpy as np

KINDS = ("flip", "shift", "rotation")
#: Exact ``P(S = 1)`` of the streams (the mean of ``Beta(2, 3)``).
P = np.array([0.6, 0.4])
BIAS = 0.4


def drift_stream(kind: str, n: int, change_at: int, seed: int, period: int = 40_000, at: int | None = None
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(eta, tau, s)`` of ``n`` samples of the stream ``kind`` (see the module docstring).

    ``at``: draw every sample from the distribution at stream index ``at`` (a probe of the
    stream's state then), instead of samples ``0..n-1`` in order.

    >>> eta, _, _ = drift_stream("shift", 2000, change_at=100, seed=1, at=500)
    >>> bool(eta.mean() > 0.4)                      # every sample is after the shift
    True
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    rng = np.random.default_rng(seed)
    tau1 = rng.beta(2.0, 3.0, n)
    s = (rng.random(n) < tau1).astype(np.int64)
    index = np.arange(n) if at is None else np.full(n, at)
    after = index >= change_at
    if kind == "flip":
        bias, offset = np.where(after, -BIAS, BIAS), np.zeros(n)
    elif kind == "shift":
        bias, offset = np.full(n, BIAS), np.where(after, 0.5, 0.0)
    else:
        bias, offset = BIAS * np.cos(2 * np.pi * index / period), np.zeros(n)
    eta = np.clip(bias * (2 * tau1 - 1) + offset + 0.25 * rng.standard_normal(n), -1.0, 1.0)
    return eta, np.column_stack([1 - tau1, tau1]), s
