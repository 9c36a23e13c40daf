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
from typing import Any

import numpy as np

from .accelerated import accelerated, accelerated_continuation
from .baselines import dual_sgd, primal_dual, subgradient
from .oracle import CountingOracle
from .problem import LinearDROProblem

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
    """A solver's output, its oracle counts and the iterates snapshotted along the way.

    Parameters
    ----------
    x
        The solver's output, shape ``(d,)``.
    n_values, n_gradients
        Individual loss values ``l_i(x)`` and gradients ``grad l_i(x)`` evaluated.
    full_passes
        Evaluations of all ``N`` losses at one point (counted in ``n_values`` too).
    snapshots
        ``(calls, x)`` pairs at geometrically spaced call counts, the last one the output at the
        final count, for suboptimality curves.

    Examples
    --------
    Each subgradient step evaluates the 100 losses and the gradients of the 10 worst (CVaR at
    ``alpha = 0.1``): 18 steps spend 1980 calls, and the 19th pass of values crosses the budget.

    >>> import numpy as np
    >>> from streamfair.dro.problem import CVaRSet, make_synthetic
    >>> problem = make_synthetic(n=100, dim=3, robust=CVaRSet(0.1), seed=0, flip=0.0)
    >>> result = solve(problem, "subgradient", budget=2_000)
    >>> result.full_passes, result.n_values, result.n_gradients, result.calls
    (19, 1900, 180, 2080)
    >>> calls, x = result.snapshots[-1]
    >>> calls == result.calls, bool(np.array_equal(x, result.x))
    (True, True)
    """

    x: np.ndarray
    n_values: int
    n_gradients: int
    full_passes: int  # evaluations of all N losses at one point (part of n_values)
    snapshots: list[tuple[int, np.ndarray]]  # [(calls, x)] at geometrically spaced call counts

    @property
    def calls(self) -> int:
        """Values plus gradients evaluated: the paper's complexity measure."""
        return self.n_values + self.n_gradients


def solve(problem: LinearDROProblem, method: str, budget: int, seed: int = 0, **options: Any) -> SolverResult:
    """Run ``method`` on ``problem`` until ``budget`` loss + gradient evaluations are spent.

    Parameters
    ----------
    problem
        The problem; the solver sees its data only through a
        :class:`~streamfair.dro.oracle.CountingOracle`.
    method
        A name of :data:`SOLVERS`: ``"subgradient"``, ``"primal_dual"``, ``"dual_sgd"``,
        ``"accelerated"`` or ``"accelerated_continuation"`` (each supports some uncertainty sets only).
    budget
        Loss values plus gradients to spend; a solver may finish its current step past it.
    seed
        Seed of the solver's sampling (unused by the deterministic subgradient method).
    **options
        Keyword options of the solver (e.g. ``step_scale`` of the subgradient method).

    Returns
    -------
    SolverResult
        The output, the oracle counts and the snapshots.

    Raises
    ------
    ValueError
        If ``method`` is not a name of :data:`SOLVERS`.

    Examples
    --------
    On separable data every hinge loss is 1 at ``x = 0``; the budget buys a better point:

    >>> import numpy as np
    >>> from streamfair.dro.problem import CVaRSet, make_synthetic
    >>> problem = make_synthetic(n=100, dim=3, robust=CVaRSet(0.1), seed=0, flip=0.0)
    >>> result = solve(problem, "dual_sgd", budget=2_000, seed=1)
    >>> result.calls >= 2_000, round(problem.objective(np.zeros(3)), 6)
    (True, 1.0)
    >>> bool(problem.objective(result.x) < 1.0)
    True
    """
    if method not in SOLVERS:
        raise ValueError(f"method must be one of {sorted(SOLVERS)}, got {method!r}")
    oracle = CountingOracle(problem, budget)
    x = SOLVERS[method](oracle, seed=seed, **options)
    snapshots = oracle.snapshots + [(oracle.calls, np.array(x, dtype=float))]
    return SolverResult(np.array(x, dtype=float), oracle.n_values, oracle.n_gradients, oracle.full_passes, snapshots)
