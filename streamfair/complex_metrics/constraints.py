"""Constraints ``phi(C) <= 0`` on a confusion tensor (Table 1, right; Examples 5-8).

Every constraint here is *linear* in its own generalized confusion vector ``v = Phi(joint) vec(C)``
once the marginals (``pi``, ``mu_a``, ``mu_{a,i}``) are fixed by the sample: the max-of-absolute
forms of the paper are written as their separate one-sided rows ``A v <= b`` (Sec. 2.10 notes that
the pruning LP is exact for such rows).  Calling a constraint on a confusion tensor returns the
paper's ``phi(C)``, i.e. ``max(A v - b)``: for coverage ``max_i |sum_j C_ji - tau_i| - eps``.

>>> import numpy as np
>>> C = np.array([[[0.3, 0.1], [0.1, 0.0]],        # group 0: P(Y_hat = 1 | A = 0) = 0.2
...               [[0.1, 0.2], [0.0, 0.2]]])       # group 1: P(Y_hat = 1 | A = 1) = 0.8
>>> round(DemographicParity(eps=0.05)(C), 6)         # |0.2 - 0.5| - 0.05
0.25
>>> round(Coverage(eps=0.01, target=[0.5, 0.5])(C), 6)   # coverage (0.5, 0.5): met with slack
-0.01
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_at_most, check_integer, check_non_negative, show
from .performance import as_tensor, class_priors

__all__ = ["LinearConstraint", "Coverage", "DemographicParity", "EqualOpportunity", "EqualizedOdds", "Precision"]


def _check_eps(eps) -> float:
    """The slack of a constraint on rates: a finite number in ``[0, 1]``."""
    check_at_most("eps", check_non_negative("eps", eps), 1.0)  # a gap between two rates is at most 1
    return float(eps)


def _check_target(target) -> np.ndarray:
    """Coverage targets: prediction rates in ``[0, 1]``, one per class (at least two)."""
    rates = check_array("target", target, finite=False)
    if rates.ndim != 1 or rates.size < 2:
        raise ValueError(f"target must be a 1-d sequence of rates, one per class, got shape {rates.shape}")
    if not np.all(np.isfinite(rates)) or rates.min() < 0 or rates.max() > 1:
        raise ValueError(f"target must be finite rates in [0, 1], got {show(rates)}")
    return rates


def _two_sided(d: int, centre: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``|v - centre| <= eps``: ``v <= centre + eps`` and ``-v <= eps - centre``."""
    return np.vstack([np.eye(d), -np.eye(d)]), np.concatenate([centre + eps, eps - centre])


def _group_priors(joint: np.ndarray, name: str) -> np.ndarray:
    if joint.shape[0] < 2:
        raise ValueError(f"{name} needs at least 2 groups, got {joint.shape[0]}")
    if np.any(joint.sum(axis=1) <= 0):
        raise ValueError(f"{name} needs every group to have samples, got group masses {joint.sum(axis=1).tolist()}")
    return joint.sum(axis=1)


class LinearConstraint:
    """Rows ``A v <= b`` on the coordinates ``v = Phi(joint) vec(C)``."""

    name = "constraint"
    #: Whether ``Phi`` and the rows can be estimated without labels (from predictions and groups).
    label_free = False

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``, shape ``(d, m n n)``."""
        raise NotImplementedError

    def bounds(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A box containing ``v`` for every achievable ``C`` (differences of rates lie in [-1, 1])."""
        d = self.coordinates(joint).shape[0]
        return -np.ones(d), np.ones(d)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(A, b)``: the constraint holds iff ``A v <= b``."""
        raise NotImplementedError

    def __call__(self, confusion: np.ndarray) -> float:
        """The paper's ``phi(C) = max(A v - b)`` (feasible iff ``<= 0``), marginals from ``C``.

        The confusion is a distribution: entries ``>= 0`` summing to one (see :func:`.as_tensor`).
        """
        tensor = as_tensor(confusion)
        joint = tensor.sum(axis=2)
        a, b = self.rows(joint)
        return float(np.max(a @ (self.coordinates(joint) @ tensor.ravel()) - b))


class Coverage(LinearConstraint):
    """``max_j |sum_i C_ij - target_j| <= eps`` (Ex. 6); ``target=None`` uses the class priors.

    Parameters
    ----------
    eps
        The slack, in ``[0, 1]``: the largest gap allowed between two rates.
    target
        The prediction rates to meet, one per class, each in ``[0, 1]``; ``None``: the sample's
        class priors ``pi`` (then the constraint needs labels).

    Examples
    --------
    The classifier predicts the classes at rates ``(0.6, 0.4)``, the priors are ``(0.5, 0.5)``:

    >>> import numpy as np
    >>> C = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> coverage = Coverage(eps=0.05)
    >>> joint = C.sum(axis=1)[None]
    >>> v = coverage.coordinates(joint) @ C.ravel()
    >>> v.round(6).tolist()
    [0.6, 0.4]
    >>> A, b = coverage.rows(joint)                        # |v - pi| <= 0.05 as four rows
    >>> round(float(np.max(A @ v - b)), 6), round(coverage(C), 6)     # 0.1 - 0.05
    (0.05, 0.05)
    >>> round(Coverage(eps=0.1, target=[0.6, 0.4])(C), 6)
    -0.1
    """

    name = "coverage"

    def __init__(self, eps: float, target: ArrayLike | None = None):
        self.eps = _check_eps(eps)
        self.target = None if target is None else _check_target(target)
        self.label_free = target is not None

    def _target(self, joint: np.ndarray) -> np.ndarray:
        if self.target is None:
            return class_priors(joint)
        if self.target.shape != (joint.shape[1],):
            raise ValueError(f"target must have {joint.shape[1]} entries, got {self.target.tolist()}")
        return self.target

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: the prediction rates ``v_j = sum_{a,i} C[a, i, j]``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (n, m n n)
            ``Phi``.
        """
        m, n = joint.shape
        phi = np.zeros((n, m, n, n))
        for j in range(n):
            phi[j, :, :, j] = 1.0
        return phi.reshape(n, -1)

    def bounds(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The box ``[0, 1]^n`` of the prediction rates.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        lower, upper : ndarray of shape (n,)
            Zeros and ones.
        """
        n = joint.shape[1]
        return np.zeros(n), np.ones(n)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``|v - target| <= eps`` as ``v <= target + eps`` and ``-v <= eps - target``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        A : ndarray of shape (2 n, n)
            One row per one-sided constraint.
        b : ndarray of shape (2 n,)
            The right-hand sides.
        """
        return _two_sided(joint.shape[1], self._target(joint), self.eps)

    def __repr__(self) -> str:
        target = None if self.target is None else self.target.tolist()
        return f"Coverage(eps={self.eps}, target={target})"


class DemographicParity(LinearConstraint):
    """``max_{a,j} |P(Y_hat = j | A = a) - P(Y_hat = j)| <= eps`` (Ex. 7; label-free).

    Parameters
    ----------
    eps
        The slack, in ``[0, 1]``: the largest gap allowed between two rates.

    Examples
    --------
    Group 0 predicts class 1 at rate 0.2, group 1 at rate 0.8, both at 0.5 overall:

    >>> import numpy as np
    >>> C = np.array([[[0.3, 0.1], [0.1, 0.0]], [[0.1, 0.2], [0.0, 0.2]]])
    >>> parity = DemographicParity(eps=0.1)
    >>> v = parity.coordinates(C.sum(axis=2)) @ C.ravel()
    >>> v.round(6).tolist()                                # v[a, j], group by group
    [0.3, -0.3, -0.3, 0.3]
    >>> round(parity(C), 6)                                # 0.3 - 0.1
    0.2

    A constant classifier is exactly fair:

    >>> constant = np.zeros((2, 2, 2))
    >>> constant[:, :, 0] = C.sum(axis=2)
    >>> round(parity(constant), 6)
    -0.1
    """

    name = "demographic parity"
    label_free = True

    def __init__(self, eps: float):
        self.eps = _check_eps(eps)

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: ``v[a, j] = P(Y_hat = j | A = a) - P(Y_hat = j)``, with ``P(A = a)`` from ``joint``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (m n, m n n)
            ``Phi``.

        Raises
        ------
        ValueError
            If there are fewer than 2 groups or a group has no mass.
        """
        m, n = joint.shape
        mass = _group_priors(joint, "demographic parity")
        phi = np.zeros((m, n, m, n, n))
        for a in range(m):
            for j in range(n):
                phi[a, j, :, :, j] = -1.0
                phi[a, j, a, :, j] += 1.0 / mass[a]
        return phi.reshape(m * n, -1)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``|v| <= eps`` as ``v <= eps`` and ``-v <= eps``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        A : ndarray of shape (2 m n, m n)
            One row per one-sided constraint.
        b : ndarray of shape (2 m n,)
            The right-hand sides.
        """
        d = joint.size
        return _two_sided(d, np.zeros(d), self.eps)

    def __repr__(self) -> str:
        return f"DemographicParity(eps={self.eps})"


class EqualOpportunity(LinearConstraint):
    """``max_a |TPR_a - TPR| <= eps`` for the ``positive`` class (Ex. 8, binary or one-vs-rest).

    ``TPR_a = P(Y_hat = c | Y = c, A = a)`` and ``TPR = P(Y_hat = c | Y = c)`` for ``c = positive``.

    Parameters
    ----------
    eps
        The slack, in ``[0, 1]``: the largest gap allowed between two rates.
    positive
        The class ``c`` whose true-positive rates are equalized, an integer ``>= 0`` (below the
        number of classes of the sample).

    Examples
    --------
    The true-positive rates are 0.75 in group 0, 0.5 in group 1 and 0.625 overall:

    >>> import numpy as np
    >>> C = np.array([[[0.2, 0.1], [0.05, 0.15]], [[0.2, 0.1], [0.1, 0.1]]])
    >>> opportunity = EqualOpportunity(eps=0.1)
    >>> v = opportunity.coordinates(C.sum(axis=2)) @ C.ravel()
    >>> v.round(6).tolist()                                # TPR_a - TPR
    [0.125, -0.125]
    >>> round(opportunity(C), 6), round(EqualOpportunity(eps=0.2)(C), 6)
    (0.025, -0.075)
    """

    name = "equal opportunity"

    def __init__(self, eps: float, positive: int = 1):
        self.eps = _check_eps(eps)
        self.positive = check_integer("positive", positive, 0)

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: ``v_a = TPR_a - TPR``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (m, m n n)
            ``Phi``.

        Raises
        ------
        ValueError
            If ``positive`` is not a class, there are fewer than 2 groups, or a group has no positives.
        """
        m, n = joint.shape
        c = self.positive
        if not 0 <= c < n:
            raise ValueError(f"positive must be a class in 0..{n - 1}, got {c}")
        _group_priors(joint, "equal opportunity")
        if np.any(joint[:, c] <= 0):
            raise ValueError(f"equal opportunity needs positives in every group, got {joint[:, c].tolist()}")
        phi = np.zeros((m, m, n, n))
        for a in range(m):
            phi[a, :, c, c] = -1.0 / joint[:, c].sum()
            phi[a, a, c, c] += 1.0 / joint[a, c]
        return phi.reshape(m, -1)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``|v| <= eps`` as ``v <= eps`` and ``-v <= eps``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        A : ndarray of shape (2 m, m)
            One row per one-sided constraint.
        b : ndarray of shape (2 m,)
            The right-hand sides.
        """
        m = joint.shape[0]
        return _two_sided(m, np.zeros(m), self.eps)

    def __repr__(self) -> str:
        return f"EqualOpportunity(eps={self.eps}, positive={self.positive})"


class EqualizedOdds(LinearConstraint):
    """``max_{a,i,j} |P(Y_hat = j | Y = i, A = a) - P(Y_hat = j | Y = i)| <= eps``.

    Parameters
    ----------
    eps
        The slack, in ``[0, 1]``: the largest gap allowed between two rates.

    Examples
    --------
    Given ``Y = 0``, both groups predict the classes at rates ``(2/3, 1/3)``; given ``Y = 1``, group
    0 at ``(0.25, 0.75)``, group 1 at ``(0.5, 0.5)`` and the whole sample at ``(0.375, 0.625)``:

    >>> import numpy as np
    >>> C = np.array([[[0.2, 0.1], [0.05, 0.15]], [[0.2, 0.1], [0.1, 0.1]]])
    >>> odds = EqualizedOdds(eps=0.1)
    >>> v = odds.coordinates(C.sum(axis=2)) @ C.ravel()
    >>> (v.round(6) + 0.0).tolist()                        # v[a, i, j]
    [0.0, 0.0, -0.125, 0.125, 0.0, 0.0, 0.125, -0.125]
    >>> round(odds(C), 6)                                  # 0.125 - 0.1
    0.025
    """

    name = "equalized odds"

    def __init__(self, eps: float):
        self.eps = _check_eps(eps)

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: ``v[a, i, j] = P(Y_hat = j | Y = i, A = a) - P(Y_hat = j | Y = i)``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (m n n, m n n)
            ``Phi``.

        Raises
        ------
        ValueError
            If there are fewer than 2 groups or a (group, class) cell is empty.
        """
        m, n = joint.shape
        _group_priors(joint, "equalized odds")
        if np.any(joint <= 0):
            raise ValueError(f"equalized odds needs every (group, class) cell to be non-empty, got {joint.tolist()}")
        priors = joint.sum(axis=0)
        phi = np.zeros((m, n, n, m, n, n))
        for a in range(m):
            for i in range(n):
                for j in range(n):
                    phi[a, i, j, :, i, j] = -1.0 / priors[i]
                    phi[a, i, j, a, i, j] += 1.0 / joint[a, i]
        return phi.reshape(m * n * n, -1)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``|v| <= eps`` as ``v <= eps`` and ``-v <= eps``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        A : ndarray of shape (2 m n n, m n n)
            One row per one-sided constraint.
        b : ndarray of shape (2 m n n,)
            The right-hand sides.
        """
        d = joint.size * joint.shape[1]
        return _two_sided(d, np.zeros(d), self.eps)

    def __repr__(self) -> str:
        return f"EqualizedOdds(eps={self.eps})"


class Precision(LinearConstraint):
    """Precision of class ``c`` at least ``minimum``: ``minimum sum_i C_ic - C_cc <= 0`` (Ex. 5, linear form).

    The first argument, ``cls``, is the class ``c``, in ``0..n-1``.

    Parameters
    ----------
    minimum
        The smallest precision allowed, in ``[0, 1]``.

    Examples
    --------
    Class 1 is predicted with mass 0.4, correctly with mass 0.3: a precision of 0.75.

    >>> import numpy as np
    >>> C = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> round(Precision(cls=1, minimum=0.8)(C), 6)         # 0.8 * 0.4 - 0.3
    0.02
    >>> round(Precision(cls=1, minimum=0.7)(C), 6)
    -0.02
    """

    name = "precision"

    def __init__(self, cls: int, minimum: float):
        self.cls = check_integer("cls", cls, 0)
        number = isinstance(minimum, (int, float, np.floating, np.integer)) and not isinstance(minimum, bool)
        if not number or not 0 <= minimum <= 1:
            raise ValueError(f"minimum must be a number in [0, 1], got {minimum!r}")
        self.minimum = float(minimum)

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: the single coordinate ``v = minimum sum_{a,i} C[a, i, c] - sum_a C[a, c, c]``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (1, m n n)
            ``Phi``.

        Raises
        ------
        ValueError
            If ``cls`` is not one of the ``n`` classes.
        """
        m, n = joint.shape
        if not 0 <= self.cls < n:
            raise ValueError(f"cls must be a class in 0..{n - 1}, got {self.cls}")
        phi = np.zeros((1, m, n, n))
        phi[0, :, :, self.cls] = self.minimum
        phi[0, :, self.cls, self.cls] -= 1.0
        return phi.reshape(1, -1)

    def rows(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The single row ``v <= 0``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        A : ndarray of shape (1, 1)
            One row per one-sided constraint.
        b : ndarray of shape (1,)
            The right-hand sides.
        """
        return np.ones((1, 1)), np.zeros(1)

    def __repr__(self) -> str:
        return f"Precision(cls={self.cls}, minimum={self.minimum})"
