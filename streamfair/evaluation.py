"""Risk and demographic-parity unfairness of predictions, given labels and the sensitive attribute.

Both unfairness measures of the paper are computed per group ``s``:

* ``atom_unfairness[s] = max_y |P(Y_hat = y | S = s) - P(Y_hat = y)|`` (the constraint, eq. 2);
* ``ks_unfairness[s] = sup_t |P(Y_hat <= t | S = s) - P(Y_hat <= t)|`` (the experiments, App. G).

For a randomized predictor they are computed from the distributions ``pi(. | x_i)`` (exact
expectations over the randomization, as the paper does), not from one draw.  Groups are either
labels ``s_i`` or a membership matrix whose row ``i`` is ``P(S = . | x_i)``.

>>> import numpy as np
>>> proba = np.array([[1.0, 0.0], [0.0, 1.0]])          # two samples, two atoms
>>> report = evaluate(proba, atoms=[0.0, 1.0], y=[0.0, 1.0], groups=[0, 1])
>>> report.risk, report.ks_unfairness.tolist()
(0.0, [0.5, 0.5])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .validation import check_distributions, check_finite, check_integer, show


@dataclass(frozen=True)
class FairnessReport:
    """Risk and per-group unfairness of a set of predictions.

    Made by :func:`evaluate` (randomized predictions) and :func:`evaluate_deterministic`.  With a
    membership matrix for the groups, the per-group quantities weigh each sample by its column.

    Parameters
    ----------
    risk
        Mean squared error ``(Y_hat - y)^2`` over the samples (expected over the randomization).
    group_risk
        Shape ``(K,)``: the mean squared error within each group.
    atom_unfairness
        Shape ``(K,)``: ``max_y |P(Y_hat = y | S = s) - P(Y_hat = y)|``, the largest gap over
        the values.
    ks_unfairness
        Shape ``(K,)``: ``sup_t |P(Y_hat <= t | S = s) - P(Y_hat <= t)|``, the Kolmogorov-Smirnov
        distance of the group's law of the predictions to the overall one.

    Examples
    --------
    Group 0 (two samples) is always predicted 0, group 1 (four samples) always 1: overall
    ``P(Y_hat = 0) = 1/3``, so the KS distances are ``1 - 1/3`` and ``1/3``; the squared errors
    are ``0, 1, 0, 0, 0, 4``:

    >>> report = evaluate_deterministic([0.0, 0.0, 1.0, 1.0, 1.0, 1.0], y=[0.0, 1.0, 1.0, 1.0, 1.0, 3.0],
    ...                                 groups=[0, 0, 1, 1, 1, 1])
    >>> round(report.risk, 6), report.group_risk.tolist()
    (0.833333, [0.5, 1.0])
    >>> report.ks_unfairness.round(4).tolist(), round(report.max_ks, 4)
    ([0.6667, 0.3333], 0.6667)
    """

    risk: float
    group_risk: np.ndarray
    atom_unfairness: np.ndarray
    ks_unfairness: np.ndarray

    @property
    def max_ks(self) -> float:
        """The worst group's KS distance."""
        return float(self.ks_unfairness.max())


def group_membership(groups, n_samples: int, n_groups: int | None = None) -> np.ndarray:
    """``(n, K)`` weights: one-hot rows for labels ``0..K-1``, or a given probability matrix (``n >= 1``)."""
    if n_samples < 1:
        raise ValueError("a report needs at least one sample, got none (the predictions, y and groups are empty)")
    expected = f"groups must be {n_samples} integer labels >= 0 or an ({n_samples}, K) matrix of non-negative weights"
    try:
        array = np.asarray(groups)
    except ValueError:  # a ragged sequence
        raise ValueError(f"{expected}, got {show(groups)}") from None
    if array.ndim == 2:
        weights = check_finite("groups", array.ravel()).reshape(array.shape)
        if array.shape[0] != n_samples or np.any(weights < 0):
            raise ValueError(f"{expected}, got {show(groups)} of shape {array.shape}")
        return weights
    if array.shape != (n_samples,) or not np.issubdtype(array.dtype, np.integer) or array.min(initial=0) < 0:
        raise ValueError(f"{expected}, got {show(groups)}")
    largest = int(array.max())  # n_samples >= 1 labels, of any integer type (unsigned ones too)
    k = largest + 1 if n_groups is None else check_integer("n_groups", n_groups, 1)
    if largest >= k:
        raise ValueError(f"group labels must be < n_groups={k}, got {largest}")
    return np.eye(k)[array]


def expected_squared_error(first, second, y):
    """``E[(Y_hat - y)^2]`` from the first two moments of ``Y_hat``: ``second - 2 y first + y^2``.

    >>> expected_squared_error(0.5, 0.5, 1.0)      # Y_hat is 0 or 1 with even odds
    0.5
    """
    return second - 2.0 * y * first + y * y


def gap_measures(gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each group's largest per-atom gap and its KS distance, from its gaps along the last axis.

    ``gaps[s, l] = P(Y_hat = y_l | S = s) - P(Y_hat = y_l)``, the atoms in increasing order: the KS
    distance is the largest gap between the two CDFs, the cumulative sums of the gaps.

    >>> atom, ks = gap_measures(np.array([[0.25, 0.25, -0.5]]))
    >>> atom.tolist(), ks.tolist()
    ([0.5], [0.5])
    """
    return np.abs(gaps).max(axis=-1), np.abs(np.cumsum(gaps, axis=-1)).max(axis=-1)


def _group_means(weights: np.ndarray, values: np.ndarray) -> np.ndarray:
    totals = weights.sum(axis=0)
    if np.any(totals <= 0):
        raise ValueError(f"every group needs at least one sample, got group weights {totals.tolist()}")
    return (weights.T @ values) / totals.reshape((-1,) + (1,) * (values.ndim - 1))


def evaluate(proba: ArrayLike, atoms: ArrayLike, y: ArrayLike, groups: ArrayLike,
             n_groups: int | None = None) -> FairnessReport:
    """Report for a randomized predictor: row ``i`` of ``proba`` is ``pi(. | x_i)`` over ``atoms``.

    The risk and the unfairness are exact expectations over the randomization, not one draw.

    Parameters
    ----------
    proba
        Shape ``(n, m)``: the law of each sample's prediction over ``atoms`` (each row finite,
        non-negative, summing to one).
    atoms
        Shape ``(m,)``: the values the predictions take, in any order.
    y
        Shape ``(n,)``: the labels.
    groups
        The sensitive attribute: ``n`` integer labels ``0..K-1``, or an ``(n, K)`` membership
        matrix of non-negative weights (row ``i``: ``P(S = . | x_i)``).
    n_groups
        ``K`` for integer labels (each group ``0..K-1`` needs a sample); ``None``: the largest
        label plus one.  Not used with a matrix.

    Returns
    -------
    FairnessReport
        The risk and the per-group unfairness of the randomized predictions.

    Raises
    ------
    ValueError
        If the shapes disagree, a value is not finite, a row of ``proba`` is not a distribution, or
        a group has no weight.

    Examples
    --------
    Group 0 is always predicted 0; group 1 is predicted 1, then 0 or 1 with even odds.  Overall
    ``P(Y_hat = 1) = 1.5 / 4``, so each group's gap is ``0.375``; the expected squared errors are
    ``0, 1, 0, 0.5``:

    >>> report = evaluate([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], atoms=[0.0, 1.0],
    ...                   y=[0.0, 1.0, 1.0, 1.0], groups=[0, 0, 1, 1])
    >>> report.risk, report.group_risk.tolist()
    (0.375, [0.5, 0.25])
    >>> report.atom_unfairness.tolist(), report.ks_unfairness.tolist()
    ([0.375, 0.375], [0.375, 0.375])
    """
    atoms = check_finite("atoms", atoms)
    proba = check_distributions("proba", proba, None, atoms.size)
    y = check_finite("y", y, proba.shape[0])
    weights = group_membership(groups, proba.shape[0], n_groups)
    order = np.argsort(atoms, kind="stable")  # the CDFs of the KS distance follow the values' order
    atoms, proba = atoms[order], proba[:, order]
    repeated = np.flatnonzero(np.diff(atoms) == 0)
    if repeated.size:
        raise ValueError(f"atoms must be distinct values, got {float(atoms[repeated[0]])!r} twice")
    losses = expected_squared_error(proba @ atoms, proba @ atoms**2, y)
    atom, ks = gap_measures(_group_means(weights, proba) - proba.mean(axis=0))
    return FairnessReport(float(losses.mean()), _group_means(weights, losses), atom, ks)


def evaluate_deterministic(predictions: ArrayLike, y: ArrayLike, groups: ArrayLike,
                           n_groups: int | None = None) -> FairnessReport:
    """Report for deterministic predictions (exact KS; per-value gaps over the distinct values).

    Parameters
    ----------
    predictions
        Shape ``(n,)``: one number per sample.
    y
        Shape ``(n,)``: the labels.
    groups, n_groups
        The sensitive attribute and the number of groups, as for :func:`evaluate`.

    Returns
    -------
    FairnessReport
        The risk and the per-group unfairness of the predictions.

    Examples
    --------
    Group 0 gets 0 and 1, group 1 gets 1 twice: overall ``P(Y_hat = 0) = 1/4``, so each group's
    gap is ``1/4``; the squared errors are ``0, 1, 0, 4``:

    >>> report = evaluate_deterministic([0.0, 1.0, 1.0, 1.0], y=[0.0, 0.0, 1.0, 3.0], groups=[0, 0, 1, 1])
    >>> report.risk, report.group_risk.tolist(), report.ks_unfairness.tolist()
    (1.25, [0.5, 2.0], [0.25, 0.25])
    """
    predictions = check_finite("predictions", predictions)
    y = check_finite("y", y, predictions.size)
    weights = group_membership(groups, predictions.size, n_groups)
    _, index = np.unique(predictions, return_inverse=True)
    histograms = np.stack([np.bincount(index, weights=column) for column in weights.T])
    losses = (predictions - y) ** 2
    group_risk = _group_means(weights, losses)  # also checks that every group has weight
    by_group = histograms / weights.sum(axis=0)[:, None]
    atom, ks = gap_measures(by_group - np.bincount(index) / predictions.size)
    return FairnessReport(float(losses.mean()), group_risk, atom, ks)


def to_grid(predictions, atoms) -> np.ndarray:
    """Deterministic predictions as one-hot distributions on their nearest atom: shape ``(n, m)``."""
    predictions = check_finite("predictions", predictions)
    atoms = check_finite("atoms", atoms)
    if atoms.size == 0:
        raise ValueError("atoms must hold at least one value, got none")
    nearest = np.abs(predictions[:, None] - atoms).argmin(axis=1)
    return np.eye(atoms.size)[nearest]
