"""Online f-divergence DRO: per-sample worst-case weights from a tracked dual variable.

On a stream the worst-case distribution of an f-divergence ball is a density ratio
``w(l) = dQ*/dP = n psi*'(l - eta)`` whose dual variable ``eta`` solves ``E_P[w(l; eta)] = 1``
(the population version of the paper's eq. (10); derived, not in the paper).  Each tracker runs
Robbins-Monro on ``eta`` -- ``eta <- eta - gamma_t (1 - w_t)``, which is SGD in ``y`` on the paper's
``Upsilon`` with the uniform-sampling estimator of its Section 4.2 -- and averages the per-sample
dual value ``v(l; eta)`` into the robust risk estimate ``value``:

=============================  ===============================  =============================================
tracker                         weight ``w(l; eta)``              per-sample dual value ``v(l; eta)``
=============================  ===============================  =============================================
:class:`CVaRTracker`            ``1{l > eta} / alpha``            ``eta + (l - eta)_+ / alpha``
``CVaRTracker(temperature=T)``  ``min(1/alpha, e^((l-eta)/T-1))``  ``eta + w (l - eta) - T w log w``
:class:`ChiSquareTracker`       ``(l - eta)_+ / lam``             ``eta + lam c + (l - eta)_+^2 / (2 lam)``
:class:`KLTracker`              ``exp((l - eta) / T)``            ``eta = T log E exp(l / T)``
=============================  ===============================  =============================================

For CVaR ``eta`` converges to the ``(1 - alpha)``-quantile (VaR).  For chi-square, ``c = 1/2`` with a
fixed penalty ``lam`` and ``c = rho + 1/2`` for the constrained ball of size ``rho``, where ``lam`` is
a second dual variable updated by ``lam <- max(lam_min, lam - gamma (rho + 1/2 - w^2 / 2))`` (the
paper's Section 2.9 Lagrangian, made jointly stochastic).  KL needs no SGD: ``eta`` is the log of
an average of ``exp(l / T)``, kept in log space.

Step sizes are ``gamma_t = step (t + 1)^(-power)``; values are averaged with rate
``max(1 / (t + 1), value_rate)`` (a running mean, or an exponential average for drifting streams).

Every update returns the sample's weight and a receipt; :meth:`DivergenceTracker.correct` replaces
a surrogate loss by its delayed true loss: the value average is corrected
exactly (for the recorded ``eta``), ``eta`` by the difference of the two weights' steps, which is
exact when no sample came in between and approximate otherwise (the update is nonlinear in
``eta``).  The KL tracker's correction is exact.  The receipt records the loss counted now, so a
correction repeated with the same loss (a label delivered twice) changes nothing; a receipt is
bound to the tracker that issued it.

Examples
--------
>>> import numpy as np
>>> losses = np.random.default_rng(0).exponential(size=200_000)
>>> tracker = CVaRTracker(alpha=0.1, step=1.0, power=1.0)
>>> weights = tracker.update_many(losses)
>>> round(tracker.threshold, 1), round(tracker.value, 1)      # VaR = log 10, CVaR = 1 + log 10
(2.3, 3.3)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, NoReturn, Self

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_non_negative, check_positive, check_real, restores_state
from .group_losses import check_rate
from .weights import _check_alpha, _check_losses

__all__ = ["DualReceipt", "DivergenceTracker", "CVaRTracker", "ChiSquareTracker", "KLTracker"]


@dataclass(slots=True)
class DualReceipt:
    """What a tracker update used for one sample, kept to correct it when its true loss arrives.

    :meth:`DivergenceTracker.correct` sets ``loss`` to the loss it counts instead, so that the
    same correction again changes nothing.  ``owner`` is the tracker whose update issued the
    receipt (another tracker refuses it; ``None``: not checked).
    """

    index: int
    loss: float  # the loss counted for the sample now (the update's, then the last correction's)
    eta: float
    lam: float
    step: float
    rate: float  # the value-averaging rate of this sample
    log_keep: float  # sum of log(1 - rate) of samples 1..index (for the exact discount)
    owner: DivergenceTracker | None = field(default=None, repr=False, compare=False)


class DivergenceTracker:
    """Robbins-Monro tracking of the f-divergence dual variable (the generic part).

    Parameters
    ----------
    step, power
        Step sizes ``gamma_t = step (t + 1)^(-power)``, ``power`` in ``[0, 1]`` (0: constant step,
        for drifting streams; the constrained :class:`ChiSquareTracker` needs ``power >= 1/2``).
    value_rate
        Floor of the value-averaging rate (0: running mean).
    eta
        Initial dual variable.
    """

    def __init__(self, step: float = 0.1, power: float = 0.6, value_rate: float = 0.0, eta: float = 0.0):
        self.step = check_positive("step", step)
        if isinstance(power, bool) or not isinstance(power, (int, float)) or not 0.0 <= power <= 1.0:
            raise ValueError(f"power must be a number in [0, 1], got {power!r}")
        self.power = float(power)
        self.value_rate = check_rate("value_rate", value_rate)
        self.eta = check_real("eta", eta)
        self.lam = 1.0
        self.value = 0.0
        self.n_samples = 0
        self._log_keep = 0.0

    # -------------------------------------------------------------- the formulas, checked
    def weight(self, loss: float, eta: float | None = None) -> float:
        """The density ratio ``w(l; eta)`` (at the current ``eta`` by default; the module's table).

        Parameters
        ----------
        loss
            A sample's loss ``l``, finite.
        eta
            The dual variable; ``None``: the tracked :attr:`eta`.

        Returns
        -------
        float
            The sample's weight, non-negative, of mean one under the stream's law at the optimal ``eta``.
        """
        return self._weight(check_real("loss", loss), self.eta if eta is None else check_real("eta", eta))

    def dual_value(self, loss: float, eta: float) -> float:
        """The per-sample dual value ``v(l; eta)`` whose mean is minimized by the optimal ``eta`` (the module's table).

        Parameters
        ----------
        loss
            A sample's loss ``l``, finite.
        eta
            The dual variable.

        Returns
        -------
        float
            ``v(l; eta)``; its mean at the optimal ``eta`` is the robust risk.
        """
        return self._dual_value(check_real("loss", loss), check_real("eta", eta))

    def _weight(self, loss: float, eta: float) -> float:
        raise NotImplementedError

    def _dual_value(self, loss: float, eta: float) -> float:
        raise NotImplementedError

    def _stepped_lam(self, w: float, gamma: float) -> float:
        """The multiplier ``lam`` after a step with weight ``w`` (constant but for the constrained chi-square)."""
        return self.lam

    @property
    def threshold(self) -> float:
        """The tracked dual variable ``eta`` (VaR for CVaR)."""
        return self.eta

    # -------------------------------------------------------------- generic machinery
    def update(self, loss: float) -> tuple[float, DualReceipt]:
        """Learn one loss; return its weight ``w(l; eta_t)`` (the DRO sample weight) and a receipt.

        Parameters
        ----------
        loss
            The sample's loss (finite), possibly a surrogate to be corrected by :meth:`correct`.

        Returns
        -------
        weight : float
            ``w(l; eta_t)`` at the dual variable before this update.
        receipt : DualReceipt
            What the update used, for :meth:`correct`.
        """
        loss = check_real("loss", loss)
        t, eta, lam = self.n_samples, self.eta, self.lam
        w, gamma, rate = self._advance(loss)
        return w, DualReceipt(t, loss, eta, lam, gamma, rate, self._log_keep, self)

    def update_many(self, losses: ArrayLike) -> np.ndarray:
        """Learn ``n`` losses in order (no receipts); return their weights.

        Parameters
        ----------
        losses
            The losses, shape ``(n,)``, in stream order.

        Returns
        -------
        ndarray of shape (n,)
            Each sample's weight ``w(l_t; eta_t)``, as :meth:`update` returns them.
        """
        advance = self._advance
        return np.array([advance(loss)[0] for loss in _check_losses(losses).tolist()])

    def _advance(self, loss: float) -> tuple[float, float, float]:
        """One Robbins-Monro step; returns ``(w, gamma, rate)``.  A loss the state cannot hold changes nothing."""
        t = self.n_samples
        eta = self.eta
        w = self._weight(loss, eta)
        gamma = self.step * (t + 1) ** -self.power
        rate = max(1.0 / (t + 1), self.value_rate)
        value = self.value + rate * (self._dual_value(loss, eta) - self.value)
        lam = self._stepped_lam(w, gamma)
        if not (math.isfinite(value) and math.isfinite(lam)):
            _refuse(loss)
        self.value, self.lam = value, lam
        if t > 0:
            self._log_keep += math.log1p(-rate)
        self.eta = eta - gamma * (1.0 - w)
        self.n_samples = t + 1
        return w, gamma, rate

    def correct(self, receipt: DualReceipt, loss: float) -> None:
        """Replace the loss counted for the receipt's sample by ``loss`` (e.g. a surrogate by its delayed true loss).

        The value average is corrected exactly; ``eta`` (and chi-square's ``lam``) exactly when no
        sample was learned since the receipt's, approximately otherwise.  The receipt then records
        ``loss``: the same correction again changes nothing.

        Parameters
        ----------
        receipt
            The receipt this tracker's :meth:`update` returned for the sample.
        loss
            The sample's true loss.
        """
        loss = check_real("loss", loss)
        self._check_receipt(receipt)
        if loss == receipt.loss:  # already counted
            return
        discount = receipt.rate * math.exp(self._log_keep - receipt.log_keep)
        eta, lam = self.eta, self.lam
        self.eta, self.lam = receipt.eta, receipt.lam  # evaluate the formulas at the recorded duals
        new, old = self._weight(loss, receipt.eta), self._weight(receipt.loss, receipt.eta)
        value = self.value + discount * (
            self._dual_value(loss, receipt.eta) - self._dual_value(receipt.loss, receipt.eta))
        self.eta, self.lam = eta, lam
        corrected_lam = self._corrected_lam(new, old, receipt.step)
        if not (math.isfinite(value) and math.isfinite(corrected_lam)):
            _refuse(loss)
        self.value, self.lam = value, corrected_lam
        self.eta += receipt.step * (new - old)
        receipt.loss = loss

    def _check_receipt(self, receipt: DualReceipt) -> None:
        if not isinstance(receipt, DualReceipt) or not 0 <= receipt.index < self.n_samples:
            raise ValueError(f"receipt must be the DualReceipt of one of the {self.n_samples} samples learned, "
                             f"got {receipt!r}")
        if receipt.owner is not None and receipt.owner is not self:
            raise ValueError(f"receipt must be one this tracker's update issued, got another tracker's: {receipt!r}")

    def _corrected_lam(self, new: float, old: float, gamma: float) -> float:
        """The multiplier ``lam`` after replacing a step's weight ``old`` by ``new``."""
        return self.lam

    def _config(self) -> dict:
        return {"step": self.step, "power": self.power, "value_rate": self.value_rate}

    def state_dict(self) -> dict[str, Any]:
        """The configuration and the state (duals, value, counters), as plain numbers.

        Returns
        -------
        dict
            What :meth:`from_state_dict` restores from.
        """
        return {
            "class": type(self).__name__,
            "config": self._config(),
            "eta": self.eta,
            "lam": self.lam,
            "value": self.value,
            "n_samples": self.n_samples,
            "log_keep": self._log_keep,
        }

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict[str, Any]) -> Self:
        """A tracker that continues exactly as the one whose :meth:`state_dict` was taken.

        Parameters
        ----------
        state
            A :meth:`state_dict` of a tracker of this class.

        Returns
        -------
        DivergenceTracker
            The restored tracker, of the class ``from_state_dict`` is called on.
        """
        if state.get("class") != cls.__name__:
            raise ValueError(f"state is for {state.get('class')!r}, expected {cls.__name__!r}")
        obj = cls(**state["config"])
        obj.eta, obj.lam, obj.value = float(state["eta"]), float(state["lam"]), float(state["value"])
        obj.n_samples, obj._log_keep = int(state["n_samples"]), float(state["log_keep"])
        return obj


class CVaRTracker(DivergenceTracker):
    """CVaR at level ``alpha`` (optionally entropy-regularized with temperature ``T``).

    Without regularization ``eta`` is a stochastic quantile tracker: at equilibrium
    ``P(l > eta) = alpha``.  The weights are then discontinuous at ``l = eta``, so a noisy
    (surrogate) loss flips them; a temperature ``T > 0`` bounds the multiplicative sensitivity of
    the weights by ``exp(2 delta / T)`` for a loss error ``delta`` (Lemmas 4-5).

    Parameters
    ----------
    alpha
        The level, in ``(0, 1]``: the share of worst samples the CVaR averages.
    temperature
        ``T >= 0``, in the losses' units (0: the unregularized CVaR).
    **kwargs
        ``step``, ``power``, ``value_rate`` and ``eta`` of :class:`DivergenceTracker`.

    Examples
    --------
    On uniform losses on ``[0, 1]`` the VaR at ``alpha = 0.2`` is 0.8 and the CVaR 0.9:

    >>> import numpy as np
    >>> losses = np.random.default_rng(0).uniform(size=20_000)
    >>> tracker = CVaRTracker(alpha=0.2, step=1.0, power=1.0)
    >>> weights = tracker.update_many(losses)
    >>> round(tracker.threshold, 2), round(tracker.value, 2)
    (0.8, 0.9)
    >>> sorted(set(weights.tolist()))                    # 0 below eta, 1 / alpha above
    [0.0, 5.0]

    A surrogate loss corrected before the next sample leaves the state the true loss gives:

    >>> on_time = CVaRTracker.from_state_dict(tracker.state_dict())
    >>> weight, receipt = tracker.update(0.99)
    >>> tracker.correct(receipt, 0.1)
    >>> _ = on_time.update(0.1)
    >>> bool(np.isclose(tracker.eta, on_time.eta) and np.isclose(tracker.value, on_time.value))
    True
    >>> tracker.correct(receipt, 0.1)                   # the label delivered again: already counted
    >>> bool(np.isclose(tracker.eta, on_time.eta) and np.isclose(tracker.value, on_time.value))
    True

    With a temperature the weights are smooth: ``min(1 / alpha, exp((l - eta) / T - 1))``.

    >>> smooth = CVaRTracker(alpha=0.5, temperature=1.0)
    >>> smooth.weight(3.0, eta=2.0), smooth.dual_value(3.0, eta=2.0)   # e^0 = 1; 2 + 1 * 1 - 0
    (1.0, 3.0)
    """

    def __init__(self, alpha: float, temperature: float = 0.0, **kwargs: float):
        self.alpha = _check_alpha(alpha)
        self.temperature = check_non_negative("temperature", temperature)
        super().__init__(**kwargs)

    def _weight(self, loss, eta):
        if self.temperature == 0.0:
            return 1.0 / self.alpha if loss > eta else 0.0
        exponent = (loss - eta) / self.temperature - 1.0
        return 1.0 / self.alpha if exponent >= -math.log(self.alpha) else math.exp(exponent)

    def _dual_value(self, loss, eta):
        if self.temperature == 0.0:
            return eta + max(loss - eta, 0.0) / self.alpha
        w = self._weight(loss, eta)
        entropy = w * math.log(w) if w > 0 else 0.0
        return eta + w * (loss - eta) - self.temperature * entropy

    def _config(self):
        return {"alpha": self.alpha, "temperature": self.temperature, **super()._config()}


class ChiSquareTracker(DivergenceTracker):
    """Chi-square DRO: constrained (ball size ``rho``, ``lam`` tracked) or penalized (fixed ``lam``).

    Parameters
    ----------
    rho
        Ball size ``D_chi2(Q, P) <= rho``; ``None`` for the penalized form.
    lam
        The penalty coefficient (penalized form), or the initial multiplier (constrained form).
    lam_min
        Floor of the tracked multiplier (weights are ``<= B / lam_min`` for losses in ``[0, B]``).
    **kwargs
        ``step``, ``power``, ``value_rate`` and ``eta`` of :class:`DivergenceTracker`.  The
        constrained form needs ``power >= 1/2`` (the default is 0.6): the step of ``lam`` is
        ``gamma w^2 / 2`` with ``w`` up to ``B / lam``, and with a slower decay, or a constant step,
        ``lam`` overshoots and the iterates diverge (measured on uniform losses at ``step = 0.1``:
        every ``power <= 0.3`` diverged, at loss scales 0.1, 1 and 10).  On a drifting stream use the
        penalized form, whose steps are bounded, with a constant step.

    Examples
    --------
    For uniform losses on ``[0, 1]`` and ``rho = 5/6`` the worst case is ``w = 8 (l - 1/2)_+``:
    ``eta = 1/2``, ``lam = 1/8`` and the robust risk ``E[w l] = 5/6``.

    >>> import numpy as np
    >>> losses = np.random.default_rng(0).uniform(size=20_000)
    >>> tracker = ChiSquareTracker(rho=5 / 6)
    >>> _ = tracker.update_many(losses)
    >>> bool(abs(tracker.threshold - 0.5) < 0.01), bool(abs(tracker.value - 5 / 6) < 0.01)
    (True, True)

    The penalized form at that ``lam``: ``w = (l - eta)_+ / lam``,
    ``v = eta + lam / 2 + (l - eta)_+^2 / (2 lam)``.

    >>> penalized = ChiSquareTracker(lam=0.125)
    >>> penalized.weight(0.75, eta=0.5), penalized.dual_value(0.75, eta=0.5)   # 0.25 / 0.125; 0.5 + 0.0625 + 0.25
    (2.0, 0.8125)
    """

    def __init__(self, rho: float | None = None, lam: float = 1.0, lam_min: float = 1e-3, **kwargs: float):
        self.rho = None if rho is None else check_positive("rho", rho)
        self.lam_min = check_positive("lam_min", lam_min)
        super().__init__(**kwargs)
        if self.rho is not None and self.power < 0.5:
            raise ValueError(f"power must be >= 0.5 for the constrained chi-square tracker (rho given): with a "
                             f"slower-decaying or constant step lam diverges; use the penalized form (lam, no "
                             f"rho) for a constant step, got {self.power!r}")
        self.lam = check_positive("lam", lam)
        self._lam_initial = self.lam

    def _weight(self, loss, eta):
        return max(loss - eta, 0.0) / self.lam

    def _dual_value(self, loss, eta):
        excess = max(loss - eta, 0.0)
        size = 0.5 if self.rho is None else self.rho + 0.5
        return eta + self.lam * size + excess * excess / (2.0 * self.lam)  # inf, not OverflowError, past the range

    def _stepped_lam(self, w, gamma):
        if self.rho is None:
            return self.lam
        return max(self.lam_min, self.lam - gamma * (self.rho + 0.5 - 0.5 * w * w))

    def _corrected_lam(self, new, old, gamma):
        if self.rho is None:
            return self.lam
        return max(self.lam_min, self.lam + 0.5 * gamma * (new * new - old * old))

    def _config(self):
        return {"rho": self.rho, "lam": self._lam_initial, "lam_min": self.lam_min, **super()._config()}


class KLTracker(DivergenceTracker):
    """KL-penalized DRO with temperature ``T``: ``eta = T log E exp(l / T)``, weights ``exp((l - eta) / T)``.

    The average of ``exp(l / T)`` is kept in log space (``m <- logaddexp(m + log(1 - k), log k + l / T)``),
    so large ``l / T`` cannot overflow; the value is ``eta`` itself and corrections are exact.

    Parameters
    ----------
    temperature
        ``T > 0``, in the losses' units.
    value_rate
        Floor of the averaging rate of ``exp(l / T)`` (0: the running mean, which makes ``value``
        exactly :func:`~streamfair.dro.kl_penalized`'s value of the losses seen).

    Examples
    --------
    The mean of ``exp(l)`` over ``l = (0, log 3)`` is 2, so ``eta = log 2``; a third loss of 5
    corrected to ``log 4`` makes it ``log(8 / 3)``:

    >>> import math
    >>> tracker = KLTracker(temperature=1.0)
    >>> tracker.update_many([0.0, math.log(3.0)]).round(6).tolist()     # the second at eta = 0
    [1.0, 3.0]
    >>> round(tracker.value, 6), round(math.log(2.0), 6)
    (0.693147, 0.693147)
    >>> weight, receipt = tracker.update(5.0)
    >>> tracker.correct(receipt, math.log(4.0))
    >>> round(tracker.value, 6), round(math.log(8 / 3), 6)
    (0.980829, 0.980829)
    >>> round(tracker.weight(math.log(4.0)), 6)                 # 4 / (8 / 3)
    1.5
    """

    def __init__(self, temperature: float, value_rate: float = 0.0):
        self.temperature = check_positive("temperature", temperature)
        super().__init__(value_rate=value_rate)

    def _weight(self, loss, eta):
        return math.exp(min((loss - eta) / self.temperature, 700.0))  # the exponent capped against overflow

    def _dual_value(self, loss, eta):
        return eta  # the KL value needs no per-sample term

    def _advance(self, loss):
        t = self.n_samples
        w = self._weight(loss, self.eta) if t else 1.0
        rate = max(1.0 / (t + 1), self.value_rate)
        scaled = loss / self.temperature
        if t == 0:
            m = scaled
        else:
            m = float(np.logaddexp(self.eta / self.temperature + math.log1p(-rate), math.log(rate) + scaled))
        eta = self.temperature * m
        if not math.isfinite(eta):
            _refuse(loss)
        if t > 0:
            self._log_keep += math.log1p(-rate)
        self.eta = self.value = eta
        self.n_samples = t + 1
        return w, 0.0, rate

    def correct(self, receipt: DualReceipt, loss: float) -> None:
        """Replace the loss counted for the receipt's sample by ``loss``, exactly (linear in ``exp(l / T)``).

        The receipt then records ``loss``: the same correction again changes nothing.

        Parameters
        ----------
        receipt
            The receipt this tracker's :meth:`update` returned for the sample.
        loss
            The sample's true loss.
        """
        loss = check_real("loss", loss)
        self._check_receipt(receipt)
        if loss == receipt.loss:  # already counted
            return
        log_discount = math.log(receipt.rate) + self._log_keep - receipt.log_keep
        m = self.eta / self.temperature
        new = log_discount + loss / self.temperature
        old = log_discount + receipt.loss / self.temperature
        top = max(m, new, old)
        total = math.exp(m - top) + math.exp(new - top) - math.exp(old - top)
        eta = self.temperature * (top + math.log(max(total, np.finfo(float).tiny)))
        if not math.isfinite(eta):
            _refuse(loss)
        self.eta = self.value = eta
        receipt.loss = loss

    def _config(self):
        return {"temperature": self.temperature, "value_rate": self.value_rate}


def _refuse(loss: float) -> NoReturn:
    """Refuse a (finite) loss whose update would leave the tracker's state beyond the floating-point range."""
    raise ValueError(f"loss is too large for the tracker's floating-point state, got {loss!r}")
