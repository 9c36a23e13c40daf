"""Per-cell surrogate losses of a linear scorer: the ``K`` convex surrogates of Jiang et al. (2020).

A *cell* is a subset of the labelled sample, e.g. group x label (the paper's fairness example: the
logistic or hinge loss on the positives and on the negatives of each group) or group x outcome
region for regression.  Surrogate ``k`` is the mean point-wise loss over cell ``k``:

    l_k(theta) = mean_{i in cell k} phi(y_i, x_i theta),

with ``phi`` the logistic or hinge loss of the margin ``y_i f_i`` (labels in ``{-1, +1}``) or the
squared error ``(f_i - y_i)^2 / 2``.  Each ``l_k`` is convex in ``theta``, so the projection of
Algorithm 1 is a convex problem.

Examples
--------
>>> import numpy as np
>>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
>>> cells = CellSurrogates(X, y=[1, -1, 1], cells=[0, 1, 1], loss="hinge")
>>> cells.values(np.array([2.0, 0.5])).tolist()     # cell 0: margin 2; cell 1: margins -0.5, 2.5
[0.0, 0.75]
>>> cells.perturb_scores(X @ [2.0, 0.5], [0.5, 0.75]).round(6).tolist()  # cell 0 shifted to loss 0.5
[0.5, 0.5, 2.5]
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_finite, check_indices, check_integer, first_entry
from ._checks import check_labels

SURROGATE_LOSSES = ("logistic", "hinge", "squared")

#: Newton steps and relative tolerance of :meth:`CellSurrogates.perturb_scores`.
NEWTON_STEPS, NEWTON_TOLERANCE = 100, 1e-12


class CellSurrogates:
    """``K`` per-cell mean losses of the linear scores ``f = X theta`` on a labelled sample.

    Parameters
    ----------
    X
        Features, finite, shape ``(n, d)`` with ``n >= 1`` (include a column of ones for an intercept).
    y
        Labels, shape ``(n,)``: ``-1`` or ``+1`` for ``"logistic"`` and ``"hinge"``, real for ``"squared"``.
    cells
        Cell of each sample, shape ``(n,)``, an integer in ``[0, n_cells)``; every cell needs a sample.
    n_cells
        ``K``; ``None``: ``max(cells) + 1``.
    loss
        ``"logistic"``, ``"hinge"`` or ``"squared"``.

    Raises
    ------
    ValueError
        For arguments outside these ranges; the methods likewise refuse scores, parameters,
        weights or targets of another shape or not finite.

    Attributes
    ----------
    counts : ndarray of shape (K,)
        Samples per cell.

    Examples
    --------
    >>> import numpy as np
    >>> X = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> cells = CellSurrogates(X, y=[1, -1, 1], cells=[0, 1, 1])          # logistic loss
    >>> cells.n_cells, cells.n_features, cells.counts.tolist()
    (2, 2, [1.0, 2.0])
    >>> theta = np.zeros(2)
    >>> cells.values(theta).round(6).tolist()                              # log 2 in each cell
    [0.693147, 0.693147]
    >>> cells.gradient(theta, np.array([1.0, 1.0])).tolist()   # phi' = -y/2: (-1/2 - 1/4, 1/4 - 1/4)
    [-0.75, 0.0]
    >>> moved = cells.perturb_scores(X @ theta, [0.1, 0.2])   # scores whose cell losses are the targets
    >>> cells.values_from_scores(moved).round(6).tolist()
    [0.1, 0.2]
    """

    def __init__(
        self, X: ArrayLike, y: ArrayLike, cells: ArrayLike, n_cells: int | None = None, loss: str = "logistic"
    ):
        X = check_array("X", X, ("n >= 1", "d"))
        if X.shape[0] < 1:
            raise ValueError(f"X must have shape (n >= 1, d), got shape {X.shape}")
        if loss not in SURROGATE_LOSSES:
            raise ValueError(f"loss must be one of {SURROGATE_LOSSES}, got {loss!r}")
        y = check_labels("y", check_finite("y", y, X.shape[0]), loss)
        cells = check_indices("cells", cells, X.shape[0], None)
        self.n_cells = int(cells.max()) + 1 if n_cells is None else check_integer("n_cells", n_cells, 1)
        self.counts = np.bincount(cells, minlength=self.n_cells).astype(float)
        if cells.max() >= self.n_cells or np.any(self.counts == 0):
            raise ValueError(
                f"cells must cover 0..{self.n_cells - 1} with a sample each, got counts {self.counts.tolist()}"
            )
        self.X, self.y, self.cells, self.loss = X, y, cells, loss
        self._average = np.eye(self.n_cells)[cells] / self.counts  # (n, K): column k averages cell k

    @property
    def n_features(self) -> int:
        """``d``, the number of features."""
        return self.X.shape[1]

    def _check_scores(self, scores: ArrayLike) -> np.ndarray:
        n = self.X.shape[0]
        return check_array("scores", scores, (n,), (n, "p"))

    def pointwise(self, scores: ArrayLike) -> np.ndarray:
        """``phi(y_i, f_i)`` for scores of shape ``(n,)`` or ``(n, p)``.

        Parameters
        ----------
        scores
            Scores ``f``, shape ``(n,)``, or ``(n, p)`` for ``p`` scorers at once.

        Returns
        -------
        ndarray of the shape of ``scores``
            The point-wise losses.
        """
        return self._pointwise(self._check_scores(scores))

    def _pointwise(self, scores: np.ndarray) -> np.ndarray:
        y = self.y if scores.ndim == 1 else self.y[:, None]
        if self.loss == "squared":
            return 0.5 * (scores - y) ** 2
        margins = y * scores
        return np.logaddexp(0.0, -margins) if self.loss == "logistic" else np.maximum(0.0, 1.0 - margins)

    def _derivative(self, scores: np.ndarray) -> np.ndarray:
        if self.loss == "squared":
            return scores - self.y
        margins = self.y * scores
        slope = -1.0 / (1.0 + np.exp(margins)) if self.loss == "logistic" else -(margins < 1.0).astype(float)
        return self.y * slope

    def values_from_scores(self, scores: ArrayLike) -> np.ndarray:
        """``l(f)``: shape ``(K,)`` for scores ``(n,)``, ``(K, p)`` for scores ``(n, p)``.

        Parameters
        ----------
        scores
            Scores ``f``, shape ``(n,)`` or ``(n, p)``.

        Returns
        -------
        ndarray of shape (K,) or (K, p)
            The mean loss of each cell (for each scorer).
        """
        return self._values_from_scores(self._check_scores(scores))

    def _values_from_scores(self, scores: np.ndarray) -> np.ndarray:
        return self._average.T @ self._pointwise(scores)

    def values(self, theta: ArrayLike) -> np.ndarray:
        """``l(theta)`` of shape ``(K,)``; for ``theta`` of shape ``(p, d)``, shape ``(K, p)``.

        Parameters
        ----------
        theta
            Parameters, shape ``(d,)``, or ``(p, d)`` for ``p`` parameter vectors at once.

        Returns
        -------
        ndarray of shape (K,) or (K, p)
            The surrogates ``l_k(theta)``.
        """
        d = self.n_features
        return self._values(check_array("theta", theta, (d,), ("p", d)))

    def _values(self, theta: np.ndarray) -> np.ndarray:
        return self._values_from_scores(self.X @ theta.T)

    def _check_weights(self, weights: ArrayLike) -> np.ndarray:
        return check_finite("weights", weights, self.n_cells)

    def gradient(self, theta: ArrayLike, weights: ArrayLike) -> np.ndarray:
        """``grad_theta sum_k w_k l_k(theta)`` (a subgradient for the hinge loss).

        Parameters
        ----------
        theta
            Parameters, shape ``(d,)``.
        weights
            Weights ``w`` of the surrogates, shape ``(K,)``.

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        theta = check_finite("theta", theta, self.n_features)
        return self._gradient_from_scores(self.X @ theta, self._check_weights(weights))

    def gradient_from_scores(self, scores: ArrayLike, weights: ArrayLike) -> np.ndarray:
        """:meth:`gradient` at the parameters whose scores are ``scores`` (saves one product).

        Parameters
        ----------
        scores
            Scores ``X theta``, shape ``(n,)``.
        weights
            Weights ``w`` of the surrogates, shape ``(K,)``.

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        scores = check_finite("scores", scores, self.X.shape[0])
        return self._gradient_from_scores(scores, self._check_weights(weights))

    def _gradient_from_scores(self, scores: np.ndarray, weights: np.ndarray) -> np.ndarray:
        return self.X.T @ (self._derivative(scores) * (weights / self.counts)[self.cells])

    def perturb_scores(self, scores: ArrayLike, targets: ArrayLike) -> np.ndarray:
        """Scores ``f + Delta`` whose cell losses equal ``targets`` (the Delta of Algorithms 2 and 4).

        Classification cells shift every margin of cell ``k`` by one scalar ``c_k`` (found by
        Newton's method); squared-error cells scale their residuals by ``sqrt(target_k / l_k)``.  Scores
        of shape ``(n, p)`` take targets of shape ``(K, p)``; every target must be ``> 0``.

        Parameters
        ----------
        scores
            Scores ``f``, shape ``(n,)`` or ``(n, p)``.
        targets
            Wanted cell losses, shape ``(K,)`` or ``(K, p)``, each ``> 0``.

        Returns
        -------
        ndarray of the shape of ``scores``
            The perturbed scores ``f + Delta``.

        Raises
        ------
        ValueError
            For non-finite scores, targets of the wrong shape, not finite or ``<= 0``, or a
            squared-error cell with zero loss.
        """
        scores = self._check_scores(scores)
        column = scores.ndim == 1
        shape = (self.n_cells,) if column else (self.n_cells, scores.shape[1])
        targets = check_array("targets", targets, shape)
        if not np.all(targets > 0):
            raise ValueError(f"targets must be > 0; {first_entry(targets, targets <= 0)}")
        scores2 = scores[:, None] if column else scores
        targets2 = targets[:, None] if column else targets
        if self.loss == "squared":
            current = self._values_from_scores(scores2)
            if np.any(current <= 0):
                cell = int(np.argwhere(current <= 0)[0][0])
                raise ValueError(
                    f"scores must give each squared-error cell a loss > 0 (residual scaling cannot perturb a zero "
                    f"loss); cell {cell} has loss 0"
                )
            y = self.y[:, None]
            perturbed = y + np.sqrt(targets2 / current)[self.cells] * (scores2 - y)
        else:
            perturbed = scores2 + self.y[:, None] * self._margin_shifts(scores2, targets2)[self.cells]
        return perturbed[:, 0] if column else perturbed

    def _margin_shifts(self, scores: np.ndarray, targets: np.ndarray) -> np.ndarray:
        """Per-cell shifts ``c`` with ``h(c) = mean_{cell} phi(m_i + c) - target = 0``.

        ``h`` is convex and decreasing, so Newton's method started left of the root (where
        ``h > 0``) stays left of it and increases monotonically to it (exactly, after finitely many
        steps, for the piecewise-linear hinge).
        """
        shifted = lambda shift: scores + self.y[:, None] * shift[self.cells]  # noqa: E731
        shift = -np.ones_like(targets)
        while np.any(low := self._values_from_scores(shifted(shift)) <= targets):
            shift = np.where(low, 2 * shift, shift)
        for _ in range(NEWTON_STEPS):
            current = shifted(shift)
            excess = self._values_from_scores(current) - targets
            if np.all(np.abs(excess) <= NEWTON_TOLERANCE * targets):
                break
            margins = self.y[:, None] * current
            if self.loss == "logistic":
                slope = self._average.T @ (-1.0 / (1.0 + np.exp(margins)))
            else:
                slope = -(self._average.T @ (margins < 1.0).astype(float))
            shift = shift - np.divide(excess, slope, out=np.zeros_like(excess), where=excess > 0)
        return shift
