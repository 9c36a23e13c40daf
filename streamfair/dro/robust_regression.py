r"""Group-robust demographic-parity regression post-processing.

The DP post-processor (:class:`~streamfair.FairRegressionPostProcessor`) minimizes the average risk
``R(pi) = E[sum_l pi(l | X) r_l(X)]``, ``r_l(x) = (eta(x) - y_l)^2``, subject to demographic parity.
When one group is small, the fair solution moves *its* predictions most: the common prediction law
sits close to the majority's, and the minority pays most of the price of fairness.  The
group-robust variant trades parity against the worst-off group's risk instead.

Derivation
----------
Let ``R_g(pi) = E[sum_l pi(l | X) r_l(X) | S = g]``.  With the group posterior ``tau(x)`` and
``p_g = P(S = g)``, and ``r`` a function of ``x``,

.. math:: R_g(\pi) = E\Big[\frac{\tau_g(X)}{p_g} \sum_l \pi(l | X) r_l(X)\Big],
   \qquad \sum_g q_g R_g(\pi) = E\Big[\sum_l \pi(l | X)\, \omega_q(X)\, r_l(X)\Big],
   \quad \omega_q(x) = \sum_g \frac{q_g \tau_g(x)}{p_g}.

The robust risk is the entropy-smoothed maximum over groups (Carmon & Hausler, eq. (6)),
``R_T(pi) = T log sum_g exp(R_g(pi) / T) = max_{q in simplex} sum_g q_g R_g(pi) + T H(q)``, within
``T log K`` of ``max_g R_g(pi)``.  The problem ``min_pi max_q`` (fairness constraints and entropic
regularization on ``pi`` only) is convex in ``pi`` and concave in ``q``, so at its saddle point
``pi*`` is the fair post-processor for the per-sample cost ``omega_{q*}(x) r_l(x)`` and
``q* = softmax(R(pi*) / T)``.  The engine is therefore unchanged: its sample weighting hook
returns ``omega_q(x)`` (the costs are ``beta omega_q(x) r_l(x)``), while an online DRO updater
(:class:`~streamfair.dro.online_group.SoftmaxGroupWeights` or the mirror-ascent
:class:`~streamfair.dro.online_group.ExponentiatedGroupWeights`) plays ``q``.  Since
``E[omega_q(X)] = sum_g q_g = 1``, the cost scale is unchanged on average, and ``q = p`` gives
``omega = 1``: the plain post-processor is the special case "average risk".

The updater learns ``R_g`` without labels from the post-processor's own output: the surrogate loss
of a sample is the expected squared deviation of its randomized prediction from ``eta``,
``sum_l pi(l | x) r_l(x)`` (``pi`` at the optimizer's output, the policy being learned, see
:meth:`learning_proba`), attributed to the groups through
``tau / p`` (self-normalized).  When a sample's label ``y`` arrives (:meth:`learn_label`), its
loss becomes ``sum_l pi(l | x) (y_l - y)^2`` with the same ``pi``, and the group risks are
corrected exactly: then ``R_g`` also contains the base model's error in group
``g``, which the post-processor cannot change but which does change who is worst off.

Timing: the weights used in the costs are refreshed every ``refresh`` learned samples (the
surrogates of those samples are computed then, vectorized).  ``learn_many`` with
``batch_size=None`` is still bit-for-bit ``n`` calls to ``learn_one``; mini-batches never straddle
a refresh (the engine's ``_reweight_horizon``), and the fused ``proba_learn_*`` methods apply too.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any, Self

import numpy as np

from .. import dual
from ..evaluation import expected_squared_error
from ..regression import FairRegressionPostProcessor
from ..validation import (
    check_array,
    check_distributions,
    check_entries,
    check_indices,
    check_integer,
    check_key,
    check_positive,
    check_real,
    restores_state,
    show,
)
from .group_losses import check_rate
from .online_group import ExponentiatedGroupWeights, SoftmaxGroupWeights
from .pending import PendingLabels, rows_to_columns

__all__ = ["RobustDiagnostics", "GroupRobustFairRegressionPostProcessor"]

UPDATERS = ("softmax", "exponentiated")


@dataclass(frozen=True)
class RobustDiagnostics:
    """The DRO state of a :class:`GroupRobustFairRegressionPostProcessor`.

    >>> import numpy as np
    >>> robust = GroupRobustFairRegressionPostProcessor(L=10, p=[0.5, 0.5], seed=0)
    >>> robust.learn_many(np.linspace(-0.5, 0.5, 100), np.tile([0.7, 0.3], (100, 1)),
    ...                   keys=[f"m{i}" for i in range(100)])
    >>> robust.learn_label("m3", 0.1)
    True
    >>> report = robust.dro_diagnostics()
    >>> report.n_labels, report.n_pending, report.label_coverage  # one of the 100 samples labelled
    (1, 99, 0.01)
    >>> robust.learn_label("m4", 100.0), robust.dro_diagnostics().n_labels_clipped  # counted as a label of 1.0
    (True, 1)
    """

    weights: np.ndarray  # (K,) worst-case group weights q in use
    group_risks: np.ndarray  # (K,) running group risks (surrogate, label-corrected where labelled)
    robust_value: float  # the updater's robust risk estimate
    n_labels: int  # labels applied
    label_coverage: float  # n_labels / samples folded into the group risks
    n_pending: int  # samples waiting for a label
    n_expired: int  # samples dropped from the pending set (max_pending) before their label came
    n_labels_clipped: int  # labels applied that were outside the target range, clipped to it (as eta, see n_clipped)


class GroupRobustFairRegressionPostProcessor(FairRegressionPostProcessor):
    """DP regression post-processor whose risk is the worst group's (entropy-smoothed), not the mean.

    Parameters
    ----------
    *args
        The positional parameters of :class:`~streamfair.FairRegressionPostProcessor` (``B``, ``L``).
    updater
        ``"softmax"``: ``q`` the softmax of running group risks (closed form, default; see ``temperature``);
        ``"exponentiated"``: clipped mirror ascent with step ``step`` and arrival correction.
    temperature
        Smoothing ``T`` of the worst-group risk, as a share of the cost scale ``risk_scale`` (the
        squared half-width of the target range: ``B^2`` for ``[-B, B]``), so that the weights do not
        depend on the target's units: ``q = softmax(R / (T risk_scale))``, and the robust risk is within
        ``T risk_scale log K`` of the largest group risk.
    step
        Mirror-ascent step of ``updater="exponentiated"``, per unit of the cost scale (each group's
        loss enters as ``loss / risk_scale``).
    forgetting
        Per-sample forgetting of the group risks (0: running means over the whole stream).
    refresh
        Samples between refreshes of the weights used in the costs.
    max_pending
        Keyed samples kept waiting for their label (oldest dropped first).
    **kwargs
        The keyword parameters of :class:`~streamfair.FairRegressionPostProcessor` (``ks``, ``eps``,
        ``beta``, ``p``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> s = (rng.random(6000) < 0.15).astype(int)                  # group 1 is a 15% minority
    >>> tau = np.where(s[:, None] == 1, [0.05, 0.95], [0.95, 0.05])
    >>> eta = np.clip(np.where(s == 1, 0.5, -0.3) + 0.1 * rng.standard_normal(6000), -1, 1)
    >>> robust = GroupRobustFairRegressionPostProcessor(L=15, p=[0.85, 0.15], temperature=0.01)
    >>> robust.learn_many(eta, tau)
    >>> report = robust.dro_diagnostics()
    >>> bool(report.weights[1] > 0.5)                             # the minority is the worst-off group
    True
    >>> top = report.group_risks.max()                            # within T log K of the worst risk (B = 1)
    >>> bool(top <= report.robust_value <= top + 0.01 * np.log(2))
    True
    >>> robust.learn_one(0.4, [0.05, 0.95], key="msg-7")
    >>> robust.learn_label("msg-7", 0.45)
    True
    """

    uses_labels = True
    uniform_weights = False

    def __init__(
        self,
        *args: Any,
        updater: str = "softmax",
        temperature: float = 0.01,
        step: float = 0.01,
        forgetting: float = 0.0,
        refresh: int = 100,
        max_pending: int = 100_000,
        **kwargs: Any,
    ):
        super().__init__(*args, **kwargs)
        if updater not in UPDATERS:
            raise ValueError(f"updater must be one of {UPDATERS}, got {updater!r}")
        self.updater = updater
        self.temperature = check_positive("temperature", temperature)
        self.step = check_positive("step", step)
        self.forgetting = check_rate("forgetting", forgetting)
        self.refresh = check_integer("refresh", refresh, 1)
        self.max_pending = check_integer("max_pending", max_pending, 0)
        self.dro: SoftmaxGroupWeights | ExponentiatedGroupWeights
        if updater == "softmax":
            self.dro = SoftmaxGroupWeights(self.n_groups, self.temperature, forgetting=self.forgetting)
        else:
            self.dro = ExponentiatedGroupWeights(self.n_groups, self.step, p=self.p_given, forgetting=self.forgetting)
        self._scale_updater()
        self._q = self.dro.weights
        self._block_eta = np.empty(self.refresh)  # samples learned since the last refresh
        self._block_tau = np.empty((self.refresh, self.n_groups))
        self._block_size = 0
        self._block_keys: dict[Hashable, int] = {}  # key -> row in the block
        self._early_labels: dict[Hashable, float] = {}
        self._pending = PendingLabels(self.n_groups, self.max_pending)
        self.n_labels = 0
        self.n_expired = 0
        self.n_labels_clipped = 0

    def _scale_updater(self) -> None:
        """Give the updater its constant in the losses' units (squared target units), from the configured share."""
        if isinstance(self.dro, SoftmaxGroupWeights):
            self.dro.temperature = self.temperature * self.cost.risk_scale
        else:
            self.dro.step = self.step / self.cost.risk_scale

    # ------------------------------------------------------------------ the weighting hooks
    def sample_weights(self, tau: np.ndarray) -> np.ndarray:
        """``omega_q(x) = sum_g q_g tau_g(x) / p_g`` for each row of ``tau`` (mean one under ``p``).

        Parameters
        ----------
        tau
            Group posteriors, shape ``(n, K)``, one row per sample.

        Returns
        -------
        ndarray of shape (n,)
            The cost weight of each sample under the current worst-case weights ``q``.

        Examples
        --------
        Before any sample ``q`` is uniform, so ``omega = (1/2) / p``, of mean one under ``p``:

        >>> import numpy as np
        >>> robust = GroupRobustFairRegressionPostProcessor(L=10, p=[0.75, 0.25])
        >>> robust.sample_weights(np.eye(2)).round(6).tolist()       # 0.5 / 0.75, 0.5 / 0.25
        [0.666667, 2.0]
        """
        return self._sample_weights(check_distributions("tau", tau, None, self.n_groups), None)

    def _sample_weights(self, tau: np.ndarray, p: np.ndarray | None) -> np.ndarray:
        shares = self.p if p is None else p
        return (tau * (self._q / shares)).sum(axis=1)  # row-wise: the same bits for one row or many

    def _reweight_horizon(self) -> int:
        """The samples left before the next refresh of ``q``."""
        return self.refresh - self._block_size

    def _learned(self, predictions: np.ndarray, tau: np.ndarray, keys: Sequence[Hashable | None] | None) -> None:
        """Add the samples to the block (under their keys); at ``refresh`` samples, refresh ``q``."""
        rows = slice(self._block_size, self._block_size + tau.shape[0])
        self._block_eta[rows], self._block_tau[rows] = predictions, tau
        if keys is not None:
            for row, key in enumerate(keys, start=rows.start):
                if key is not None:
                    self._block_keys[key] = row
        self._block_size = rows.stop
        if self._block_size == self.refresh:
            self._refresh_weights()

    def learning_proba(self, predictions: Any, tau: Any) -> np.ndarray:
        """``pi(. | x)`` at the optimizer's output: the policy being learned, which the surrogate losses follow.

        For the tracking optimizer (the ``anytime`` profile) the output is the mean of its served
        points, and this policy a one-policy stand-in for the mixture it serves (they differ by a
        few hundredths per atom); for the paper's optimizers it is the running output ``w_ag``, what
        the current epoch will serve (predictions use the last *completed* epoch's dual).

        Parameters
        ----------
        predictions, tau
            The base model's predictions and the group posteriors, one row per sample, as for
            :meth:`learn_many`.

        Returns
        -------
        ndarray of shape (n, m)
            Row ``i`` is ``pi(. | x_i)`` over :attr:`atoms`.  Nothing is learned.
        """
        predictions = self._check_predictions(predictions, None)
        return self._learning_proba(predictions, self._check_tau(tau, predictions.shape[0]))

    def _learning_proba(self, predictions: np.ndarray, tau: np.ndarray) -> np.ndarray:
        costs = self._scaled_costs(predictions, tau, learning=False) / self.beta
        output = self._optimizer.output  # its per-atom form: C^T applied to Lambda and to V
        per_atom = np.stack([self.constraints.atoms_of(output[0]), self.constraints.atoms_of(output[1])])
        return dual.policy(per_atom, self._serving_features(tau), costs, self.beta)

    def _refresh_weights(self) -> None:
        """Fold the block's surrogate (or early-labelled) losses into the updater; refresh ``q``."""
        size = self._block_size
        eta, tau = self._block_eta[:size], self._block_tau[:size]
        proba = self._learning_proba(eta, tau)
        squared, _ = self.cost.scaled_costs(eta, 1.0)  # (clip(eta) - y_l)^2, clipped to the target range
        losses = (proba * squared).sum(axis=1)
        first, second = proba @ self.atoms, proba @ self.atoms**2
        labelled = set()
        for key, row in self._block_keys.items():
            if key in self._early_labels:  # the label came before the surrogate was folded in
                y = self._early_labels.pop(key)
                losses[row] = expected_squared_error(first[row], second[row], y)
                labelled.add(key)
        self.n_labels += len(labelled)
        receipts = self.dro.update_many(losses, tau)
        keys = [key for key in self._block_keys if key not in labelled]
        rows = np.array([self._block_keys[key] for key in keys], dtype=np.int64)
        self.n_expired += self._pending.add(keys, receipts.take(rows), first[rows], second[rows])
        self._q = self.dro.weights
        self._block_size = 0
        self._block_keys = {}

    def learn_label(self, key: Hashable, y: float) -> bool:
        """The label of the sample learned with ``key``: replace its surrogate loss by the true one (``uses_labels``).

        Parameters
        ----------
        key
            The key the sample was learned with.
        y
            Its label, in the target's units.  Outside the target range it is clipped to it, as the
            base predictions are (a label of 100 with ``B = 1`` counts as 1), and counted in
            ``dro_diagnostics().n_labels_clipped``.

        Returns
        -------
        bool
            ``True`` if the label was used; ``False`` if the key is unknown (never learned with a
            key, expired, or already labelled).
        """
        key, y = check_key("key", key), check_real("y", y)
        waiting = self._pending.pop(key)
        if waiting is not None:
            receipt, first, second = waiting
            self.dro.correct(receipt, expected_squared_error(first, second, self._clip_label(y)))
            self.n_labels += 1
            return True
        if key in self._block_keys and key not in self._early_labels:
            self._early_labels[key] = self._clip_label(y)
            return True
        return False

    def _clip_label(self, y: float) -> float:
        """``y`` clipped to the target range, counted in ``n_labels_clipped`` if it was outside."""
        low, high = self.target_range  # as the base predictions are
        clipped = min(max(y, low), high)
        if clipped != y:
            self.n_labels_clipped += 1
        return clipped

    def dro_diagnostics(self) -> RobustDiagnostics:
        """Weights, group risks, robust value and label bookkeeping.

        Returns
        -------
        RobustDiagnostics
            A snapshot of the DRO state (the arrays are copies or fresh).
        """
        folded = self.dro.stats.n_samples
        return RobustDiagnostics(
            weights=self._q.copy(),
            group_risks=self.dro.losses,
            robust_value=self.dro.value,
            n_labels=self.n_labels,
            label_coverage=self.n_labels / folded if folded else 0.0,
            n_pending=len(self._pending),
            n_expired=self.n_expired,
            n_labels_clipped=self.n_labels_clipped,
        )

    # ------------------------------------------------------------------ state
    def get_params(self) -> dict[str, Any]:
        """The constructor arguments that rebuild an equivalent fresh object, with the DRO settings.

        Returns
        -------
        dict
            :meth:`FairRegressionPostProcessor.get_params` plus ``updater``, ``temperature``,
            ``step``, ``forgetting``, ``refresh`` and ``max_pending``.
        """
        return {
            **super().get_params(),
            "updater": self.updater,
            "temperature": self.temperature,
            "step": self.step,
            "forgetting": self.forgetting,
            "refresh": self.refresh,
            "max_pending": self.max_pending,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly, the DRO state included (updater, block, pending labels).

        Returns
        -------
        dict
            What :meth:`from_state_dict` restores from.
        """
        state = super().state_dict()
        state["dro"] = {
            "updater": self.dro.state_dict(),
            "q": self._q.tolist(),
            "block": [
                self._block_eta[: self._block_size].copy(),
                self._block_tau[: self._block_size].copy(),
                list(self._block_keys.items()),
            ],
            "early_labels": list(self._early_labels.items()),
            "pending": self._pending.state_dict(),
            # the third counter only when not zero: a state without clipped labels reads as before it existed
            "counters": [self.n_labels, self.n_expired] + ([self.n_labels_clipped] if self.n_labels_clipped else []),
        }
        return state

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict[str, Any]) -> Self:
        """A new object that continues exactly as the one whose :meth:`state_dict` was taken.

        Parameters
        ----------
        state
            A :meth:`state_dict` of this class.

        Returns
        -------
        GroupRobustFairRegressionPostProcessor
            The restored post-processor.
        """
        obj = super().from_state_dict(state)
        extra = state["dro"]
        obj.dro = type(obj.dro).from_state_dict(extra["updater"])
        obj._scale_updater()  # checkpoints from before the constants were relative to the cost scale hold them unscaled
        obj._q = check_array("state's dro q", extra["q"], (obj.n_groups,), copy=True)
        eta, tau, keys = check_entries("state's dro block", extra["block"], 3)
        block_eta = check_array("state's dro block predictions", eta, ("n",))
        size = obj._block_size = block_eta.size
        if size >= obj.refresh:  # a full block is folded in when it fills
            raise ValueError(f"state's dro block must hold fewer than refresh={obj.refresh} samples, got {size}")
        obj._block_eta[:size] = block_eta
        obj._block_tau[:size] = check_array("state's dro block tau", tau, (size, obj.n_groups),
                                            (size * obj.n_groups,)).reshape(size, obj.n_groups)
        keys = [check_entries("state's dro block key", pair, 2) for pair in keys]  # [id, row] pairs
        rows = check_indices("state's dro block rows", [row for _, row in keys], None, size)
        obj._block_keys = {key: int(row) for (key, _), row in zip(keys, rows, strict=True)}
        pending = extra["pending"]
        obj._pending.load_state_dict(rows_to_columns(pending) if isinstance(pending, list) else pending)
        counters = extra["counters"]  # the clipped count only when not 0 (and not before it was counted)
        if not isinstance(counters, (list, tuple, np.ndarray)) or len(counters) not in (2, 3):
            raise ValueError(f"state's dro counters must be a list of 2 or 3 entries (labels, expired[, clipped]), "
                             f"got {show(counters)}")
        obj.n_labels, obj.n_expired, obj.n_labels_clipped = (check_integer("state's dro counters", count, 0)
                                                              for count in [*counters, 0][:3])
        # clipped already, unless the state is from before labels were clipped: then clipped and counted now
        obj._early_labels = {key: obj._clip_label(check_real("state's dro early label", y))
                             for key, y in extra["early_labels"]}
        return obj
