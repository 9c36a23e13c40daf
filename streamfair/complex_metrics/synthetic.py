"""The synthetic 3-class distribution of Sec. 8.3 (Narasimhan et al.), with its exact posterior.

Classes 0, 1, 2 have priors 0.85, 0.10, 0.05; given the class, ``x`` in R^2 is Gaussian with mean
``(1, 1)``, ``(0, 0)`` or ``(-1, -1)`` and the shared covariance ``[[5, 1], [1, 5]]``.  With a shared
covariance the posterior ``eta(x)`` is a softmax of linear functions of ``x``.

>>> x, y = sample_three_class(5, seed=0)
>>> x.shape, y.tolist()
((5, 2), [0, 0, 0, 0, 0])
>>> posterior(np.zeros((1, 2))).round(4).tolist()        # the mean of class 1
[[0.8349, 0.116, 0.0491]]
"""

from __future__ import annotations

import numpy as np

from ..softmax import softmax
from ..validation import check_integer, check_seed

__all__ = [
    "PRIORS",
    "MEANS",
    "COVARIANCE",
    "GROUP_PRIORS",
    "GROUP_SHARE",
    "sample_three_class",
    "posterior",
    "sample_two_groups",
]

PRIORS = np.array([0.85, 0.10, 0.05])
MEANS = np.array([[1.0, 1.0], [0.0, 0.0], [-1.0, -1.0]])
COVARIANCE = np.array([[5.0, 1.0], [1.0, 5.0]])


def sample_three_class(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``n`` draws ``(x, y)`` of the distribution."""
    n = check_integer("n", n, 1)
    rng = np.random.default_rng(check_seed(seed))
    y = rng.choice(3, size=n, p=PRIORS)
    x = MEANS[y] + rng.standard_normal((n, 2)) @ np.linalg.cholesky(COVARIANCE).T
    return x, y


def posterior(x: np.ndarray) -> np.ndarray:
    """``eta(x) = P(Y = . | x)``: ``softmax(log pi_k + mu_k^T S^-1 x - mu_k^T S^-1 mu_k / 2)``."""
    precision = np.linalg.inv(COVARIANCE)
    weights = MEANS @ precision
    offsets = np.log(PRIORS) - 0.5 * np.sum(weights * MEANS, axis=1)
    return softmax(np.asarray(x, dtype=float) @ weights.T + offsets, overwrite=True)


#: Class priors within each group of :func:`sample_two_groups` (a variant for fairness, not in the paper).
GROUP_PRIORS = np.array([[0.75, 0.15, 0.10], [0.45, 0.30, 0.25]])
#: ``P(A = 1)`` in :func:`sample_two_groups`.
GROUP_SHARE = 0.4


def sample_two_groups(n: int, seed: int) -> dict[str, np.ndarray]:
    """A two-group variant of the 3-class distribution for the fairness tests (derived, not in the paper).

    ``A ~ Bernoulli(0.4)``, ``Y | A`` has the priors ``GROUP_PRIORS[A]``, ``X | Y`` is as in the
    paper's distribution (so ``X`` reveals ``A`` only through ``Y``).  Returns ``x``, ``y``, ``a``,
    ``eta_aware = P(Y | x, a)``, ``eta = P(Y | x)`` and ``tau = P(A | x)``, all exact.
    """
    n = check_integer("n", n, 1)
    rng = np.random.default_rng(check_seed(seed))
    a = (rng.random(n) < GROUP_SHARE).astype(np.intp)
    y = (rng.random((n, 1)) > np.cumsum(GROUP_PRIORS[a], axis=1)).sum(axis=1)
    x = MEANS[y] + rng.standard_normal((n, 2)) @ np.linalg.cholesky(COVARIANCE).T
    likelihood = posterior(x) / PRIORS  # proportional to p(x | y), the same for every y-column scale
    joint = np.stack(
        [(1 - GROUP_SHARE) * likelihood * GROUP_PRIORS[0], GROUP_SHARE * likelihood * GROUP_PRIORS[1]], axis=1
    )
    joint /= joint.sum(axis=(1, 2), keepdims=True)  # P(A = a, Y = i | x)
    tau = joint.sum(axis=2)
    return {
        "x": x,
        "y": y,
        "a": a,
        "eta_aware": joint[np.arange(n), a] / tau[np.arange(n), a][:, None],
        "eta": joint.sum(axis=1),
        "tau": tau,
    }
