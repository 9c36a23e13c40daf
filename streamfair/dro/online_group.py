"""Online group-DRO weights, one sample at a time, O(groups) per sample.

Two updaters of the worst-case group distribution ``q`` over ``M`` groups (derived for
streams, not in the paper):

* :class:`SoftmaxGroupWeights` (option A, the default): the closed-form entropy-regularized weights
  ``q = softmax(L / T)`` of the running group losses ``L`` (paper eq. (6); robust value
  ``T log sum exp(L / T)``, within ``T log M`` of ``max_g L_g`` by Lemma 11).
* :class:`ExponentiatedGroupWeights` (option B): stochastic mirror ascent on ``q`` with clipped
  steps (paper App. A.1), ``theta_g += clip(step * l * tau_g / p_g, -1, 1)``, ``q = softmax(theta)``.
  The division by the arrival frequency ``p_g`` makes ``l tau_g / p_g`` an unbiased estimate of
  group ``g``'s loss under the arrival law.  Without it (``correct_arrivals=False``, the update of
  the popular group-DRO code) the drift of ``theta_g`` is ``step p_g L_g``, so ``q`` concentrates on
  ``argmax_g p_g L_g``: the most *frequent* bad group rather than the worst one.

A sample carries a loss and its group attribution ``tau`` (one-hot when the group is observed;
the group posterior ``P(S = . | x)`` when it is not, as in the post-processor).  With a posterior,
``l tau_g / p_g`` is still unbiased for ``E[l | S = g]`` (``p_g = E[tau_g]``).

Both updaters return receipts so that a surrogate loss can be replaced by a delayed true loss
exactly (:meth:`correct`): the running sums and ``theta`` are additive in the per-sample terms.  The
receipt records the loss counted now, so a correction repeated with the same loss (a label
delivered twice) changes nothing; a receipt is bound to the updater that issued it.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> groups = rng.choice(3, size=20000, p=[0.8, 0.15, 0.05])     # imbalanced arrivals
>>> losses = rng.binomial(1, np.array([0.4, 0.3, 0.5])[groups])   # group 2 is the worst
>>> onehot = np.eye(3)[groups]
>>> fair = ExponentiatedGroupWeights(3, step=0.01)
>>> naive = ExponentiatedGroupWeights(3, step=0.01, correct_arrivals=False)
>>> _ = fair.update_many(losses, onehot); _ = naive.update_many(losses, onehot)
>>> int(fair.weights.argmax()), int(naive.weights.argmax())
(2, 0)
>>> soft = SoftmaxGroupWeights(3, temperature=0.01)
>>> _ = soft.update_many(losses, onehot)
>>> soft.losses.round(2), int(soft.weights.argmax())
(array([0.4 , 0.31, 0.49]), 2)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_distribution, check_positive, restores_state
from .group_losses import GroupLosses, Receipt, Receipts
from .simplex import log_sum_exp, softmax

__all__ = ["SoftmaxGroupWeights", "ExponentiatedGroupWeights"]


class _RunningGroupStats:
    """What both updaters read from their :class:`~streamfair.dro.group_losses.GroupLosses` ``stats``."""

    stats: GroupLosses

    @property
    def n_groups(self) -> int:
        """``M``, the number of groups."""
        return self.stats.n_groups

    @property
    def losses(self) -> np.ndarray:
        """Running group losses ``L`` (behind :attr:`value`; they drive ``q`` in option A only)."""
        return self.stats.losses


class SoftmaxGroupWeights(_RunningGroupStats):
    """Entropy-regularized group-DRO weights ``softmax(L / T)`` of running group losses (option A).

    Parameters
    ----------
    n_groups
        ``M``.
    temperature
        ``T``; the paper's choice is ``eps / (2 log M)`` for a target accuracy ``eps``.  A sup-norm
        error ``delta`` in the loss estimates moves every weight by a factor within
        ``exp(+-2 delta / T)`` (Lemmas 4-5), so ``T`` of about twice the losses' standard errors
        keeps the weights stable.
    forgetting, prior_weight, prior_loss
        See :class:`~streamfair.dro.group_losses.GroupLosses`.

    Examples
    --------
    Running group losses ``L = (0, 2)``, then the last loss corrected from 3 to 1: ``L = (0, 1)``,
    whose weights at ``T = 1`` are ``(1, e) / (1 + e)`` and value ``log(1 + e)``.

    >>> import numpy as np
    >>> soft = SoftmaxGroupWeights(2, temperature=1.0, prior_weight=0.0)
    >>> receipts = soft.update_many([0.0, 1.0, 3.0], np.eye(2)[[0, 1, 1]])   # one-hot groups
    >>> soft.losses.tolist()
    [0.0, 2.0]
    >>> soft.correct(receipts.row(2), 1.0)
    >>> soft.losses.tolist(), soft.weights.round(6).tolist(), round(soft.value, 6)
    ([0.0, 1.0], [0.268941, 0.731059], 1.313262)
    >>> soft.correct(receipts.row(2), 1.0)            # the same label again: already counted
    >>> soft.losses.tolist()
    [0.0, 1.0]
    >>> receipt = soft.update(1.0, [0.0, 1.0])        # one more sample of group 1's mean loss
    >>> restored = SoftmaxGroupWeights.from_state_dict(soft.state_dict())
    >>> bool(np.array_equal(restored.weights, soft.weights))
    True
    """

    def __init__(
        self,
        n_groups: int,
        temperature: float,
        forgetting: float = 0.0,
        prior_weight: float = 1.0,
        prior_loss: float = 0.0,
    ):
        self.temperature = check_positive("temperature", temperature)
        self.stats = GroupLosses(n_groups, forgetting, prior_weight, prior_loss)

    @property
    def weights(self) -> np.ndarray:
        """``q = softmax(L / T)``."""
        return softmax(self.losses / self.temperature)

    @property
    def value(self) -> float:
        """Robust value ``T log sum_g exp(L_g / T)`` in ``[max L, max L + T log M]``."""
        return self.temperature * log_sum_exp(self.losses / self.temperature)

    def update(self, loss: float, tau: Sequence[float] | np.ndarray) -> Receipt:
        """Fold one sample into the running group losses (and so into :attr:`weights`).

        Parameters
        ----------
        loss
            The sample's loss, possibly a surrogate to be corrected by :meth:`correct`.
        tau
            Its group attribution, shape ``(M,)``: one-hot, or the group posterior.

        Returns
        -------
        Receipt
            What the update used, for :meth:`correct`.
        """
        return self.stats.update(loss, tau)

    def update_many(self, losses: ArrayLike, tau: ArrayLike) -> Receipts:
        """Fold ``n`` samples in order, as ``n`` calls to :meth:`update`.

        Parameters
        ----------
        losses
            The losses, shape ``(n,)``.
        tau
            Their group attributions, shape ``(n, M)``.

        Returns
        -------
        Receipts
            The receipts as arrays; ``receipts.row(i)`` is sample ``i``'s.
        """
        return self.stats.update_many(losses, tau)

    def correct(self, receipt: Receipt, loss: float) -> None:
        """Replace the loss counted for a sample (a surrogate) by the true one; exact for ``L``, hence for ``q``.

        The receipt then records ``loss``, so the same correction again changes nothing.

        Parameters
        ----------
        receipt
            The sample's receipt, from this updater's :meth:`update` or ``update_many(...).row(i)``.
        loss
            Its true loss.
        """
        self.stats.correct(receipt, loss)

    def state_dict(self) -> dict[str, Any]:
        """The temperature and the running group losses, as plain numbers and lists.

        Returns
        -------
        dict
            What :meth:`from_state_dict` restores from.
        """
        return {"temperature": self.temperature, "stats": self.stats.state_dict()}

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict[str, Any]) -> SoftmaxGroupWeights:
        """An updater that continues exactly as the one whose :meth:`state_dict` was taken.

        Parameters
        ----------
        state
            A :meth:`state_dict` of a :class:`SoftmaxGroupWeights`.

        Returns
        -------
        SoftmaxGroupWeights
            The restored updater.
        """
        obj = cls(state["stats"]["config"]["n_groups"], state["temperature"])
        obj.stats = GroupLosses.from_state_dict(state["stats"])
        return obj


class ExponentiatedGroupWeights(_RunningGroupStats):
    """Clipped exponentiated-gradient (mirror ascent) group weights with arrival correction (option B).

    Parameters
    ----------
    n_groups
        ``M``.
    step
        Mirror-ascent step ``eta``; App. A.1 / Prop. 2 take ``eta = c eps log M / (G^2 R^2 + M B^2)``
        for losses in ``[0, B]`` and a horizon of about ``(G^2 R^2 + B^2 M log M) / eps^2``.
    correct_arrivals
        Divide by the arrival frequency ``p_g`` (unbiased); ``False`` reproduces the biased update.
    p
        Known group frequencies; ``None``: ``(sum_t tau_tg + a) / (n + a M)`` including the current
        sample, with ``a = prior_count``.
    prior_count
        ``a`` above.
    clip
        Steps are clipped to ``[-clip, clip]`` (App. A.1 uses 1).
    forgetting
        Forgetting of the running group losses behind :attr:`value` (``q`` itself does not forget).

    Examples
    --------
    With ``p = (1/2, 1/2)`` and ``step = 1/2`` a loss of 1 in group 1 moves ``theta`` by
    ``clip(step l / p_1) = 1``: ``q = softmax(0, 1)``.  Correcting the loss to 0 undoes the step.

    >>> import numpy as np
    >>> mirror = ExponentiatedGroupWeights(2, step=0.5, p=[0.5, 0.5])
    >>> receipt = mirror.update(1.0, [0.0, 1.0])
    >>> mirror.weights.round(6).tolist()
    [0.268941, 0.731059]
    >>> mirror.correct(receipt, 0.0)
    >>> mirror.weights.tolist()
    [0.5, 0.5]
    >>> mirror.correct(receipt, 0.0)                      # delivered twice: counted once
    >>> mirror.weights.tolist()
    [0.5, 0.5]
    >>> _ = mirror.update_many([1.0, 1.0], np.eye(2))      # equal steps on both groups
    >>> mirror.weights.tolist()
    [0.5, 0.5]
    """

    def __init__(
        self,
        n_groups: int,
        step: float,
        correct_arrivals: bool = True,
        p: Sequence[float] | np.ndarray | None = None,
        prior_count: float = 1.0,
        clip: float = 1.0,
        forgetting: float = 0.0,
    ):
        self.step = check_positive("step", step)
        self.correct_arrivals = bool(correct_arrivals)
        self.stats = GroupLosses(n_groups, forgetting)
        self.p_given = None if p is None else check_distribution("p", p, self.stats.n_groups, strictly_positive=True)
        self.prior_count = check_positive("prior_count", prior_count)
        self.clip = check_positive("clip", clip)
        self.theta: np.ndarray = np.zeros(self.stats.n_groups)  # np.ndarray: numpy 2.5's stubs refuse .max()
        self.tau_sum = np.zeros(self.stats.n_groups)

    @property
    def weights(self) -> np.ndarray:
        """``q = softmax(theta)``."""
        return softmax(self.theta)

    @property
    def value(self) -> float:
        """``q . L``: the running group losses weighted by the current ``q``."""
        return float(self.weights @ self.losses)

    def _scales(self, tau: np.ndarray) -> np.ndarray:
        """``step tau_t / p_t`` (or ``step tau_t``) per sample; advances the frequency estimate."""
        if not self.correct_arrivals:
            return self.step * tau
        if self.p_given is not None:
            return self.step * tau / self.p_given
        counts = self.tau_sum + np.cumsum(tau, axis=0)
        self.tau_sum = counts[-1].copy()
        n = self.stats.n_samples + np.arange(1, tau.shape[0] + 1)
        p = (counts + self.prior_count) / (n + self.prior_count * self.n_groups)[:, None]
        return self.step * tau / p

    def update_many(self, losses: ArrayLike, tau: ArrayLike) -> Receipts:
        """``n`` samples in order: the steps do not depend on ``theta``, so they are summed at once.

        Parameters
        ----------
        losses
            The losses, shape ``(n,)``.
        tau
            Their group attributions, shape ``(n, M)``: one-hot rows, or group posteriors.

        Returns
        -------
        Receipts
            The receipts as arrays; ``receipts.row(i)`` is sample ``i``'s.
        """
        losses, tau = self.stats._check(losses, tau)
        scales = self._scales(tau)
        self.theta += np.clip(scales * losses[:, None], -self.clip, self.clip).sum(axis=0)
        self.theta -= self.theta.max()  # softmax is shift invariant; keeps theta bounded
        return self.stats.update_many(losses, tau, scales)

    def update(self, loss: float, tau: Sequence[float] | np.ndarray) -> Receipt:
        """One mirror-ascent step ``theta_g += clip(step l tau_g / p_g, -clip, clip)``.

        Parameters
        ----------
        loss
            The sample's loss, possibly a surrogate to be corrected by :meth:`correct`.
        tau
            Its group attribution, shape ``(M,)``: one-hot, or the group posterior.

        Returns
        -------
        Receipt
            What the update used (with its per-group step multiplier), for :meth:`correct`.
        """
        value, row = self.stats._check_one(loss, tau)
        if not self.correct_arrivals:
            scale = self.step * row
        elif self.p_given is not None:
            scale = self.step * row / self.p_given
        else:
            self.tau_sum += row
            n = self.stats.n_samples + 1
            scale = self.step * row / ((self.tau_sum + self.prior_count) / (n + self.prior_count * self.n_groups))
        self.theta += np.minimum(np.maximum(scale * value, -self.clip), self.clip)  # np.clip is slow on tiny arrays
        self.theta -= self.theta.max()
        return self.stats._fold_one(value, row, scale)

    def correct(self, receipt: Receipt, loss: float) -> None:
        """Replace the loss counted for a sample: ``theta += clip(s l) - clip(s l_counted)``, exact for ``q``.

        The receipt then records ``loss``, so the same correction again changes nothing.

        Parameters
        ----------
        receipt
            The sample's receipt, from this updater's :meth:`update` or ``update_many(...).row(i)``.
        loss
            Its true loss.
        """
        counted = self.stats.correct(receipt, loss)
        loss = float(loss)  # a finite number: checked by stats.correct
        if loss != counted:
            new = np.clip(receipt.scale * loss, -self.clip, self.clip)
            self.theta += new - np.clip(receipt.scale * counted, -self.clip, self.clip)
            self.theta -= self.theta.max()

    def state_dict(self) -> dict[str, Any]:
        """The configuration, ``theta``, the arrival counts and the running group losses.

        Returns
        -------
        dict
            What :meth:`from_state_dict` restores from (plain numbers and lists).
        """
        return {
            "config": {
                "n_groups": self.n_groups,
                "step": self.step,
                "correct_arrivals": self.correct_arrivals,
                "p": None if self.p_given is None else self.p_given.tolist(),
                "prior_count": self.prior_count,
                "clip": self.clip,
                "forgetting": self.stats.forgetting,
            },
            "theta": self.theta.tolist(),
            "tau_sum": self.tau_sum.tolist(),
            "stats": self.stats.state_dict(),
        }

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict[str, Any]) -> ExponentiatedGroupWeights:
        """An updater that continues exactly as the one whose :meth:`state_dict` was taken.

        Parameters
        ----------
        state
            A :meth:`state_dict` of an :class:`ExponentiatedGroupWeights`.

        Returns
        -------
        ExponentiatedGroupWeights
            The restored updater.
        """
        obj = cls(**state["config"])
        obj.theta = check_array("state's theta", state["theta"], (obj.n_groups,), copy=True)
        obj.tau_sum = check_array("state's tau_sum", state["tau_sum"], (obj.n_groups,), copy=True)
        obj.stats = GroupLosses.from_state_dict(state["stats"])
        return obj
