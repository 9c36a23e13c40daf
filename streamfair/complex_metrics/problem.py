"""A learning problem (OP1 / OP2) on a sample, and its plug-in linear minimization oracle (Alg. 9/10).

The problem stacks the metric's and the constraints' coordinates into one generalized confusion
vector ``v = Phi vec(C)`` of dimension ``d`` (Def. 24).  The outer algorithms work on ``v`` only:

* ``objective(v)`` and its gradient (the metric reads the first block);
* ``constraint_values(v) = A v - b`` (one row per one-sided linear constraint);
* ``lmo(w)``: the plug-in classifier minimizing ``<w, v>`` -- its score matrix is ``Phi^T w``
  reshaped to ``(m n, n)`` -- with its empirical ``v`` and confusion tensor on the sample.

>>> import numpy as np
>>> from streamfair.complex_metrics.performance import QMean
>>> from streamfair.complex_metrics.confusion import Sample
>>> sample = Sample(np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7]]), y=[0, 1, 1])
>>> problem = Problem(QMean(), sample)
>>> best = problem.lmo(np.array([-1.0, -1.0]))          # maximize the sum of recalls
>>> best.point.tolist(), round(problem.objective(best.point), 4)
([1.0, 0.5], 0.3536)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..validation import check_array, check_index, check_instance
from .confusion import Sample, check_scores, zero_one_scores
from .constraints import LinearConstraint
from .lp import linprog
from .performance import Metric, as_tensor

__all__ = ["Component", "Layout", "Problem", "check_constraints"]


def check_constraints(constraints: Sequence[LinearConstraint]) -> tuple[LinearConstraint, ...]:
    """A sequence of :class:`LinearConstraint` (possibly empty) as a tuple."""
    try:
        items = tuple(constraints)
    except TypeError:  # not iterable: e.g. a single constraint, not in a list
        raise ValueError(f"constraints must be a sequence of constraints, got {constraints!r}") from None
    for constraint in items:
        if not isinstance(constraint, LinearConstraint):
            raise ValueError(f"constraints must hold constraints such as Coverage, got {type(constraint).__name__}")
    return items


@dataclass(frozen=True)
class Component:
    """A (small) mixture of plug-in classifiers and its place on the sample.

    ``scores`` has shape ``(k, m n, n)`` with inner weights ``mix`` (``k = 1``: deterministic) and
    inner vectors ``points`` ``(k, d)``; ``point`` is its ``v`` and ``confusion`` its confusion
    tensor on the problem's sample.
    """

    scores: np.ndarray
    mix: np.ndarray
    points: np.ndarray
    point: np.ndarray
    confusion: np.ndarray


@dataclass(frozen=True)
class Layout:
    """The stacked coordinates ``v = matrix vec(C)`` (metric block first) and rows ``A v <= b``."""

    matrix: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    metric_size: int
    A: np.ndarray
    b: np.ndarray

    @classmethod
    def build(cls, metric: Metric, constraints: Sequence[LinearConstraint], joint: np.ndarray) -> Layout:
        """The layout at the marginals ``joint`` (``(m, n)``)."""
        blocks = [metric.coordinates(joint)] + [c.coordinates(joint) for c in constraints]
        matrix = np.vstack(blocks)
        bounds = [metric.bounds(joint)] + [c.bounds(joint) for c in constraints]
        rows, rhs, start = [], [], blocks[0].shape[0]
        for constraint, block in zip(constraints, blocks[1:], strict=True):
            a, b = constraint.rows(joint)
            full = np.zeros((a.shape[0], matrix.shape[0]))
            full[:, start : start + block.shape[0]] = a
            rows.append(full)
            rhs.append(b)
            start += block.shape[0]
        return cls(
            matrix,
            np.concatenate([low for low, _ in bounds]),
            np.concatenate([high for _, high in bounds]),
            blocks[0].shape[0],
            np.vstack(rows) if rows else np.zeros((0, matrix.shape[0])),
            np.concatenate(rhs) if rhs else np.zeros(0),
        )


class Problem:
    """Minimize ``metric`` subject to ``constraints`` over classifiers, estimated on ``sample``.

    Parameters
    ----------
    metric
        The objective ``psi``.
    sample
        The labelled sample (labels may be missing for label-free coordinates).
    constraints
        Linear constraints (possibly none: OP1).

    Attributes
    ----------
    matrix, lower, upper
        The stacked ``Phi`` (shape ``(d, m n n)``, the metric's block first) and the box of ``v``.
    metric_size
        The length of the metric's block of ``v``.
    A, b
        The one-sided constraint rows ``A v <= b``, shapes ``(K, d)`` and ``(K,)``.

    Examples
    --------
    Q-mean under a coverage constraint, on four samples: the plug-in ``argmax eta_hat`` predicts
    0, 0, 1, 0, i.e. recalls ``(1, 0.5)`` and coverage ``(0.75, 0.25)`` against priors
    ``(0.5, 0.5)``.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Coverage, QMean, Sample
    >>> proba = np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.8, 0.2]])
    >>> problem = Problem(QMean(), Sample(proba, y=[0, 1, 1, 0]), [Coverage(eps=0.1)])
    >>> problem.dimension, problem.n_constraints        # 2 recalls and 2 rates; 4 one-sided rows
    (4, 4)
    >>> base = problem.baseline()
    >>> base.point.tolist()
    [1.0, 0.5, 0.75, 0.25]
    >>> round(problem.objective(base.point), 6), round(problem.violation(base.point), 6)
    (0.353553, 0.15)
    >>> round(problem.violation(problem.feasible_start().point), 6)    # the least possible: -eps
    -0.1
    """

    def __init__(self, metric: Metric, sample: Sample, constraints: Sequence[LinearConstraint] = ()):
        self.metric = check_instance("metric", metric, Metric)
        self.sample = check_instance("sample", sample, Sample)
        self.constraints = check_constraints(constraints)
        layout = Layout.build(metric, self.constraints, sample.joint)
        self.matrix, self.lower, self.upper = layout.matrix, layout.lower, layout.upper
        self.metric_size, self.A, self.b = layout.metric_size, layout.A, layout.b

    @property
    def dimension(self) -> int:
        """``d``, the length of the generalized confusion vector."""
        return self.matrix.shape[0]

    @property
    def n_constraints(self) -> int:
        """``K``, the number of one-sided constraint rows."""
        return self.b.size

    def _vector(self, name: str, value: np.ndarray) -> np.ndarray:
        """A finite vector of length ``d`` (the argument ``name`` of a public method)."""
        return check_array(name, value, (self.dimension,))

    def with_metric(self, metric: Metric) -> Problem:
        """The same sample and constraints with another objective.

        Parameters
        ----------
        metric
            The new objective.

        Returns
        -------
        Problem
            A new problem; this one is unchanged.
        """
        return Problem(metric, self.sample, self.constraints)

    # ------------------------------------------------------------------ functions of v
    def objective(self, v: np.ndarray) -> float:
        """``psi(v)``.

        Parameters
        ----------
        v
            A finite generalized confusion vector, shape ``(d,)``.

        Returns
        -------
        float
            The metric, read from the first :attr:`metric_size` entries of ``v``.
        """
        return self._objective(self._vector("v", v))

    def _objective(self, v: np.ndarray) -> float:
        return self.metric.value(v[: self.metric_size])

    def objective_gradient(self, v: np.ndarray) -> np.ndarray:
        """``grad psi(v)`` padded with zeros on the constraint coordinates.

        Parameters
        ----------
        v
            A finite generalized confusion vector, shape ``(d,)``.

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        return self._objective_gradient(self._vector("v", v))

    def _objective_gradient(self, v: np.ndarray) -> np.ndarray:
        gradient = np.zeros(self.dimension)
        gradient[: self.metric_size] = self.metric.gradient(v[: self.metric_size])
        return gradient

    def constraint_values(self, v: np.ndarray) -> np.ndarray:
        """``A v - b``: feasible iff every entry is ``<= 0``.

        Parameters
        ----------
        v
            A finite generalized confusion vector, shape ``(d,)``.

        Returns
        -------
        ndarray of shape (K,)
            One value per one-sided constraint row.
        """
        return self._constraint_values(self._vector("v", v))

    def _constraint_values(self, v: np.ndarray) -> np.ndarray:
        return self.A @ v - self.b

    def violation(self, v: np.ndarray) -> float:
        """``max_k phi_k(v)`` (0 for an unconstrained problem).

        Parameters
        ----------
        v
            A finite generalized confusion vector, shape ``(d,)``.

        Returns
        -------
        float
            The largest entry of :meth:`constraint_values`: feasible iff ``<= 0``.
        """
        return self._violation(self._vector("v", v))

    def _violation(self, v: np.ndarray) -> float:
        return float(self._constraint_values(v).max()) if self.n_constraints else 0.0

    def point(self, confusion: np.ndarray) -> np.ndarray:
        """``v = Phi vec(C)``.

        Parameters
        ----------
        confusion
            A confusion tensor ``C``, shape ``(m, n, n)``: a distribution (entries ``>= 0`` summing
            to one).

        Returns
        -------
        ndarray of shape (d,)
            Its generalized confusion vector.
        """
        n, m = self.sample.n_classes, self.sample.n_groups
        return self._point(as_tensor(confusion, (m, n, n)))

    def _point(self, confusion: np.ndarray) -> np.ndarray:
        return self.matrix @ confusion.ravel()

    def conjugate_argmin(self, g: np.ndarray) -> np.ndarray:
        """``argmin_{lower <= v <= upper} psi(v) - g . v`` (psi reads only the metric block).

        Outside the metric block the minimizer is the upper bound where ``g > 0`` and the lower
        bound elsewhere.

        Parameters
        ----------
        g
            The finite linear term, shape ``(d,)``.

        Returns
        -------
        ndarray of shape (d,)
            The minimizer.
        """
        return self._conjugate_argmin(self._vector("g", g))

    def _conjugate_argmin(self, g: np.ndarray) -> np.ndarray:
        k = self.metric_size
        v = np.where(g > 0, self.upper, self.lower)
        v[:k] = self.metric.conjugate_argmin(g[:k], self.lower[:k], self.upper[:k])
        return v

    # ------------------------------------------------------------------ oracles
    def scores(self, w: np.ndarray) -> np.ndarray:
        """The score matrix ``Phi^T w`` of the linear objective ``<w, v>``, shape ``(m n, n)``.

        Parameters
        ----------
        w
            The finite weights of the linear objective, shape ``(d,)``.

        Returns
        -------
        ndarray of shape (m n, n)
            The scores ``L[a n + i, j]`` of predicting ``j`` for group ``a`` and label ``i``.
        """
        return self._scores(self._vector("w", w))

    def _scores(self, w: np.ndarray) -> np.ndarray:
        n = self.sample.n_classes
        return (self.matrix.T @ w).reshape(-1, n)

    def oracle(self, scores: np.ndarray) -> Component:
        """The deterministic plug-in classifier with this score matrix, placed on the sample.

        Parameters
        ----------
        scores
            A finite score matrix, shape ``(m n, n)``.

        Returns
        -------
        Component
            The classifier (one plug-in, weight 1), its ``v`` and its confusion tensor on the sample.
        """
        return self._oracle(check_scores(scores, self.sample.n_groups, self.sample.n_classes))

    def _oracle(self, scores: np.ndarray) -> Component:
        confusion = self.sample._confusion(self.sample._predict(scores))
        point = self._point(confusion)
        return Component(scores[None].copy(), np.ones(1), point[None], point, confusion)

    def lmo(self, w: np.ndarray) -> Component:
        """Alg. 9/10: the plug-in classifier for the linear objective ``<w, v>``.

        Parameters
        ----------
        w
            The finite weights of the linear objective, shape ``(d,)``.

        Returns
        -------
        Component
            The plug-in classifier with the scores :meth:`scores` of ``w``, placed on the sample.
        """
        return self._lmo(self._vector("w", w))

    def _lmo(self, w: np.ndarray) -> Component:
        return self._oracle(self._scores(w))

    def baseline(self) -> Component:
        """The plug-in ``argmax eta_hat`` (the arbitrary first oracle call of the algorithms).

        Returns
        -------
        Component
            The classifier, placed on the sample.
        """
        return self._oracle(zero_one_scores(self.sample.n_classes, self.sample.n_groups))

    def constant(self, j: int) -> Component:
        """The classifier that always predicts class ``j`` (exactly fair; coverage ``e_j``).

        Parameters
        ----------
        j
            The class, in ``0..n-1``.

        Returns
        -------
        Component
            The classifier, placed on the sample.
        """
        n, m = self.sample.n_classes, self.sample.n_groups
        scores = np.ones((m * n, n))
        scores[:, check_index("j", j, n, "a class")] = 0.0
        return self._oracle(scores)

    def feasible_start(self) -> Component:
        """A mixture of the constant classifiers and ``argmax eta_hat`` with the smallest ``max_k phi_k``.

        Constant classifiers satisfy demographic parity, equal opportunity and equalized odds
        exactly, and mixing them with weights ``tau`` meets any coverage target, so this is the
        strictly feasible start that ConEllipsoid and ConBisection need.

        Returns
        -------
        Component
            The mixture, from a linear program minimizing ``max_k phi_k``; ``argmax eta_hat`` alone
            when there are no constraints.
        """
        candidates = [self.baseline()] + [self.constant(j) for j in range(self.sample.n_classes)]
        if not self.n_constraints:
            return candidates[0]
        points = np.stack([c.point for c in candidates])
        values = points @ self.A.T - self.b  # (k, K)
        k = len(candidates)
        # min s  s.t.  sum_t alpha_t values[t] <= s,  alpha in the simplex;  s = s_plus - s_minus.
        cost = np.zeros(k + 2)
        cost[k], cost[k + 1] = 1.0, -1.0
        a_ub = np.hstack([values.T, -np.ones((self.n_constraints, 1)), np.ones((self.n_constraints, 1))])
        a_eq = np.concatenate([np.ones(k), [0.0, 0.0]])[None]
        result = linprog(cost, a_ub, np.zeros(self.n_constraints), a_eq, np.ones(1))
        alpha = result.solution()[:k]
        return combine(candidates, alpha / alpha.sum())


def combine(components: Sequence[Component], weights: np.ndarray) -> Component:
    """The mixture ``sum_t weights[t] components[t]`` as one component (zero weights dropped)."""
    keep = [t for t in range(len(components)) if weights[t] > 0]
    scores = np.concatenate([components[t].scores for t in keep])
    mix = np.concatenate([weights[t] * components[t].mix for t in keep])
    points = np.concatenate([components[t].points for t in keep])
    point = sum(weights[t] * components[t].point for t in keep)
    confusion = sum(weights[t] * components[t].confusion for t in keep)
    positive = mix > 0
    return Component(scores[positive], mix[positive] / mix[positive].sum(), points[positive], point, confusion)
