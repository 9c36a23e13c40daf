"""The result of a fit, and hyper-parameter selection as in App. B.1 of Narasimhan et al.

>>> import numpy as np
>>> from streamfair.complex_metrics import Problem, QMean, Sample, frank_wolfe
>>> sample = Sample(np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]]), y=[0, 1, 1, 0])
>>> fits = [frank_wolfe(Problem(QMean(), sample), iterations=t) for t in (1, 20)]
>>> best = select(fits)
>>> best.objective == min(f.objective for f in fits)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..validation import check_instance, check_non_negative
from .mixture import RandomizedClassifier
from .problem import Component, Problem, combine
from .pruning import sparsify

__all__ = ["Fit", "make_fit", "select"]


@dataclass
class Fit:
    """A fitted randomized classifier and its training-sample performance.

    The algorithms build it; the parameters are also its attributes.

    Parameters
    ----------
    classifier
        The randomized classifier (serve it with ``predict_one(..., key=message_id)``).
    point, confusion
        Its generalized confusion vector ``(d,)`` and confusion tensor ``(m, n, n)`` on the training
        sample (``confusion`` is ``None`` after :meth:`sparse`).
    objective, violation
        ``psi`` and ``max_k phi_k`` (``<= 0``: feasible; 0 without constraints) on the training sample.
    history
        Per-iteration traces (algorithm-specific, e.g. ``"objective"``, ``"interval"``).
    points
        ``(k, d)``: the training vector of each component of ``classifier``; ``None``: unknown.

    Examples
    --------
    >>> import numpy as np
    >>> from streamfair.complex_metrics import HMean, Problem, Sample, frank_wolfe
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(1000, seed=0)
    >>> sample = Sample(posterior(x), y)
    >>> problem = Problem(HMean(), sample)
    >>> fit = frank_wolfe(problem, iterations=50)
    >>> bool(abs(fit.objective - HMean()(fit.classifier.confusion(sample))) < 1e-9)   # what is served
    True
    >>> bool(np.allclose(fit.point, problem.point(fit.confusion))), fit.violation
    (True, 0.0)

    Frank-Wolfe mixes one classifier per iteration; :meth:`sparse` keeps at most ``d + 1 = 4``
    (three recalls) with the same training vector.

    >>> sparse = fit.sparse()
    >>> fit.classifier.n_components, sparse.classifier.n_components <= problem.dimension + 1
    (50, True)
    >>> bool(np.allclose(sparse.point, fit.point)), bool(abs(sparse.objective - fit.objective) < 1e-9)
    (True, True)
    """

    classifier: RandomizedClassifier
    point: np.ndarray
    confusion: np.ndarray | None
    objective: float
    violation: float
    history: dict = field(default_factory=dict)
    points: np.ndarray | None = None

    def sparse(self) -> Fit:
        """The same training vector with at most ``d + 1`` components (Caratheodory, :func:`sparsify`).

        Training vector, objective and constraints are unchanged; serving and evaluation get
        cheaper.  Only the vector is matched, so ``confusion`` (the full training tensor) is set to
        ``None``: use ``classifier.confusion(sample)`` for it.

        Returns
        -------
        Fit
            A new fit with the re-weighted classifier (same seed), its ``point`` and ``points``,
            and ``confusion=None``; objective, violation and history are kept.
        """
        points = self.points
        if points is None:
            raise ValueError("sparse() needs the training vector of each component, got points=None")
        weights = sparsify(points, self.classifier.weights)
        keep = weights > 0
        classifier = RandomizedClassifier(weights[keep], self.classifier.scores[keep], self.classifier.grouping,
                                          self.classifier.seed)
        point = weights[keep] @ points[keep]
        return replace(self, classifier=classifier, point=point, confusion=None, points=points[keep])


def make_fit(problem: Problem, components: Sequence[Component], weights: np.ndarray, seed: int = 0, **history) -> Fit:
    """Combine ``components`` with ``weights`` into a :class:`Fit` on ``problem``."""
    weights = np.asarray(weights, dtype=float)
    weights = np.maximum(weights, 0.0)
    mixture = combine(components, weights / weights.sum())
    classifier = RandomizedClassifier(mixture.mix, mixture.scores, problem.sample.grouping, seed)
    return Fit(
        classifier,
        mixture.point,
        mixture.confusion,
        problem._objective(mixture.point),
        problem._violation(mixture.point),
        {name: np.asarray(value) for name, value in history.items()},
        mixture.points,
    )


def select(fits: Sequence[Fit], tolerance: float = 1e-9) -> Fit:
    """App. B.1: the lowest training objective among fits that meet the constraints on the training
    sample; if none does, the one with the smallest violation.

    Parameters
    ----------
    fits
        The candidates, e.g. one per hyper-parameter setting (at least one).
    tolerance
        A fit meets the constraints when its ``violation`` is at most this (a finite number ``>= 0``).

    Returns
    -------
    Fit
        The selected fit (one of ``fits``, not a copy).

    Examples
    --------
    >>> import numpy as np
    >>> from dataclasses import replace
    >>> from streamfair.complex_metrics import Problem, QMean, Sample, frank_wolfe
    >>> sample = Sample(np.array([[0.9, 0.1], [0.6, 0.4], [0.3, 0.7], [0.2, 0.8]]), y=[0, 1, 1, 0])
    >>> fit = frank_wolfe(Problem(QMean(), sample), iterations=10)
    >>> feasible = replace(fit, objective=0.4, violation=0.0)
    >>> lower_but_infeasible = replace(fit, objective=0.3, violation=0.05)
    >>> select([feasible, lower_but_infeasible]) is feasible
    True
    >>> select([lower_but_infeasible, replace(fit, objective=0.2, violation=0.1)]).violation  # none feasible
    0.05
    """
    if not fits:
        raise ValueError(f"fits must hold at least one fit, got {fits!r}")
    for fit in fits:
        check_instance("fits", fit, Fit)
    tolerance = check_non_negative("tolerance", tolerance)
    feasible = [f for f in fits if f.violation <= tolerance]
    if feasible:
        return min(feasible, key=lambda f: f.objective)
    return min(fits, key=lambda f: f.violation)
