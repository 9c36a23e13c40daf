"""The audit window: the last labelled predictions of a post-processor, for the audited fairness and risk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streamfair.evaluation import FairnessReport, evaluate
from streamfair.validation import check_distributions, check_finite, check_integer


class AuditWindow:
    """The last ``size`` labelled predictions of one post-processor, for the audited fairness and risk.

    Each row is the distribution that was served for a sample (over ``atoms``), its label ``y`` and
    its group; :meth:`report` evaluates them with :func:`streamfair.evaluate`.

    Parameters
    ----------
    atoms
        The values the served distributions are over (the post-processor's atoms): finite
        numbers, at least one, in any order.
    n_groups
        ``K``, at least 2: the groups are ``0 .. K - 1``.
    size
        Rows held, at least 1.

    Attributes
    ----------
    count : int
        Rows held, at most ``size``.

    Examples
    --------
    Four rows in a window of three: the first falls out, and the three left were served their
    label with probability 1 (risk 0):

    >>> window = AuditWindow(atoms=[0.0, 1.0], n_groups=2, size=3)
    >>> window.add([[1.0, 0.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0]], y=[0, 1, 1, 0], groups=[0, 1, 1, 0])
    >>> window.count, window.group_counts().tolist(), window.report().risk
    (3, [1, 2], 0.0)
    """

    def __init__(self, atoms: Sequence[float] | np.ndarray, n_groups: int, size: int):
        self.atoms = check_finite("atoms", atoms)
        if self.atoms.size < 1:
            raise ValueError(f"atoms must be a non-empty 1-d array of finite numbers, got {atoms!r}")
        self.n_groups, self.size = check_integer("n_groups", n_groups, 2), check_integer("size", size, 1)
        self._proba = np.zeros((self.size, self.atoms.size))
        self._y = np.zeros(self.size)
        self._group = np.zeros(self.size, dtype=int)
        self._next = 0
        self.count = 0

    def add(self, proba: Any, y: Any, groups: Any) -> None:
        """Append rows (the oldest fall out once ``size`` are held).

        Parameters
        ----------
        proba
            Shape ``(n, m)``: the distribution served for each sample, over ``atoms`` (each row
            finite probabilities summing to one).
        y
            Shape ``(n,)``: the labels, finite numbers.
        groups
            Shape ``(n,)``: the true groups, integers ``0 .. K - 1``.

        Raises
        ------
        ValueError
            If the shapes disagree, a value is not finite, a row of ``proba`` is not a
            distribution, or a group is out of range; nothing is added.
        """
        y = check_finite("y", y)
        n = y.size
        proba = check_distributions("proba", proba, n, self.atoms.size)
        groups = self._check_groups(groups, n)
        if n > self.size:
            proba, y, groups, n = proba[-self.size:], y[-self.size:], groups[-self.size:], self.size
        rows = (self._next + np.arange(n)) % self.size
        self._proba[rows], self._y[rows], self._group[rows] = proba, y, groups
        self._next = int((self._next + n) % self.size)
        self.count = min(self.size, self.count + n)

    def _check_groups(self, groups: Any, n: int) -> np.ndarray:
        """``n`` group indices, integers in ``0 .. K - 1``, else ``ValueError`` (showing the first bad one)."""
        groups = np.asarray(groups)
        if groups.shape != (n,):
            raise ValueError(f"groups must have shape ({n},), got shape {groups.shape}")
        if n == 0:
            return groups.astype(int)
        if not np.issubdtype(groups.dtype, np.integer):
            raise ValueError(f"groups must be integers in 0..{self.n_groups - 1}, got dtype {groups.dtype}")
        bad = np.flatnonzero((groups < 0) | (groups >= self.n_groups))
        if bad.size:
            entry = bad[0]
            raise ValueError(
                f"groups must be integers in 0..{self.n_groups - 1}; entry {entry} is {groups[entry].item()!r}")
        return groups

    def group_counts(self) -> np.ndarray:
        """Rows held per group.

        Returns
        -------
        ndarray of shape (K,)
            The number of rows of each group.
        """
        return np.bincount(self._group[: self.count], minlength=self.n_groups)

    def report(self) -> FairnessReport | None:
        """Risk and per-group unfairness of the rows held; ``None`` until every group has a row.

        Returns
        -------
        FairnessReport or None
            :func:`streamfair.evaluate` of the rows held, or ``None`` while a group has none.
        """
        if self.count == 0 or np.any(self.group_counts() == 0):
            return None
        rows = slice(0, self.count)
        return evaluate(self._proba[rows], self.atoms, self._y[rows], self._group[rows], n_groups=self.n_groups)
