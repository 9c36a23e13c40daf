"""The cost side of a post-processor: what a base prediction is, its per-atom costs, and the output labels.

The engine (:class:`~streamfair.postprocessor.DualPostProcessor`) is generic over three parts:

* the **constraint family** (:mod:`streamfair.constraints`): which functionals of the prediction
  law must match across groups;
* the **cost model** (this module): how a sample's base prediction is validated and becomes the
  cost vector ``r(x)`` over the ``m`` atoms, and what the atoms are reported as;
* the **sample weighting** (the engine's weighting hooks, see its docstring): uniform, or the
  worst-case group weights of :class:`~streamfair.dro.GroupRobustFairRegressionPostProcessor`.

A cost model is a small immutable object with

``prediction_input``
    ``"eta"`` (one number per sample) or ``"proba"`` (one probability row per sample).
``atoms``, ``labels``
    The ``m`` atoms as floats (the engine's outcomes; the ``"mean"`` mode averages them) and what
    the predictions are reported in (the atoms themselves, or class labels).
``prediction_modes``
    The ``mode`` values of ``predict_*``.
``risk_scale``
    The scale of the costs (for the ``anytime`` default of ``beta``).
``check(predictions, n_rows)``
    The validated predictions (``ValueError`` naming the argument otherwise).
``clip(predictions)``
    The predictions the costs are computed from (the same object when nothing is clipped);
    entries that differ are counted in ``n_clipped`` when the engine learns them.
``costs(clipped)``
    ``r(x)`` for each row, shape ``(n, m)``: a row's costs never depend on the other rows.

>>> import numpy as np
>>> squared = SquaredCosts(1.0, np.array([-1.0, 0.0, 1.0]))
>>> squared.costs(squared.clip(squared.check([0.5, 3.0], 2))).tolist()
[[2.25, 0.25, 0.25], [4.0, 1.0, 0.0]]
>>> expected = ExpectedCosts(["no", "yes"], 1.0 - np.eye(2))
>>> expected.costs(expected.check([[0.3, 0.7]], 1)).round(2).tolist(), expected.labels.tolist()
([[0.7, 0.3]], ['no', 'yes'])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dual
from .validation import check_distributions, check_finite

__all__ = ["SquaredCosts", "ExpectedCosts"]


class SquaredCosts:
    """Regression: a base estimate ``eta(x)``, clipped to ``[-B, B]``, costs ``(eta - y_l)^2`` on the grid.

    Parameters
    ----------
    bound
        ``B``: estimates outside ``[-B, B]`` are clipped.
    atoms
        The grid (the output values, reported as they are).
    """

    prediction_input = "eta"
    prediction_modes = ("sample", "mean", "mode")

    def __init__(self, bound: float, atoms: np.ndarray):
        self.bound = bound
        self.atoms = self.labels = atoms
        self.risk_scale = bound**2

    def check(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        return check_finite("eta", predictions, n_rows)

    def clip(self, predictions: np.ndarray) -> np.ndarray:
        return np.minimum(np.maximum(predictions, -self.bound), self.bound)

    def costs(self, clipped: np.ndarray) -> np.ndarray:
        return dual.squared_costs(clipped, self.atoms)


class ExpectedCosts:
    """Classification: class probabilities ``P(Y = . | x)``, costs ``r_j = sum_i P(Y = i | x) L[i, j]``.

    Parameters
    ----------
    classes
        The labels the predictions are reported in (the atoms are their indices ``0..n-1``).
    cost_matrix
        ``L[i, j]``: the cost of predicting ``j`` when the truth is ``i``.
    """

    prediction_input = "proba"
    prediction_modes = ("sample", "mode")

    def __init__(self, classes: Sequence[Any] | np.ndarray, cost_matrix: np.ndarray):
        self.labels = np.asarray(classes)
        self.atoms = np.arange(self.labels.size, dtype=float)
        self.cost_matrix = cost_matrix
        self.risk_scale = float(np.max(cost_matrix))

    def check(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        return check_distributions("proba", predictions, n_rows, self.atoms.size)

    def clip(self, predictions: np.ndarray) -> np.ndarray:
        return predictions

    def costs(self, clipped: np.ndarray) -> np.ndarray:
        return clipped @ self.cost_matrix
