"""Running per-group losses from a stream in which groups are known or only posterior-attributed.

A sample with loss ``l`` and group posterior ``tau`` (a one-hot vector when the group is observed)
contributes ``tau_g`` of a sample to every group ``g``: the estimate of group ``g``'s loss is the
self-normalized ratio ``L_g = S_g / W_g`` with ``S_g = sum_t f^(n-1-t) tau_tg l_t`` and
``W_g = sum_t f^(n-1-t) tau_tg`` (``f = 1 - forgetting``), which is consistent for
``E[l | S = g] = E[l tau_g(X)] / E[tau_g(X)]`` when ``tau`` is the true posterior.  Forgetting runs
on the global sample clock, so a drifting stream is tracked with an effective window of
``1 / forgetting`` samples.

Because ``S`` is linear in the losses, a loss that is replaced later (a surrogate loss confirmed by
a delayed label) is corrected exactly: ``S_g += f^age tau_g (l - l_counted)``
leaves the state equal to the one the true loss would have produced on time.  The receipt of the
update keeps ``l_counted``, the loss counted for the sample now, and a correction updates it: a
replacement by the loss already counted changes nothing, so a label delivered twice (at-least-once
delivery) counts once, and a later correction replaces the last one.  A receipt is bound to the
object whose update issued it; another one refuses it.

Examples
--------
>>> import numpy as np
>>> stats = GroupLosses(n_groups=2, prior_weight=0.0)
>>> receipts = stats.update_many(np.array([1.0, 3.0, 2.0]), np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]]))
>>> stats.losses
array([1.33333333, 2.66666667])
>>> stats.correct(receipts.row(0), 4.0)          # sample 0's true loss arrives late: 1.0 was counted
1.0
>>> stats.losses
array([3.33333333, 2.66666667])
>>> stats.correct(receipts.row(0), 4.0)          # ... and is delivered again: nothing changes
4.0
>>> stats.losses, receipts.row(0).loss
(array([3.33333333, 2.66666667]), 4.0)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..validation import (
    SUM_TOLERANCE,
    check_array,
    check_distribution,
    check_distributions,
    check_finite,
    check_integer,
    check_non_negative,
    check_real,
    float_array,
    restores_state,
)

__all__ = ["Receipt", "Receipts", "GroupLosses", "check_rate"]


class Receipt:
    """What an update counted for one sample, kept to correct it when its true loss arrives.

    Parameters
    ----------
    index
        The sample's position in the stream (0-based).
    tau
        The group attribution used, shape ``(M,)``.
    loss
        The loss counted (typically a label-free surrogate).
    scale
        The per-group step multiplier used by mirror ascent, shape ``(M,)`` (zeros when unused).
    owner
        The :class:`GroupLosses` whose update issued the receipt; ``None`` for a receipt rebuilt
        from saved columns (the post-processor's pending labels), which no owner check can refuse.

    Attributes
    ----------
    loss : float
        The loss counted for the sample now: the update's, then the last correction's
        (:meth:`GroupLosses.correct` updates it).  A receipt taken with :meth:`Receipts.row` reads
        and updates the batch's ``loss`` column, so every receipt of one sample agrees.

    Examples
    --------
    >>> stats = GroupLosses(n_groups=2)
    >>> receipt = stats.update(1.0, [0.25, 0.75])
    >>> receipt
    Receipt(index=0, tau=[0.25, 0.75], loss=1.0, scale=[0.0, 0.0])
    >>> stats.correct(receipt, 3.0)  # the loss counted before
    1.0
    >>> receipt.loss
    3.0
    """

    __slots__ = ("index", "tau", "scale", "owner", "_store", "_row")

    def __init__(self, index: int, tau: np.ndarray, loss: float, scale: np.ndarray,
                 owner: GroupLosses | None = None):
        self.index, self.tau, self.scale, self.owner = index, tau, scale, owner
        self._store: list[float] | np.ndarray = [loss]  # where the counted loss lives: its own cell, or a column
        self._row = 0

    @property
    def loss(self) -> float:
        """The loss counted for the sample now."""
        return float(self._store[self._row])

    def _count(self, loss: float) -> None:
        self._store[self._row] = loss

    def __repr__(self) -> str:
        return (f"Receipt(index={self.index}, tau={np.asarray(self.tau).tolist()}, loss={self.loss!r}, "
                f"scale={np.asarray(self.scale).tolist()})")


class Receipts(NamedTuple):
    """The receipts of a batch of updates, as arrays (``row(i)`` is sample ``i``'s :class:`Receipt`).

    ``loss`` is the loss counted for each sample now: a correction through a receipt of
    :meth:`row` updates it.  ``owner`` is the :class:`GroupLosses` that issued them (``None``: not
    bound, as for receipts rebuilt from saved columns).
    """

    index: np.ndarray  # type: ignore[assignment]  # the public field name shadows tuple.index
    tau: np.ndarray
    loss: np.ndarray
    scale: np.ndarray
    owner: GroupLosses | None = None

    def row(self, i: int) -> Receipt:
        """Sample ``i``'s receipt (``tau`` and ``scale`` copied; its ``loss`` is this batch's ``loss[i]``)."""
        receipt = Receipt(int(self.index[i]), self.tau[i].copy(), 0.0, self.scale[i].copy(), self.owner)
        receipt._store, receipt._row = self.loss, int(i)
        return receipt

    def take(self, rows: np.ndarray) -> Receipts:
        """The receipts of the samples ``rows`` (copies of the columns), of the same owner."""
        return Receipts(self.index[rows], self.tau[rows], self.loss[rows], self.scale[rows], self.owner)


def check_rate(name: str, value) -> float:
    """A number in ``[0, 1)``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)


class GroupLosses:
    """Per-group loss estimates ``S_g / W_g`` with optional forgetting and exact late corrections.

    Parameters
    ----------
    n_groups
        ``M``.
    forgetting
        Per-sample discount ``1 - f`` of past samples: ``0`` gives running means.
    prior_weight, prior_loss
        Every group starts with ``prior_weight`` pseudo-samples of loss ``prior_loss`` (so that an
        unseen group has a defined loss).
    """

    def __init__(self, n_groups: int, forgetting: float = 0.0, prior_weight: float = 1.0, prior_loss: float = 0.0):
        self.n_groups = check_integer("n_groups", n_groups, 2)
        self.forgetting = check_rate("forgetting", forgetting)
        self.prior_weight = check_non_negative("prior_weight", prior_weight)
        self.prior_loss = check_real("prior_loss", prior_loss)
        self.sums = np.full(self.n_groups, self.prior_weight * self.prior_loss)
        self.weights = np.full(self.n_groups, self.prior_weight)
        self.n_samples = 0

    @property
    def losses(self) -> np.ndarray:
        """``L_g = S_g / W_g`` (``prior_loss`` for a group without weight)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(
                self.weights > 0, self.sums / np.where(self.weights > 0, self.weights, 1.0), self.prior_loss
            )

    def _check(self, losses, tau) -> tuple[np.ndarray, np.ndarray]:
        losses = check_finite("loss", losses)
        return losses, check_distributions("tau", tau, losses.size, self.n_groups)

    def update_many(self, losses, tau, scale: np.ndarray | None = None) -> Receipts:
        """Fold ``n`` samples in order (the same state as ``n`` single updates, up to rounding)."""
        losses, tau = self._check(losses, tau)
        n = losses.size
        if self.forgetting > 0.0:
            decay = (1.0 - self.forgetting) ** np.arange(n - 1, -1, -1)
            carry = (1.0 - self.forgetting) ** n
        else:
            decay, carry = np.ones(n), 1.0
        weighted = tau * decay[:, None]
        self.sums = carry * self.sums + losses @ weighted
        self.weights = carry * self.weights + weighted.sum(axis=0)
        index = self.n_samples + np.arange(n)
        self.n_samples += n  # the receipts' losses are a copy: corrections write into them
        return Receipts(index, tau, losses.copy(), np.zeros_like(tau) if scale is None else scale, self)

    def _check_one(self, loss, tau) -> tuple[float, np.ndarray]:
        """Cheap checks for one sample; the full validator only runs to word an error."""
        loss = check_real("loss", loss)
        try:
            row = float_array(tau, copy=True)
        except (TypeError, ValueError, OverflowError):
            return loss, check_distribution("tau", tau, self.n_groups)
        if row.shape != (self.n_groups,) or not abs(row.sum() - 1.0) <= SUM_TOLERANCE or not row.min() >= 0:
            return loss, check_distribution("tau", tau, self.n_groups)
        return loss, row

    def update(self, loss: float, tau) -> Receipt:
        """Fold one sample with loss ``loss`` and group attribution ``tau``."""
        loss, tau = self._check_one(loss, tau)
        return self._fold_one(loss, tau, np.zeros(self.n_groups))

    def _fold_one(self, loss: float, tau: np.ndarray, scale: np.ndarray) -> Receipt:
        if self.forgetting > 0.0:
            self.sums *= 1.0 - self.forgetting
            self.weights *= 1.0 - self.forgetting
        self.sums += loss * tau
        self.weights += tau
        self.n_samples += 1
        return Receipt(self.n_samples - 1, tau, loss, scale, self)

    def correct(self, receipt: Receipt, loss: float) -> float:
        """Count ``loss`` for the receipt's sample instead of the loss counted now, exactly.

        The receipt then records ``loss``: a second correction by the same loss changes nothing.

        Parameters
        ----------
        receipt
            The sample's receipt, from :meth:`update` or ``update_many(...).row(i)`` of this object.
        loss
            The sample's true loss, finite.

        Returns
        -------
        float
            The loss counted before (``loss`` itself: nothing changed).
        """
        loss = check_real("loss", loss)
        self._check_receipt(receipt)
        counted = receipt.loss
        if loss != counted:
            age = self.n_samples - 1 - receipt.index
            self.sums += (1.0 - self.forgetting) ** age * (loss - counted) * receipt.tau
            receipt._count(loss)
        return counted

    def _check_receipt(self, receipt: Receipt) -> None:
        if not isinstance(receipt, Receipt):
            raise ValueError(f"receipt must be a Receipt of update or update_many(...).row(i), got {receipt!r}")
        if receipt.owner is not None and receipt.owner is not self:
            raise ValueError(f"receipt must be one this updater's update issued, got another updater's: {receipt!r}")
        if not 0 <= receipt.index < self.n_samples:
            raise ValueError(f"receipt.index must be a past sample in [0, {self.n_samples}), got {receipt.index}")

    def state_dict(self) -> dict:
        return {
            "config": {
                "n_groups": self.n_groups,
                "forgetting": self.forgetting,
                "prior_weight": self.prior_weight,
                "prior_loss": self.prior_loss,
            },
            "sums": self.sums.tolist(),
            "weights": self.weights.tolist(),
            "n_samples": self.n_samples,
        }

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict) -> GroupLosses:
        obj = cls(**state["config"])
        obj.sums = check_array("state's sums", state["sums"], (obj.n_groups,), copy=True)
        obj.weights = check_array("state's weights", state["weights"], (obj.n_groups,), copy=True)
        obj.n_samples = int(state["n_samples"])
        return obj
