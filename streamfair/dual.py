"""The entropic dual of demographic-parity post-processing (Chzhen, Hebiri & Taturyan, NeurIPS 2024).

A randomized predictor puts probability ``pi(l | x)`` on each of ``m`` atoms (grid points for
regression, classes for classification).  With per-sample costs ``r_l(x)`` and group features
``t_s(x) = 1 - tau_s(x) / p_s`` the fair predictor is

    pi(. | x) = softmax(beta * ((Lambda - V) t(x) - r(x)))

for dual variables ``Lambda, V >= 0`` of shape ``(m, K)`` that minimize the convex function

    F(Lambda, V) = E[LSE_beta((Lambda - V) t(X) - r(X))] + sum_l <lambda_l + nu_l, eps>.

Everything here is a pure function of arrays.  The dual is stored as one array ``w`` of shape
``(2, m, K)`` with ``w[0] = Lambda`` and ``w[1] = V``.  The population versions (``objective``,
``gradient``, ...) take a finite population with weights and are exact finite sums: they are the
reference against which the stochastic updates are tested.

Examples
--------
>>> import numpy as np
>>> t = group_features(np.array([0.9, 0.1]), np.array([0.5, 0.5]))
>>> t
array([-0.8,  0.8])
>>> w = np.zeros((2, 3, 2))
>>> policy(w, t[None, :], np.array([[1.0, 0.0, 1.0]]), beta=10.0).round(3)
array([[0., 1., 0.]])
"""

from __future__ import annotations

import numpy as np

from .softmax import softmax

__all__ = [
    "range_grid",
    "regression_grid",
    "group_features",
    "squared_costs",
    "policy",
    "objective",
    "gradient",
    "stochastic_gradient",
    "gradient_mapping",
    "atom_gaps",
    "entropic_risk",
]


def regression_grid(bound: float, half_size: int) -> np.ndarray:
    """The ``2L + 1`` atoms ``l * B / L`` for ``l = -L..L``.

    >>> regression_grid(2.0, 3)
    array([-2.        , -1.33333333, -0.66666667,  0.        ,  0.66666667,
            1.33333333,  2.        ])
    """
    return bound * np.arange(-half_size, half_size + 1) / half_size


def range_grid(low: float, high: float, half_size: int) -> np.ndarray:
    """The ``2L + 1`` evenly spaced atoms from ``low`` to ``high``, each a weighted mean of the two ends.

    Atom ``l`` (``l = -L..L``) is ``(low (L - l) + high (L + l)) / (2L)``, so that ends with short
    decimals give atoms with short decimals (``0.01``, not ``0.5 - 0.49``), and ``(-1, 1)`` gives
    :func:`regression_grid` exactly.

    >>> range_grid(0.0, 1.0, 2).tolist()
    [0.0, 0.25, 0.5, 0.75, 1.0]
    >>> float(range_grid(0.0, 1.0, 50)[1]), float(0.5 + regression_grid(0.5, 50)[1])
    (0.01, 0.010000000000000009)
    """
    steps = np.arange(-half_size, half_size + 1)
    return (low * (half_size - steps) + high * (half_size + steps)) / (2 * half_size)


def group_features(tau: np.ndarray, p: np.ndarray) -> np.ndarray:
    """``t_s(x) = 1 - tau_s(x) / p_s``: zero-mean features whose sign says 'likely in group s'."""
    return 1.0 - tau / p


def squared_costs(eta: np.ndarray, atoms: np.ndarray) -> np.ndarray:
    """``r_l(x) = (eta(x) - y_l)^2`` for every sample (rows) and atom (columns)."""
    return (np.asarray(eta, dtype=float)[..., None] - atoms) ** 2


def _scores(w: np.ndarray, t: np.ndarray, r: np.ndarray, beta: float) -> np.ndarray:
    """``beta * ((Lambda - V) t - r)`` for each sample: shape ``(n, m)``."""
    return beta * (t @ (w[0] - w[1]).T - r)


def _log_sum_exp(scores: np.ndarray) -> np.ndarray:
    top = scores.max(axis=1)
    return top + np.log(np.exp(scores - top[:, None]).sum(axis=1))


def policy(w: np.ndarray, t: np.ndarray, r: np.ndarray, beta: float) -> np.ndarray:
    """The randomized prediction ``pi(. | x_i)`` for each row: shape ``(n, m)``, rows sum to one."""
    return softmax(_scores(w, t, r, beta), overwrite=True)


def objective(w, t, r, weights, eps, beta) -> float:
    """The dual objective ``F(Lambda, V)`` on a finite population with sample ``weights``."""
    lse = _log_sum_exp(_scores(w, t, r, beta)) / beta
    return float(weights @ lse + (w[0] + w[1]).sum(axis=0) @ eps)


def atom_gaps(w, t, r, weights, beta) -> np.ndarray:
    """``E[pi(l | X) t_s(X)] = P(Y_hat = l) - P(Y_hat = l | S = s)``: shape ``(m, K)``."""
    return policy(w, t, r, beta).T @ (weights[:, None] * t)


def gradient(w, t, r, weights, eps, beta) -> np.ndarray:
    """Exact ``grad F``: ``+E[pi t] + eps`` for ``Lambda`` and ``-E[pi t] + eps`` for ``V``."""
    gaps = atom_gaps(w, t, r, weights, beta)
    return np.stack([gaps + eps, -gaps + eps])


def stochastic_gradient(w, t_one, r_one, eps, beta) -> np.ndarray:
    """The one-sample unbiased gradient of eq. (11) at a single sample ``(t_one, r_one)``."""
    return gradient(w, t_one[None, :], r_one[None, :], np.ones(1), eps, beta)


def gradient_mapping(w: np.ndarray, grad: np.ndarray, step: float) -> np.ndarray:
    """``G_alpha(w) = (w - (w - alpha grad)_+) / alpha``, computed stably as ``min(w / alpha, grad)``."""
    return np.minimum(w / step, grad)


def entropic_risk(w, t, r, weights, beta) -> tuple[float, float]:
    """``(R(pi), R(pi) + E[sum pi log pi] / beta)`` for the policy at ``w`` (risk measured by ``r``)."""
    pi = policy(w, t, r, beta)
    risk = float(weights @ (pi * r).sum(axis=1))
    with np.errstate(divide="ignore", invalid="ignore"):
        neg_entropy = np.where(pi > 0, pi * np.log(pi), 0.0).sum(axis=1)
    return risk, risk + float(weights @ neg_entropy) / beta
