"""Demographic-parity post-processing of a regressor's output, one unlabeled sample at a time."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from . import dual
from .costs import SquaredCosts
from .postprocessor import DualPostProcessor
from .profiles import PROFILES, default_grid_size, reference_horizon
from .validation import check_choice, check_integer, check_range

#: ``anytime`` profile: the KS target when neither ``ks`` nor ``eps`` is given.
DEFAULT_KS = 0.05
#: ``anytime`` profile: the grid's half-size (resolution ``B / 50``).
DEFAULT_GRID_SIZE = 50
#: ``paper`` profile: the per-atom slack.
PAPER_EPS = 0.001


class FairRegressionPostProcessor(DualPostProcessor):
    """Streaming DP regression post-processor (Chzhen, Hebiri & Taturyan, NeurIPS 2024).

    Each sample brings the base model's estimate ``eta(x)`` and the group posterior
    ``tau(x) = P(S = . | x)``; S itself is never seen.  Every sample takes one stochastic step on
    the entropic dual, and predictions are draws from ``pi(. | x)`` on a grid of ``2L + 1``
    evenly spaced values over the target range, whose law is (approximately, up to the target)
    the same in every group.

    Parameters
    ----------
    B
        The target range, in the target's own units: ``(low, high)``, or a half-width ``B`` for
        ``[-B, B]`` (the paper's, which assumes ``|eta| <= B``).  Predictions live in it; ``eta``
        outside is clipped to it and counted in ``n_clipped``.  Below, ``B`` is the half-width
        ``(high - low) / 2``.
    L
        The grid has ``2L + 1`` atoms ``(low + high) / 2 + l B / L`` for ``l = -L..L``.  ``None``:
        50 (``anytime``), ``floor(sqrt(T))`` (``paper``).
    ks
        The fairness target: the bound the constraints put on the KS distance between each group's
        prediction CDF and the overall one (what :func:`~streamfair.evaluate` and the dashboards
        report), one number or one per group, in ``[0, 1]``.  The time-averaged predictor meets
        it; the served one, learned from recent samples, fluctuates around it (to keep a bound,
        set ``ks`` about 0.8 times it).  ``None``: ``DEFAULT_KS`` unless ``eps`` is given.
    eps
        The paper's per-atom slack ``|P(Y_hat = y) - P(Y_hat = y | S = s)| <= eps`` instead of
        ``ks`` (it allows a KS distance of up to about ``eps (2L + 1)``).  ``None``: 0.001 in the
        ``paper`` profile, not used in the ``anytime`` one.
    beta
        Entropic parameter; ``None``: ``log(2L + 1) / (0.02 B^2)`` (``anytime``: the randomization
        costs at most ``2%`` of ``B^2`` in risk, Lemma 3.3), ``sqrt(T) log2(sqrt(T))`` (``paper``).
    p
        Group marginals in ``tau``'s column order; ``None``: estimated online from ``tau``.
    n_groups
        ``K``, when neither ``p`` nor a per-group ``ks``/``eps`` gives it.
    profile
        ``"anytime"`` (default): corrected from the first samples, follows drift, no horizon.
        ``"paper"``: the paper's settings (SGD3 + AC-SA^2 over epochs of a horizon), for reproduction.
    memory
        ``anytime``: the served predictor mixes the policies at 16 snapshots of the dual taken
        over the last ``memory`` samples (default 2000): a shift of the stream is followed within
        about one ``memory``.
    horizon, optimizer, inner, mu
        The optimizer (``"tracking"`` for ``anytime``, the paper's ``"sgd3"`` with ``inner``
        ``"acsa2"`` for ``paper``; also ``"acsa"``, ``"acsa2"``, ``"sgd"``) and, for the paper's
        optimizers, the horizon ``T`` of epoch 0 (2500; later epochs double) and the
        strong-convexity parameter (``2 sigma^2 / beta``).
    seed
        Seed of the randomized predictions.
    window
        Recent samples kept (bounded memory) for the live :meth:`diagnostics`.
    serve
        The paper's optimizers only: what predictions use (``"epoch"``, the default: the last
        completed epoch's output; ``"live"``: the running output).

    Attributes
    ----------
    atoms : ndarray of shape (2L + 1,)
        The grid.
    n_samples, n_clipped : int
        Samples learned from, and how many had ``eta`` outside the target range.

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = rng.integers(0, 2, 5000)                      # hidden group, never given to the model
    >>> tau = np.where(s[:, None] == 1, [0.2, 0.8], [0.8, 0.2])
    >>> eta = np.clip(0.5 * s - 0.25 + 0.1 * rng.standard_normal(5000), -1, 1)
    >>> fair = FairRegressionPostProcessor(B=1.0, ks=0.05, p=[0.5, 0.5])
    >>> fair.learn_many(eta[:1000], tau[:1000])          # a thousand unlabeled samples
    >>> before = eta[s == 1].mean() - eta[s == 0].mean()
    >>> after = np.diff(fair.diagnostics().group_mean)[0]
    >>> bool(abs(after) < 0.5 * abs(before)), bool(fair.diagnostics().group_ks.max() < 0.1)
    (True, True)
    >>> float(fair.predict_one(0.3, [0.2, 0.8], key="msg-1")) in fair.atoms
    True

    A target in its own units, here a probability: the grid covers ``[0, 1]``.

    >>> rate = FairRegressionPostProcessor(B=(0, 1), L=4, p=[0.5, 0.5])
    >>> rate.atoms.tolist()
    [0.0, 0.125, 0.25, 0.375, 0.5, 0.625, 0.75, 0.875, 1.0]
    """

    prediction_modes = SquaredCosts.prediction_modes

    def __init__(
        self,
        B: float | Sequence[float] | np.ndarray = 1.0,
        L: int | None = None,
        *,
        ks: float | Sequence[float] | np.ndarray | None = None,
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
        low, high = check_range("B", B)
        self.B = high if low == -high else [low, high]  # a JSON value, as get_params gives it
        if ks is not None and eps is not None:
            raise ValueError(
                f"give ks (a KS target) or eps (the paper's per-atom slack), not both: ks={ks!r}, eps={eps!r}"
            )
        paper = check_choice("profile", profile, PROFILES) == "paper"
        if L is None:
            L = default_grid_size(reference_horizon(horizon)) if paper else DEFAULT_GRID_SIZE
        self.L = check_integer("L", L, 1)
        slack: float | Sequence[float] | np.ndarray
        if eps is not None:
            slack, constraint = eps, "atom"
        elif ks is not None:
            slack, constraint = ks, "cdf"
        else:  # neither: the profile's default
            slack, constraint = (PAPER_EPS, "atom") if paper else (DEFAULT_KS, "cdf")
        super().__init__(
            SquaredCosts(low, high, dual.range_grid(low, high, self.L)),
            slack=slack,
            constraint=constraint,
            slack_at_most=math.inf if eps is not None else 1.0,  # a KS target is a distance; eps is the paper's
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

    @property
    def target_range(self) -> tuple[float, float]:
        """``(low, high)``: the target range ``B``, which the base predictions are clipped to."""
        cost = self.cost
        assert isinstance(cost, SquaredCosts)  # by the constructor
        return cost.low, cost.high

    def get_params(self) -> dict[str, Any]:
        """The constructor arguments that rebuild an equivalent fresh object (its settings, no state).

        Returns
        -------
        dict
            ``B`` and ``L``, then the engine's :meth:`DualPostProcessor.get_params`, as JSON values.
        """
        return {"B": self.B, "L": self.L, **super().get_params()}
