"""The over-constrained projection onto the surrogate space (Jiang et al. 2020, eq. 4, Lemmas 1 and 5).

Given a target ``u~`` in surrogate space, find parameters whose surrogates do not overshoot it:

    theta+ in argmin_theta 1/2 ||(l(theta) - u~)_+||^2,        u+ = l(theta+).

The problem is convex in ``theta`` (each ``l_k`` is convex; ``(.)_+`` and the squared norm are convex
and monotone).  It is solved as the paper does, by Adagrad with a fixed step (100 steps at 1.0 in
its experiments), warm-started at the current parameters with fresh accumulators (the paper does
not say; this is our choice), returning the best iterate.  The clipped residuals
``lambda = (l(theta+) - u~)_+`` are the KKT multipliers of the surrogate constraints: ``theta+`` is a
stationary point of the weighted loss ``sum_k lambda_k l_k`` (the weighted-loss reading of the
paper's Appendix C).

Examples
--------
>>> import numpy as np
>>> from streamfair.surrogates.cells import CellSurrogates
>>> X = np.array([[1.0], [1.0]])
>>> cells = CellSurrogates(X, y=[1.0, 3.0], cells=[0, 1], loss="squared")
>>> result = project(cells, target=[0.0, 0.0], theta0=np.zeros(1), steps=500, lr=0.5)
>>> result.theta.round(3).tolist(), result.multipliers.round(3).tolist()   # equal weights at theta = 2
([2.0], [0.5, 0.5])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_finite, check_instance, check_integer, check_positive
from .cells import CellSurrogates

#: Added to the Adagrad denominator.
ADAGRAD_EPS = 1e-10


@dataclass(frozen=True)
class Projection:
    """Result of the over-constrained projection.

    Parameters
    ----------
    theta
        The projected parameters ``theta+``, shape ``(d,)``.
    values
        ``u+ = l(theta+)``, shape ``(K,)``.
    multipliers
        ``(l(theta+) - u~)_+``, shape ``(K,)``: the KKT multipliers, for which ``theta+`` is a
        stationary point of ``sum_k multipliers_k l_k``.
    residual
        ``||(l(theta+) - u~)_+||^2``, the projection gap (``0``: the target is reached).
    steps
        Adagrad steps taken.

    Examples
    --------
    Two squared-error cells ``(theta - 1)^2 / 2`` and ``(theta - 3)^2 / 2`` and the unreachable
    target ``(0, 0)``: the projection balances them at ``theta = 2``, where each loss is ``1/2``.

    >>> import numpy as np
    >>> from streamfair.surrogates import CellSurrogates
    >>> cells = CellSurrogates([[1.0], [1.0]], y=[1.0, 3.0], cells=[0, 1], loss="squared")
    >>> result = project(cells, target=[0.0, 0.0], theta0=[0.0], steps=500, lr=0.5)
    >>> result.theta.round(6).tolist(), result.multipliers.round(6).tolist(), round(result.residual, 6)
    ([2.0], [0.5, 0.5], 0.5)
    >>> bool(abs(cells.gradient(result.theta, result.multipliers)[0]) < 1e-6)   # KKT: stationary
    True
    """

    theta: np.ndarray
    values: np.ndarray
    multipliers: np.ndarray
    residual: float
    steps: int


def project(
    surrogates: CellSurrogates, target: ArrayLike, theta0: ArrayLike, *, steps: int = 100, lr: float = 1.0
) -> Projection:
    """Adagrad on ``1/2 ||(l(theta) - target)_+||^2`` from ``theta0``; returns the best iterate.

    Parameters
    ----------
    surrogates
        The per-cell surrogates ``l``.
    target
        The target ``u~`` in surrogate space, finite, shape ``(K,)``.
    theta0
        The starting parameters, finite, shape ``(d,)`` (the current iterate of Algorithm 1).
    steps
        Adagrad steps at most, an integer ``>= 0`` (``0``: ``theta0`` itself, with its residual);
        the search stops early once the residual is ``0``.
    lr
        Adagrad step size, ``> 0``.

    Returns
    -------
    Projection
        The iterate with the smallest residual, its surrogates and multipliers.

    Examples
    --------
    One squared-error cell ``((theta - 1)^2 + (theta - 3)^2) / 4``, at ``2.5`` for ``theta = 0``,
    and the target ``1``: the first Adagrad step has length ``lr`` and reaches ``theta = 1.5``,
    where the loss is ``0.625 <= 1``, so the projection stops there.

    >>> from streamfair.surrogates import CellSurrogates
    >>> cells = CellSurrogates([[1.0], [1.0]], y=[1.0, 3.0], cells=[0, 0], loss="squared")
    >>> result = project(cells, target=[1.0], theta0=[0.0], lr=1.5)
    >>> result.theta.round(6).tolist(), result.values.round(6).tolist(), result.residual, result.steps
    ([1.5], [0.625], 0.0, 1)
    >>> project(cells, target=[3.0], theta0=[0.0]).steps      # already below the target
    0
    """
    check_instance("surrogates", surrogates, CellSurrogates)
    target = check_finite("target", target, surrogates.n_cells)
    theta = check_finite("theta0", theta0, surrogates.n_features).copy()
    steps = check_integer("steps", steps, 0)
    lr = check_positive("lr", lr)
    accumulator = np.zeros_like(theta)
    best = None
    for step in range(steps + 1):
        scores = surrogates.X @ theta
        values = surrogates._values_from_scores(scores)
        excess = np.maximum(values - target, 0.0)
        residual = float(excess @ excess)
        if best is None or residual < best.residual:
            best = Projection(theta, values, excess, residual, step)
        if step == steps or residual == 0.0:
            break
        gradient = surrogates._gradient_from_scores(scores, excess)
        accumulator += gradient * gradient
        theta = theta - lr * gradient / (np.sqrt(accumulator) + ADAGRAD_EPS)
    assert best is not None  # step 0 always sets it
    return Projection(best.theta, best.values, best.multipliers, best.residual, step)
