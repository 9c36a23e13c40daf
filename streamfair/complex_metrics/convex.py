"""Projections and a small box-constrained convex solver used by the outer optimizers.

>>> project_simplex(np.array([0.2, 1.5, 0.1])).tolist()
[0.0, 1.0, 0.0]
>>> project_nonnegative_l1(np.array([3.0, -1.0, 1.0]), radius=2.0).tolist()
[2.0, 0.0, 0.0]
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["project_box", "project_ball", "project_simplex", "project_nonnegative_l1", "minimize_on_box"]


def project_box(x: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """Euclidean projection onto ``[lower, upper]`` (coordinate-wise clipping)."""
    return np.minimum(np.maximum(x, lower), upper)


def project_ball(x: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{||x||_2 <= radius}``."""
    norm = float(np.linalg.norm(x))
    return x if norm <= radius else x * (radius / norm)


def project_simplex(x: np.ndarray, total: float = 1.0) -> np.ndarray:
    """Euclidean projection onto ``{x >= 0, sum x = total}`` (sort-based, exact)."""
    ordered = np.sort(x)[::-1]
    cumulative = np.cumsum(ordered) - total
    index = np.arange(1, x.size + 1)
    rho = np.flatnonzero(ordered - cumulative / index > 0)[-1]
    return np.maximum(x - cumulative[rho] / (rho + 1), 0.0)


def project_nonnegative_l1(x: np.ndarray, radius: float) -> np.ndarray:
    """Euclidean projection onto ``{x >= 0, sum x <= radius}`` (the multiplier set of ConGDA)."""
    clipped = np.maximum(x, 0.0)
    if clipped.sum() <= radius:
        return clipped
    return project_simplex(x, radius)


def minimize_on_box(
    value_and_gradient: Callable[[np.ndarray], tuple[float, np.ndarray]],
    start: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    iterations: int = 500,
    tolerance: float = 1e-12,
) -> np.ndarray:
    """Minimize a smooth convex function over a box: FISTA with backtracking and adaptive restart.

    Stops when an iteration moves the point by less than ``tolerance`` (in the max norm).
    """
    x = project_box(np.asarray(start, dtype=float), lower, upper)
    y, momentum, step = x.copy(), 1.0, 1.0
    fx, _ = value_and_gradient(x)
    for _ in range(iterations):
        fy, gy = value_and_gradient(y)
        while True:
            candidate = project_box(y - step * gy, lower, upper)
            move = candidate - y
            fc, _ = value_and_gradient(candidate)
            if fc <= fy + gy @ move + move @ move / (2 * step) + 1e-15 or step < 1e-16:
                break
            step *= 0.5
        if fc > fx:  # momentum overshot: restart from the last point
            y, momentum = x.copy(), 1.0
            continue
        next_momentum = (1 + np.sqrt(1 + 4 * momentum**2)) / 2
        y = candidate + (momentum - 1) / next_momentum * (candidate - x)
        done = np.abs(candidate - x).max() < tolerance
        x, fx, momentum = candidate, fc, next_momentum
        step *= 2.0
        if done:
            break
    return x
