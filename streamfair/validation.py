"""Argument checks that raise :class:`ValueError` naming the argument and the offending value.

>>> check_distribution("p", [0.5, 0.5])
array([0.5, 0.5])
>>> check_distribution("p", [0.5, 0.6])
Traceback (most recent call last):
...
ValueError: p must sum to 1 (within 1e-06), got [0.5, 0.6] (sum 1.1)
"""

from __future__ import annotations

import functools
import math
import reprlib
from array import array as typed_array
from collections.abc import Callable, Mapping, Set
from numbers import Integral, Real
from typing import Any, TypeVar, cast

import numpy as np

#: Absolute tolerance on ``sum(tau) == 1`` and ``sum(p) == 1``.
SUM_TOLERANCE = 1e-6
#: Rows checked at once by the array checks: their temporaries stay a few MB however long the array.
CHECK_ROWS = 65_536
#: The float dtype: an array of it is taken as it is.
FLOAT = np.dtype(float)
#: What ``float`` parses as text (``float("0.1")`` and ``float(b"0.1")`` are 0.1), which is never a number here.
TEXT = (str, bytes, bytearray, memoryview)
#: A shape that :func:`check_array` accepts: an ``int`` is a required length, a ``str`` (``"n"``) any length.
Shape = tuple[int | str, ...]
T = TypeVar("T")
Restore = TypeVar("Restore", bound=Callable[..., Any])


def show(value) -> str:
    """``value`` for an error message: its repr, an array of more than 8 entries by its shape.

    >>> show([0.5, 0.6]), show(np.zeros((3, 4))), show([[1], [1, 2]])
    ('[0.5, 0.6]', 'array of shape (3, 4)', '[[1], [1, 2]]')
    """
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged sequence
        return reprlib.repr(value)
    if array.size > 8:
        return f"array of shape {array.shape}"
    return repr(array.tolist()) if array.ndim else repr(value)


def first_entry(array: np.ndarray, bad: np.ndarray) -> str:
    """``"entry <index> is <value>"`` for the first entry of ``array`` that the mask ``bad`` flags.

    >>> first_entry(np.array([[1.0, -2.0]]), np.array([[False, True]]))
    'entry (0, 1) is -2.0'
    """
    index = tuple(int(i) for i in np.unravel_index(int(np.flatnonzero(bad)[0]), array.shape))
    return f"entry {index[0] if array.ndim == 1 else index} is {float(array[index])!r}"


def is_real(value) -> bool:
    """Whether ``value`` is a finite real number (a bool is not one).

    >>> is_real(2.5), is_real(float("nan")), is_real(True), is_real("1")
    (True, False, False, False)
    """
    if type(value) is float:  # the common case, without the abstract class's check (a fifth of the time)
        return math.isfinite(value)
    return isinstance(value, Real) and not isinstance(value, bool) and math.isfinite(value)


def floats(values) -> list[float]:
    """The numbers of ``values`` (one sample's few) as floats, as ``float`` converts them, text excepted.

    ``float("0.1")`` is 0.1, but a string is no number: a text entry (``str``, ``bytes``, ...) raises
    ``TypeError``, as does text for ``values`` itself, and an integer too large for a float
    ``OverflowError``, for the caller to word.  :func:`float_array` is the same for arrays.

    >>> floats((1, np.float32(0.5), np.array(0.25)))
    [1.0, 0.5, 0.25]
    >>> floats([0.5, "0.5"])
    Traceback (most recent call last):
    ...
    TypeError: must be real number, not str
    """
    if isinstance(values, TEXT):  # typed_array would read the bytes of bytes (or a view of them) as numbers
        raise TypeError(f"text is not a number, got {values!r}")
    return typed_array("d", values).tolist()  # the conversion of float, without its parsing of text


def float_array(value, copy: bool = False) -> np.ndarray:
    """``np.asarray(value, dtype=float)`` (``np.array`` if ``copy``), text excepted.

    numpy reads a string entry as the number it spells; here a text entry (``str``, ``bytes``, ...)
    raises ``TypeError``, for the caller to word, so that an array's check refuses what the check of
    one sample (:func:`floats`) refuses.  A float array is taken as it is, without a look at its entries.

    >>> float_array([1, 0.5]).tolist()
    [1.0, 0.5]
    >>> float_array([["0.5", "0.5"]])
    Traceback (most recent call last):
    ...
    TypeError: text is not a number, got [['0.5', '0.5']]
    """
    array = np.asarray(value)
    if array.dtype is FLOAT:
        return array.copy() if copy else array
    kind = array.dtype.kind
    if kind in "SU" or (kind == "O" and any(isinstance(entry, TEXT) for entry in array.flat)):
        raise TypeError(f"text is not a number, got {show(value)}")
    return np.array(value, dtype=float)  # what np.asarray(value, dtype=float) gives (None is NaN)


def check_real(name: str, value) -> float:
    """A finite real number.

    >>> check_real("loss", 0.5)
    0.5
    >>> check_real("loss", float("nan"))
    Traceback (most recent call last):
    ...
    ValueError: loss must be a finite number, got nan
    """
    if not is_real(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def check_positive(name: str, value) -> float:
    """A finite real number > 0."""
    if not is_real(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return float(value)


def check_non_negative(name: str, value) -> float:
    """A finite real number >= 0."""
    if not is_real(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_range(name: str, value) -> tuple[float, float]:
    """A target range ``(low, high)``: a half-width ``B > 0`` for ``[-B, B]``, or two finite numbers ``low < high``.

    The half-width's square scales the risk, so it must be a finite number > 0 as well.

    >>> check_range("B", 2), check_range("B", [0, 1])
    ((-2.0, 2.0), (0.0, 1.0))
    >>> check_range("B", (1, 0))
    Traceback (most recent call last):
    ...
    ValueError: B must be a half-width > 0 or a range (low, high) of finite numbers with low < high, got (1, 0)
    >>> check_range("B", 1e200)
    Traceback (most recent call last):
    ...
    ValueError: B's half-width squared must be a finite number > 0, got 1e+200
    """
    if isinstance(value, Real) and not isinstance(value, bool):
        low, high = -check_positive(name, value), float(value)
    elif (isinstance(value, (list, tuple, np.ndarray)) and len(value) == 2 and all(map(is_real, value))
          and float(value[0]) < float(value[1])):
        low, high = float(value[0]), float(value[1])
    else:
        raise ValueError(f"{name} must be a half-width > 0 or a range (low, high) of finite numbers with low < high, "
                         f"got {value!r}")
    half = (high - low) / 2
    if not 0.0 < half * half < math.inf:
        raise ValueError(f"{name}'s half-width squared must be a finite number > 0, got {value!r}")
    return low, high


def check_integer(name: str, value, minimum: int) -> int:
    """An integer >= ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_key(name: str, value: T) -> T:
    """A hashable ``value``: a key that names a sample (a message id, say).

    >>> check_key("key", ("topic", 3))
    ('topic', 3)
    >>> check_key("key", [1])
    Traceback (most recent call last):
    ...
    ValueError: key must be hashable (a message id, say), got [1]
    """
    try:
        hash(value)
    except TypeError:
        raise ValueError(f"{name} must be hashable (a message id, say), got {show(value)}") from None
    return value


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
        array = float_array(eps, copy=True)  # a copy: the caller's array may change later
        if any(isinstance(entry, (bool, np.bool_)) for entry in np.asarray(eps, dtype=object).flat):
            raise TypeError(eps)  # True would be read as 1: no constraint at all
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a number or a sequence of {n_groups} numbers, got {eps!r}") from None
    if array.ndim == 0:
        array = np.full(n_groups, float(array))
    if array.shape != (n_groups,):
        raise ValueError(f"{name} must be a number or a sequence of {n_groups} numbers, got {show(eps)}")
    if not np.all(np.isfinite(array)) or np.any(array < 0):
        raise ValueError(f"{name} must be finite and >= 0, got {show(eps)}")
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
        raise ValueError(f"{name} must be <= {at_most:g} (0.05 is 5 points), got {show(value)}")


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
    times faster than numpy reductions.  A mapping (such as River's ``predict_proba_one``) is not one,
    since it would be read as its keys, nor a set or a string, which have no order of groups, nor
    text entries, which :func:`check_distributions` refuses in an array too.

    >>> check_distribution("tau", {0: 0.9, 1: 0.1})
    Traceback (most recent call last):
    ...
    ValueError: tau must be a 1-d sequence of numbers, got {0: 0.9, 1: 0.1}
    >>> check_distribution("tau", ["0.9", "0.1"])
    Traceback (most recent call last):
    ...
    ValueError: tau must be a 1-d sequence of numbers, got ['0.9', '0.1']
    """
    try:
        if type(value) is not list and isinstance(value, (Mapping, Set)):  # a list, the common case, is neither
            raise TypeError(value)
        values = floats(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be a 1-d sequence of numbers, got {value!r}") from None
    if (size is not None and len(values) != size) or len(values) < 2:
        expected = f"{size}" if size is not None else "at least 2"
        raise ValueError(f"{name} must be a 1-d sequence of {expected} probabilities, got {show(value)}")
    if strictly_positive:
        valid = all(0.0 < v <= 1.0 for v in values)
    else:
        valid = all(0.0 <= v <= 1.0 for v in values)  # False for NaN
    if not valid:
        bounds = "(0, 1]" if strictly_positive else "[0, 1]"
        raise ValueError(f"{name} must be finite probabilities in {bounds}, got {show(value)}")
    total = math.fsum(values)
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{name} must sum to 1 (within {SUM_TOLERANCE}), got {show(value)} (sum {total:.6g})")
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
        array = float_array(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an array of numbers, got {show(value)}") from None
    if array.ndim != 2 or array.shape[1] != size or (n_rows is not None and array.shape[0] != n_rows):
        rows = n_rows if n_rows is not None else "n"
        raise ValueError(f"{name} must have shape ({rows}, {size}), got shape {array.shape}")
    row = _first_failing(array, _not_distributions)
    if row is not None:
        raise ValueError(
            f"{name} rows must be finite probabilities in [0, 1] summing to 1; row {row} is {show(array[row])}"
        )
    return array


def check_finite(name: str, value, n_rows: int | None = None) -> np.ndarray:
    """A 1-d array (or a scalar, returned as shape ``(1,)``) of finite numbers."""
    try:
        array = float_array(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be numbers, got {value!r}") from None
    if array.ndim == 0:
        array = array.reshape(1)
    if array.ndim != 1 or (n_rows is not None and array.size != n_rows):
        rows = n_rows if n_rows is not None else "n"
        raise ValueError(f"{name} must have shape ({rows},), got shape {array.shape}")
    row = _first_failing(array, lambda entries: ~np.isfinite(entries))
    if row is not None:
        given = value[row] if isinstance(value, (list, tuple)) and len(value) == array.size else float(array[row])
        raise ValueError(f"{name} must be finite; entry {row} is {given!r}")  # None, not the NaN it became
    return array


def check_array(name: str, value, *shapes: Shape, finite: bool = True, copy: bool = False) -> np.ndarray:
    """A float array whose shape is one of ``shapes`` (any shape if none is given), finite unless ``finite=False``.

    A float array ``value`` is returned as it is unless ``copy``: what an object keeps (a restored
    state's arrays) must be its own, not the caller's.

    >>> check_array("theta", [[1.0, 2.0]], (2,), ("p", 2)).shape
    (1, 2)
    >>> given = np.zeros(2)
    >>> check_array("theta", given) is given, check_array("theta", given, copy=True) is given
    (True, False)
    >>> check_array("theta", [1.0, 2.0, 3.0], (2,), ("p", 2))
    Traceback (most recent call last):
    ...
    ValueError: theta must have shape (2,) or (p, 2), got shape (3,)
    >>> check_array("X", [[0.0, 1.0], [float("nan"), 0.0]], ("n", 2))
    Traceback (most recent call last):
    ...
    ValueError: X must be finite; entry (1, 0) is nan
    """
    try:
        array = float_array(value, copy)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be an array of numbers, got {show(value)}") from None
    if shapes and not any(_fits(array.shape, shape) for shape in shapes):
        expected = " or ".join(_shape_text(shape) for shape in shapes)
        raise ValueError(f"{name} must have shape {expected}, got shape {array.shape}")
    if finite:
        bad = ~np.isfinite(array)
        if bad.any():
            raise ValueError(f"{name} must be finite; {first_entry(array, bad)}")
    return array


def _fits(actual: tuple[int, ...], shape: Shape) -> bool:
    return len(actual) == len(shape) and all(isinstance(s, str) or s == a for a, s in zip(actual, shape, strict=True))


def _shape_text(shape: Shape) -> str:
    return f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"


def check_weights(name: str, value, size: int | None = None) -> np.ndarray:
    """Weights of a mixture or of a sample: ``size`` (any number >= 1 if ``None``) finite numbers >= 0 summing to one.

    Checked in one vectorized pass (there may be many); :func:`check_distribution` checks the few
    probabilities of one sample faster.

    >>> check_weights("weights", [0.25, 0.75]).tolist()
    [0.25, 0.75]
    >>> check_weights("weights", [0.7, 0.7])
    Traceback (most recent call last):
    ...
    ValueError: weights must be finite, >= 0 and sum to 1 (within 1e-06), got [0.7, 0.7] (sum 1.4)
    """
    weights = check_array(name, value, ("n",) if size is None else (size,))
    total = float(weights.sum())
    if weights.size == 0 or weights.min() < 0 or abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"{name} must be finite, >= 0 and sum to 1 (within {SUM_TOLERANCE}), got {show(weights)} "
                         f"(sum {total:.6g})")
    return weights


def check_index(name: str, value, size: int, kind: str = "an integer") -> int:
    """An integer in ``0..size-1`` (a class, a group, a cell), not a bool.

    >>> check_index("y", 2, 3, "a class")
    2
    >>> check_index("y", 3, 3, "a class")
    Traceback (most recent call last):
    ...
    ValueError: y must be a class in 0..2, got 3
    """
    if isinstance(value, bool) or not isinstance(value, Integral) or not 0 <= int(value) < size:
        raise ValueError(f"{name} must be {kind} in 0..{size - 1}, got {value!r}")
    return int(value)


def check_indices(name: str, value, n_rows: int | None, size: int | None) -> np.ndarray:
    """``n_rows`` (any number if ``None``) integers in ``0..size-1`` (``>= 0`` if ``size`` is ``None``).

    >>> check_indices("cells", [0, 2, 1], 3, 2)
    Traceback (most recent call last):
    ...
    ValueError: cells must be integers in 0..1; entry 1 is 2
    """
    try:
        array = np.asarray(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be integers, got {show(value)}") from None
    if array.size == 0 and array.ndim == 1:
        array = array.astype(int)
    rows = "n" if n_rows is None else n_rows
    if array.ndim != 1 or (n_rows is not None and array.size != n_rows) or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"{name} must be {rows} integers, got {show(value)}")
    bad = np.flatnonzero((array < 0) | (array >= (math.inf if size is None else size)))
    if bad.size:
        bounds = ">= 0" if size is None else f"in 0..{size - 1}"
        raise ValueError(f"{name} must be integers {bounds}; entry {int(bad[0])} is {int(array[bad[0]])}")
    return array


def check_not_empty(name: str, array: np.ndarray, axis: int = -1) -> None:
    """Refuse an array without an entry along ``axis`` (of which numpy takes no maximum), naming it.

    >>> check_not_empty("scores", np.zeros((2, 0)))
    Traceback (most recent call last):
    ...
    ValueError: scores must have at least one entry along axis -1, got shape (2, 0)
    """
    if array.ndim and -array.ndim <= axis < array.ndim and array.shape[axis] == 0:
        raise ValueError(f"{name} must have at least one entry along axis {axis}, got shape {array.shape}")


def check_entries(name: str, value, n: int) -> list:
    """``value``, a list, tuple or array of exactly ``n`` entries (a part of a state, say), as a list.

    >>> check_entries("counters", (3, 0), 2)
    [3, 0]
    >>> check_entries("counters", [3, 0, 1], 2)
    Traceback (most recent call last):
    ...
    ValueError: counters must be a list of 2 entries, got [3, 0, 1]
    """
    if not isinstance(value, (list, tuple, np.ndarray)) or len(value) != n:
        raise ValueError(f"{name} must be a list of {n} entries, got {show(value)}")
    return list(value)


def check_bool(name: str, value) -> bool:
    """``True`` or ``False`` (a numpy bool too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_instance(name: str, value: Any, kind: type[T]) -> T:
    """An instance of ``kind`` (e.g. a :class:`~streamfair.complex_metrics.Problem` where a problem is expected).

    >>> check_instance("rng", 3, np.random.Generator)
    Traceback (most recent call last):
    ...
    ValueError: rng must be a Generator, got 3 (int)
    """
    if not isinstance(value, kind):
        raise ValueError(f"{name} must be a {kind.__name__}, got {show(value)} ({type(value).__name__})")
    return value


def restores_state(from_state_dict: Restore) -> Restore:
    """Decorates a ``from_state_dict(cls, state)``: a state that is not a dict, or lacks an entry or holds one of the
    wrong kind, is a ``ValueError`` naming the class, not a ``KeyError`` or ``TypeError`` from inside.

    >>> class Counter:
    ...     def __init__(self, n):
    ...         self.n = n
    ...     @classmethod
    ...     @restores_state
    ...     def from_state_dict(cls, state):
    ...         return cls(int(state["n"]))
    >>> Counter.from_state_dict({"n": 3}).n
    3
    >>> Counter.from_state_dict({"count": 3})
    Traceback (most recent call last):
    ...
    ValueError: state is not a complete Counter state: KeyError 'n'
    """
    @functools.wraps(from_state_dict)
    def restore(cls: type, state: Any) -> Any:
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict made by {cls.__name__}.state_dict(), got {type(state).__name__}")
        try:
            return from_state_dict(cls, state)
        except (KeyError, TypeError, IndexError, AttributeError) as error:
            raise ValueError(f"state is not a complete {cls.__name__} state: {type(error).__name__} {error}") from error
    return cast(Restore, restore)
