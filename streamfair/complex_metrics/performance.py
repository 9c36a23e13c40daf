"""Performance metrics ``psi`` of a confusion matrix (Table 1 of Narasimhan et al.; lower is better).

Each metric is a function of a short *generalized confusion vector* ``v = Phi vec(C)`` (Def. 24)
rather than of the whole tensor ``C[a, i, j] = P(A = a, Y = i, Y_hat = j)``:

* linear metrics (0-1, balanced, any cost matrix, group-dependent costs): ``v = <L, C>``;
* the recall metrics H-mean, G-mean, Q-mean and min-max: the recalls ``u_i = C_ii / pi_i``
  with the class priors ``pi`` held fixed, which makes them convex (Sec. 8.2);
* micro F1: the numerator and denominator of its ratio-of-linear form (for bisection);
* macro F1: the diagonal, column sums and row sums.

``Phi`` depends on the sample's marginals ``joint[a, i] = P(A = a, Y = i)`` (the row sums of every
achievable confusion tensor).  Calling a metric on a confusion matrix evaluates the paper's formula,
taking the marginals from the matrix itself:

>>> import numpy as np
>>> C = np.array([[0.4, 0.1], [0.2, 0.3]])            # recalls 0.8 and 0.6
>>> round(QMean()(C), 6), round(HMean()(C), 6), round(MinMax()(C), 6)
(0.316228, 0.314286, 0.4)
>>> round(ZeroOneError()(C), 6), round(MicroF1()(C), 6)
(0.3, 0.333333)
"""

from __future__ import annotations

import math

import numpy as np

from ..validation import check_array, first_entry
from .convex import minimize_on_box

__all__ = [
    "Metric",
    "CostSensitive",
    "ZeroOneError",
    "BalancedError",
    "HMean",
    "GMean",
    "QMean",
    "MinMax",
    "MicroF1",
    "MacroF1",
]


#: Absolute tolerance on ``sum(C) == 1``: looser than a probability vector's, since an estimated
#: confusion adds up rows of class probabilities and group posteriors that may each be off by ``SUM_TOLERANCE``.
CONFUSION_TOLERANCE = 1e-4


def as_tensor(confusion: np.ndarray, shape: tuple[int, int, int] | None = None) -> np.ndarray:
    """A confusion matrix ``(n, n)`` or tensor ``(m, n, n)`` as a tensor, checked to be a distribution.

    Its entries are probabilities ``P(A = a, Y = i, Y_hat = j)``: finite, non-negative and summing to
    one within :data:`CONFUSION_TOLERANCE` (counts or percentages are refused).  ``shape``: the
    tensor shape required (a matrix is accepted for ``m = 1``).

    >>> as_tensor(np.array([[40.0, 10.0], [20.0, 30.0]]))
    Traceback (most recent call last):
    ...
    ValueError: confusion must sum to 1 (a distribution, not counts), got entries summing to 100
    """
    tensor = check_array("confusion", confusion, finite=False)
    if tensor.ndim == 2:
        tensor = tensor[None]
    if tensor.ndim != 3 or tensor.shape[1] != tensor.shape[2] or tensor.shape[1] < 2 or tensor.shape[0] < 1:
        raise ValueError(f"confusion must have shape (n, n) or (m, n, n), got shape {np.shape(confusion)}")
    if shape is not None and tensor.shape != shape:
        raise ValueError(f"confusion must have shape {shape}, got shape {np.shape(confusion)}")
    bad = ~(tensor >= 0) | ~np.isfinite(tensor)
    if bad.any():
        raise ValueError(f"confusion must have finite non-negative entries; {first_entry(tensor, bad)}")
    total = float(tensor.sum())
    if abs(total - 1.0) > CONFUSION_TOLERANCE:
        raise ValueError(f"confusion must sum to 1 (a distribution, not counts), got entries summing to {total:.6g}")
    return tensor


def class_priors(joint: np.ndarray) -> np.ndarray:
    """``pi_i = sum_a joint[a, i]``, refusing empty classes (their rates are undefined)."""
    priors = joint.sum(axis=0)
    if np.any(priors <= 0):
        raise ValueError(f"every class needs a positive prior, got class priors {priors.tolist()}")
    return priors


class Metric:
    """A metric ``psi(v)`` of the generalized confusion vector ``v = Phi(joint) vec(C)``.

    Subclasses define :meth:`coordinates`, :meth:`bounds`, :meth:`value` and :meth:`gradient`;
    piecewise-linear metrics also define :meth:`pieces`, which lets the final convex programs be
    solved exactly as linear programs.
    """

    name = "metric"

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``, shape ``(d, m n n)``, for marginals ``joint`` of shape ``(m, n)``."""
        raise NotImplementedError

    def bounds(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """A box ``[lower, upper]`` that contains ``Phi vec(C)`` for every achievable ``C``."""
        d = self.coordinates(joint).shape[0]
        return np.zeros(d), np.ones(d)

    def value(self, v: np.ndarray) -> float:
        """``psi(v)``."""
        raise NotImplementedError

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """A (super-)gradient of ``psi`` at ``v``."""
        raise NotImplementedError

    def pieces(self, d: int) -> tuple[np.ndarray, np.ndarray] | None:
        """``(G, h)`` with ``psi(v) = max_k G_k . v + h_k`` if ``psi`` is piecewise linear, else ``None``."""
        return None

    def lipschitz(self, d: int) -> float:
        """An l2 Lipschitz constant of ``psi`` on its box (sets the default multiplier radii)."""
        return 1.0

    def conjugate_argmin(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """``argmin_{lower <= v <= upper} psi(v) - g . v`` (the slack step of the ellipsoid method)."""
        pieces = self.pieces(g.size)
        if pieces is not None and pieces[0].shape[0] == 1:
            return np.where(pieces[0][0] - g < 0, upper, lower).astype(float)

        def value_and_gradient(v):
            return self.value(v) - g @ v, self.gradient(v) - g

        return minimize_on_box(value_and_gradient, (lower + upper) / 2, lower, upper)

    def __call__(self, confusion: np.ndarray) -> float:
        """The metric of a confusion matrix ``(n, n)`` or tensor ``(m, n, n)``, marginals from itself.

        The confusion is a distribution: entries ``>= 0`` summing to one (see :func:`as_tensor`).
        """
        tensor = as_tensor(confusion)
        return self.value(self.coordinates(tensor.sum(axis=2)) @ tensor.ravel())

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


# ---------------------------------------------------------------------------------------- linear
class CostSensitive(Metric):
    """``psi(C) = sum L[a, i, j] C[a, i, j]``: expected cost, with one cost matrix or one per group.

    Parameters
    ----------
    costs
        ``(n, n)`` (shared by all groups) or ``(m, n, n)`` (group-dependent costs, Alg. 10), finite,
        with ``n >= 2``: ``costs[..., i, j]`` is the cost of predicting ``j`` when the label is ``i``.

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> metric = CostSensitive(np.array([[0.0, 1.0], [5.0, 0.0]]))   # a missed positive costs 5
    >>> round(metric(C), 6)                                # 0.1 * 1 + 0.2 * 5
    1.1

    One cost matrix per group, on a tensor ``C[a, i, j]``:

    >>> T = np.array([[[0.3, 0.1], [0.1, 0.0]], [[0.1, 0.2], [0.0, 0.2]]])
    >>> by_group = CostSensitive(np.array([[[0.0, 1.0], [1.0, 0.0]], [[0.0, 2.0], [2.0, 0.0]]]))
    >>> round(by_group(T), 6)                              # 0.2 * 1 + 0.2 * 2
    0.6
    """

    name = "cost"

    def __init__(self, costs: np.ndarray):
        costs = check_array("costs", costs, ("n", "n"), ("m", "n", "n"))
        if costs.shape[-1] != costs.shape[-2] or costs.shape[-1] < 2 or costs.shape[0] < 1:
            raise ValueError(f"costs must be a finite (n, n) or (m, n, n) array with n >= 2, got shape {costs.shape}")
        self.costs = costs

    def _costs(self, joint: np.ndarray) -> np.ndarray:
        m, n = joint.shape
        if self.costs.shape[-1] != n or (self.costs.ndim == 3 and self.costs.shape[0] != m):
            raise ValueError(f"costs of shape {self.costs.shape} do not fit {m} group(s) and {n} classes")
        return np.broadcast_to(self.costs, (m, n, n))

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: the costs as one row, so that ``v = <L, C>`` is the expected cost.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (1, m n n)
            The costs broadcast to every group, flattened.
        """
        return self._costs(joint).reshape(1, -1).copy()

    def bounds(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The smallest and largest cost, between which every expected cost lies.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        lower, upper : ndarray of shape (1,)
            The box of ``v``.
        """
        costs = self._costs(joint)
        return np.array([costs.min()]), np.array([costs.max()])

    def value(self, v: np.ndarray) -> float:
        """``psi(v) = v_0``, the expected cost.

        Parameters
        ----------
        v
            The generalized confusion vector, shape ``(1,)``.

        Returns
        -------
        float
            The expected cost.
        """
        return float(v[0])

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """The gradient of ``psi(v) = v_0``: ``[1.0]``.

        Parameters
        ----------
        v
            The generalized confusion vector, shape ``(1,)``.

        Returns
        -------
        ndarray of shape (1,)
            Ones.
        """
        return np.ones(1)

    def pieces(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """One linear piece ``psi(v) = 1 . v + 0``.

        Parameters
        ----------
        d
            The dimension of ``v`` (1).

        Returns
        -------
        G : ndarray of shape (1, 1)
            Ones.
        h : ndarray of shape (1,)
            Zeros.
        """
        return np.ones((1, 1)), np.zeros(1)

    def __repr__(self) -> str:
        return f"CostSensitive(costs={self.costs.tolist()})"


class _DerivedCosts(CostSensitive):
    """A cost-sensitive metric whose costs follow from the sample's shape and marginals (no argument)."""

    def __init__(self) -> None:
        self.costs = np.empty((0, 0))

    __repr__ = Metric.__repr__


class ZeroOneError(_DerivedCosts):
    """The 0-1 loss ``1 - sum_i C_ii``.

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> round(ZeroOneError()(C), 6)                        # the off-diagonal mass
    0.2
    """

    name = "0-1"

    def _costs(self, joint: np.ndarray) -> np.ndarray:
        m, n = joint.shape
        return np.broadcast_to(1.0 - np.eye(n), (m, n, n))


class BalancedError(_DerivedCosts):
    """The balanced 0-1 loss ``1 - (1/n) sum_i C_ii / pi_i`` (costs ``1(i != j) / (n pi_i)``).

    Examples
    --------
    The 0-1 error is 0.2, but the recalls are 1 and 0.5:

    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> round(BalancedError()(C), 6)                       # 1 - (1 + 0.5) / 2
    0.25
    """

    name = "balanced"

    def _costs(self, joint: np.ndarray) -> np.ndarray:
        m, n = joint.shape
        costs = (1.0 - np.eye(n)) / (n * class_priors(joint))[:, None]
        return np.broadcast_to(costs, (m, n, n))


# ---------------------------------------------------------------------------------------- recalls
class RecallMetric(Metric):
    """A metric of the recalls ``u_i = C_ii / pi_i`` (priors fixed by the sample)."""

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        m, n = joint.shape
        priors = class_priors(joint)
        phi = np.zeros((n, m, n, n))
        for i in range(n):
            phi[i, :, i, i] = 1.0 / priors[i]
        return phi.reshape(n, -1)


class HMean(RecallMetric):
    """``1 - n / sum_i (1 / u_i)``: one minus the harmonic mean of the recalls.

    Examples
    --------
    The recalls are ``v = (1, 0.5)``:

    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> metric = HMean()
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.tolist()
    [1.0, 0.5]
    >>> round(metric(C), 6)                                # 1 - 2 / (1 + 2)
    0.333333
    >>> metric.gradient(v).round(6).tolist()               # -2 (1/3, 2/3)^2
    [-0.222222, -0.888889]
    """

    name = "H-mean"

    def lipschitz(self, d: int) -> float:
        """``d``: the gradient is ``-d q^2`` with ``q`` on the simplex, of norm at most ``d``.

        Parameters
        ----------
        d
            The number of recalls.

        Returns
        -------
        float
            The Lipschitz constant.
        """
        return float(d)  # the gradient is -d q^2 with q on the simplex

    def value(self, v: np.ndarray) -> float:
        """``1 - n / sum_i (1 / u_i)`` (1 if a recall is zero).

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        float
            The metric.
        """
        with np.errstate(divide="ignore"):
            total = np.sum(1.0 / np.maximum(v, 0.0))
        return float(1.0 - v.size / total)

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """``-n q^2`` with ``q_i = (1 / u_i) / sum_k (1 / u_k)`` (recalls floored at ``1e-12``).

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The gradient.
        """
        inverse = 1.0 / np.maximum(v, 1e-12)
        share = inverse / inverse.sum()  # (1/u_i) / sum_k (1/u_k), finite even at u_i = 0
        return -v.size * share**2


class GMean(RecallMetric):
    """``1 - (prod_i u_i)^(1/n)``: one minus the geometric mean of the recalls.

    Examples
    --------
    The recalls are ``v = (1, 0.5)``:

    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> metric = GMean()
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.tolist()
    [1.0, 0.5]
    >>> round(metric(C), 6)                                # 1 - sqrt(0.5)
    0.292893
    >>> metric.gradient(v).round(6).tolist()               # -sqrt(0.5) / (2 u)
    [-0.353553, -0.707107]
    """

    name = "G-mean"
    #: Recalls are floored here in the gradient (the gradient is unbounded at zero recall).
    floor = 1e-6

    def value(self, v: np.ndarray) -> float:
        """``1 - (prod_i u_i)^(1/n)``.

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        float
            The metric.
        """
        return float(1.0 - np.prod(np.maximum(v, 0.0)) ** (1.0 / v.size))

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """``-(prod_k u_k)^(1/n) / (n u_i)``, with the recalls floored at :attr:`floor`.

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The gradient.
        """
        u = np.maximum(v, self.floor)
        mean = float(np.exp(np.log(u).mean()))
        return -mean / (v.size * u)


class QMean(RecallMetric):
    """``sqrt((1/n) sum_i (1 - u_i)^2)``: the quadratic mean of the per-class errors.

    Examples
    --------
    The recalls are ``v = (1, 0.5)``:

    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> metric = QMean()
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.tolist()
    [1.0, 0.5]
    >>> round(metric(C), 6)                                # sqrt((0 + 0.25) / 2)
    0.353553
    >>> (metric.gradient(v) + 0.0).round(6).tolist()       # -(1 - u) / (n psi)
    [0.0, -0.707107]
    """

    name = "Q-mean"

    def lipschitz(self, d: int) -> float:
        """``1 / sqrt(d)``: the gradient norm is exactly that away from ``psi = 0``.

        Parameters
        ----------
        d
            The number of recalls.

        Returns
        -------
        float
            The Lipschitz constant.
        """
        return 1.0 / math.sqrt(d)  # the gradient norm is exactly 1 / sqrt(d) away from psi = 0

    def value(self, v: np.ndarray) -> float:
        """``sqrt((1/n) sum_i (1 - u_i)^2)``.

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        float
            The metric.
        """
        return float(np.sqrt(np.mean((1.0 - v) ** 2)))

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """``-(1 - u) / (n psi(u))``, and zero where ``psi = 0`` (all recalls 1).

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The gradient.
        """
        psi = self.value(v)
        return -(1.0 - v) / (v.size * psi) if psi > 0 else np.zeros(v.size)

    def conjugate_argmin(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Closed form on ``[0, 1]^n`` (derived): with ``z = 1 - u``, minimize ``||z|| / sqrt(n) + g . z``.

        ``z = 0`` if ``||min(g, 0)|| <= 1 / sqrt(n)``; otherwise ``z = clip(-g s, 0, 1)`` at the root
        ``s > 0`` of ``s = sqrt(n) ||clip(-g s, 0, 1)||`` (the KKT conditions), found by bisection.

        Parameters
        ----------
        g
            The linear term, shape ``(n,)``.
        lower, upper
            The box of the recalls; taken to be ``[0, 1]^n`` (the recalls' own box), not read.

        Returns
        -------
        ndarray of shape (n,)
            The minimizing recalls ``u = 1 - z``.

        Examples
        --------
        >>> import numpy as np
        >>> u = QMean().conjugate_argmin(np.array([-2.0, -0.3]), np.zeros(2), np.ones(2))
        >>> u.round(4).tolist()                            # z = (1, sqrt(0.18 / 0.82))
        [0.0, 0.5315]
        """
        n = g.size
        negative = np.maximum(-g, 0.0)
        if np.linalg.norm(negative) * math.sqrt(n) <= 1.0:
            return np.ones(n)
        low, high = 0.0, math.sqrt(n) * math.sqrt(np.count_nonzero(negative)) + 1.0
        for _ in range(100):
            s = (low + high) / 2
            if math.sqrt(n) * np.linalg.norm(np.minimum(negative * s, 1.0)) > s:
                low = s
            else:
                high = s
        return 1.0 - np.minimum(negative * low, 1.0)


class MinMax(RecallMetric):
    """``max_i (1 - u_i)``: the worst per-class error (convex, not smooth).

    Examples
    --------
    The recalls are ``v = (1, 0.5)``:

    >>> import numpy as np
    >>> C = np.array([[0.6, 0.0], [0.2, 0.2]])
    >>> metric = MinMax()
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.tolist()
    [1.0, 0.5]
    >>> round(metric(C), 6), metric.gradient(v).tolist()  # the worst class is class 1
    (0.5, [0.0, -1.0])
    >>> G, h = metric.pieces(2)
    >>> float(np.max(G @ v + h))                           # psi as a maximum of linear pieces
    0.5
    """

    name = "min-max"

    def value(self, v: np.ndarray) -> float:
        """``max_i (1 - u_i)``.

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        float
            The metric.
        """
        return float(np.max(1.0 - v))

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """A subgradient: ``-e_i`` at the first smallest recall ``u_i``.

        Parameters
        ----------
        v
            The recalls ``u``, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The subgradient.
        """
        g = np.zeros(v.size)
        g[int(np.argmin(v))] = -1.0
        return g

    def pieces(self, d: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``d`` pieces ``1 - u_i``.

        Parameters
        ----------
        d
            The number of recalls.

        Returns
        -------
        G : ndarray of shape (d, d)
            ``-I``.
        h : ndarray of shape (d,)
            Ones.
        """
        return -np.eye(d), np.ones(d)

    def conjugate_argmin(self, g: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Closed form on ``[0, 1]^n``: with ``t = min_i u_i``, ``u_i = 1`` if ``g_i > 0`` else ``t``.

        ``t`` is 1 if ``1 + sum_{g_i <= 0} g_i > 0``, else 0.

        Parameters
        ----------
        g
            The linear term, shape ``(n,)``.
        lower, upper
            The box of the recalls; taken to be ``[0, 1]^n`` (the recalls' own box), not read.

        Returns
        -------
        ndarray of shape (n,)
            The minimizing recalls.
        """
        negative = g <= 0
        if not negative.any():
            return np.ones(g.size)
        t = 1.0 if 1.0 + g[negative].sum() > 0 else 0.0
        return np.where(negative, t, 1.0)


# ---------------------------------------------------------------------------------------- F1
class MicroF1(Metric):
    """``1 - 2 sum_{i != k} C_ii / (2 - sum_i C_ki - sum_i C_ik)`` with default class ``k`` (Ex. 4).

    Ratio-of-linear: ``v = (<B - A, C>, <B, C>)`` and ``psi = v_0 / v_1``, with
    ``A = 2 diag(1 - e_k)`` and ``B = 2 11^T - e_k 1^T - 1 e_k^T`` (Prop. 8, bisection).

    Parameters
    ----------
    default_class
        ``k``, the class left out of the F1 (e.g. the negative class of a binary problem).

    Examples
    --------
    With two classes and ``k = 0`` it is one minus the F1 score of class 1, here of precision
    0.75 and recall 0.6:

    >>> import numpy as np
    >>> C = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> metric = MicroF1(default_class=0)
    >>> round(metric(C), 6)                                # 1 - 2 (0.75 * 0.6) / 1.35
    0.333333
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.round(6).tolist(), round(metric.value(v), 6)     # psi = v_0 / v_1
    ([0.3, 0.9], 0.333333)
    >>> round(MicroF1(default_class=1)(C), 6)              # F1 of class 0: 0.8 / 1.1
    0.272727
    """

    name = "micro-F1"
    ratio = True

    def __init__(self, default_class: int = 0):
        if isinstance(default_class, bool) or not isinstance(default_class, (int, np.integer)) or default_class < 0:
            raise ValueError(f"default_class must be an integer >= 0, got {default_class!r}")
        self.default_class = int(default_class)

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: the rows ``B - A`` and ``B`` of the ratio, for every group.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (2, m n n)
            The numerator's and the denominator's coefficients.

        Raises
        ------
        ValueError
            If :attr:`default_class` is not one of the ``n`` classes.
        """
        m, n = joint.shape
        k = self.default_class
        if k >= n:
            raise ValueError(f"default_class must be < n_classes={n}, got {k}")
        a = 2.0 * np.diag(np.where(np.arange(n) == k, 0.0, 1.0))
        b = np.full((n, n), 2.0)
        b[k, :] -= 1.0
        b[:, k] -= 1.0
        rows = np.stack([b - a, b])
        return np.broadcast_to(rows[:, None], (2, m, n, n)).reshape(2, -1).copy()

    def bounds(self, joint: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The box ``[0, 2]^2`` of the numerator and the denominator.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)`` (not read).

        Returns
        -------
        lower, upper : ndarray of shape (2,)
            Zeros and twos.
        """
        return np.zeros(2), np.full(2, 2.0)

    def value(self, v: np.ndarray) -> float:
        """``v_0 / v_1`` (1 if the denominator is 0).

        Parameters
        ----------
        v
            The numerator and the denominator, shape ``(2,)``.

        Returns
        -------
        float
            The metric.
        """
        return float(v[0] / v[1]) if v[1] > 0 else 1.0

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """``(1 / v_1, -v_0 / v_1^2)``, with the denominator floored at ``1e-12``.

        Parameters
        ----------
        v
            The numerator and the denominator, shape ``(2,)``.

        Returns
        -------
        ndarray of shape (2,)
            The gradient.
        """
        denominator = max(v[1], 1e-12)
        return np.array([1.0 / denominator, -v[0] / denominator**2])

    def __repr__(self) -> str:
        return f"MicroF1(default_class={self.default_class})"


class MacroF1(Metric):
    """``1 - (1/n) sum_i 2 C_ii / (sum_j C_ij + sum_j C_ji)``: one minus the mean per-class F1.

    ``v = (diagonal, column sums, row sums)``.  Not convex: the paper assigns it no algorithm; the
    Frank-Wolfe and GDA routines run on it as heuristics.

    Examples
    --------
    The per-class F1 scores are ``0.8 / 1.1`` and ``0.6 / 0.9``:

    >>> import numpy as np
    >>> C = np.array([[0.4, 0.1], [0.2, 0.3]])
    >>> metric = MacroF1()
    >>> round(metric(C), 6)                                # 1 - (0.727273 + 0.666667) / 2
    0.30303
    >>> v = metric.coordinates(C.sum(axis=1)[None]) @ C.ravel()
    >>> v.round(6).tolist()                                # diagonal, column sums, row sums
    [0.4, 0.3, 0.6, 0.4, 0.5, 0.5]
    """

    name = "macro-F1"

    def coordinates(self, joint: np.ndarray) -> np.ndarray:
        """``Phi``: the diagonal, the column sums and the row sums of ``sum_a C[a]``.

        Parameters
        ----------
        joint
            The marginals ``P(A = a, Y = i)``, shape ``(m, n)``.

        Returns
        -------
        ndarray of shape (3 n, m n n)
            The three blocks, in that order.
        """
        m, n = joint.shape
        phi = np.zeros((3, n, m, n, n))
        for i in range(n):
            phi[0, i, :, i, i] = 1.0
            phi[1, i, :, :, i] = 1.0
            phi[2, i, :, i, :] = 1.0
        return phi.reshape(3 * n, -1)

    def value(self, v: np.ndarray) -> float:
        """``1 - (1/n) sum_i 2 diagonal_i / (rows_i + columns_i)`` (a class never seen nor predicted scores 0).

        Parameters
        ----------
        v
            The diagonal, the column sums and the row sums, shape ``(3 n,)``.

        Returns
        -------
        float
            The metric.
        """
        diagonal, columns, rows = np.split(v, 3)
        total = rows + columns
        scores = np.divide(2.0 * diagonal, total, out=np.zeros_like(total), where=total > 0)
        return float(1.0 - scores.mean())

    def gradient(self, v: np.ndarray) -> np.ndarray:
        """The gradient of :meth:`value` (the totals floored at ``1e-12``).

        Parameters
        ----------
        v
            The diagonal, the column sums and the row sums, shape ``(3 n,)``.

        Returns
        -------
        ndarray of shape (3 n,)
            ``-2 / (n t_i)`` on the diagonal and ``2 C_ii / (n t_i^2)`` on both sums, with
            ``t_i = rows_i + columns_i``.
        """
        diagonal, columns, rows = np.split(v, 3)
        n = diagonal.size
        total = np.maximum(rows + columns, 1e-12)
        d_total = 2.0 * diagonal / (n * total**2)
        return np.concatenate([-2.0 / (n * total), d_total, d_total])

