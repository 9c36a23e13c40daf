"""The softmax, ``exp(s - max s) / sum exp(s - max s)`` along one axis: the one implementation in streamfair.

The policies of the dual (:mod:`streamfair.dual`, the post-processor's served and learning
policies), the class probabilities of the linear models and the worst-case group weights of
:mod:`streamfair.dro` all call it, so that every one of them rounds the same way: the maximum is
subtracted first (no overflow, whatever the scale of the scores), then the exponentials are
normalized by their sum along ``axis``.  The exponentials are the compiled kernel's
(:func:`streamfair.kernel.exp_non_positive`), which round the same way on every CPU: a replay on
another machine gives the same bytes.

>>> import numpy as np
>>> softmax(np.array([800.0, 800.0]))                       # exp(800) overflows; this does not
array([0.5, 0.5])
>>> softmax(np.array([[0.0, np.log(3.0)], [1.0, 1.0]])).round(3).tolist()
[[0.25, 0.75], [0.5, 0.5]]
>>> scores = np.array([1.0, 2.0, 3.0])
>>> softmax(scores, overwrite=True) is scores                # in place, for the hot paths
True
"""

from __future__ import annotations

import numpy as np

from . import kernel
from .validation import check_not_empty

__all__ = ["softmax"]


def softmax(scores: np.ndarray, axis: int = -1, *, overwrite: bool = False) -> np.ndarray:
    """The softmax of ``scores`` along ``axis`` (each slice along it sums to one).

    Parameters
    ----------
    scores
        Real scores, any shape: finite, or ``-inf`` (probability 0) below a finite maximum.
    axis
        The axis the probabilities are over.
    overwrite
        Compute in place in ``scores`` (a float array) and return it, instead of a new array.

    Returns
    -------
    ndarray
        The probabilities, of the shape of ``scores``: ``exp(s - max s) / sum exp(s - max s)``
        along ``axis`` (``scores`` itself with ``overwrite``).

    Raises
    ------
    ValueError
        If ``scores`` has no entry along ``axis``, or a slice along it holds a ``NaN`` or
        ``+inf``, or only ``-inf``.

    Examples
    --------
    Scores ``0`` and ``log 3`` give ``1 : 3``; adding a constant changes nothing, and ``-inf``
    has probability 0:

    >>> import numpy as np
    >>> softmax(np.array([0.0, np.log(3.0)])).round(6).tolist()
    [0.25, 0.75]
    >>> softmax(np.array([1000.0, 1000.0 + np.log(3.0)])).round(6).tolist()
    [0.25, 0.75]
    >>> softmax(np.array([[0.0, 0.0], [2.0, -np.inf]]), axis=1).tolist()
    [[0.5, 0.5], [1.0, 0.0]]
    >>> softmax([])
    Traceback (most recent call last):
    ...
    ValueError: scores must have at least one entry along axis -1, got shape (0,)
    """
    result = scores if overwrite else np.array(scores, dtype=float)
    try:
        top = result.max(axis=axis, keepdims=True)
    except ValueError:  # numpy's maximum of nothing (or a bad axis): named, at no cost to the other calls
        check_not_empty("scores", result, axis)
        raise
    if not np.isfinite(top).all():  # a NaN is its slice's maximum
        raise ValueError(f"scores must be finite or -inf, with a finite maximum along axis {axis}, got {scores!r}")
    result -= top
    shifted = result.reshape(-1)  # a view of a C-contiguous result, else a copy written back
    kernel.exp_non_positive(shifted)
    if not np.shares_memory(shifted, result):
        result[...] = shifted.reshape(result.shape)
    result /= result.sum(axis=axis, keepdims=True)
    return result
