"""A first-order oracle that counts every individual loss and gradient evaluation.

The paper's complexity measure is the number of evaluations of individual ``l_i(x)`` and
``grad l_i(x)`` (Carmon & Hausler, Table 1).  Solvers see the data only through this class, which
counts values and gradients separately (for linear models a gradient also yields the value; both
conventions can be reported from the two counters), enforces a budget and keeps snapshots of the
iterate at geometrically spaced counts so that suboptimality curves can be drawn afterwards with
the exact, *uncounted* objective.

Examples
--------
>>> import numpy as np
>>> from streamfair.dro.problem import CVaRSet, make_synthetic
>>> oracle = CountingOracle(make_synthetic(n=50, dim=3, robust=CVaRSet(0.2), seed=0), budget=120)
>>> _ = oracle.values(np.arange(50), np.zeros(3))
>>> _ = oracle.gradient(np.array([3, 3, 7]), np.zeros(3), np.ones(3))
>>> oracle.n_values, oracle.n_gradients, oracle.calls, oracle.full_passes, oracle.exhausted
(50, 3, 53, 0, False)
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from ..validation import check_integer, check_positive
from .problem import LinearDROProblem

__all__ = ["CountingOracle"]


class CountingOracle:
    """Counted access to ``l_i(x)`` and ``grad l_i(x)`` of a :class:`LinearDROProblem`.

    Parameters
    ----------
    problem
        The problem.
    budget
        Total evaluations (values + gradients) after which :attr:`exhausted` is true.
    spacing
        Snapshots of the iterate are kept each time the count has grown by this factor.
    """

    def __init__(self, problem: LinearDROProblem, budget: int, spacing: float = 1.2):
        self.problem = problem
        self.budget = check_integer("budget", budget, 1)
        self.spacing = check_positive("spacing", spacing)
        if self.spacing <= 1.0:
            raise ValueError(f"spacing must be > 1, got {spacing!r}")
        self.n_values = 0
        self.n_gradients = 0
        self.full_passes = 0
        self.snapshots: list[tuple[int, np.ndarray]] = []
        self._next_snapshot = 1.0
        self._recording = True

    @property
    def calls(self) -> int:
        """Values plus gradients evaluated so far."""
        return self.n_values + self.n_gradients

    @property
    def exhausted(self) -> bool:
        return self.calls >= self.budget

    def values(self, index: np.ndarray, x: np.ndarray) -> np.ndarray:
        """``l_i(x)`` for each ``i`` in ``index`` (counted ``len(index)`` times)."""
        self.n_values += len(index)
        return self.problem.losses_at(index, x)

    def all_values(self, x: np.ndarray) -> np.ndarray:
        """All ``N`` losses (counted ``N`` times, and once in :attr:`full_passes`)."""
        self.n_values += self.problem.n
        self.full_passes += 1
        return self.problem.losses_at(slice(None), x)

    def gradient(self, index: np.ndarray, x: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_k weights_k grad l_{index_k}(x)`` (counted ``len(index)`` times)."""
        self.n_gradients += len(index)
        return self.problem.gradient_sum(index, x, weights)

    @contextmanager
    def capped(self, calls: int) -> Iterator[CountingOracle]:
        """A sub-run: inside the block at most ``calls`` more evaluations, and snapshots are paused.

        For solvers that call other solvers (the ``nu``-search of the accelerated method), whose
        output is not the inner solver's iterate.
        """
        budget, recording = self.budget, self._recording
        self.budget, self._recording = min(budget, self.calls + max(0, int(calls))), False
        try:
            yield self
        finally:
            self.budget, self._recording = budget, recording

    def record(self, x: np.ndarray) -> None:
        """Offer the solver's current output; kept if the count crossed the next snapshot mark."""
        if self._recording and self.calls >= self._next_snapshot:
            self.snapshots.append((self.calls, np.array(x, dtype=float)))
            while self._next_snapshot <= self.calls:
                self._next_snapshot *= self.spacing
