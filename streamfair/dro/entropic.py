"""Entropy-regularized penalties ``psi_eps(t) = psi(t) + eps' t log t`` and their dual threshold.

Carmon & Hausler (NeurIPS 2022, Section 4) write every f-divergence DRO risk as
``L_psi(l) = max_{q in simplex} sum_i q_i l_i - psi(q_i) = min_eta sum_i psi*(l_i - eta) + eta``
(eq. (10), with ``eta = G y``) and smooth it by adding ``eps' t log t`` to ``psi``.  The worst-case
weights are ``q_i = psi_eps*'(l_i - eta*)`` where the threshold ``eta*`` makes them sum to one.

Each penalty class gives ``psi_eps*'`` (``weight``), its logarithm, its derivative and the conjugate
``psi_eps*`` itself; :func:`solve_threshold` finds ``eta*`` by safeguarded Newton steps.  Two facts
from the paper are what make these weights usable in stochastic algorithms:

* Lemma 4: ``log psi_eps*'`` is ``1 / eps'``-Lipschitz, so weights move by at most a factor
  ``exp(|dv| / eps')``;
* Lemma 5: ``|eta*(l) - eta*(l')| <= ||l - l'||_inf``, so an old threshold brackets the new one
  (the ``warm_start`` argument).

Examples
--------
>>> import numpy as np
>>> losses = np.array([0.0, 1.0, 2.0, 3.0])
>>> eta, q = solve_threshold(EntropicCVaR(alpha=0.5, n=4, eps=0.5), losses)
>>> q.round(4)                       # the capped softmax: no weight above 1 / (alpha n) = 0.5
array([0.0079, 0.0587, 0.4334, 0.5   ])
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import check_integer, check_positive
from .weights import _check_alpha, _check_losses

__all__ = ["EntropicPenalty", "EntropicMaxLoss", "EntropicCVaR", "EntropicChiSquare", "EntropicKL", "solve_threshold"]

#: Newton iterations of the Lambert-W solve in :class:`EntropicChiSquare` (quadratic convergence).
LAMBERT_ITERATIONS = 40
#: Iteration cap of :func:`solve_threshold` (each halves the bracket at worst).
MAX_ITERATIONS = 400


class EntropicPenalty:
    """``psi_eps(t) = psi(t) + eps' t log t`` on ``t >= 0`` (subclasses give ``psi``).

    Parameters
    ----------
    eps
        The entropy coefficient ``eps'`` (the paper's ``eps / (2 log N)``).
    """

    def __init__(self, eps: float):
        self.eps = check_positive("eps", eps)

    def log_weight(self, v: np.ndarray) -> np.ndarray:
        """``log psi_eps*'(v)``."""
        raise NotImplementedError

    def weight(self, v: np.ndarray) -> np.ndarray:
        """``psi_eps*'(v)``: the weight of a sample with ``loss - eta = v``."""
        with np.errstate(over="ignore"):
            return np.exp(self.log_weight(v))

    def weight_slope(self, v: np.ndarray) -> np.ndarray:
        """``psi_eps*''(v) >= 0``."""
        raise NotImplementedError

    def conjugate(self, v: np.ndarray) -> np.ndarray:
        """``psi_eps*(v) = max_t v t - psi_eps(t)``."""
        raise NotImplementedError

    def dual_objective(self, losses: np.ndarray, eta: float) -> float:
        """``sum_i psi_eps*(l_i - eta) + eta``, whose minimum over ``eta`` is the regularized risk."""
        return float(np.sum(self.conjugate(np.asarray(losses, dtype=float) - eta)) + eta)


class EntropicMaxLoss(EntropicPenalty):
    """``psi = 0`` (the maximal loss): ``psi_eps*'(v) = exp(v / eps' - 1)``, weights ``softmax(l / eps')``."""

    def log_weight(self, v):
        return np.asarray(v, dtype=float) / self.eps - 1.0

    def weight_slope(self, v):
        return self.weight(v) / self.eps

    def conjugate(self, v):
        return self.eps * self.weight(v)


class EntropicCVaR(EntropicPenalty):
    """CVaR at level ``alpha`` over ``n`` samples: ``psi`` is the indicator of ``t <= u = 1 / (alpha n)``.

    ``psi_eps*'(v) = min(u, exp(v / eps' - 1))``: the capped softmax.
    """

    def __init__(self, alpha: float, n: int, eps: float):
        super().__init__(eps)
        self.n = check_integer("n", n, 1)
        self.alpha = _check_alpha(alpha, self.n)
        self.cap = 1.0 / (self.alpha * self.n)

    def log_weight(self, v):
        return np.minimum(math.log(self.cap), np.asarray(v, dtype=float) / self.eps - 1.0)

    def weight_slope(self, v):
        v = np.asarray(v, dtype=float)
        return np.where(v / self.eps - 1.0 < math.log(self.cap), self.weight(v) / self.eps, 0.0)

    def conjugate(self, v):
        v = np.asarray(v, dtype=float)
        free = v / self.eps - 1.0 < math.log(self.cap)
        with np.errstate(over="ignore"):
            inside = self.eps * np.exp(np.minimum(v / self.eps - 1.0, math.log(self.cap)))
        return np.where(free, inside, v * self.cap - self.eps * self.cap * math.log(self.cap))


class EntropicChiSquare(EntropicPenalty):
    """Chi-square penalty ``lam D_chi2(q, unif)`` over ``n`` samples.

    ``psi(t) = (beta / 2)(t - 1/n)^2`` with ``beta = lam n``.

    ``t = psi_eps*'(v)`` solves ``beta (t - 1/n) + eps' (log t + 1) = v``, i.e.
    ``t = (eps' / beta) w`` with ``w + log w = log(beta / eps') + (v + beta / n) / eps' - 1`` (a Lambert-W
    value), solved by Newton's method on ``log w`` so that ``exp`` never overflows.
    """

    def __init__(self, lam: float, n: int, eps: float):
        super().__init__(eps)
        self.n = check_integer("n", n, 1)
        self.lam = check_positive("lam", lam)
        self.beta = self.lam * self.n

    def log_weight(self, v):
        z = math.log(self.beta / self.eps) + (np.asarray(v, dtype=float) + self.beta / self.n) / self.eps - 1.0
        s = np.where(z > 1.0, np.log(np.maximum(z - np.log(np.maximum(z, 1.0)), 1.0)), z)  # log w, initial guess
        for _ in range(LAMBERT_ITERATIONS):
            w = np.exp(s)
            s = s - (w + s - z) / (w + 1.0)
        return math.log(self.eps / self.beta) + s

    def weight_slope(self, v):
        t = self.weight(v)
        return t / (self.beta * t + self.eps)

    def conjugate(self, v):
        v = np.asarray(v, dtype=float)
        log_t = self.log_weight(v)
        t = np.exp(log_t)
        return v * t - 0.5 * self.beta * (t - 1.0 / self.n) ** 2 - self.eps * t * log_t


class EntropicKL(EntropicPenalty):
    """KL penalty ``T KL(q || unif)`` over ``n`` samples: ``psi(t) = T t log(n t)``.

    ``psi_eps(t) = (T + eps') t log t + (T log n) t``, so ``psi_eps*'(v) = exp((v - T log n) / (T + eps') - 1)``:
    the weights are ``softmax(l / (T + eps'))`` and the regularized risk is
    ``(T + eps') log sum exp(l / (T + eps')) - T log n``.
    """

    def __init__(self, temperature: float, n: int, eps: float):
        super().__init__(eps)
        self.n = check_integer("n", n, 1)
        self.temperature = check_positive("temperature", temperature)
        self.scale = self.temperature + self.eps

    def log_weight(self, v):
        return (np.asarray(v, dtype=float) - self.temperature * math.log(self.n)) / self.scale - 1.0

    def weight_slope(self, v):
        return self.weight(v) / self.scale

    def conjugate(self, v):
        return self.scale * self.weight(v)


def _excess(penalty: EntropicPenalty, losses: np.ndarray, eta: float) -> float:
    return float(np.sum(penalty.weight(losses - eta))) - 1.0


def solve_threshold(
    penalty: EntropicPenalty,
    losses,
    warm_start: tuple[float, np.ndarray] | None = None,
    tolerance: float = 1e-13,
) -> tuple[float, np.ndarray]:
    """The threshold ``eta*`` with ``sum_i psi_eps*'(l_i - eta*) = 1`` and the weights there.

    ``sum_i psi_eps*'(l_i - eta) - 1`` is continuous and non-increasing in ``eta``.  The root is
    bracketed -- by Lemma 5 within ``||l - l_old||_inf`` of ``eta_old`` when ``warm_start =
    (eta_old, l_old)`` is given, else by doubling around ``max(l)`` -- and then refined by Newton
    steps that fall back to bisection whenever they would leave the bracket.

    Parameters
    ----------
    penalty
        The regularized penalty.
    losses
        The losses ``l``.
    warm_start
        ``(eta_old, l_old)``: a solved threshold for other losses of the same size.
    tolerance
        Stop when ``|sum q - 1| <= tolerance`` (or the bracket has no float inside).

    Returns
    -------
    eta, weights
        The threshold and ``psi_eps*'(l - eta)`` (summing to one within ``tolerance``).
    """
    losses = _check_losses(losses)
    if warm_start is not None:
        eta_old, old = warm_start
        shift = float(np.max(np.abs(losses - np.asarray(old, dtype=float))))
        lo, hi = eta_old - shift, eta_old + shift
    else:
        lo = hi = float(losses.max())
    width = penalty.eps
    while _excess(penalty, losses, lo) < 0:  # need excess(lo) >= 0
        lo -= width
        width *= 2.0
    width = penalty.eps
    while _excess(penalty, losses, hi) > 0:  # need excess(hi) <= 0
        hi += width
        width *= 2.0
    eta = 0.5 * (lo + hi)
    for _ in range(MAX_ITERATIONS):
        v = losses - eta
        excess = float(np.sum(penalty.weight(v))) - 1.0
        if abs(excess) <= tolerance:
            break
        if excess > 0:
            lo = eta
        else:
            hi = eta
        slope = float(np.sum(penalty.weight_slope(v)))
        step = eta + excess / slope if slope > 0 else math.nan
        eta = step if lo < step < hi else 0.5 * (lo + hi)
        if eta in (lo, hi):
            break
    return eta, penalty.weight(losses - eta)
