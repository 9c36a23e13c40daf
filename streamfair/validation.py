"""Argument checks that raise :class:`ValueError` naming the argument and the offending value.

>>> check_distribution("p", [0.5, 0.5])
array([0.5, 0.5])
>>> check_distribution("p", [0.5, 0.6])
Traceback (most recent call last):
...
ValueError: p must sum to 1 (within 1e-06), got [0.5, 0.6] (sum 1.1)
"""

from __future__ import annotations

import math
from collections.abc import Callable
from numbers import Integral, Real

import numpy as np

#: Absolute tolerance on ``sum(tau) == 1`` and ``sum(p) == 1``.
SUM_TOLERANCE = 1e-6
#: Rows checked at once by the array checks: their temporaries stay a few MB however long the array.
CHECK_ROWS = 65_536


def _show(value) -> str:
    array = np.asarray(value)
    if array.size > 8:
        return f"array of shape {array.shape}"
    return repr(array.tolist()) if array.ndim else repr(value)


def _is_real(value) -> bool:
    """A finite real number (a bool is not one)."""
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def check_real(name: str, value) -> float:
    """A finite real number.

    >>> check_real("loss", 0.5)
    0.5
    >>> check_real("loss", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: loss must be a finite number, got nan
    """
    if not _is_real(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_positive(name: str, value) -> float:
    """A finite real number > 0."""
    if not _is_real(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_non_negative(name: str, value) -> float:
    """A finite real number >= 0."""
    if not _is_real(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_range(name: str, value) -> tuple[float, float]:
    """A target range ``(low, high)``: a half-width ``B > 0`` for ``[-B, B]``, or two finite numbers ``low < high``.

    >>> check_range("B", 2), check_range("B", [0, 1])
    ((-2.0, 2.0), (0.0, 1.0))
    >>> check_range("B", (1, 0))
    Traceback (most recent call last):
    ...
    ValueError: B must be a half-width > 0 or a range (low, high) of finite numbers with low < high, got (1, 0)
    """
    if isinstance(value, Real) and not isinstance(value, bool):
        bound = check_positive(name, value)
        return -bound, bound
    if isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2 and all(map(_is_real, value)):
        low, high = float(value[0]), float(value[1])
        if low < high:
            return low, high
    raise ValueError(f"{name} must be a half-width > 0 or a range (low, high) of finite numbers with low < high, "
                     f"got {value!r}")


def check_integer(name: str, value, minimum: int) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_seed(value) -> int:
    """A seed: an integer in ``[0, 2**64)``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or not 0 <= int(value) < 2**64:
        raise ValueError(f"seed must be an integer in [0, 2**64), got {value!r}")
    return int(value)


def check_slack(eps, n_groups: int, name: str = "eps", *, at_most: float = math.inf) -> np.ndarray:
    """Per-group slack ``name``: a number or one per group, each finite, >= 0 and <= ``at_most``.

    A KS target bounds a distance between two CDFs, so it is at most 1 (``ks=5`` is most likely
    meant as 5 points, ``0.05``):

    >>> check_slack(0.05, 2, "ks", at_most=1.0).tolist()
    [0.05, 0.05]
    >>> check_slack(5, 2, "ks", at_most=1.0)
    Traceback (most recent call last):
    ...
    ValueError: ks must be <= 1 (0.05 is 5 points), got 5
    """
    try:
        array = np.asarray(eps, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number or a sequence of {n_groups} numbers, got {eps!r}") from None
    if array.ndim == 0:
        array = np.full(n_groups, float(array))
    if array.shape != (n_groups,):
        raise ValueError(f"{name} must be a number or a sequence of {n_groups} numbers, got {_show(eps)}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {_show(eps)}")
    check_at_most(name, eps, at_most)
    return array


def check_at_most(name: str, value, at_most: float) -> None:
    """Refuse a fairness target (one number or several) above ``at_most``, the largest it can mean.

    >>> check_at_most("eps", 5, 1.0)
    Traceback (most recent call last):
    ...
    ValueError: eps must be <= 1 (0.05 is 5 points), got 5
    """
    if np.any(np.asarray(value, dtype=float) > at_most):
        raise ValueError(f"{name} must be <= {at_most:g} (0.05 is 5 points), got {_show(value)}")


def check_choice(name: str, value, choices: tuple[str, ...]) -> str:
    """One of ``choices``.

    >>> check_choice("profile", "paper", ("anytime", "paper"))
    'paper'
    """
    if not isinstance(value, str) or value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value


def check_distribution(name: str, value, size: int | None = None, *, strictly_positive: bool = False) -> np.ndarray:
    """A probability vector: finite, in ``[0, 1]`` (or ``(0, 1]``), summing to one.

    Checked element by element in Python: for the handful of groups of one sample this is several
    times faster than numpy reductions.
    """
    try:
        values = [float(v) for v in value]
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a 1-d sequence of numbers, got {value!r}") from None
    if (size is not None and len(values) != size) or len(values) < 2:
        expected = f"{size}" if size is not None else "at least 2"
        raise ValueError(f"{name} must be a 1-d sequence of {expected} probabilities, got {_show(value)}")
    if strictly_positive:
        valid = all(0.0 < v <= 1.0 for v in values)
    else:
        valid = all(0.0 <= v <= 1.0 for v in values)  # False for NaN
    if not valid:
        bounds = "(0, 1]" if strictly_positive else "[0, 1]"
        raise ValueError(f"{name} must be finite probabilities in {bounds}, got {_show(value)}")
    total = math.fsum(values)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{name} must sum to 1 (within {SUM_TOLERANCE}), got {_show(value)} (sum {total:.6g})")
    return np.array(values)


def _first_failing(array: np.ndarray, failing: Callable[[np.ndarray], np.ndarray]) -> int | None:
    """The index of the first row of ``array`` that ``failing`` flags, or ``None``.

    ``failing(rows)`` is a boolean mask of a piece of at most ``CHECK_ROWS`` rows, so that the
    temporaries of a check stay bounded however long the array.

    >>> _first_failing(np.array([1.0, np.nan, np.inf]), lambda rows: ~np.isfinite(rows))
    1
    """
    for start in range(0, array.shape[0], CHECK_ROWS):
        bad = failing(array[start : start + CHECK_ROWS])
        if bad.any():
            return start + int(np.flatnonzero(bad)[0])
    return None


def _not_distributions(rows: np.ndarray) -> np.ndarray:
    """Which rows are not finite probabilities in ``[0, 1]`` summing to 1 (within ``SUM_TOLERANCE``)."""
    bad = ~np.isfinite(rows).all(axis=1) | (rows.min(axis=1, initial=0.0) < 0)
    return bad | (rows.max(axis=1, initial=0.0) > 1) | (np.abs(rows.sum(axis=1) - 1.0) > SUM_TOLERANCE)


def check_distributions(name: str, value, n_rows: int | None, size: int) -> np.ndarray:
    """An ``(n, size)`` array of probability vectors (rows), every row checked before the array is returned."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an array of numbers, got {type(value).__name__}") from None
    if array.ndim != 2 or array.shape[1] != size or (n_rows is not None and array.shape[0] != n_rows):
        rows = n_rows if n_rows is not None else "n"
        raise ValueError(f"{name} must have shape ({rows}, {size}), got shape {array.shape}")
    row = _first_failing(array, _not_distributions)
    if row is not None:
        raise ValueError(
            f"{name} rows must be finite probabilities in [0, 1] summing to 1; row {row} is {_show(array[row])}"
        )
    return array


def check_finite(name: str, value, n_rows: int | None = None) -> np.ndarray:
    """A 1-d array (or a scalar, returned as shape ``(1,)``) of finite numbers."""
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be numbers, got {value!r}") from None
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1 or (n_rows is not None and array.size != n_rows):
        rows = n_rows if n_rows is not None else "n"
        raise ValueError(f"{name} must have shape ({rows},), got shape {array.shape}")
    row = _first_failing(array, lambda entries: ~np.isfinite(entries))
    if row is not None:
        raise ValueError(f"{name} must be finite; entry {row} is {array[row]!r}")
    return array
