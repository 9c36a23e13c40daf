"""Batch DRO problems for linear models: data, losses, uncertainty sets, exact objective.

A :class:`LinearDROProblem` holds ``N`` samples ``(a_i, b_i)`` with ``b_i in {-1, +1}``, a loss
(``"hinge"``: ``max(0, 1 - b a.x)``, ``"logistic"``: ``log(1 + exp(-b a.x))``, both ``G``-Lipschitz
with ``G = max ||a_i||``), the box domain ``X = {||x||_inf <= radius}`` and an uncertainty set:

* :class:`GroupSet` -- group DRO over a partition (``L_g`` = mean loss of group ``g``, paper eq. (2));
* :class:`CVaRSet` -- CVaR at level ``alpha`` (eq. (3) with the indicator ``f``);
* :class:`ChiSquareSet` and :class:`KLSet` -- the chi-square and KL balls of size ``rho`` around the
  uniform distribution;
* :class:`ChiSquarePenalty` and :class:`KLPenalty` -- the penalized forms ``max_q q.l - lam D(q)``
  (the paper's ``L_psi``, eq. (10)); ``ChiSquareSet(rho).penalized(nu)`` is the penalized problem of
  the constrained one at multiplier ``nu`` (paper Section 2.9).

Everything here is *uncounted* (the exact objective used to measure suboptimality); solvers see the
data only through :class:`~streamfair.dro.oracle.CountingOracle`.

Examples
--------
>>> problem = make_synthetic(n=200, dim=5, robust=CVaRSet(0.1), seed=0)
>>> problem.lipschitz
1.0
>>> round(problem.objective(np.zeros(5)), 6)                   # every hinge loss is 1 at x = 0
1.0
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..validation import check_finite, check_integer, check_non_negative, check_positive
from .entropic import EntropicChiSquare, EntropicCVaR, EntropicKL, EntropicPenalty
from .weights import (
    _check_alpha,
    chi_square,
    chi_square_divergence,
    chi_square_penalized,
    cvar,
    group_max,
    group_means,
    kl_constrained,
    kl_divergence,
    kl_penalized,
)

__all__ = [
    "GroupSet",
    "CVaRSet",
    "ChiSquareSet",
    "KLSet",
    "ChiSquarePenalty",
    "KLPenalty",
    "LinearDROProblem",
    "make_synthetic",
    "imbalanced_groups",
    "LOSSES",
]

LOSSES = ("hinge", "logistic")


class GroupSet:
    """Group DRO over a partition: ``max_g`` of the group mean losses."""

    kind = "group"

    def __init__(self, groups, n_groups: int):
        self.n_groups = check_integer("n_groups", n_groups, 2)
        self.groups = np.asarray(groups)
        if self.groups.ndim != 1 or not np.issubdtype(self.groups.dtype, np.integer):
            raise ValueError(f"groups must be a 1-d array of integers, got {groups!r}")
        self.sizes = np.bincount(self.groups, minlength=self.n_groups)
        if self.sizes.size != self.n_groups or np.any(self.sizes == 0):
            raise ValueError(f"groups must label every group in [0, {n_groups}) at least once")
        self.members = [np.flatnonzero(self.groups == g) for g in range(self.n_groups)]

    def group_losses(self, losses: np.ndarray) -> np.ndarray:
        return group_means(losses, self.groups, self.n_groups)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        """Sample weights ``sum_g q_g w_g`` of a worst group distribution ``q``, and the value."""
        worst = group_max(self.group_losses(losses))
        return worst.weights[self.groups] / self.sizes[self.groups], worst.value


class CVaRSet:
    """CVaR at level ``alpha``: the uniform distribution on the worst ``alpha`` fraction.

    Parameters
    ----------
    alpha
        The level, ``> 0``; it must lie in ``[1 / N, 1]`` for a problem of ``N`` samples.

    Examples
    --------
    >>> import numpy as np
    >>> robust = CVaRSet(0.5)
    >>> weights, value = robust.worst_case(np.array([1.0, 2.0, 3.0, 4.0]))   # the worst half
    >>> weights.tolist(), value
    ([0.0, 0.0, 0.5, 0.5], 3.5)
    >>> robust.entropic_penalty(n=4, eps=0.1).cap                            # 1 / (alpha n)
    0.5
    """

    kind = "cvar"

    def __init__(self, alpha: float):
        self.alpha = _check_alpha(alpha)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        """The CVaR's worst-case weights and value (:func:`~streamfair.dro.cvar`).

        Parameters
        ----------
        losses
            Per-sample losses, shape ``(N,)``.

        Returns
        -------
        weights : ndarray of shape (N,)
            At most ``1 / (alpha N)`` each, on the largest losses.
        value : float
            The CVaR.
        """
        _check_alpha(self.alpha, losses.size)
        worst = cvar(losses, self.alpha)
        return worst.weights, worst.value

    def entropic_penalty(self, n: int, eps: float) -> EntropicPenalty:
        """``psi_eps`` of this set (CVaR is already of penalized form: no ``nu``-search).

        Parameters
        ----------
        n
            ``N``, the number of samples.
        eps
            The entropy coefficient ``eps'`` of :class:`~streamfair.dro.entropic.EntropicPenalty`.

        Returns
        -------
        EntropicPenalty
            The capped-softmax penalty :class:`~streamfair.dro.entropic.EntropicCVaR`.
        """
        return EntropicCVaR(self.alpha, n, eps)


class ChiSquarePenalty:
    """The chi-square penalty: ``max_q q.l - lam D_chi2(q, unif)``."""

    kind = "chi_square_penalty"

    def __init__(self, lam: float):
        self.lam = check_positive("lam", lam)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        worst = chi_square_penalized(losses, self.lam)
        return worst.weights, worst.value

    def entropic_penalty(self, n: int, eps: float) -> EntropicPenalty:
        return EntropicChiSquare(self.lam, n, eps)


class KLPenalty:
    """The KL penalty: ``max_q q.l - T KL(q || unif) = T log mean exp(l / T)``."""

    kind = "kl_penalty"

    def __init__(self, temperature: float):
        self.temperature = check_positive("temperature", temperature)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        worst = kl_penalized(losses, self.temperature)
        return worst.weights, worst.value

    def entropic_penalty(self, n: int, eps: float) -> EntropicPenalty:
        return EntropicKL(self.temperature, n, eps)


class ChiSquareSet:
    """The chi-square ball ``D_chi2(q, unif) <= rho``."""

    kind = "chi_square"

    def __init__(self, rho: float):
        self.rho = check_positive("rho", rho)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        worst = chi_square(losses, self.rho)
        return worst.weights, worst.value

    def divergence(self, q: np.ndarray) -> float:
        return chi_square_divergence(q)

    def penalized(self, nu: float) -> ChiSquarePenalty:
        """The penalty ``nu f`` with ``f(t) = (t - 1)^2 / (2 rho)`` (radius folded into ``f``): ``lam = nu / rho``."""
        return ChiSquarePenalty(nu / self.rho)


class KLSet:
    """The KL ball ``KL(q || unif) <= rho``."""

    kind = "kl"

    def __init__(self, rho: float):
        self.rho = check_positive("rho", rho)

    def worst_case(self, losses: np.ndarray) -> tuple[np.ndarray, float]:
        worst = kl_constrained(losses, self.rho)
        return worst.weights, worst.value

    def divergence(self, q: np.ndarray) -> float:
        return kl_divergence(q)

    def penalized(self, nu: float) -> KLPenalty:
        """The penalty ``nu f`` with ``f(t) = t log t / rho``: temperature ``nu / rho``."""
        return KLPenalty(nu / self.rho)


#: The uncertainty sets and penalties a :class:`LinearDROProblem` takes.
ROBUST_SETS = (GroupSet, CVaRSet, ChiSquareSet, KLSet, ChiSquarePenalty, KLPenalty)


class LinearDROProblem:
    """``min_{||x||_inf <= radius} sup_{q in U} sum_i q_i loss(b_i a_i . x)``.

    Parameters
    ----------
    features
        ``a``, shape ``(N, d)``.
    labels
        ``b``, shape ``(N,)``, entries ``-1`` or ``+1``.
    robust
        The uncertainty set or penalty (:class:`GroupSet`, :class:`CVaRSet`, :class:`ChiSquareSet`,
        :class:`KLSet`, :class:`ChiSquarePenalty` or :class:`KLPenalty`).
    loss
        ``"hinge"`` or ``"logistic"``.
    radius
        Half-width of the box domain.
    """

    def __init__(self, features, labels, robust, loss: str = "hinge", radius: float = 1.0):
        features = np.asarray(features, dtype=float)
        if features.ndim != 2 or not np.all(np.isfinite(features)):
            raise ValueError(f"features must be a finite (N, d) array, got shape {features.shape}")
        self.features = features
        self.labels = check_finite("labels", labels, features.shape[0])
        if not np.all(np.abs(self.labels) == 1):
            raise ValueError("labels must be -1 or +1")
        if loss not in LOSSES:
            raise ValueError(f"loss must be one of {LOSSES}, got {loss!r}")
        self.loss = loss
        if not isinstance(robust, ROBUST_SETS):
            kinds = ", ".join(kind.__name__ for kind in ROBUST_SETS)
            raise ValueError(f"robust must be one of {kinds}, got {robust!r}")
        self.robust: Any = robust  # the solvers also read attributes of one kind (a GroupSet's members)
        self.radius = check_positive("radius", radius)
        self.signed = self.features * self.labels[:, None]  # b_i a_i
        self.lipschitz = float(np.sqrt((self.features**2).sum(axis=1)).max())

    @property
    def n(self) -> int:
        return self.features.shape[0]

    @property
    def dim(self) -> int:
        return self.features.shape[1]

    @property
    def diameter(self) -> float:
        """Euclidean diameter ``R`` of the box."""
        return 2.0 * self.radius * math.sqrt(self.dim)

    def project(self, x: np.ndarray) -> np.ndarray:
        return np.clip(x, -self.radius, self.radius)

    def losses_at(self, index: np.ndarray | slice, x: np.ndarray) -> np.ndarray:
        margins = self.signed[index] @ x
        if self.loss == "hinge":
            return np.maximum(0.0, 1.0 - margins)
        return np.logaddexp(0.0, -margins)

    def gradient_sum(self, index: np.ndarray | slice, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_k weights_k grad loss_{index_k}(x)``."""
        rows = self.signed[index]
        margins = rows @ x
        if self.loss == "hinge":
            slopes = -(margins < 1.0).astype(float)
        else:
            slopes = -0.5 * (1.0 - np.tanh(0.5 * margins))  # -sigmoid(-m), overflow-free
        return (weights * slopes) @ rows

    def objective(self, x: np.ndarray) -> float:
        """The exact DRO objective (uncounted)."""
        return self.robust.worst_case(self.losses_at(slice(None), x))[1]


def make_synthetic(
    n: int,
    dim: int,
    robust: Any,
    seed: int,
    loss: str = "hinge",
    radius: float = 1.0,
    flip: float = 0.1,
) -> LinearDROProblem:
    """Synthetic classification with ``G = 1`` (features scaled by the largest norm).

    Labels are ``sign(a . x_g)`` for a planted direction ``x_g`` per group (group ``g`` rotates the
    first one by ``g / M`` of a half turn in the first two coordinates), then flipped with
    probability ``flip``.  The groups are those of a :class:`GroupSet` (see :func:`imbalanced_groups`);
    other sets use one planted direction.

    Parameters
    ----------
    n, dim
        ``N`` samples in dimension ``d``, both at least 2.
    robust
        The uncertainty set or penalty (one of the classes of :class:`LinearDROProblem`'s
        ``robust``); a :class:`GroupSet` must label the ``n`` samples.
    seed
        Seed of the features, the planted directions and the flips.
    loss, radius
        The loss (``"hinge"`` or ``"logistic"``) and the box half-width of :class:`LinearDROProblem`.
    flip
        Probability of flipping each label (0: separable within each group).

    Returns
    -------
    LinearDROProblem
        The problem, with ``G = max ||a_i|| = 1``.

    Examples
    --------
    At ``x = 0`` every margin is 0: the hinge losses are all 1 and the logistic ones ``log 2``,
    so any robust risk equals them.

    >>> import numpy as np
    >>> problem = make_synthetic(n=40, dim=3, robust=imbalanced_groups(40, 3), seed=0, loss="logistic")
    >>> problem.n, problem.dim, problem.lipschitz
    (40, 3, 1.0)
    >>> round(problem.objective(np.zeros(3)), 6), round(float(np.log(2)), 6)
    (0.693147, 0.693147)
    >>> sorted(set(problem.labels.tolist()))
    [-1.0, 1.0]
    """
    n = check_integer("n", n, 2)
    dim = check_integer("dim", dim, 2)
    if check_non_negative("flip", flip) > 1.0:
        raise ValueError(f"flip must be a probability in [0, 1], got {flip!r}")
    rng = np.random.default_rng(seed)
    features = rng.standard_normal((n, dim))
    features /= np.sqrt((features**2).sum(axis=1)).max()
    if isinstance(robust, GroupSet):
        groups = robust.groups
        n_groups = robust.n_groups
    else:
        groups, n_groups = np.zeros(n, dtype=int), 1
    if groups.size != n:
        raise ValueError(f"the group labels must have {n} entries, got {groups.size}")
    base = rng.standard_normal(dim)
    planted = np.tile(base, (n_groups, 1))
    angles = np.pi * np.arange(n_groups) / max(n_groups, 2)
    planted[:, 0] = base[0] * np.cos(angles) - base[1] * np.sin(angles)
    planted[:, 1] = base[0] * np.sin(angles) + base[1] * np.cos(angles)
    scores = np.einsum("ij,ij->i", features, planted[groups])
    labels = np.where(scores >= 0, 1.0, -1.0)
    labels[rng.random(n) < flip] *= -1.0
    return LinearDROProblem(features, labels, robust, loss=loss, radius=radius)


def imbalanced_groups(n: int, n_groups: int, decay: float = 0.5) -> GroupSet:
    """A :class:`GroupSet` whose group ``g`` holds about ``decay^g`` of the mass (each at least 1 sample).

    Each group gets ``max(1, floor(n decay^g / sum_h decay^h))`` samples and group 0 the rest; the
    samples are in group order.

    Parameters
    ----------
    n
        The number of samples.
    n_groups
        ``M >= 2``.
    decay
        The ratio of consecutive group masses, ``> 0``.

    Returns
    -------
    GroupSet
        The partition of the ``n`` samples.

    Raises
    ------
    ValueError
        If ``n`` is too small to give every group a sample.

    Examples
    --------
    The masses ``(4, 2, 1) / 7`` of 10 samples floor to ``(5, 2, 1)``; group 0 takes the 2 left over:

    >>> imbalanced_groups(10, 3).sizes
    array([7, 2, 1])
    >>> imbalanced_groups(6, 2, decay=1.0).groups.tolist()
    [0, 0, 0, 1, 1, 1]
    """
    n_groups = check_integer("n_groups", n_groups, 2)
    mass = check_positive("decay", decay) ** np.arange(n_groups)
    sizes = np.maximum(1, np.floor(n * mass / mass.sum())).astype(int)
    sizes[0] += n - sizes.sum()
    if sizes[0] < 1:
        raise ValueError(f"n = {n} is too small for {n_groups} groups")
    return GroupSet(np.repeat(np.arange(n_groups), sizes), n_groups)
