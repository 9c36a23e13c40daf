"""One interface for the batch DRO solvers, with exact oracle accounting.

>>> from streamfair.dro.problem import CVaRSet, make_synthetic
>>> problem = make_synthetic(n=300, dim=5, robust=CVaRSet(0.1), seed=0, flip=0.0)
>>> result = solve(problem, "subgradient", budget=20_000)
>>> result.calls == result.n_values + result.n_gradients >= 20_000
True
>>> bool(problem.objective(result.x) < problem.objective(np.zeros(5)))
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .accelerated import accelerated, accelerated_continuation
from .baselines import dual_sgd, primal_dual, subgradient
from .oracle import CountingOracle

__all__ = ["SOLVERS", "SolverResult", "solve"]

#: name -> solver(oracle, seed, **options) -> x.  Which problems each supports:
#: subgradient: any set; primal_dual: group DRO and CVaR; dual_sgd: CVaR; accelerated: group DRO, CVaR,
#: chi-square and KL (balls and penalties), also with eps-continuation (accelerated_continuation).
SOLVERS: dict[str, Callable[..., np.ndarray]] = {
    "subgradient": subgradient,
    "primal_dual": primal_dual,
    "dual_sgd": dual_sgd,
    "accelerated": accelerated,
    "accelerated_continuation": accelerated_continuation,
}


@dataclass(frozen=True)
class SolverResult:
    """A solver's output, its oracle counts and the iterates snapshotted along the way."""

    x: np.ndarray
    n_values: int
    n_gradients: int
    full_passes: int  # evaluations of all N losses at one point (part of n_values)
    snapshots: list  # [(calls, x)] at geometrically spaced call counts

    @property
    def calls(self) -> int:
        return self.n_values + self.n_gradients


def solve(problem, method: str, budget: int, seed: int = 0, **options) -> SolverResult:
    """Run ``method`` on ``problem`` until ``budget`` loss + gradient evaluations are spent."""
    if method not in SOLVERS:
        raise ValueError(f"method must be one of {sorted(SOLVERS)}, got {method!r}")
    oracle = CountingOracle(problem, budget)
    x = SOLVERS[method](oracle, seed=seed, **options)
    snapshots = oracle.snapshots + [(oracle.calls, np.array(x, dtype=float))]
    return SolverResult(np.array(x, dtype=float), oracle.n_values, oracle.n_gradients, oracle.full_passes, snapshots)
