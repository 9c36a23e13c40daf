"""The offline optimum: the fair-prediction LP on a finite sample, and the predictor its prices define.

On ``n`` samples with weights ``w_i``, group features ``t_i`` and costs ``r_i`` (one per atom), the
linear program of Chzhen, Hebiri & Taturyan (NeurIPS 2024, problem 3) with a constraint family
``C`` (:mod:`streamfair.constraints`) is

    min_pi  sum_i w_i <pi_i, r_i>   s.t.  pi_i in the simplex,  |sum_i w_i (C pi_i)_k t_is| <= slack_s.

It is the frontier an online method is measured against: no predictor on this grid, with these
posteriors, meets the constraints on the sample at a lower risk.  Its constraint prices
``mu = mu_upper - mu_lower`` (HiGHS's marginals) define a deterministic predictor for new
samples, ``argmin_l r_l(x) + ((C^T mu) t(x))_l``, which is how the frontier is evaluated on test
data.  Needs scipy (the ``experiments`` extra).

>>> import numpy as np
>>> from streamfair.constraints import CdfConstraints
>>> t = np.array([[1.0, -1.0], [-1.0, 1.0]])           # two samples, one per group (p = 1/2)
>>> r = np.array([[0.0, 1.0], [1.0, 0.0]])             # each prefers a different atom
>>> lp = solve(t, r, np.array([0.5, 0.5]), np.array([0.1, 0.1]), CdfConstraints(2))
>>> round(lp.risk, 6), round(float(np.abs(lp.constraint_values).max()), 6)
(0.4, 0.1)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamfair.constraints import AtomConstraints, CdfConstraints


@dataclass(frozen=True)
class FairLP:
    """A solved LP: its risk, policy, constraint values ``sum_i w_i (C pi_i) t_i`` and prices ``mu``.

    Examples
    --------
    Two samples, one per group, each preferring another atom.  With a tight slack the optimum
    randomizes the first sample, and the constraint's price sends a new sample (here both old
    ones) to a single atom:

    >>> from streamfair.constraints import CdfConstraints
    >>> t = np.array([[1.0, -1.0], [-1.0, 1.0]])
    >>> r = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> lp = solve(t, r, np.array([0.5, 0.5]), np.array([0.1, 0.1]), CdfConstraints(2))
    >>> lp.policy.round(3).tolist(), lp.constraint_values.round(3).tolist(), lp.prices.round(3).tolist()
    ([[0.2, 0.8], [0.0, 1.0]], [[0.1, -0.1]], [[0.0, -1.0]])
    >>> lp.predict_index(t, r).tolist()
    [0, 0]
    """

    risk: float
    policy: np.ndarray  # (n, m)
    constraint_values: np.ndarray  # (rows, K)
    prices: np.ndarray  # (rows, K): mu_upper - mu_lower, the net price of each constraint row
    constraints: AtomConstraints | CdfConstraints

    def predict_index(self, t: np.ndarray, r: np.ndarray) -> np.ndarray:
        """The atom index the prices choose for new samples (features ``t``, costs ``r``)."""
        return np.argmin(r + t @ self.constraints.atoms_of(self.prices).T, axis=1)


def solve(t: np.ndarray, r: np.ndarray, weights: np.ndarray, slack: np.ndarray,
          constraints: AtomConstraints | CdfConstraints) -> FairLP:
    """Solve the LP with HiGHS; raise ``RuntimeError`` if it does not solve.

    The variables are each sample's CDF ``F_il = sum_{l' <= l} pi_il'`` (non-decreasing in ``l``,
    ``F_i,m-1 = 1``) rather than ``pi``: every constraint row then touches one or two variables per
    sample instead of up to ``m``, which keeps the CDF family as sparse as the per-atom one.

    Parameters
    ----------
    t
        ``(n, K)`` group features of the samples.
    r
        ``(n, m)`` cost of each atom for each sample.
    weights
        ``(n,)`` sample weights.
    slack
        ``(K,)`` slack of each group's constraints.
    constraints
        The constraint family ``C`` (per atom or on the CDF).

    Examples
    --------
    With a slack too loose to bind, each sample takes its cheapest atom and every price is 0:

    >>> from streamfair.constraints import CdfConstraints
    >>> t = np.array([[1.0, -1.0], [-1.0, 1.0]])
    >>> r = np.array([[0.0, 1.0], [1.0, 0.0]])
    >>> lp = solve(t, r, np.array([0.5, 0.5]), np.array([1.0, 1.0]), CdfConstraints(2))
    >>> lp.risk, lp.policy.tolist(), lp.prices.tolist()
    (0.0, [[1.0, 0.0], [0.0, 1.0]], [[0.0, 0.0]])
    """
    from scipy import sparse
    from scipy.optimize import linprog

    n, m = r.shape
    rows = constraints.n_rows
    to_proba = sparse.eye(m, format="csr") - sparse.eye(m, k=-1, format="csr")  # pi = D F
    # Rows (j, s) of the constraints, columns (i, l): C[j, :] D[:, l] w_i t_is (kron of the two, reordered).
    by_atom = sparse.kron(sparse.csr_matrix(constraints.rows_of(to_proba.toarray().T).T), (weights[:, None] * t).T)
    order = (np.arange(m)[None, :] * n + np.arange(n)[:, None]).ravel()  # new column i*m + l <- old l*n + i
    gap = by_atom.tocsc()[:, order].tocsr()
    monotone = sparse.kron(sparse.eye(n), -to_proba[1:], format="csr")  # F_il - F_i,l-1 >= 0
    bound = np.tile(slack, rows)
    last = np.zeros(m, dtype=bool)
    last[-1] = True
    bounds = np.column_stack([np.where(np.tile(last, n), 1.0, 0.0), np.ones(n * m)])  # 0 <= F <= 1, F_last = 1
    result = linprog(
        (weights[:, None] * (r @ to_proba.toarray())).ravel(),
        A_ub=sparse.vstack([gap, -gap, monotone], format="csr"),
        b_ub=np.concatenate([bound, bound, np.zeros(n * (m - 1))]),
        bounds=bounds,
        method="highs",
    )
    if result.status != 0:
        raise RuntimeError(f"the fair LP did not solve: {result.message}")
    marginals = -result.ineqlin.marginals[: 2 * rows * t.shape[1]]  # >= 0: prices of the upper and lower rows
    half = rows * t.shape[1]
    cdf = result.x.reshape(n, m)
    return FairLP(
        risk=float(result.fun),
        policy=cdf @ to_proba.toarray().T,
        constraint_values=(gap @ result.x).reshape(rows, t.shape[1]),
        prices=(marginals[:half] - marginals[half:]).reshape(rows, t.shape[1]),
        constraints=constraints,
    )
