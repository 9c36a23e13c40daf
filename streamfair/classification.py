"""Demographic-parity post-processing of a multiclass classifier, one unlabeled sample at a time.

The dual method of Chzhen, Hebiri & Taturyan (NeurIPS 2024) is stated for regression, and its
Remark 2.2 notes that it carries over to multiclass classification: the atoms are the classes and
the per-sample cost of predicting class ``j`` is the expected loss under the base model's class
probabilities, ``r_j(x) = sum_i P(Y = i | x) L[i, j]`` (``1 - P(Y = j | x)`` for the 0-1 loss).
Those costs are the cost model :class:`~streamfair.costs.ExpectedCosts`; everything else -- the
entropic dual, the stochastic optimizers, randomized predictions, state and diagnostics -- is
:class:`~streamfair.postprocessor.DualPostProcessor`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .costs import ExpectedCosts
from .postprocessor import DualPostProcessor
from .profiles import PROFILES
from .validation import check_array, check_choice, check_integer

#: ``anytime`` profile: the per-class rate gap when ``eps`` is not given.
DEFAULT_RATE_GAP = 0.02
#: ``paper`` profile: the per-class rate gap.
PAPER_EPS = 0.005

__all__ = ["FairClassificationPostProcessor", "zero_one_costs"]


def zero_one_costs(n_classes: int) -> np.ndarray:
    """The 0-1 loss matrix ``L[i, j] = 1(i != j)`` (row: true class, column: predicted class).

    >>> zero_one_costs(3)
    array([[0., 1., 1.],
           [1., 0., 1.],
           [1., 1., 0.]])
    """
    return 1.0 - np.eye(check_integer("n_classes", n_classes, 2))


def _check_cost_matrix(cost_matrix: Any, n_classes: int) -> np.ndarray:
    """An ``(n, n)`` finite array whose largest entry, the cost scale (``beta``'s unit), is positive."""
    array = check_array("cost_matrix", cost_matrix, (n_classes, n_classes))
    if array.max() <= 0:
        raise ValueError(f"cost_matrix must have a positive entry: its largest sets the cost scale (add a constant to "
                         f"every entry, which changes no decision), got {array.tolist()}")
    return array


class FairClassificationPostProcessor(DualPostProcessor):
    """Streaming DP post-processor for a multiclass classifier, unaware of the sensitive attribute.

    Each sample brings the base model's class probabilities ``P(Y = . | x)`` and the group
    posterior ``tau(x) = P(S = . | x)``; neither the label nor S is ever seen.  Every sample takes
    one stochastic step on the entropic dual, and predictions are draws from ``pi(. | x)`` over the
    classes whose law is (up to ``eps`` per class and group) the same in every group:
    ``|P(Y_hat = j | S = s) - P(Y_hat = j)| <= eps_s``.  Binary classification is ``n_classes=2``.

    Parameters
    ----------
    n_classes
        Number of classes ``n >= 2``; ``None``: ``len(classes)``.
    classes
        Labels returned by the ``predict_*`` methods, in the column order of the probabilities;
        ``None``: ``0, ..., n - 1``.
    cost_matrix
        ``L[i, j]``, the cost of predicting ``j`` when the truth is ``i``; ``None``: the 0-1 loss.
        The post-processor minimizes the expected cost under the base model's probabilities.
    eps
        The fairness target: the largest gap ``|P(Y_hat = j | S = s) - P(Y_hat = j)|`` allowed
        for any class ``j`` (the demographic-parity difference of each class's rate), one number
        or one per group, in ``[0, 1]``.  ``None``: ``DEFAULT_RATE_GAP`` (``anytime``) or 0.005
        (``paper``).
        (Classes have no order, so there is no KS form: the per-class gap is the target itself.)
    beta
        Entropic parameter; ``None``: ``log(n) / (0.02 max L)`` (``anytime``: the randomization
        costs at most ``2%`` of the largest misclassification cost, Lemma 3.3) or
        ``sqrt(T) log2(sqrt(T))`` (``paper``).
    p, n_groups, profile, memory, horizon, optimizer, inner, mu, seed, window, serve
        As for :class:`~streamfair.regression.FairRegressionPostProcessor` (``serve="epoch"``:
        predictions use the last completed epoch's output, the soft-rounded base prediction before).

    Attributes
    ----------
    atoms : ndarray of shape (n,)
        The class indices ``0, ..., n - 1`` as floats (what the engine calls atoms).
    classes, labels : ndarray of shape (n,)
        The labels the predictions are reported in (the same array).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = rng.integers(0, 2, 4000)                       # hidden group, never given to the model
    >>> tau = np.where(s[:, None] == 1, [0.2, 0.8], [0.8, 0.2])
    >>> score = np.clip(0.3 + 0.4 * s + 0.15 * rng.standard_normal(4000), 0, 1)
    >>> proba = np.column_stack([1 - score, score])      # base model: P(Y = 1 | x) = score
    >>> fair = FairClassificationPostProcessor(classes=["no", "yes"], eps=0.01, p=[0.5, 0.5])
    >>> fair.learn_many(proba, tau)
    >>> rates = fair.diagnostics().group_proba[1]          # estimated P(Y_hat = yes | S = s)
    >>> before = abs((score[s == 1] > 0.5).mean() - (score[s == 0] > 0.5).mean())
    >>> bool(abs(rates[1] - rates[0]) < 0.5 * before)
    True
    >>> str(fair.predict_one([0.4, 0.6], [0.2, 0.8], key="msg-1")) in ("no", "yes")
    True
    """

    prediction_modes = ExpectedCosts.prediction_modes

    def __init__(
        self,
        n_classes: int | None = None,
        classes: Sequence[Any] | None = None,
        cost_matrix: Any = None,
        *,
        eps: float | Sequence[float] | np.ndarray | None = None,
        beta: float | None = None,
        p: Sequence[float] | np.ndarray | None = None,
        n_groups: int | None = None,
        profile: str = "anytime",
        memory: int | None = None,
        horizon: int | None = None,
        optimizer: str | None = None,
        inner: str | None = None,
        mu: float | None = None,
        seed: int = 0,
        window: int = 1000,
        serve: str | None = None,
    ):
        if n_classes is None and classes is None:
            raise ValueError("the number of classes is unknown: give n_classes or classes")
        if classes is not None:
            labels = [label.item() if isinstance(label, np.generic) else label for label in classes]  # JSON values
            try:
                distinct = len(set(labels))
            except TypeError:  # a label that is a list, a dict, ...
                raise ValueError(f"classes must be hashable labels, got {labels!r}") from None
            if distinct != len(labels):
                raise ValueError(f"classes must be distinct, got {labels!r}")
            if n_classes is not None and check_integer("n_classes", n_classes, 2) != len(labels):
                raise ValueError(f"n_classes={n_classes} does not match the {len(labels)} classes {labels!r}")
            n_classes = len(labels)
        self.n_classes = check_integer("n_classes", n_classes, 2)
        self.classes = np.arange(self.n_classes) if classes is None else _label_array(labels)
        self._classes_given = None if classes is None else labels
        self.cost_matrix = (
            zero_one_costs(self.n_classes) if cost_matrix is None else _check_cost_matrix(cost_matrix, self.n_classes)
        )
        self._cost_given = cost_matrix is not None
        if eps is None:
            eps = PAPER_EPS if check_choice("profile", profile, PROFILES) == "paper" else DEFAULT_RATE_GAP
        super().__init__(
            ExpectedCosts(self.classes, self.cost_matrix),
            slack=eps,
            constraint="atom",
            slack_at_most=1.0,  # the target: a gap between two rates
            p=p,
            n_groups=n_groups,
            beta=beta,
            profile=profile,
            optimizer=optimizer,
            memory=memory,
            horizon=horizon,
            inner=inner,
            mu=mu,
            seed=seed,
            window=window,
            serve=serve,
        )

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments that rebuild an equivalent fresh object (its settings, no state).

        Returns
        -------
        dict
            ``n_classes``, ``classes`` and ``cost_matrix`` (``None`` where not given), then the
            engine's :meth:`DualPostProcessor.get_params`, as JSON values.
        """
        return {
            "n_classes": self.n_classes,
            "classes": self._classes_given,
            "cost_matrix": self.cost_matrix.tolist() if self._cost_given else None,
            **super().get_params(),
        }


def _label_array(labels: list) -> np.ndarray:
    """The class labels as an array that gives them back as given (``[1, "a"]`` stays, not ``["1", "a"]``).

    >>> _label_array([1, "a"]).tolist(), _label_array(["no", "yes"]).dtype.kind
    ([1, 'a'], 'U')
    """
    array = np.asarray(labels)
    if array.ndim == 1 and array.tolist() == labels and array.dtype.kind != "O":
        return array
    array = np.empty(len(labels), dtype=object)  # mixed kinds, or labels numpy would read as rows (tuples)
    for i, label in enumerate(labels):
        array[i] = label
    return array
