"""Samples, plug-in predictions and (group-specific) confusion matrices.

A sample holds what the plug-in algorithms of Narasimhan et al. need after the base model has
been applied: class probabilities ``eta_hat(x)`` (rows), labels ``y`` and, for fairness, the group
of each sample -- or its posterior ``tau(x) = P(A = . | x)`` when the group is not observed.

Every deterministic classifier here is a *plug-in* classifier given by a score matrix ``L`` of shape
``(m n, n)``: it predicts ``argmin*_j sum_{a,i} P[a, i] L[a n + i, j]`` (ties to the larger index),
where the per-sample weights ``P[a, i]`` are

* ``eta_hat_i(x)`` without groups (``m = 1``; the cost-sensitive plug-in, Alg. 9);
* ``1(A(x) = a) eta_hat_i(x)`` when the group is observed (group-aware, Alg. 10);
* ``tau_a(x) eta_hat_i(x)`` when it is not (unaware; exact when ``A`` and ``Y`` are independent
  given ``x``; derived, not in the paper).

The confusion tensor ``C[a, i, j] = P(A = a, Y = i, Y_hat = j)`` is estimated as
``(1/N) sum_l G[l, a] Y[l, i] 1(y_hat_l = j)``, with ``G`` the one-hot group (or ``tau``) and ``Y``
the one-hot label -- or ``eta_hat`` itself when labels are missing (a label-free surrogate, derived,
not in the paper; exact for coordinates such as coverage and demographic parity that sum over ``i``).

>>> import numpy as np
>>> sample = Sample(np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4]]), y=[0, 1, 1])
>>> predictions = sample.predict(np.array([[0.0, 1.0], [1.0, 0.0]]))   # the 0-1 loss: argmax
>>> predictions.tolist()
[0, 1, 0]
>>> (sample.confusion(predictions)[0] * 3).tolist()
[[1.0, 0.0], [1.0, 1.0]]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..validation import check_array, check_distributions, check_integer, show

__all__ = ["Sample", "check_labels", "check_scores", "cost_features", "plug_in", "zero_one_scores"]


def plug_in(features: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``argmin*_j (features @ scores)[:, j]`` per row, ties broken towards the larger index."""
    values = features @ scores
    n = values.shape[1]
    return n - 1 - np.argmin(values[:, ::-1], axis=1)


def cost_features(proba: np.ndarray, groups: np.ndarray | None, tau: np.ndarray | None, n_groups: int) -> np.ndarray:
    """The per-sample weights ``P`` (shape ``(N, m n)``) that a score matrix is applied to."""
    if tau is not None:
        membership = tau
    elif groups is not None:
        membership = np.eye(n_groups)[groups]
    else:
        return proba
    return (membership[:, :, None] * proba[:, None, :]).reshape(proba.shape[0], membership.shape[1] * proba.shape[1])


def zero_one_scores(n_classes: int, n_groups: int = 1) -> np.ndarray:
    """The score matrix of the 0-1 loss (the plug-in ``argmax eta_hat``), shape ``(m n, n)``."""
    return np.tile(1.0 - np.eye(n_classes), (n_groups, 1))


def check_labels(name: str, value: Any, n_rows: int, n_values: int | None) -> np.ndarray:
    """``n_rows`` integer labels (classes, groups, predictions) in ``0..n_values-1`` (``None``: any ``>= 0``)."""
    try:
        array = np.asarray(value)
    except ValueError:  # a ragged sequence
        raise ValueError(f"{name} must be {n_rows} integer labels, got {value!r}") from None
    if array.shape != (n_rows,) or not (np.issubdtype(array.dtype, np.integer) or array.size == 0):
        raise ValueError(
            f"{name} must be {n_rows} integer labels, got an array of shape {array.shape} and dtype {array.dtype}"
        )
    if array.size and (array.min() < 0 or (n_values is not None and array.max() >= n_values)):
        allowed = f"in 0..{n_values - 1}" if n_values is not None else ">= 0"
        raise ValueError(f"{name} must be {allowed}, got values in {int(array.min())}..{int(array.max())}")
    return array.astype(np.intp)


def check_scores(scores: Any, n_groups: int, n_classes: int) -> np.ndarray:
    """A finite score matrix of shape ``(m n, n)``."""
    return check_array("scores", scores, (n_groups * n_classes, n_classes))


class Sample:
    """A (possibly unlabeled) sample for the plug-in oracle.

    Parameters
    ----------
    proba
        ``(N, n)`` class probabilities ``eta_hat(x_l)`` of the base model.
    y
        ``(N,)`` labels in ``0..n-1``, or ``(N, n)`` label distributions (soft labels, e.g. the
        true posterior of a synthetic distribution); ``None``: use ``proba`` in their place (the
        label-free surrogate).
    groups
        ``(N,)`` observed groups in ``0..m-1``: group-aware predictions and exact group confusions.
    tau
        ``(N, m)`` group posteriors: unaware predictions; also the group weights of the confusion
        when ``groups`` is not given.
    n_groups
        ``m`` when only ``groups`` is given and some group may be absent; default ``max + 1``.
        With ``tau`` it must be the number of columns of ``tau``; without groups nor ``tau``, 1.

    Attributes
    ----------
    n_classes, n_groups, size
        ``n``, ``m`` (1 without groups) and ``N``.
    grouping
        ``"none"``, ``"aware"`` (predictions use ``groups``) or ``"unaware"`` (they use ``tau``).
    joint
        ``(m, n)``: the estimated ``P(A = a, Y = i)`` (the row sums of every confusion tensor).

    Examples
    --------
    Two groups, observed: predictions and confusions are group-aware.

    >>> import numpy as np
    >>> proba = np.array([[0.7, 0.3], [0.2, 0.8], [0.6, 0.4], [0.1, 0.9]])
    >>> sample = Sample(proba, y=[0, 1, 1, 1], groups=[0, 0, 1, 1])
    >>> sample.grouping, sample.n_groups, sample.joint.tolist()      # P(A = a, Y = i)
    ('aware', 2, [[0.25, 0.25], [0.0, 0.5]])
    >>> predictions = sample.predict(np.tile(1.0 - np.eye(2), (2, 1)))   # the 0-1 loss in each group
    >>> predictions.tolist()                                         # argmax of each row
    [0, 1, 0, 1]
    >>> (sample.confusion(predictions) * 4).tolist()                 # counts of (a, y, y_hat)
    [[[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0], [1.0, 1.0]]]
    >>> sample.subset([2, 3]).joint.tolist()                         # group 0 absent, still counted
    [[0.0, 0.0], [0.0, 1.0]]
    """

    def __init__(self, proba: Any, y: Any = None, groups: Any = None, tau: Any = None, n_groups: int | None = None):
        proba = check_array("proba", proba, finite=False)
        if proba.ndim != 2 or proba.shape[1] < 2:
            raise ValueError(f"proba must have shape (N, n) with n >= 2, got shape {proba.shape}")
        self.proba = check_distributions("proba", proba, None, proba.shape[1])
        self.size, self.n_classes = proba.shape
        if self.size == 0:
            raise ValueError("proba must have at least one row")
        self.y: np.ndarray | None
        self.soft_labels: np.ndarray | None
        self.tau: np.ndarray | None
        self.groups: np.ndarray | None
        if y is not None and np.ndim(y) == 2:
            self.y, self.soft_labels = None, check_distributions("y", y, self.size, self.n_classes)
        else:
            self.y, self.soft_labels = None if y is None else check_labels("y", y, self.size, self.n_classes), None
        if tau is not None:
            tau = check_array("tau", tau, finite=False)
            m = tau.shape[1] if tau.ndim == 2 else -1
            self.tau = check_distributions("tau", tau, self.size, max(m, 2))
            self.n_groups = self.tau.shape[1]
        else:
            self.tau = None
        if n_groups is not None:
            self._check_n_groups(check_integer("n_groups", n_groups, 1), groups)
        if groups is not None:
            m = self.n_groups if tau is not None else n_groups
            if m is None:
                m = int(check_labels("groups", groups, self.size, None).max()) + 1
            self.groups = check_labels("groups", groups, self.size, m)
            self.n_groups = m
        else:
            self.groups = None
        if groups is None and tau is None:
            self.n_groups = 1
        self.grouping = "unaware" if self.tau is not None else ("aware" if self.groups is not None else "none")
        self.features = cost_features(self.proba, self.groups, self.tau, self.n_groups)
        self._hard_index: np.ndarray | None = None
        self._weights: np.ndarray | None
        self.joint: np.ndarray
        if self.y is not None and (self.groups is not None or self.tau is None):
            group = self.groups if self.groups is not None else np.zeros(self.size, dtype=np.intp)
            self._hard_index = (group * self.n_classes + self.y) * self.n_classes
            self.joint = np.bincount(group * self.n_classes + self.y, minlength=self.n_groups * self.n_classes)
            self.joint = self.joint.reshape(self.n_groups, self.n_classes) / self.size
            self._weights = None
        else:
            self._weights = self._soft_weights()
            self.joint = self._weights.mean(axis=0).reshape(self.n_groups, self.n_classes)

    def _check_n_groups(self, n_groups: int, groups: Any) -> None:
        """``n_groups`` must agree with ``tau`` and, without groups or ``tau``, be 1."""
        if self.tau is not None and n_groups != self.tau.shape[1]:
            raise ValueError(f"n_groups={n_groups} does not fit tau, which has {self.tau.shape[1]} columns")
        if self.tau is None and groups is None and n_groups != 1:
            raise ValueError(f"n_groups={n_groups} needs groups or tau (without them the sample has one group)")

    def _soft_weights(self) -> np.ndarray:
        """``(N, m n)`` weights ``G[l, a] Y[l, i]`` of each sample in each (group, label) cell."""
        if self.y is not None:
            labels = np.eye(self.n_classes)[self.y]
        else:
            labels = self.proba if self.soft_labels is None else self.soft_labels
        if self.groups is not None:
            membership = np.eye(self.n_groups)[self.groups]
        elif self.tau is not None:
            membership = self.tau
        else:
            membership = np.ones((self.size, 1))
        return (membership[:, :, None] * labels[:, None, :]).reshape(self.size, -1)

    @property
    def labelled(self) -> bool:
        """Whether labels were given (otherwise confusions use the label-free surrogate)."""
        return self.y is not None or self.soft_labels is not None

    def predict(self, scores: np.ndarray) -> np.ndarray:
        """Predictions of the plug-in classifier with score matrix ``scores`` (shape ``(m n, n)``).

        Parameters
        ----------
        scores
            The finite score matrix ``L``, shape ``(m n, n)``: row ``a n + i`` is the cost of each
            prediction when the group is ``a`` and the class ``i``.

        Returns
        -------
        ndarray of shape (N,)
            The predicted class of each sample, ``argmin*_j`` of its expected cost (ties broken
            towards the larger index).
        """
        return self._predict(check_scores(scores, self.n_groups, self.n_classes))

    def _predict(self, scores: np.ndarray) -> np.ndarray:
        """:meth:`predict` without the checks (the algorithms' oracle calls)."""
        return plug_in(self.features, scores)

    def confusion(self, predictions: np.ndarray) -> np.ndarray:
        """The estimated confusion tensor ``(m, n, n)`` of the given predictions on this sample.

        Parameters
        ----------
        predictions
            ``(N,)`` integer predicted classes in ``0..n-1``, one per sample.

        Returns
        -------
        ndarray of shape (m, n, n)
            ``C[a, i, j]``, the estimated ``P(A = a, Y = i, Y_hat = j)``; its entries sum to one.
        """
        return self._confusion(check_labels("predictions", predictions, self.size, self.n_classes))

    def _confusion(self, predictions: np.ndarray) -> np.ndarray:
        """:meth:`confusion` without the checks (the algorithms' oracle calls)."""
        n, m = self.n_classes, self.n_groups
        if self._hard_index is not None:
            counts = np.bincount(self._hard_index + predictions, minlength=m * n * n)
            return counts.reshape(m, n, n) / self.size
        weights = self._weights
        assert weights is not None  # set whenever _hard_index is not
        onehot = np.zeros((self.size, n))
        onehot[np.arange(self.size), predictions] = 1.0
        return (weights.T @ onehot).reshape(m, n, n) / self.size

    def subset(self, rows: Any) -> Sample:
        """The sample restricted to ``rows`` (an index array or a boolean mask).

        Parameters
        ----------
        rows
            The rows kept, at least one: an index array (indices in ``-N..N-1``, as in numpy) or a
            boolean mask of length ``N``.

        Returns
        -------
        Sample
            The rows' probabilities, labels, groups and posteriors, with the same ``n_groups``
            (a group may be absent from the subset).
        """
        rows = self._check_rows(rows)
        labels = self.y if self.y is not None else self.soft_labels
        labels, groups, tau = (None if part is None else part[rows] for part in (labels, self.groups, self.tau))
        return Sample(self.proba[rows], labels, groups, tau, n_groups=self.n_groups)

    def _check_rows(self, rows: Any) -> np.ndarray:
        """``rows`` as an index array or a boolean mask that selects at least one row of this sample."""
        array = np.asarray(rows)
        n = self.size
        if array.dtype == bool and array.shape == (n,):
            selected = int(np.count_nonzero(array))
        elif np.issubdtype(array.dtype, np.integer) and array.ndim == 1 and np.all((array >= -n) & (array < n)):
            selected = array.size
        else:
            selected = 0
        if selected == 0:
            raise ValueError(
                f"rows must select at least one row: indices in {-n}..{n - 1} or a boolean mask of length {n}, "
                f"got {show(rows)}"
            )
        return array
