"""The two families of demographic-parity constraints the dual can enforce.

Both bound, for every group ``s``, linear functionals of the randomized predictor ``pi`` that are
zero exactly when the group's prediction law equals the overall one.  With the group features
``t_s(x) = 1 - tau_s(x) / p_s`` (so that ``E[pi(l | X) t_s(X)] = P(Y_hat = l) - P(Y_hat = l | S = s)``):

* :class:`AtomConstraints` -- the paper's: ``|P(Y_hat = l) - P(Y_hat = l | S = s)| <= eps_s`` for
  every atom ``l``.  The KS distance this allows grows with the number of atoms.
* :class:`CdfConstraints` -- the Kolmogorov-Smirnov form: ``|P(Y_hat <= y_k) - P(Y_hat <= y_k | S = s)|
  <= ks_s`` for every threshold ``k`` between consecutive atoms.  Its slack *is* the KS distance
  that :func:`~streamfair.evaluate` and the dashboards report.

Each row ``k`` of the constraint matrix ``C`` picks the atoms it sums (one atom for the per-atom
family, atoms ``0..k`` for the CDF family).  The dual then has one ``(Lambda, V)`` pair per row,
the stochastic gradient is ``+-C E[pi t] + slack`` and the scores of the policy are
``(C^T (Lambda - V)) t(x) - r(x)``: the same entropic dual as the paper's, with cumulative features
(Chzhen, Hebiri & Taturyan, NeurIPS 2024, eq. 5, with ``A(x)`` multiplied by ``C``).  Both maps are
O(m K), so the per-sample cost is unchanged.

>>> import numpy as np
>>> cdf = CdfConstraints(4)
>>> cdf.n_rows
3
>>> cdf.rows_of(np.array([0.1, 0.2, 0.3, 0.4])).round(2)        # C pi: the CDF below each threshold
array([0.1, 0.3, 0.6])
>>> cdf.atoms_of(np.array([[1.0], [2.0], [4.0]]))[:, 0]          # C^T d: what each atom's score gets
array([7., 6., 4., 0.])
"""

from __future__ import annotations

import numpy as np

__all__ = ["AtomConstraints", "CdfConstraints", "CONSTRAINTS", "Constraints"]


class AtomConstraints:
    """One constraint per atom: ``C`` is the identity (the paper's constraint family).

    >>> AtomConstraints(3).rows_of(np.array([0.2, 0.5, 0.3])).tolist()
    [0.2, 0.5, 0.3]
    """

    name = "atom"

    def __init__(self, n_atoms: int):
        self.n_rows = n_atoms

    def rows_of(self, proba: np.ndarray) -> np.ndarray:
        """``C pi`` along the last axis (the identity: ``proba`` itself, no copy)."""
        return proba

    def atoms_of(self, dual: np.ndarray) -> np.ndarray:
        """``C^T d`` along the first axis (the identity: ``dual`` itself, no copy)."""
        return dual


class CdfConstraints:
    """One constraint per threshold between consecutive atoms: ``C[k, l] = 1(l <= k)``, ``k < m - 1``.

    The last threshold (all atoms) is left out: its row is ``E[t_s] = 0`` whatever ``pi`` is.

    >>> c = CdfConstraints(3)
    >>> c.atoms_of(np.array([[2.0], [3.0]]))[:, 0].tolist()
    [5.0, 3.0, 0.0]
    """

    name = "cdf"

    def __init__(self, n_atoms: int):
        if n_atoms < 2:
            raise ValueError(f"the CDF constraints need at least 2 atoms, got {n_atoms}")
        self.n_atoms = n_atoms
        self.n_rows = n_atoms - 1

    def rows_of(self, proba: np.ndarray) -> np.ndarray:
        """``C pi`` along the last axis: the CDF at each threshold, shape ``(..., m - 1)``."""
        return np.cumsum(proba, axis=-1)[..., :-1]

    def atoms_of(self, dual: np.ndarray) -> np.ndarray:
        """``C^T d`` along the first axis: atom ``l`` gets ``sum_{k >= l} d_k`` (0 for the last atom)."""
        atoms = np.zeros((self.n_atoms,) + dual.shape[1:])
        np.cumsum(dual[::-1], axis=0, out=atoms[-2::-1])
        return atoms


#: The constraint families by name.
#: A constraint family: the post-processor only uses ``name``, ``n_rows``, ``rows_of`` and ``atoms_of``.
Constraints = AtomConstraints | CdfConstraints
CONSTRAINTS: dict[str, type[Constraints]] = {"atom": AtomConstraints, "cdf": CdfConstraints}
