"""Demographic-parity post-processing of a regressor's output, one unlabeled sample at a time."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from . import dual
from .postprocessor import REFERENCE_HORIZON, DualPostProcessor, default_grid_size
from .validation import check_finite, check_integer, check_positive


class FairRegressionPostProcessor(DualPostProcessor):
    """Streaming DP regression post-processor (Chzhen, Hebiri & Taturyan, NeurIPS 2024).

    Each sample brings the base model's estimate ``eta(x)`` and the group posterior
    ``tau(x) = P(S = . | x)``; S itself is never seen.  Every sample takes one stochastic step on
    the entropic dual, and predictions are draws from ``pi(. | x)`` on the grid
    ``{l B / L : l = -L..L}``, whose law is (approximately, up to ``eps``) the same in every group.

    Parameters
    ----------
    B
        Half-width of the grid: predictions live in ``[-B, B]``.  ``eta`` outside is clipped to
        ``[-B, B]`` (the paper assumes ``|eta| <= B``) and counted in ``n_clipped``.
    L
        The grid has ``2L + 1`` atoms.  ``None``: ``floor(sqrt(T))`` (the paper's ``L = sqrt(T)``).
    eps
        Allowed per-atom gap ``|P(Y_hat = y) - P(Y_hat = y | S = s)|``: a number or one per group.
        A KS target ``kappa`` needs roughly ``eps <= kappa / (2L + 1)``.
    beta
        Entropic parameter; ``None``: ``sqrt(T) log2(sqrt(T))`` (the paper's experiments).  The
        regularization costs at most ``log(2L + 1) / beta`` of risk (Lemma 3.3).
    p
        Group marginals in ``tau``'s column order; ``None``: estimated online from ``tau``.
    n_groups
        ``K``, when neither ``p`` nor a per-group ``eps`` gives it.
    horizon
        ``T``, samples in the first epoch (the paper's schedule is exact within it); later epochs
        double it, warm-started at the previous output.  ``None``: 2500.
    optimizer
        ``"sgd3"`` (SGD3-refined, the paper's choice), ``"acsa"``, ``"acsa2"`` or ``"sgd"``.
    inner
        Inner solver of ``"sgd3"``: ``"acsa2"`` (the paper's experiments) or ``"acsa"`` (Thm C.3).
    mu
        Strong-convexity parameter; ``None``: ``2 sigma^2 / beta`` (the paper's theory).
    seed
        Seed of the randomized predictions.
    window
        Recent samples kept (bounded memory) for the live :meth:`diagnostics`.
    serve
        ``"epoch"`` (default): predictions use the output of the last completed epoch -- the
        paper's output after ``T`` samples, the soft-rounded ``eta`` before it -- so a restart never
        degrades them.  ``"live"``: the optimizer's running output, updated every sample.

    Attributes
    ----------
    atoms : ndarray of shape (2L + 1,)
        The grid.
    n_samples, n_clipped : int
        Samples learned from, and how many had ``eta`` outside ``[-B, B]``.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = rng.integers(0, 2, 5000)                      # hidden group, never given to the model
    >>> tau = np.where(s[:, None] == 1, [0.2, 0.8], [0.8, 0.2])
    >>> eta = np.clip(0.5 * s - 0.25 + 0.1 * rng.standard_normal(5000), -1, 1)
    >>> fair = FairRegressionPostProcessor(L=20, eps=0.005, p=[0.5, 0.5], horizon=5000)
    >>> fair.learn_many(eta, tau)
    >>> before = eta[s == 1].mean() - eta[s == 0].mean()
    >>> after = np.diff(fair.diagnostics().group_mean)[0]
    >>> bool(abs(after) < 0.5 * abs(before))
    True
    >>> float(fair.predict_one(0.3, [0.2, 0.8], key="msg-1")) in fair.atoms
    True
    """

    prediction_modes = ("sample", "mean", "mode")

    def __init__(
        self,
        B: float = 1.0,
        L: int | None = None,
        eps: float | Sequence[float] = 0.001,
        beta: float | None = None,
        p: Sequence[float] | None = None,
        n_groups: int | None = None,
        horizon: int | None = None,
        optimizer: str = "sgd3",
        inner: str = "acsa2",
        mu: float | None = None,
        seed: int = 0,
        window: int = 1000,
        serve: str = "epoch",
    ):
        self.B = check_positive("B", B)
        reference = REFERENCE_HORIZON if horizon is None else check_integer("horizon", horizon, 1)
        self.L = default_grid_size(reference) if L is None else check_integer("L", L, 1)
        super().__init__(
            dual.regression_grid(self.B, self.L),
            eps=eps,
            p=p,
            n_groups=n_groups,
            beta=beta,
            horizon=horizon,
            optimizer=optimizer,
            inner=inner,
            mu=mu,
            seed=seed,
            window=window,
            serve=serve,
        )

    def _check_predictions(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        return check_finite("eta", predictions, n_rows)

    def _scaled_costs(self, predictions: np.ndarray, tau: np.ndarray, learning: bool) -> np.ndarray:
        clipped = np.minimum(np.maximum(predictions, -self.B), self.B)
        if learning:
            self.n_clipped += int(np.count_nonzero(clipped != predictions))
        return self.beta * dual.squared_costs(clipped, self.atoms)

    def _config(self) -> dict:
        return {"B": self.B, "L": self.L, **super()._config()}
