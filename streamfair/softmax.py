"""The softmax, ``exp(s - max s) / sum exp(s - max s)`` along one axis: the one implementation in streamfair.

The policies of the dual (:mod:`streamfair.dual`, the post-processor's served and learning
policies), the class probabilities of the linear models and the worst-case group weights of
:mod:`streamfair.dro` all call it, so that every one of them rounds the same way: the maximum is
subtracted first (no overflow, whatever the scale of the scores), then the exponentials are
normalized by their sum along ``axis``.

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

__all__ = ["softmax"]


def softmax(scores: np.ndarray, axis: int = -1, *, overwrite: bool = False) -> np.ndarray:
    """The softmax of ``scores`` along ``axis`` (each slice along it sums to one).

    Parameters
    ----------
    scores
        Real scores, any shape.
    axis
        The axis the probabilities are over.
    overwrite
        Compute in place in ``scores`` (a float array) and return it, instead of a new array.
    """
    result = scores if overwrite else np.array(scores, dtype=float)
    result -= result.max(axis=axis, keepdims=True)
    np.exp(result, out=result)
    result /= result.sum(axis=axis, keepdims=True)
    return result
