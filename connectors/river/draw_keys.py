"""The key of a sampled prediction in the River wrappers: cheap, order-free, numbers by value."""

from __future__ import annotations

import struct
from collections.abc import Callable
from numbers import Real
from operator import itemgetter
from typing import Any

import numpy as np

#: Value types packed as they are: ``struct`` reads each as ``float(value)`` would.
PACKED_AS_IS = frozenset({float, int, bool, np.float64})


class DrawKeys:
    """The key of a sampled prediction: the features by name, order-free, numbers by value.

    Real values (``bool`` and ``int`` included) are packed as doubles in the order of the sorted
    names' reprs; that order is worked out once per set of names (a stream keeps its names).
    Other values fall back to a text of every ``(name, value)`` pair.

    >>> keys = DrawKeys()
    >>> keys({"a": 1, "b": 2.5}) == keys({"b": 2.5, "a": 1.0}) != keys({"a": 1, "b": 2.0})
    True
    >>> keys({"a": "x"}) == keys({"a": "x"}) != keys({"a": "y"})
    True
    """

    def __init__(self) -> None:
        self._names: tuple = ()
        self._order: list[int] = []
        self._sorted: Callable[[tuple], tuple] | None = None  # the values in name order; None: already are
        self._format = "<0d"
        self._prefix = b""

    def __call__(self, features: dict) -> bytes | str:
        names = tuple(features)
        if names != self._names:
            texts = [repr(name) for name in names]
            self._order = sorted(range(len(names)), key=texts.__getitem__)
            self._sorted = None if self._order == list(range(len(names))) else itemgetter(*self._order)
            self._format = f"<{len(names)}d"
            self._prefix = "\x1f".join(texts[i] for i in self._order).encode("utf-8") + b"\x1e"
            self._names = names
        values = tuple(features.values())
        if PACKED_AS_IS.issuperset(map(type, values)):  # the usual features: no per-value call
            in_order = values if self._sorted is None else self._sorted(values)
            try:
                return self._prefix + struct.pack(self._format, *in_order)
            except struct.error:  # an int too large for a double: the general path raises as float() does
                pass
        try:
            return self._prefix + struct.pack(self._format, *[real_value(values[i]) for i in self._order])
        except TypeError:
            items = sorted((repr(k), number_text(v)) for k, v in features.items())
            return "\x1f".join([f"{k}\x1e{v}" for k, v in items])


def real_value(value: Any) -> float:
    """``value`` as a float if it is a real number, else ``TypeError`` (strings, ``None``, ...).

    >>> import numpy as np
    >>> real_value(3), real_value(True), real_value(np.float32(0.5))
    (3.0, 1.0, 0.5)
    >>> real_value("3")
    Traceback (most recent call last):
    ...
    TypeError: not a real number: '3'
    """
    if type(value) is float or isinstance(value, Real):
        return float(value)
    raise TypeError(f"not a real number: {value!r}")


def number_text(value: Any) -> str:
    """``repr(float(value))`` for a real number (``bool`` included), else ``repr(value)``.

    Equal numbers get the same text whatever their type, so that the fallback key of
    :class:`DrawKeys` still reads numbers by value:

    >>> number_text(1), number_text(1.0), number_text(True), number_text("1"), number_text(None)
    ('1.0', '1.0', '1.0', "'1'", 'None')
    """
    kind = type(value)
    if kind is float:  # the usual feature values first: no ABC check
        return repr(value)
    if kind is int or kind is bool:
        return repr(float(value))
    return repr(float(value)) if isinstance(value, Real) else repr(value)
