"""A class-probability estimator: L2-regularized multinomial logistic regression by Newton's method.

The plug-in algorithms need ``eta_hat(x)``; the paper uses linear logistic regression for every
non-image data set.  This small dependency-free version is enough for the synthetic study, the
tests and the fairness experiments (tens to a few hundred features).

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

from ..validation import check_integer

__all__ = ["SoftmaxRegression"]


class SoftmaxRegression:
    """``P(Y = k | x) = softmax(W x + c)_k`` with class 0 as reference (``W_0 = c_0 = 0``).

    Parameters
    ----------
    l2
        Ridge penalty ``l2 / 2 ||W||^2`` on the weights (not the intercepts), per sample.
    iterations
        Maximum Newton steps (each with a backtracking line search).
    """

    def __init__(self, l2: float = 1e-4, iterations: int = 50):
        if not np.isfinite(l2) or l2 < 0:
            raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}")
        self.l2 = float(l2)
        self.iterations = check_integer("iterations", iterations, 1)
        self.coef_: np.ndarray | None = None

    @staticmethod
    def _design(x: np.ndarray) -> np.ndarray:
        return np.hstack([np.asarray(x, dtype=float), np.ones((len(x), 1))])

    def _loss(self, theta, design, onehot, penalty):
        logits = np.hstack([np.zeros((design.shape[0], 1)), design @ theta])
        top = logits.max(axis=1, keepdims=True)
        log_norm = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
        loss = float(np.mean(log_norm - np.sum(onehot * logits, axis=1)) + 0.5 * np.sum(penalty * theta**2))
        proba = np.exp(logits - log_norm[:, None])
        return loss, proba

    def fit(self, x: np.ndarray, y: np.ndarray, n_classes: int | None = None) -> "SoftmaxRegression":
        """Fit on features ``x`` ``(N, p)`` and labels ``y`` in ``0..n-1``."""
        design = self._design(x)
        y = np.asarray(y)
        n = int(y.max()) + 1 if n_classes is None else check_integer("n_classes", n_classes, 2)
        size, p = design.shape
        onehot = np.eye(n)[y]
        penalty = np.full((p, 1), self.l2)
        penalty[-1] = 0.0
        theta = np.zeros((p, n - 1))
        loss, proba = self._loss(theta, design, onehot, penalty)
        for _ in range(self.iterations):
            residual = proba[:, 1:] - onehot[:, 1:]
            gradient = design.T @ residual / size + penalty * theta
            hessian = np.zeros((p * (n - 1), p * (n - 1)))
            for k in range(n - 1):
                for l in range(n - 1):
                    w = proba[:, k + 1] * ((k == l) - proba[:, l + 1])
                    hessian[k * p : (k + 1) * p, l * p : (l + 1) * p] = design.T @ (design * w[:, None]) / size
            hessian += np.diag(np.tile(penalty[:, 0], n - 1)) + 1e-10 * np.eye(p * (n - 1))
            step = np.linalg.solve(hessian, gradient.T.ravel()).reshape(n - 1, p).T
            rate = 1.0
            while True:
                candidate = theta - rate * step
                new_loss, new_proba = self._loss(candidate, design, onehot, penalty)
                if new_loss <= loss - 1e-4 * rate * np.sum(gradient * step) or rate < 1e-8:
                    break
                rate /= 2
            done = loss - new_loss < 1e-12
            theta, loss, proba = candidate, new_loss, new_proba
            if done:
                break
        self.coef_ = theta
        return self

    def predict_proba(self, x: np.ndarray) -> np.ndarray:
        """``(N, n)`` class probabilities."""
        if self.coef_ is None:
            raise ValueError("the model is not fitted: call fit first")
        logits = np.hstack([np.zeros((len(x), 1)), self._design(x) @ self.coef_])
        logits -= logits.max(axis=1, keepdims=True)
        proba = np.exp(logits)
        return proba / proba.sum(axis=1, keepdims=True)
