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
``check_one(prediction)``
    ``check([prediction], 1)``, with a shortcut for the common form of one sample's prediction.
``scaled_costs(predictions, beta)``
    ``beta r(x)`` for each row, shape ``(n, m)``, and how many predictions were clipped to the
    grid's range first (the engine counts them in ``n_clipped`` when it learns them).  A row's
    costs never depend on the other rows.

>>> import numpy as np
>>> squared = SquaredCosts(-1.0, 1.0, np.array([-1.0, 0.0, 1.0]))
>>> costs, clipped = squared.scaled_costs(squared.check([0.5, 3.0], 2), 1.0)
>>> costs.tolist(), clipped
([[2.25, 0.25, 0.25], [4.0, 1.0, 0.0]], 1)
>>> expected = ExpectedCosts(["no", "yes"], 1.0 - np.eye(2))
>>> expected.scaled_costs(expected.check_one([0.3, 0.7]), 1.0)[0].round(2).tolist(), expected.labels.tolist()
([[0.7, 0.3]], ['no', 'yes'])
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import kernel
from .validation import check_distribution, check_distributions, check_finite

#: The types of a number that :meth:`SquaredCosts.check_one` takes without numpy.
PLAIN_NUMBERS = frozenset({float, int, np.float64, np.float32, np.int64, np.int32})

__all__ = ["SquaredCosts", "ExpectedCosts"]


class SquaredCosts:
    """Regression: a base estimate ``eta(x)``, clipped to ``[low, high]``, costs ``(eta - y_l)^2`` on the grid.

    Parameters
    ----------
    low, high
        The target range: estimates outside are clipped to it.  The cost scale is the squared
        half-width, ``((high - low) / 2)^2`` (``B^2`` on ``[-B, B]``).
    atoms
        The grid (the output values, reported as they are).
    """

    prediction_input = "eta"
    prediction_modes = ("sample", "mean", "mode")

    def __init__(self, low: float, high: float, atoms: np.ndarray):
        self.low, self.high = low, high
        self.atoms = self.labels = atoms
        self.risk_scale = ((high - low) / 2) ** 2

    def check(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        return check_finite("eta", predictions, n_rows)

    def check_one(self, prediction: Any) -> np.ndarray:
        if type(prediction) in PLAIN_NUMBERS:  # converted first: compared as float32, an infinity would pass
            try:
                value = float(prediction)
            except OverflowError:  # an int too large for a float: check() words the error
                value = math.inf
            if math.isfinite(value):
                return np.array((value,))
        return self.check([prediction], 1)

    def scaled_costs(self, predictions: np.ndarray, beta: float) -> tuple[np.ndarray, int]:
        costs = np.empty((predictions.size, self.atoms.size))
        clipped = kernel.scaled_squared_costs(predictions, self.atoms, self.low, self.high, beta, costs)
        return costs, clipped


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

    def check_one(self, prediction: Any) -> np.ndarray:
        return check_distribution("proba", prediction, self.atoms.size)[None, :]

    def scaled_costs(self, predictions: np.ndarray, beta: float) -> tuple[np.ndarray, int]:
        costs = np.empty((predictions.shape[0], self.atoms.size))
        kernel.scaled_expected_costs(predictions, self.cost_matrix, beta, costs)
        return costs, 0
