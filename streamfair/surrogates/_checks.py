"""Argument checks of the surrogates that :mod:`streamfair.validation` lacks: a loss's labels, fractions.

Each raises :class:`ValueError` naming the argument and showing the offending value.

>>> check_label("y", 0.0, "logistic")
Traceback (most recent call last):
...
ValueError: y must be -1 or +1 for the logistic loss, got 0.0
"""

from __future__ import annotations

import math
from numbers import Real

import numpy as np

from ..validation import check_real, is_real


def check_finite_or_nan(name: str, value) -> float:
    """A number, finite or ``nan`` (a value not known)."""
    if isinstance(value, bool) or not isinstance(value, Real) or math.isinf(value):
        raise ValueError(f"{name} must be a finite number or nan, got {value!r}")
    return float(value)


def check_fraction(name: str, value) -> float:
    """A number in ``(0, 1)``."""
    if not is_real(value) or not 0 < value < 1:
        raise ValueError(f"{name} must be in (0, 1), got {value!r}")
    return float(value)


def check_label(name: str, value, loss: str) -> float:
    """One label: a finite number, ``-1`` or ``+1`` unless ``loss`` is ``"squared"``."""
    label = check_real(name, value)
    if loss != "squared" and abs(label) != 1:
        raise ValueError(f"{name} must be -1 or +1 for the {loss} loss, got {value!r}")
    return label


def check_labels(name: str, values: np.ndarray, loss: str) -> np.ndarray:
    """Finite labels (already checked), each ``-1`` or ``+1`` unless ``loss`` is ``"squared"``."""
    if loss != "squared":
        bad = np.flatnonzero(np.abs(values) != 1.0)
        if bad.size:
            raise ValueError(f"{name} must be -1 or +1 for the {loss} loss, got {values[bad[0]]!r}")
    return values
