"""Log-sum-exp, softmax and Euclidean projections onto the (capped) probability simplex.

These (with :func:`streamfair.softmax.softmax`, re-exported here) are the numerical primitives shared
by the worst-case weight oracles (:mod:`streamfair.dro.weights`), the online updaters and the batch solvers.
Every exponential is taken after subtracting the maximum, so ``loss / temperature`` ratios of ``1e7`` and more are safe.

Examples
--------
>>> import numpy as np
>>> project_simplex(np.array([0.5, 0.9, -1.0]))
array([0.3, 0.7, 0. ])
>>> project_capped_simplex(np.array([3.0, 0.0, 0.0, 0.0]), cap=0.5)
array([0.5       , 0.16666667, 0.16666667, 0.16666667])
>>> round(log_sum_exp(np.array([800.0, 800.0])), 6)        # exp(800) overflows; this does not
800.693147
"""

from __future__ import annotations

import math

import numpy as np

from .. import kernel
from ..softmax import softmax
from ..validation import check_array, check_finite, check_not_empty, check_positive

__all__ = ["log_sum_exp", "softmax", "project_simplex", "project_capped_simplex"]


def log_sum_exp(values: np.ndarray) -> float:
    """``log(sum(exp(values)))`` of a 1-d array without overflow.

    Parameters
    ----------
    values
        The exponents, shape ``(n,)``, ``n >= 1``: finite, or ``-inf`` (a term ``exp(-inf) = 0``).

    Returns
    -------
    float
        ``max(values) + log(sum(exp(values - max(values))))``; ``-inf`` for all-``-inf`` values.

    Raises
    ------
    ValueError
        If ``values`` is empty, not 1-d, or holds a ``NaN`` or ``+inf``.

    Examples
    --------
    >>> import numpy as np
    >>> round(log_sum_exp(np.array([0.0, np.log(3.0)])), 6)       # log(1 + 3) = log 4
    1.386294
    >>> round(log_sum_exp(np.array([1000.0, 1000.0])), 6)          # 1000 + log 2, no overflow
    1000.693147
    """
    values = _vector("values", values, finite=False)
    top = float(np.max(values))
    if not np.isfinite(top):  # NaN is the maximum of an array that holds one
        if top == -np.inf:
            return top
        raise ValueError(f"values must be finite or -inf, got {values!r}")
    shifted = values - top
    kernel.exp_non_positive(shifted)  # the same floats on every CPU (see streamfair.softmax)
    return top + math.log(float(np.sum(shifted)))


def project_simplex(v: np.ndarray) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{q >= 0, sum(q) = 1}`` (sort and threshold, O(n log n)).

    The threshold ``theta`` is the one for which ``sum(max(v - theta, 0)) = 1``; with ``v`` sorted
    in decreasing order it is ``(sum of the top k entries - 1) / k`` for the largest ``k`` whose
    ``k``-th entry stays above it.

    Parameters
    ----------
    v
        The point to project, shape ``(n,)``, ``n >= 1``, finite.

    Returns
    -------
    ndarray of shape (n,)
        The closest probability vector to ``v`` (non-negative, summing to one).

    Examples
    --------
    >>> import numpy as np
    >>> project_simplex(np.array([0.5, 0.9, -1.0]))                # theta = (0.9 + 0.5 - 1) / 2
    array([0.3, 0.7, 0. ])
    >>> project_simplex(np.array([0.25, 0.25, 0.5])).tolist()      # already on the simplex
    [0.25, 0.25, 0.5]
    """
    v = _vector("v", v)
    ordered = np.sort(v)[::-1]
    excess = np.cumsum(ordered) - 1.0
    k = np.arange(1, v.size + 1)
    support = np.flatnonzero(ordered - excess / k > 0)[-1] + 1
    theta = excess[support - 1] / support
    return np.maximum(v - theta, 0.0)


def project_capped_simplex(v: np.ndarray, cap: float) -> np.ndarray:
    """Euclidean projection of ``v`` onto ``{0 <= q <= cap, sum(q) = 1}`` (needs ``cap * n >= 1``).

    The projection is ``clip(v - theta, 0, cap)`` where ``s(theta) = sum(clip(v - theta, 0, cap))``
    is continuous, piecewise linear and non-increasing with kinks at ``v_i`` and ``v_i - cap``.  A
    binary search over the sorted kinks finds the linear piece containing ``s = 1``, which is then
    solved exactly.

    Parameters
    ----------
    v
        The point to project, shape ``(n,)``, ``n >= 1``, finite.
    cap
        The largest entry allowed, at least ``1 / n`` (``1 / n`` leaves only the uniform vector;
        ``cap >= 1`` is :func:`project_simplex`).

    Returns
    -------
    ndarray of shape (n,)
        The closest probability vector to ``v`` whose entries are at most ``cap``.

    Raises
    ------
    ValueError
        If ``cap < 1 / n`` (the set is empty), or ``v`` is empty or not finite.

    Examples
    --------
    With ``theta = -1/6``, ``clip(v - theta, 0, 1/2)`` sums to one:

    >>> import numpy as np
    >>> project_capped_simplex(np.array([3.0, 0.0, 0.0, 0.0]), cap=0.5).round(6).tolist()
    [0.5, 0.166667, 0.166667, 0.166667]
    >>> v = np.array([0.5, 0.9, -1.0])
    >>> bool(np.allclose(project_capped_simplex(v, cap=1.0), project_simplex(v)))
    True
    """
    v = _vector("v", v)
    cap = check_positive("cap", cap)
    if cap * v.size < 1.0 - 1e-12:
        raise ValueError(f"cap must be >= 1 / n = {1.0 / v.size}, got {cap!r}")
    if cap * v.size <= 1.0:
        return np.full(v.size, 1.0 / v.size)
    kinks = np.unique(np.concatenate([v, v - cap]))

    def mass(theta: float) -> float:
        return float(np.clip(v - theta, 0.0, cap).sum())

    lo, hi = 0, kinks.size - 1  # mass(kinks[0]) = n * cap >= 1 >= 0 = mass(kinks[-1])
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if mass(kinks[mid]) >= 1.0:
            lo = mid
        else:
            hi = mid
    left, right = kinks[lo], kinks[hi]
    mass_left, mass_right = mass(left), mass(right)
    theta = left if mass_left == mass_right else left + (mass_left - 1.0) * (right - left) / (mass_left - mass_right)
    return np.clip(v - theta, 0.0, cap)


def _vector(name: str, value, *, finite: bool = True) -> np.ndarray:
    """``value`` as a non-empty 1-d float array (a number is one entry), finite unless ``finite=False``.

    ``finite=False`` is for ``log_sum_exp``, whose ``-inf`` terms are zeros of the sum (and which takes no number).
    """
    array = check_finite(name, value) if finite else check_array(name, value, ("n",), finite=False)
    check_not_empty(name, array)
    return array
