"""A class-probability estimator: L2-regularized multinomial logistic regression, as a fit/predict object.

The plug-in algorithms need ``eta_hat(x)``; the paper uses linear logistic regression for every
non-image data set.  The fit is :func:`streamfair.linear_models.fit_logistic` (Newton's method)
with the penalty given per sample, which suits data sets of any size.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> x = rng.normal(size=(500, 2))
>>> y = (x[:, 0] + 0.5 * rng.normal(size=500) > 0).astype(int)
>>> model = SoftmaxRegression(l2=1e-4).fit(x, y)
>>> bool(np.mean(model.predict_proba(x).argmax(axis=1) == y) > 0.8)
True
"""

from __future__ import annotations

import numpy as np

from ..linear_models import SoftmaxModel, fit_logistic
from ..validation import check_integer, check_non_negative

__all__ = ["SoftmaxRegression"]


class SoftmaxRegression:
    """``P(Y = k | x) = softmax(x W + c)_k``, fitted by :func:`~streamfair.linear_models.fit_logistic`.

    Parameters
    ----------
    l2
        Ridge penalty ``l2 / 2 ||W||^2`` (a finite number ``>= 0``) on the weights of every class
        (not the intercepts) per sample: the mean log-loss is penalized, i.e. ``fit_logistic``'s
        ``l2`` is ``n`` times this one.
    iterations
        Maximum Newton steps (each with a backtracking line search); :meth:`fit` raises
        ``ValueError`` if they do not suffice.

    Examples
    --------
    Features that say nothing about the label: the (unpenalized) intercepts fit the class
    frequencies.

    >>> import numpy as np
    >>> model = SoftmaxRegression().fit(np.zeros((4, 1)), np.array([0, 0, 0, 1]))
    >>> model.predict_proba(np.zeros((2, 1))).round(6).tolist()
    [[0.75, 0.25], [0.75, 0.25]]

    A label that is the sign of the first feature:

    >>> rng = np.random.default_rng(0)
    >>> x = rng.normal(size=(200, 2))
    >>> model = SoftmaxRegression(l2=1e-3).fit(x, (x[:, 0] > 0).astype(int))
    >>> proba = model.predict_proba(np.array([[2.0, 0.0], [-2.0, 0.0]]))
    >>> bool(proba[0, 1] > 0.9 and proba[1, 0] > 0.9), proba.sum(axis=1).round(9).tolist()
    (True, [1.0, 1.0])
    """

    def __init__(self, l2: float = 1e-4, iterations: int = 50):
        self.l2 = check_non_negative("l2", l2)
        self.iterations = check_integer("iterations", iterations, 1)
        self.model: SoftmaxModel | None = None

    def fit(self, x: np.ndarray, y: np.ndarray, n_classes: int | None = None) -> SoftmaxRegression:
        """Fit on features ``x`` ``(N, p)`` and labels ``y`` in ``0..n-1`` (every class present).

        Parameters
        ----------
        x
            ``(N, p)`` features (standardize them: the penalty is not scale invariant).
        y
            ``(N,)`` labels in ``0..n-1``; every class must occur.
        n_classes
            ``n``; ``None``: ``max(y) + 1``.

        Returns
        -------
        SoftmaxRegression
            This estimator, fitted.
        """
        self.model = fit_logistic(x, y, n_classes, l2=self.l2 * len(y), max_iter=self.iterations)
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``(N, n)`` class probabilities.

        Parameters
        ----------
        x
            ``(N, p)`` features, as given to :meth:`fit`.

        Returns
        -------
        ndarray of shape (N, n)
            ``eta_hat(x)``: each row sums to one.
        """
        if self.model is None:
            raise ValueError("the model is not fitted: call fit first")
        return self.model.predict_proba(x)
