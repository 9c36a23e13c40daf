"""A small dense two-phase simplex method for the linear programs of the complex-metric algorithms.

The programs here are tiny in rows (a few constraints on a confusion vector) and moderate in
columns (one per classifier of a mixture): the pruning LP, the linear-minimization oracle of the
feasible set in Split Frank-Wolfe, and the final convex programs.  :func:`linprog` solves

    minimize c.x  subject to  A_ub x <= b_ub,  A_eq x = b_eq,  x >= 0

with Dantzig's rule, switching to Bland's rule (which cannot cycle) after a run of degenerate
pivots.  The returned point is a basic solution, so it has at most ``rows`` non-zero entries.

>>> result = linprog(np.array([-1.0, -1.0]), A_ub=np.array([[1.0, 2.0], [3.0, 1.0]]), b_ub=np.array([4.0, 6.0]))
>>> result.status, result.x.round(6).tolist(), round(result.fun, 6)
('optimal', [1.6, 1.2], -2.8)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LPResult", "linprog"]

#: Pivot and feasibility tolerance (the data are probabilities and costs of order one).
TOLERANCE = 1e-10
#: Degenerate pivots in a row after which Bland's rule takes over.
DEGENERATE_PIVOTS = 50


@dataclass(frozen=True)
class LPResult:
    """``status`` is ``"optimal"``, ``"infeasible"`` or ``"unbounded"``; ``x`` is ``None`` unless optimal."""

    status: str
    x: np.ndarray | None
    fun: float

    def solution(self) -> np.ndarray:
        """``x``, the optimal point; ``ValueError`` when there is none (infeasible or unbounded)."""
        if self.x is None:
            raise ValueError(f"the linear program has no solution: it is {self.status}")
        return self.x


def _pivot(tableau: np.ndarray, basis: np.ndarray, row: int, column: int) -> None:
    tableau[row] /= tableau[row, column]
    factors = tableau[:, column].copy()
    factors[row] = 0.0
    tableau -= np.outer(factors, tableau[row])
    basis[row] = column


def _iterate(tableau: np.ndarray, basis: np.ndarray, n_columns: int, max_pivots: int) -> str:
    """Pivot until the objective row (last) has no negative reduced cost among ``n_columns``."""
    degenerate = 0
    for _ in range(max_pivots):
        costs = tableau[-1, :n_columns]
        candidates = np.flatnonzero(costs < -TOLERANCE)
        if candidates.size == 0:
            return "optimal"
        column = (
            int(candidates[0]) if degenerate >= DEGENERATE_PIVOTS else int(candidates[np.argmin(costs[candidates])])
        )
        entries = tableau[:-1, column]
        rows = np.flatnonzero(entries > TOLERANCE)
        if rows.size == 0:
            return "unbounded"
        ratios = tableau[rows, -1] / entries[rows]
        best = ratios.min()
        ties = rows[ratios <= best + TOLERANCE * max(1.0, abs(best))]
        row = int(ties[np.argmin(basis[ties])])  # Bland's tie-break: smallest basic index leaves
        degenerate = degenerate + 1 if best <= TOLERANCE else 0
        _pivot(tableau, basis, row, column)
    raise RuntimeError(f"the simplex method did not finish within {max_pivots} pivots")


def linprog(
    c: np.ndarray,
    A_ub: np.ndarray | None = None,
    b_ub: np.ndarray | None = None,
    A_eq: np.ndarray | None = None,
    b_eq: np.ndarray | None = None,
    max_pivots: int = 100_000,
) -> LPResult:
    """Minimize ``c.x`` over ``x >= 0`` with ``A_ub x <= b_ub`` and ``A_eq x = b_eq`` (dense arrays)."""
    c = np.asarray(c, dtype=float)
    n = c.size
    blocks = []
    for matrix, rhs, slack in ((A_ub, b_ub, True), (A_eq, b_eq, False)):
        if matrix is None:
            continue
        matrix = np.asarray(matrix, dtype=float).reshape(-1, n)
        rhs = np.asarray(rhs, dtype=float).reshape(-1)
        if rhs.size != matrix.shape[0]:
            raise ValueError(f"the right-hand side has {rhs.size} entries for {matrix.shape[0]} rows")
        blocks.append((matrix, rhs, slack))
    n_ub = sum(m.shape[0] for m, _, s in blocks if s)
    rows = sum(m.shape[0] for m, _, _ in blocks)
    if rows == 0:
        if np.any(c < 0):
            return LPResult("unbounded", None, -np.inf)
        return LPResult("optimal", np.zeros(n), 0.0)
    # Columns: x (n) | slacks (n_ub) | artificials (rows) | rhs.
    width = n + n_ub + rows
    tableau = np.zeros((rows + 1, width + 1))
    at, slack_at = 0, n
    for matrix, rhs, slack in blocks:
        k = matrix.shape[0]
        tableau[at : at + k, :n] = matrix
        if slack:
            tableau[at : at + k, slack_at : slack_at + k] = np.eye(k)
            slack_at += k
        tableau[at : at + k, -1] = rhs
        at += k
    negative = tableau[:-1, -1] < 0
    tableau[:-1][negative] *= -1.0
    tableau[:rows, n + n_ub : width] = np.eye(rows)
    basis = np.arange(n + n_ub, width)
    # Phase 1: minimize the sum of artificials (objective row = -sum of the constraint rows).
    tableau[-1] = -tableau[:-1].sum(axis=0)
    tableau[-1, n + n_ub : width] = 0.0
    _iterate(tableau, basis, n + n_ub, max_pivots)
    if -tableau[-1, -1] > 1e-8 * max(1.0, np.abs(tableau[:-1, -1]).max()):
        return LPResult("infeasible", None, np.nan)
    # Drive artificials out of the basis; a row where that is impossible is redundant.
    keep = np.ones(rows, dtype=bool)
    for row in range(rows):
        if basis[row] >= n + n_ub:
            entries = np.abs(tableau[row, : n + n_ub])
            if entries.max(initial=0.0) > 1e-9:
                _pivot(tableau, basis, row, int(np.argmax(entries)))
            else:
                keep[row] = False
    tableau = np.vstack([tableau[:-1][keep], tableau[-1:]])
    basis = basis[keep]
    tableau = np.delete(tableau, np.s_[n + n_ub : width], axis=1)
    # Phase 2: reduced costs of the original objective.
    objective = np.zeros(n + n_ub + 1)
    objective[:n] = c
    tableau[-1] = objective - _basic_costs(basis, c) @ tableau[:-1]
    status = _iterate(tableau, basis, n + n_ub, max_pivots)
    if status != "optimal":
        return LPResult(status, None, -np.inf)
    x = np.zeros(n + n_ub)
    x[basis] = tableau[:-1, -1]
    x = np.maximum(x[:n], 0.0)
    return LPResult("optimal", x, float(c @ x))


def _basic_costs(basis: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Objective coefficients of the basic variables (slacks cost nothing)."""
    padded = np.zeros(basis.max(initial=0) + 1)
    padded[: c.size] = c[: padded.size]
    return padded[basis]
