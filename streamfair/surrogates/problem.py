"""A black-box metric over a linear scorer, paired with its per-cell surrogates.

The metric ``M`` is any function of the scores a linear model gives on the *metric sample* (lower
is better: pass ``1 - F1`` for an F-measure).  It may be evaluated on the surrogates' own sample
(what the finite-difference estimates of Algorithms 2 and 4 need) or on a separate validation
slice (Algorithm 3).  Every evaluation is counted, since evaluations are the expensive part.

Examples
--------
>>> import numpy as np
>>> from streamfair.surrogates.cells import CellSurrogates
>>> X = np.array([[1.0, 0.0], [0.0, 1.0]]); y = np.array([1.0, -1.0])
>>> error = lambda scores: float(np.mean(np.sign(scores) != y))
>>> problem = BlackBoxProblem(CellSurrogates(X, y, cells=[0, 1]), error)
>>> problem.metric_at(np.array([1.0, -1.0])), problem.metric_calls
(0.0, 1)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_finite, check_instance, show
from .cells import CellSurrogates

Metric = Callable[[np.ndarray], float]


class BlackBoxProblem:
    """The pair (surrogates, black-box metric) that Algorithm 1 optimises.

    Parameters
    ----------
    surrogates
        The ``K`` per-cell convex surrogates (and the sample they are measured on).
    metric
        ``M(scores) -> float``, lower is better, where ``scores = metric_features @ theta``.
    metric_features
        The metric sample's features, finite, shape ``(n_M, d)`` with ``n_M >= 1``; ``None``: the
        surrogates' sample.

    Attributes
    ----------
    metric_calls : int
        Evaluations of ``metric`` so far.
    shared_sample : bool
        Whether the metric is evaluated on the surrogates' own sample.

    Examples
    --------
    The error rate on a separate two-sample validation slice, both of whose labels are ``+1``:

    >>> import numpy as np
    >>> from streamfair.surrogates import CellSurrogates
    >>> surrogates = CellSurrogates(np.eye(2), y=[1, -1], cells=[0, 1])
    >>> error = lambda scores: float(np.mean(np.sign(scores) != 1.0))
    >>> problem = BlackBoxProblem(surrogates, error, metric_features=[[1.0, 1.0], [1.0, -1.0]])
    >>> problem.metric_at(np.array([1.0, 0.5])), problem.metric_at(np.array([1.0, 2.0]))  # scores 1.5, 0.5; 3, -1
    (0.0, 0.5)
    >>> problem.metric_calls, problem.n_cells, problem.shared_sample
    (2, 2, False)
    """

    def __init__(self, surrogates: CellSurrogates, metric: Metric, metric_features: ArrayLike | None = None):
        check_instance("surrogates", surrogates, CellSurrogates)
        if not callable(metric):
            raise ValueError(f"metric must be callable, got {metric!r}")
        self.surrogates = surrogates
        self.metric = metric
        self.shared_sample = metric_features is None
        self.metric_features = surrogates.X if metric_features is None else _check_features(metric_features, surrogates)
        self.metric_calls = 0

    @property
    def n_cells(self) -> int:
        """``K``, the number of surrogates."""
        return self.surrogates.n_cells

    def metric_of_scores(self, scores: ArrayLike) -> float:
        """``M`` at the given metric-sample scores (counted).

        Parameters
        ----------
        scores
            Scores on the metric sample, shape ``(n_M,)``.

        Returns
        -------
        float
            ``M(scores)``.

        Raises
        ------
        ValueError
            For scores of another shape or not finite, or if the metric returns a value that is not
            a finite number.
        """
        return self._metric_of_scores(check_array("scores", scores, (self.metric_features.shape[0],)))

    def _metric_of_scores(self, scores: np.ndarray) -> float:
        value = self.metric(scores)
        self.metric_calls += 1
        try:
            number = float(value)
        except (TypeError, ValueError):
            number = math.nan
        if not math.isfinite(number):
            raise ValueError(f"metric must return a finite number, got {show(value)}")
        return number

    def metric_at(self, theta: ArrayLike) -> float:
        """``M(theta)`` (counted).

        Parameters
        ----------
        theta
            Parameters of the linear scorer, shape ``(d,)``.

        Returns
        -------
        float
            ``M(metric_features @ theta)``.

        Raises
        ------
        ValueError
            For parameters of another shape or not finite, or if the metric returns a value that
            is not a finite number.
        """
        return self._metric_at(check_finite("theta", theta, self.surrogates.n_features))

    def _metric_at(self, theta: np.ndarray) -> float:
        return self._metric_of_scores(self.metric_features @ theta)


def _check_features(metric_features: ArrayLike, surrogates: CellSurrogates) -> np.ndarray:
    """The metric sample's features: finite, ``(n_M >= 1, d)``."""
    d = surrogates.n_features
    features = check_array("metric_features", metric_features, ("n", "d"), finite=False)
    if features.shape[0] < 1 or features.shape[1] != d:
        raise ValueError(f"metric_features must be a finite (n >= 1, {d}) array, got shape {features.shape}")
    return check_array("metric_features", features, ("n", d))
