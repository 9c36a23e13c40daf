"""Exact worst-case distributions ("weight oracles") of distributionally robust risks.

For a vector of losses ``l`` (one per sample, or one per group) each oracle returns the
maximizing distribution ``q`` of the robust risk ``sup_{q in U} q . l - penalty(q)`` together with
the robust value and the optimal dual variable (Carmon & Hausler, NeurIPS 2022, eq. (10): the
weights are ``q_i = psi*'(l_i - eta)`` for the dual variable ``eta`` that makes them a pmf).

======================  ======================================  ==========================================
oracle                   uncertainty set / penalty               weights
======================  ======================================  ==========================================
:func:`group_max`        ``q`` in the simplex over groups         uniform on the argmax groups
:func:`group_softmax`    ``+ T H(q)`` (paper eq. (6))             ``softmax(L / T)``
:func:`cvar`             ``q_i <= 1 / (alpha n)``                 top losses get the cap
:func:`capped_softmax`   CVaR set, ``+ T H(q)``                   ``min(1 / (alpha n), c exp(l_i / T))``
:func:`chi_square`       ``D_chi2(q, unif) <= rho``              ``(l_i - eta)_+ / sum_j (l_j - eta)_+``
:func:`chi_square_penalized` ``- lam D_chi2(q, unif)``            ``proj_simplex(1 / n + l / (lam n))``
:func:`kl_penalized`     ``- T KL(q || unif)``                    ``softmax(l / T)``
:func:`kl_constrained`   ``KL(q || unif) <= rho``                 ``softmax(l / T*)``, ``KL = rho``
======================  ======================================  ==========================================

``H(q) = -sum q log q`` and ``D_chi2(q, unif) = (1 / 2n) sum (n q_i - 1)^2`` (the paper's
normalization).  All exponentials go through log-sum-exp.

Examples
--------
>>> import numpy as np
>>> losses = np.array([1.0, 4.0, 2.0, 3.0])
>>> cvar(losses, alpha=0.5).value                      # mean of the worst half
3.5
>>> worst = chi_square(losses, rho=0.5)
>>> bool(abs(0.5 * np.mean((4 * worst.weights - 1) ** 2) - 0.5) < 1e-12)   # the constraint is tight
True
>>> group_softmax(np.array([0.2, 0.7]), temperature=1e-9).weights
array([0., 1.])
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ..validation import check_finite, check_integer, check_positive
from .simplex import log_sum_exp, project_simplex, softmax

__all__ = [
    "WorstCase",
    "group_means",
    "group_max",
    "group_softmax",
    "cvar",
    "capped_softmax",
    "chi_square_divergence",
    "chi_square",
    "chi_square_penalized",
    "kl_divergence",
    "kl_penalized",
    "kl_constrained",
]

#: Relative width at which the bisection of :func:`kl_constrained` stops.
BISECTION_TOLERANCE = 1e-15


class WorstCase(NamedTuple):
    """The maximizing distribution, the robust value and the optimal dual variable."""

    weights: np.ndarray
    value: float
    dual: float


def _check_losses(losses) -> np.ndarray:
    array = check_finite("losses", losses)
    if array.size == 0:
        raise ValueError("losses must not be empty")
    return array


def _check_alpha(alpha, n: int) -> float:
    alpha = check_positive("alpha", alpha)
    if not 1.0 / n - 1e-12 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [1/n, 1] = [{1.0 / n}, 1] for n = {n} losses, got {alpha!r}")
    return alpha


def _entropy(q: np.ndarray) -> float:
    positive = q[q > 0]
    return float(-(positive * np.log(positive)).sum())


def group_means(losses, groups, n_groups: int) -> np.ndarray:
    """Per-group mean loss ``L_g`` when the groups partition the samples (every group non-empty).

    >>> group_means([1.0, 3.0, 5.0], [0, 0, 1], 2)
    array([2., 5.])
    """
    losses = _check_losses(losses)
    n_groups = check_integer("n_groups", n_groups, 1)
    ids = np.asarray(groups)
    if ids.shape != losses.shape or not np.issubdtype(ids.dtype, np.integer) or ids.min() < 0 or ids.max() >= n_groups:
        raise ValueError(f"groups must be {losses.size} integers in [0, {n_groups}), got {groups!r}")
    counts = np.bincount(ids, minlength=n_groups)
    if np.any(counts == 0):
        raise ValueError(f"every group needs a sample; groups {np.flatnonzero(counts == 0).tolist()} are empty")
    return np.bincount(ids, weights=losses, minlength=n_groups) / counts


def group_max(group_losses) -> WorstCase:
    """Group DRO (paper eq. (2)): value ``max_g L_g``, weights uniform on the maximizers."""
    losses = _check_losses(group_losses)
    top = losses.max()
    q = (losses == top) / np.count_nonzero(losses == top)
    return WorstCase(q, float(top), float(top))


def group_softmax(group_losses, temperature: float) -> WorstCase:
    """Entropy-smoothed group DRO (paper eq. (6)): ``max_q q . L + T H(q)`` = ``T log sum exp(L / T)``.

    The value lies in ``[max_g L_g, max_g L_g + T log M]`` (Lemma 11); the paper's temperature is
    ``eps / (2 log M)``.  The dual is the value itself: ``q_g = exp((L_g - value) / T)``.
    """
    losses = _check_losses(group_losses)
    temperature = check_positive("temperature", temperature)
    scaled = losses / temperature
    value = temperature * log_sum_exp(scaled)
    return WorstCase(softmax(scaled), value, value)


def cvar(losses, alpha: float) -> WorstCase:
    """CVaR at level ``alpha``: the ``floor(alpha n)`` largest losses get ``1 / (alpha n)``, the next the rest.

    The value equals the Rockafellar-Uryasev dual ``min_eta eta + sum(l - eta)_+ / (alpha n)``,
    attained at the dual ``eta = VaR`` (the ``ceil(alpha n)``-th largest loss).
    """
    losses = _check_losses(losses)
    n = losses.size
    alpha = _check_alpha(alpha, n)
    cap = 1.0 / (alpha * n)
    full = min(n, int(math.floor(alpha * n + 1e-12)))  # guard alpha * n = k - 1 ulp
    order = np.argsort(-losses, kind="stable")
    q = np.zeros(n)
    q[order[:full]] = cap
    if full < n:
        q[order[full]] = max(0.0, 1.0 - full * cap)
    var = losses[order[min(n, math.ceil(alpha * n - 1e-12)) - 1]]
    return WorstCase(q, float(q @ losses), float(var))


def capped_softmax(losses, alpha: float, temperature: float) -> WorstCase:
    """Entropy-regularized CVaR: ``max q . l + T H(q)`` over ``{q in simplex, q_i <= 1 / (alpha n)}``.

    The maximizer is ``q_i = min(u, c exp(l_i / T))`` with ``u = 1 / (alpha n)``: going down the
    sorted losses, the top ``k`` are capped for the first ``k`` at which the uncapped remainder
    ``(1 - k u) softmax`` stays below ``u``.  The value lies in ``[CVaR, CVaR + T log n]``.  The dual
    is ``eta`` with ``q_i = min(u, exp((l_i - eta) / T - 1))`` (the paper's ``psi_eps*'``).
    """
    losses = _check_losses(losses)
    n = losses.size
    alpha = _check_alpha(alpha, n)
    temperature = check_positive("temperature", temperature)
    cap = min(1.0, 1.0 / (alpha * n))
    order = np.argsort(-losses, kind="stable")
    scaled = losses[order] / temperature
    # suffix[k] = log sum_{i >= k} exp(scaled_i), the mass left for the uncapped tail
    suffix = np.logaddexp.accumulate(scaled[::-1])[::-1]
    candidates = np.arange(min(n, math.ceil(alpha * n - 1e-12)))  # k u < 1 for these k
    log_c = np.log1p(-candidates * cap) - suffix[candidates]
    stops = log_c + scaled[candidates] <= math.log(cap) + 1e-12
    stops[-1] = True  # holds in exact arithmetic: there the remainder is at most the cap
    capped = int(np.argmax(stops))
    log_c = float(log_c[capped])
    q_sorted = np.empty(n)
    q_sorted[:capped] = cap
    q_sorted[capped:] = np.minimum(cap, np.exp(log_c + scaled[capped:]))
    q = np.empty(n)
    q[order] = q_sorted
    q /= q.sum()
    eta = -temperature * (log_c + 1.0)
    return WorstCase(q, float(q @ losses + temperature * _entropy(q)), float(eta))


def chi_square_divergence(q) -> float:
    """``D_chi2(q, unif) = (1 / 2n) sum_i (n q_i - 1)^2``."""
    q = np.asarray(q, dtype=float)
    return float(0.5 * np.mean((q.size * q - 1.0) ** 2))


def chi_square(losses, rho: float) -> WorstCase:
    """Chi-square DRO: ``max q . l`` over ``{q in simplex, D_chi2(q, unif) <= rho}``, exactly.

    If the uniform distribution on the largest losses is feasible it is optimal.  Otherwise the
    constraint is tight and ``q_i = (l_i - eta)_+ / sum_j (l_j - eta)_+``: with the support being the
    ``k`` largest losses (mean ``m``, centered values ``d``), ``||q||^2 = (1 + 2 rho) / n`` gives
    ``q_i = 1/k + d_i / c`` with ``c = ||d|| / sqrt((1 + 2 rho) / n - 1/k)`` and ``eta = m - c / k``; the
    right ``k`` is the one whose ``eta`` lies between the ``(k+1)``-th and ``k``-th largest loss.  The
    value equals ``min_eta eta + sqrt((1 + 2 rho) / n) ||(l - eta)_+||``.
    """
    losses = _check_losses(losses)
    rho = check_positive("rho", rho)
    n = losses.size
    order = np.argsort(-losses, kind="stable")
    top = losses[order[0]]
    shifted = losses[order] - top  # sorted decreasing, shifted so the largest is 0
    n_top = int(np.count_nonzero(shifted == 0.0))
    target = (1.0 + 2.0 * rho) / n  # ||q||^2 on the constraint's boundary
    if 1.0 / n_top <= target:  # the argmax vertex is feasible
        q = (losses == top) / n_top
        return WorstCase(q, float(top), float(top))
    k = np.arange(1, n + 1)
    mean = np.cumsum(shifted) / k
    spread = np.maximum(np.cumsum(shifted**2) - k * mean**2, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = np.sqrt(spread / (target - 1.0 / k))
        eta = mean - scale / k
    below = np.append(shifted[1:], -np.inf)
    usable = (target > 1.0 / k) & (spread > 0)
    violation = np.where(usable, np.maximum.reduce([below - eta, eta - shifted, np.zeros(n)]), np.inf)
    support = int(np.argmin(violation)) + 1
    centered = shifted[:support] - shifted[:support].mean()  # two-pass recomputation on the support
    c = math.sqrt(float(centered @ centered) / (target - 1.0 / support))
    q_sorted = np.zeros(n)
    q_sorted[:support] = np.maximum(1.0 / support + centered / c, 0.0)
    q_sorted /= q_sorted.sum()
    q = np.empty(n)
    q[order] = q_sorted
    return WorstCase(q, float(q @ losses), float(top + shifted[:support].mean() - c / support))


def chi_square_penalized(losses, lam: float) -> WorstCase:
    """``max_q q . l - lam D_chi2(q, unif)``: ``q = proj_simplex(1/n + l / (lam n))``.

    The dual is the ``eta`` with ``n q_i = (l_i - eta)_+ / lam`` (the density ratio), which attains
    ``value = min_eta eta + lam / 2 + sum_i (l_i - eta)_+^2 / (2 lam n)``.
    """
    losses = _check_losses(losses)
    lam = check_positive("lam", lam)
    n = losses.size
    q = project_simplex(1.0 / n + (losses - losses.max()) / (lam * n))
    i = int(np.argmax(q))
    eta = losses[i] - lam * n * q[i]
    return WorstCase(q, float(q @ losses - lam * chi_square_divergence(q)), float(eta))


def kl_divergence(q) -> float:
    """``KL(q || unif) = log n - H(q)``."""
    q = np.asarray(q, dtype=float)
    return math.log(q.size) - _entropy(q)


def kl_penalized(losses, temperature: float) -> WorstCase:
    """``max_q q . l - T KL(q || unif)`` = ``T log mean exp(l / T)``, at ``q = softmax(l / T)``.

    The dual is the value ``eta``: ``q_i = exp((l_i - eta) / T) / n``.
    """
    losses = _check_losses(losses)
    temperature = check_positive("temperature", temperature)
    scaled = losses / temperature
    value = temperature * (log_sum_exp(scaled) - math.log(losses.size))
    return WorstCase(softmax(scaled), value, value)


def kl_constrained(losses, rho: float) -> WorstCase:
    """``max q . l`` over ``{q in simplex, KL(q || unif) <= rho}``.

    Uniform on the argmax set if that is feasible (``log(n / #argmax) <= rho``); otherwise
    ``softmax(l / T)`` with the temperature ``T`` (the dual) at which ``KL = rho``, found by bisection
    on ``log T`` (KL decreases in ``T``), keeping the feasible end.  The value equals
    ``min_T T rho + T log mean exp(l / T)``.
    """
    losses = _check_losses(losses)
    rho = check_positive("rho", rho)
    n = losses.size
    top = losses.max()
    n_top = int(np.count_nonzero(losses == top))
    if math.log(n / n_top) <= rho:
        q = (losses == top) / n_top
        return WorstCase(q, float(top), 0.0)

    def divergence(log_t: float) -> float:
        return kl_divergence(softmax(losses / math.exp(log_t)))

    spread = float(top - losses.min())
    lo = hi = math.log(spread)
    while divergence(hi) > rho:  # hi: feasible (small KL)
        hi += 1.0
    while divergence(lo) <= rho:  # lo: infeasible
        lo -= 1.0
    while hi - lo > BISECTION_TOLERANCE * max(1.0, abs(hi)):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        if divergence(mid) > rho:
            lo = mid
        else:
            hi = mid
    temperature = math.exp(hi)
    q = softmax(losses / temperature)
    return WorstCase(q, float(q @ losses), temperature)
