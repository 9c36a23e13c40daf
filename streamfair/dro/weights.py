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
from numpy.typing import ArrayLike

from ..validation import check_integer, check_positive, check_weights
from .simplex import _vector, log_sum_exp, project_simplex, softmax

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
    """The maximizing distribution, the robust value and the optimal dual variable.

    What every oracle of this module returns; it unpacks as ``weights, value, dual``.

    Parameters
    ----------
    weights
        The worst-case distribution ``q``, shape ``(n,)`` (one entry per loss), summing to one.
    value
        The robust risk ``q . l - penalty(q)`` at ``q``.
    dual
        The optimal dual variable (``eta`` of the oracle's dual form, or the temperature for
        :func:`kl_constrained`); see each oracle.

    Examples
    --------
    >>> import numpy as np
    >>> weights, value, dual = group_max(np.array([1.0, 3.0, 3.0]))
    >>> weights.tolist(), value, dual
    ([0.0, 0.5, 0.5], 3.0, 3.0)
    """

    weights: np.ndarray
    value: float
    dual: float


def _check_losses(losses: ArrayLike) -> np.ndarray:
    return _vector("losses", losses)


def _check_alpha(alpha, n: int | None = None) -> float:
    """A CVaR level: in ``(0, 1]``, and at least ``1 / n`` for ``n`` losses."""
    level = check_positive("alpha", alpha)
    if n is None and level > 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha!r}")
    if n is not None and not 1.0 / n - 1e-12 <= level <= 1.0:
        raise ValueError(f"alpha must be in [1/n, 1] = [{1.0 / n}, 1] for n = {n} losses, got {alpha!r}")
    return level


def _entropy(q: np.ndarray) -> float:
    positive = q[q > 0]
    return float(-(positive * np.log(positive)).sum())


def group_means(losses: ArrayLike, groups: ArrayLike, n_groups: int) -> np.ndarray:
    """Per-group mean loss ``L_g`` when the groups partition the samples (every group non-empty).

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    groups
        The group of each sample, ``n`` integers in ``[0, n_groups)``.
    n_groups
        ``M``, the number of groups; each must hold at least one sample.

    Returns
    -------
    ndarray of shape (n_groups,)
        The mean loss of each group.

    Examples
    --------
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


def group_max(group_losses: ArrayLike) -> WorstCase:
    """Group DRO (paper eq. (2)): value ``max_g L_g``, weights uniform on the maximizers.

    Parameters
    ----------
    group_losses
        The group losses ``L_g``, shape ``(M,)`` (e.g. from :func:`group_means`).

    Returns
    -------
    WorstCase
        Weights uniform on the groups of largest loss; value and dual both ``max_g L_g``.

    Examples
    --------
    >>> group_max([1.0, 3.0, 3.0])
    WorstCase(weights=array([0. , 0.5, 0.5]), value=3.0, dual=3.0)
    """
    losses = _check_losses(group_losses)
    top = losses.max()
    q = (losses == top) / np.count_nonzero(losses == top)
    return WorstCase(q, float(top), float(top))


def group_softmax(group_losses: ArrayLike, temperature: float) -> WorstCase:
    """Entropy-smoothed group DRO (paper eq. (6)): ``max_q q . L + T H(q)`` = ``T log sum exp(L / T)``.

    The value lies in ``[max_g L_g, max_g L_g + T log M]`` (Lemma 11); the paper's temperature is
    ``eps / (2 log M)``.  The dual is the value itself: ``q_g = exp((L_g - value) / T)``.

    Parameters
    ----------
    group_losses
        The group losses ``L_g``, shape ``(M,)``.
    temperature
        ``T > 0``, in the losses' units.

    Returns
    -------
    WorstCase
        Weights ``softmax(L / T)``; value and dual ``T log sum_g exp(L_g / T)``.

    Examples
    --------
    At ``L = (0, log 3)`` and ``T = 1`` the weights are ``(1, 3) / 4`` and the value ``log 4``:

    >>> import numpy as np
    >>> worst = group_softmax(np.array([0.0, np.log(3.0)]), temperature=1.0)
    >>> worst.weights.round(6).tolist(), round(worst.value, 6)
    ([0.25, 0.75], 1.386294)
    """
    losses = _check_losses(group_losses)
    temperature = check_positive("temperature", temperature)
    scaled = losses / temperature
    value = temperature * log_sum_exp(scaled)
    return WorstCase(softmax(scaled), value, value)


def cvar(losses: ArrayLike, alpha: float) -> WorstCase:
    """CVaR at level ``alpha``: the ``floor(alpha n)`` largest losses get ``1 / (alpha n)``, the next the rest.

    The value equals the Rockafellar-Uryasev dual ``min_eta eta + sum(l - eta)_+ / (alpha n)``,
    attained at the dual ``eta = VaR`` (the ``ceil(alpha n)``-th largest loss).

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    alpha
        The level, in ``[1 / n, 1]``: the share of worst samples averaged (1: the mean loss).

    Returns
    -------
    WorstCase
        The weights (at most ``1 / (alpha n)`` each), the CVaR and the VaR.

    Examples
    --------
    >>> import numpy as np
    >>> worst = cvar(np.array([1.0, 2.0, 3.0, 4.0]), alpha=0.5)       # mean of the worst half
    >>> worst.weights.tolist(), worst.value, worst.dual
    ([0.0, 0.0, 0.5, 0.5], 3.5, 3.0)

    At ``alpha n = 1.5`` the largest loss gets ``2/3`` and the next ``1/3``:

    >>> worst = cvar(np.array([1.0, 2.0, 3.0, 4.0]), alpha=0.375)
    >>> round(worst.value, 6), round(worst.dual + (4.0 - worst.dual) / 1.5, 6)   # = 11/3, its dual form
    (3.666667, 3.666667)
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


def capped_softmax(losses: ArrayLike, alpha: float, temperature: float) -> WorstCase:
    """Entropy-regularized CVaR: ``max q . l + T H(q)`` over ``{q in simplex, q_i <= 1 / (alpha n)}``.

    The maximizer is ``q_i = min(u, c exp(l_i / T))`` with ``u = 1 / (alpha n)``: going down the
    sorted losses, the top ``k`` are capped for the first ``k`` at which the uncapped remainder
    ``(1 - k u) softmax`` stays below ``u``.  The value lies in ``[CVaR, CVaR + T log n]``.  The dual
    is ``eta`` with ``q_i = min(u, exp((l_i - eta) / T - 1))`` (the paper's ``psi_eps*'``).

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    alpha
        The CVaR level, in ``[1 / n, 1]``.
    temperature
        ``T > 0``, in the losses' units.

    Returns
    -------
    WorstCase
        The weights, the regularized value ``q . l + T H(q)`` and the dual ``eta``.

    Examples
    --------
    At ``alpha = 1/2`` the cap ``2/3`` binds on the largest loss; the other two share the rest:

    >>> import numpy as np
    >>> worst = capped_softmax(np.array([0.0, 0.0, 10.0]), alpha=0.5, temperature=1.0)
    >>> worst.weights.round(6).tolist()
    [0.166667, 0.166667, 0.666667]
    >>> round(worst.value, 6)                       # 20/3 + H(1/6, 1/6, 2/3)
    7.53423

    With the cap at 1 (``alpha = 1 / n``) it is the plain softmax of :func:`group_softmax`:

    >>> losses = np.array([0.0, np.log(3.0)])
    >>> bool(np.isclose(capped_softmax(losses, 0.5, 1.0).value, group_softmax(losses, 1.0).value))
    True
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
    log_cs = np.log1p(-candidates * cap) - suffix[candidates]  # log c for each candidate k
    stops = log_cs + scaled[candidates] <= math.log(cap) + 1e-12
    stops[-1] = True  # holds in exact arithmetic: there the remainder is at most the cap
    capped = int(np.argmax(stops))
    log_c = float(log_cs[capped])
    q_sorted = np.empty(n)
    q_sorted[:capped] = cap
    q_sorted[capped:] = np.minimum(cap, np.exp(log_c + scaled[capped:]))
    q = np.empty(n)
    q[order] = q_sorted
    q /= q.sum()
    eta = -temperature * (log_c + 1.0)
    return WorstCase(q, float(q @ losses + temperature * _entropy(q)), float(eta))


def chi_square_divergence(q: ArrayLike) -> float:
    """``D_chi2(q, unif) = (1 / 2n) sum_i (n q_i - 1)^2``.

    Parameters
    ----------
    q
        A distribution over ``n`` points, shape ``(n,)`` (non-negative, summing to one).

    Returns
    -------
    float
        Its chi-square divergence from the uniform distribution, in the paper's normalization.

    Examples
    --------
    >>> chi_square_divergence([0.5, 0.5, 0.0, 0.0])         # (1 + 1 + 1 + 1) / 8
    0.5
    >>> chi_square_divergence([0.25, 0.25, 0.25, 0.25])
    0.0
    """
    q = check_weights("q", q)
    return float(0.5 * np.mean((q.size * q - 1.0) ** 2))


def chi_square(losses: ArrayLike, rho: float) -> WorstCase:
    """Chi-square DRO: ``max q . l`` over ``{q in simplex, D_chi2(q, unif) <= rho}``, exactly.

    If the uniform distribution on the largest losses is feasible it is optimal.  Otherwise the
    constraint is tight and ``q_i = (l_i - eta)_+ / sum_j (l_j - eta)_+``: with the support being the
    ``k`` largest losses (mean ``m``, centered values ``d``), ``||q||^2 = (1 + 2 rho) / n`` gives
    ``q_i = 1/k + d_i / c`` with ``c = ||d|| / sqrt((1 + 2 rho) / n - 1/k)`` and ``eta = m - c / k``; the
    right ``k`` is the one whose ``eta`` lies between the ``(k+1)``-th and ``k``-th largest loss.  The
    value equals ``min_eta eta + sqrt((1 + 2 rho) / n) ||(l - eta)_+||``.

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    rho
        The ball's size ``rho > 0``.

    Returns
    -------
    WorstCase
        The weights, the robust value and the dual ``eta`` (the largest loss when the argmax vertex
        is feasible).

    Examples
    --------
    For ``l = (1, 4, 2, 3)`` and ``rho = 1/2`` the support is the top three losses (mean 3,
    ``||d||^2 = 2``, ``c = sqrt(12)``), so the value is ``3 + ||d||^2 / c = 3 + 1 / sqrt(3)``:

    >>> import numpy as np
    >>> losses = np.array([1.0, 4.0, 2.0, 3.0])
    >>> worst = chi_square(losses, rho=0.5)
    >>> round(worst.value, 6), round(3 + 1 / 3 ** 0.5, 6)
    (3.57735, 3.57735)
    >>> round(chi_square_divergence(worst.weights), 6)     # the constraint is tight
    0.5
    >>> eta = worst.dual                                    # the dual form attains the value
    >>> round(float(eta + np.sqrt(2 / 4) * np.linalg.norm(np.maximum(losses - eta, 0))), 6)
    3.57735
    >>> chi_square(losses, rho=1.5).weights.tolist()       # the argmax vertex is feasible
    [0.0, 1.0, 0.0, 0.0]
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
    violation = np.where(usable, np.maximum(np.maximum(below - eta, eta - shifted), 0.0), np.inf)
    support = int(np.argmin(violation)) + 1
    centered = shifted[:support] - shifted[:support].mean()  # two-pass recomputation on the support
    c = math.sqrt(float(centered @ centered) / (target - 1.0 / support))
    q_sorted = np.zeros(n)
    q_sorted[:support] = np.maximum(1.0 / support + centered / c, 0.0)
    q_sorted /= q_sorted.sum()
    q = np.empty(n)
    q[order] = q_sorted
    return WorstCase(q, float(q @ losses), float(top + shifted[:support].mean() - c / support))


def chi_square_penalized(losses: ArrayLike, lam: float) -> WorstCase:
    """``max_q q . l - lam D_chi2(q, unif)``: ``q = proj_simplex(1/n + l / (lam n))``.

    The dual is the ``eta`` with ``n q_i = (l_i - eta)_+ / lam`` (the density ratio), which attains
    ``value = min_eta eta + lam / 2 + sum_i (l_i - eta)_+^2 / (2 lam n)``.

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    lam
        The penalty coefficient ``lam > 0``, in the losses' units.

    Returns
    -------
    WorstCase
        The weights, the penalized value and the dual ``eta``.

    Examples
    --------
    ``1/4 + l/4 = (0.5, 1.25, 0.75, 1)`` projects with threshold ``2/3``; then ``q . l = 3.5``,
    ``D_chi2 = 5/12`` and the value is ``37/12``, with ``eta = 4 - 4 q_2 = 5/3``:

    >>> import numpy as np
    >>> worst = chi_square_penalized(np.array([1.0, 4.0, 2.0, 3.0]), lam=1.0)
    >>> worst.weights.round(6).tolist()
    [0.0, 0.583333, 0.083333, 0.333333]
    >>> round(worst.value, 6), round(37 / 12, 6), round(worst.dual, 6)
    (3.083333, 3.083333, 1.666667)
    """
    losses = _check_losses(losses)
    lam = check_positive("lam", lam)
    n = losses.size
    q = project_simplex(1.0 / n + (losses - losses.max()) / (lam * n))
    i = int(np.argmax(q))
    eta = losses[i] - lam * n * q[i]
    return WorstCase(q, float(q @ losses - lam * chi_square_divergence(q)), float(eta))


def kl_divergence(q: ArrayLike) -> float:
    """``KL(q || unif) = log n - H(q)``.

    Parameters
    ----------
    q
        A distribution over ``n`` points, shape ``(n,)`` (zero entries allowed).

    Returns
    -------
    float
        Its Kullback-Leibler divergence from the uniform distribution, in nats.

    Examples
    --------
    >>> round(kl_divergence([0.5, 0.5, 0.0, 0.0]), 6)       # log 4 - log 2
    0.693147
    >>> kl_divergence([0.25, 0.25, 0.25, 0.25])
    0.0
    """
    return _kl_divergence(check_weights("q", q))


def _kl_divergence(q: np.ndarray) -> float:
    return math.log(q.size) - _entropy(q)


def kl_penalized(losses: ArrayLike, temperature: float) -> WorstCase:
    """``max_q q . l - T KL(q || unif)`` = ``T log mean exp(l / T)``, at ``q = softmax(l / T)``.

    The dual is the value ``eta``: ``q_i = exp((l_i - eta) / T) / n``.

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    temperature
        ``T > 0``, in the losses' units.

    Returns
    -------
    WorstCase
        Weights ``softmax(l / T)``; value and dual ``T log mean exp(l / T)``.

    Examples
    --------
    At ``l = (0, log 3)`` and ``T = 1``: weights ``(1, 3) / 4``, value ``log((1 + 3) / 2) = log 2``:

    >>> import numpy as np
    >>> worst = kl_penalized(np.array([0.0, np.log(3.0)]), temperature=1.0)
    >>> worst.weights.round(6).tolist(), round(worst.value, 6)
    ([0.25, 0.75], 0.693147)
    """
    losses = _check_losses(losses)
    temperature = check_positive("temperature", temperature)
    scaled = losses / temperature
    value = temperature * (log_sum_exp(scaled) - math.log(losses.size))
    return WorstCase(softmax(scaled), value, value)


def kl_constrained(losses: ArrayLike, rho: float) -> WorstCase:
    """``max q . l`` over ``{q in simplex, KL(q || unif) <= rho}``.

    Uniform on the argmax set if that is feasible (``log(n / #argmax) <= rho``); otherwise
    ``softmax(l / T)`` with the temperature ``T`` (the dual) at which ``KL = rho``, found by bisection
    on ``log T`` (KL decreases in ``T``), keeping the feasible end.  The value equals
    ``min_T T rho + T log mean exp(l / T)``.

    Parameters
    ----------
    losses
        Per-sample losses, shape ``(n,)``.
    rho
        The ball's size ``rho > 0``, in nats.

    Returns
    -------
    WorstCase
        The weights, the robust value and the temperature ``T*`` as the dual (0 when the argmax
        vertex is feasible).

    Examples
    --------
    The ball whose boundary passes through ``softmax(l)`` has ``T* = 1``, and the value equals the
    dual form ``T* rho + T* log mean exp(l / T*)``:

    >>> import numpy as np
    >>> losses = np.array([0.0, 1.0])
    >>> rho = kl_divergence(softmax(losses))
    >>> worst = kl_constrained(losses, rho)
    >>> round(worst.dual, 6), worst.weights.round(6).tolist()      # e / (1 + e) on the larger loss
    (1.0, [0.268941, 0.731059])
    >>> round(worst.value, 6), round(worst.dual * rho + kl_penalized(losses, worst.dual).value, 6)
    (0.731059, 0.731059)
    >>> kl_constrained(losses, rho=1.0).weights.tolist()            # log 2 <= rho: the vertex
    [0.0, 1.0]
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
        return _kl_divergence(softmax(losses / math.exp(log_t)))

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
