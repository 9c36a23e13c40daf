"""Least squares and L2-penalized multinomial logistic regression, in pure numpy (no I/O).

The paper's pipeline (§6) estimates the regression function ``eta(x) = E[Y | X = x]`` with
ordinary least squares and the group posterior ``tau(x) = P(S = . | X = x)`` with logistic
regression (scikit-learn's ``LinearRegression`` and ``LogisticRegression`` with default
settings).  These are numpy equivalents, so that the post-processor's inputs can be built without
scikit-learn:

* :func:`fit_least_squares` -- intercept plus the minimum-norm least-squares coefficients of the
  centred data (what ``LinearRegression`` computes, also for rank-deficient designs);
* :func:`fit_logistic` -- multinomial (softmax) logistic regression minimizing
  :func:`logistic_objective` by Newton's method with backtracking: the *sum* of the log-losses
  plus ``l2 ||W||^2 / 2`` on the coefficients of every class, intercepts unpenalized.  It has the
  minimizer of scikit-learn's ``LogisticRegression(C=C)`` for ``l2 = 1 / C`` with three classes or
  more, and for ``l2 = 2 / C`` with two: there both classes get coefficients, the optimum puts
  ``+w / 2`` and ``-w / 2`` on them, so the penalty on the logit difference ``w`` is
  ``l2 ||w||^2 / 4`` against scikit-learn's ``||w||^2 / (2 C)``.

Examples
--------
>>> import numpy as np
>>> X = np.array([[0.0], [1.0], [2.0], [3.0]])
>>> model = fit_least_squares(X, 2.0 * X[:, 0] + 1.0)
>>> model.coef.round(6).tolist(), round(model.intercept, 6)
([2.0], 1.0)
>>> clf = fit_logistic(X, np.array([0, 0, 1, 1]), l2=1.0)
>>> proba = clf.predict_proba(X)
>>> proba.shape, bool(np.allclose(proba.sum(axis=1), 1.0)), bool(proba[3, 1] > 0.5 > proba[0, 1])
((4, 2), True, True)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .softmax import softmax
from .validation import check_finite, check_integer, check_non_negative


def _check_design(X) -> np.ndarray:
    try:
        array = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"X must be a 2-d array of numbers, got {type(X).__name__}") from None
    if array.ndim != 2 or array.shape[0] < 1:
        raise ValueError(f"X must be a 2-d array with at least one row, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        row = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
        raise ValueError(f"X must be finite; row {row} is not")
    return array


@dataclass(frozen=True)
class LinearModel:
    """``x -> x @ coef + intercept``."""

    coef: np.ndarray  # (d,)
    intercept: float

    def predict(self, X) -> np.ndarray:
        """Predictions for the rows of ``X``: shape ``(n,)``."""
        X = _check_design(X)
        if X.shape[1] != self.coef.size:
            raise ValueError(f"X must have {self.coef.size} columns, got shape {X.shape}")
        return X @ self.coef + self.intercept


@dataclass(frozen=True)
class SoftmaxModel:
    """``x -> softmax(x @ coef + intercept)``: class probabilities."""

    coef: np.ndarray  # (d, K)
    intercept: np.ndarray  # (K,)

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities for the rows of ``X``: shape ``(n, K)``, rows sum to one."""
        X = _check_design(X)
        if X.shape[1] != self.coef.shape[0]:
            raise ValueError(f"X must have {self.coef.shape[0]} columns, got shape {X.shape}")
        return softmax(X @ self.coef + self.intercept, overwrite=True)


def fit_least_squares(X, y) -> LinearModel:
    """Ordinary least squares with an intercept.

    The coefficients are the minimum-norm minimizer of ``||Xc b - yc||`` for the column-centred
    ``Xc`` and ``yc``, and the intercept is ``mean(y) - mean(X) @ b``; with a full-rank design this
    is the unique solution of the normal equations.  They are computed from the ``d x d`` normal
    equations (directions in which the design's singular values are below ``1e-6`` times the
    largest count as null), which is much cheaper than an SVD of the ``n x d`` design.

    Parameters
    ----------
    X
        Features, shape ``(n, d)``.
    y
        Targets, shape ``(n,)``.

    Examples
    --------
    >>> import numpy as np
    >>> fit_least_squares(np.array([[1.0], [1.0]]), np.array([0.0, 2.0])).intercept
    1.0
    """
    X = _check_design(X)
    y = check_finite("y", y, X.shape[0])
    x_mean, y_mean = X.mean(axis=0), float(y.mean())
    centred = X - x_mean
    coef = np.linalg.lstsq(centred.T @ centred, centred.T @ (y - y_mean), rcond=1e-12)[0]
    return LinearModel(coef, y_mean - float(x_mean @ coef))


def _check_labels(labels, n_rows: int, n_classes: int | None) -> tuple[np.ndarray, int]:
    array = np.asarray(labels)
    if array.shape != (n_rows,) or not np.issubdtype(array.dtype, np.integer) or array.min(initial=0) < 0:
        raise ValueError(f"labels must be {n_rows} integers >= 0, got shape {array.shape} dtype {array.dtype}")
    k = int(array.max()) + 1 if n_classes is None else check_integer("n_classes", n_classes, 2)
    counts = np.bincount(array, minlength=k)
    if counts.size != k or k < 2 or np.any(counts == 0):
        raise ValueError(f"labels must use every class 0..{k - 1} (k >= 2), got class counts {counts.tolist()}")
    return array, k


def logistic_objective(coef, intercept, X, labels, l2: float = 1.0) -> tuple[float, np.ndarray, np.ndarray]:
    """The penalized multinomial log-loss and its gradient.

    ``sum_i [log sum_k exp(z_ik) - z_i,labels_i] + l2 / 2 ||coef||^2`` with ``z = X coef + intercept``.

    Returns
    -------
    value, grad_coef (d, K), grad_intercept (K,)

    Examples
    --------
    >>> import numpy as np
    >>> value, _, g = logistic_objective(np.zeros((1, 2)), np.zeros(2), np.ones((3, 1)), np.array([0, 1, 1]))
    >>> bool(np.isclose(value, 3 * np.log(2))), g.tolist()
    (True, [0.5, -0.5])
    """
    X = _check_design(X)
    labels, k = _check_labels(labels, X.shape[0], np.shape(coef)[1])
    coef, intercept = np.asarray(coef, dtype=float), np.asarray(intercept, dtype=float)
    if coef.shape != (X.shape[1], k) or intercept.shape != (k,):
        raise ValueError(f"coef must be ({X.shape[1]}, {k}) and intercept ({k},), got {coef.shape}, {intercept.shape}")
    logits = X @ coef + intercept
    top = logits.max(axis=1)
    log_norm = top + np.log(np.exp(logits - top[:, None]).sum(axis=1))
    value = float(np.sum(log_norm - logits[np.arange(X.shape[0]), labels]) + 0.5 * l2 * np.sum(coef**2))
    residual = softmax(logits)
    residual[np.arange(X.shape[0]), labels] -= 1.0
    return value, X.T @ residual + l2 * coef, residual.sum(axis=0)


def _hessian(Z: np.ndarray, proba: np.ndarray, l2: float) -> np.ndarray:
    """Hessian of the objective in the flattened ``[coef; intercept]`` (row-major ``(d+1, K)``)."""
    n_features, k = Z.shape[1], proba.shape[1]
    blocks = np.empty((n_features, k, n_features, k))
    for a in range(k):
        for b in range(a, k):
            curvature = proba[:, a] * ((a == b) - proba[:, b])
            block = (Z * curvature[:, None]).T @ Z
            blocks[:, a, :, b] = block
            blocks[:, b, :, a] = block
    hessian = blocks.reshape(n_features * k, n_features * k)
    penalized = np.arange((n_features - 1) * k)  # every coefficient but the intercepts (last row)
    hessian[penalized, penalized] += l2
    return hessian


def fit_logistic(X, labels, n_classes: int | None = None, l2: float = 1.0, tol: float = 1e-9, max_iter: int = 100):
    """Multinomial logistic regression by Newton's method (minimizes :func:`logistic_objective`).

    Parameters
    ----------
    X
        Features, shape ``(n, d)`` (standardize them: the penalty is not scale invariant).
    labels
        Classes ``0..K-1``, shape ``(n,)``; every class must occur.
    n_classes
        ``K``; default ``max(labels) + 1``.
    l2
        Ridge weight on the coefficients (not the intercepts).  scikit-learn's
        ``LogisticRegression(C=C)`` is ``l2 = 1 / C`` for ``K >= 3`` classes and ``l2 = 2 / C`` for
        two (its binary model has one coefficient vector, this one two opposite ones), so the
        default ``1.0`` is ``C = 1`` for ``K >= 3`` and ``C = 2`` for two classes.
    tol
        Stop when the largest gradient entry is below ``tol * n``.
    max_iter
        At most this many Newton steps; ``ValueError`` if not converged by then.

    Returns
    -------
    SoftmaxModel

    Notes
    -----
    The objective is invariant to adding a constant to every intercept, so the Hessian ``H`` is
    singular along that direction ``v``; the gradient is orthogonal to ``v``, so the Newton step
    solves ``(H + v v^T) step = grad`` (non-singular when ``l2 > 0``), whose solution never moves
    along ``v`` (the minimum-norm Newton step).
    """
    X = _check_design(X)
    labels, k = _check_labels(labels, X.shape[0], n_classes)
    check_non_negative("l2", l2)
    check_integer("max_iter", max_iter, 1)
    n, d = X.shape
    Z = np.hstack([X, np.ones((n, 1))])
    theta = np.zeros((d + 1, k))
    value, grad_coef, grad_intercept = logistic_objective(theta[:d], theta[d], X, labels, l2)
    for _ in range(max_iter):
        grad = np.vstack([grad_coef, grad_intercept])
        if np.abs(grad).max() <= tol * n:
            return SoftmaxModel(theta[:d].copy(), theta[d].copy())
        proba = softmax(Z @ theta, overwrite=True)
        hessian = _hessian(Z, proba, l2)
        hessian[d * k :, d * k :] += 1.0 / k  # + v v^T, v = ones(K) / sqrt(K) on the intercepts
        try:
            step = np.linalg.solve(hessian, grad.ravel()).reshape(d + 1, k)
        except np.linalg.LinAlgError:  # l2 = 0 with a rank-deficient design
            step = np.linalg.lstsq(hessian, grad.ravel(), rcond=None)[0].reshape(d + 1, k)
        slope, size = float(np.sum(grad * step)), 1.0
        while True:  # backtracking (Armijo) line search along the Newton direction
            candidate = theta - size * step
            new = logistic_objective(candidate[:d], candidate[d], X, labels, l2)
            if new[0] <= value - 1e-4 * size * slope:
                break
            size *= 0.5
            if size < 1e-12:  # no decrease left at machine precision: this is the minimizer
                return SoftmaxModel(theta[:d].copy(), theta[d].copy())
        theta = candidate
        value, grad_coef, grad_intercept = new
    raise ValueError(f"fit_logistic did not converge in max_iter={max_iter} Newton steps")
