"""The audit window: the last labelled predictions of a post-processor, for the audited fairness and risk."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from streamfair.evaluation import FairnessReport, evaluate


class AuditWindow:
    """The last ``size`` labelled predictions of one post-processor, for the audited fairness and risk.

    Each row is the distribution that was served for a sample (over ``atoms``), its label ``y`` and
    its group; :meth:`report` evaluates them with :func:`streamfair.evaluate`.

    Parameters
    ----------
    atoms
        The values the served distributions are over (the post-processor's atoms).
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

    def __init__(self, atoms: Sequence[float], n_groups: int, size: int):
        self.atoms = np.asarray(atoms, dtype=float)
        if self.atoms.ndim != 1 or self.atoms.size < 1 or not np.all(np.isfinite(self.atoms)):
            raise ValueError(f"atoms must be a non-empty 1-d array of finite numbers, got {atoms!r}")
        if not (isinstance(n_groups, (int, np.integer)) and n_groups >= 2):
            raise ValueError(f"n_groups must be an integer >= 2, got {n_groups!r}")
        if not (isinstance(size, (int, np.integer)) and size >= 1):
            raise ValueError(f"size must be an integer >= 1, got {size!r}")
        self.n_groups, self.size = int(n_groups), int(size)
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
            Shape ``(n, m)``: the distribution served for each sample, over ``atoms``.
        y
            Shape ``(n,)``: the labels.
        groups
            Shape ``(n,)``: the true groups, integers ``0 .. K - 1``.

        Raises
        ------
        ValueError
            If the shapes disagree, a value is not finite, or a group is out of range; nothing is added.
        """
        proba = np.asarray(proba, dtype=float)
        y = np.asarray(y, dtype=float).reshape(-1)
        groups = np.asarray(groups).reshape(-1)
        n = y.size
        if proba.shape != (n, self.atoms.size):
            raise ValueError(f"proba must have shape ({n}, {self.atoms.size}), got {proba.shape}")
        if groups.shape != (n,) or not np.issubdtype(groups.dtype, np.integer) or np.any(groups < 0) \
                or np.any(groups >= self.n_groups):
            raise ValueError(f"groups must be {n} integers in 0..{self.n_groups - 1}, got {groups.tolist()!r}")
        if not (np.all(np.isfinite(proba)) and np.all(np.isfinite(y))):
            raise ValueError("proba and y must be finite")
        if n > self.size:
            proba, y, groups, n = proba[-self.size:], y[-self.size:], groups[-self.size:], self.size
        rows = (self._next + np.arange(n)) % self.size
        self._proba[rows], self._y[rows], self._group[rows] = proba, y, groups
        self._next = int((self._next + n) % self.size)
        self.count = min(self.size, self.count + n)

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
