"""Anytime, tracking dual iterates: projected SGD with a bounded step schedule, served as a mixture of recent policies.

The paper's optimizers (:mod:`streamfair.optimizer`) are built for a known horizon ``T`` and
serve their output after ``T`` samples.  A live stream needs a predictor that is corrected from
the first samples on and that follows the stream when it drifts.  :class:`TrackingOptimizer`
runs the paper's projected SGD (step ``1 / M``, ``M = 2 beta sigma^2`` the smoothness of the
dual, Lemma 3.4) without a horizon and keeps a ring of ``SNAPSHOTS`` iterates, one every
``memory / SNAPSHOTS`` samples.  The served predictor is the uniform *mixture* of the policies at
those iterates (their primal average), not the policy at their average: SGD with a floored step keeps
fluctuating around the optimum, and by Jensen's inequality the policy at an averaged dual
violates the constraints that the averaged policies meet (measured at ``ks = 0.05`` on
populations with exact posteriors, the mean served KS from 10,000 to 30,000 samples: 0.051 for
the mixture against 0.057 for the averaged dual on Adult, 0.074 against 0.080 on Communities &
Crime; within 0.001 on Law School).  So that:

* predictions are corrected from the first sample on (the live iterate is served until the
  first snapshot);
* the predictor forgets: it only depends on the iterates of the last ``memory`` samples, so a
  shift of the stream is followed within a few ``memory`` samples, however long it has run;
* it moves in small steps: it changes only when a snapshot is taken, and then one of the
  ``SNAPSHOTS`` components of the mixture is replaced, so the law of the prediction of any ``x``
  moves by at most ``1 / SNAPSHOTS`` in total variation every ``memory / SNAPSHOTS`` samples
  once the ring is full (``1 / k`` while it holds ``k`` snapshots).  (The post-processor refreshes
  the mean of ``tau`` it corrects ``tau`` by at the same moments, which adds its own, small, move.)

The stochastic gradient ``(C pi(x) - b) t(x)^T`` subtracts a baseline ``b``, the exponential
average of ``C pi`` over ``memory`` samples (a control variate): ``E[t] = 0`` under the
group shares, so the expectation is the paper's gradient, while the noise of the rows whose
``C pi(x)`` is nearly the same for everyone (the upper thresholds of the CDF constraints, where
it is close to 1) drops from ``Var t`` to almost nothing.  Where the shares ``p`` differ from the
mean of ``tau``, the centred rows estimate each group's CDF normalized by ``E[tau_s]`` rather
than by ``p_s`` (a proper distribution).  Measured on Law School: the worst-group KS on test
after 500 samples went from 0.074 to 0.047, and its largest value over 4,000-20,000 samples from
0.088 to 0.054.

**Small groups.**  A group with a share ``p_s`` of the stream has about ``p_s n`` of ``n``
samples, and its prediction law cannot be learned faster than they come: with the step of two
equal groups kept for good, a group of 5% is served at 2.2 times the target on average where two
equal groups are served at 1.25 times.  So the step is ``1 / M`` for the first ``memory`` samples
and then decays like ``memory / n`` until ``n`` reaches ``settle = memory / min(1, 2 p_min)``,
when the smallest group has had ``memory / 2`` samples, as each of two equal groups has in
``memory``; it stays there.  The step is constant within a snapshot interval (it is re-derived at
each snapshot), and two equal groups (``p_min = 1/2``) keep ``1 / M`` throughout.  Measured with
a group of 5% (2%): 1.5 (1.8) times the target on average; after an abrupt shift long past
``settle``, back at that level within 3,000 samples, as the constant step is at its own.

Steps are grouped in windows of ``memory`` samples (the optimizer's "epochs"): ``M`` and ``p_min``
are re-derived from the current ``p`` estimate at each window end, through ``epoch_hook`` and
:meth:`retune`, as the paper's optimizers re-derive theirs at each restart.

>>> import numpy as np
>>> opt = TrackingOptimizer(n_rows=3, slack=np.array([0.1, 0.1]), step=0.5, memory=32, smallest_share=0.1)
>>> opt.learn(1.0, False, np.zeros(2), np.zeros(3))   # t = 0: no gap, only the slack pushes, w stays at 0
>>> float(opt.served.max()), opt.steps_left(), opt.served_points.shape
(0.0, 31, (1, 2, 3, 2))
>>> opt.baseline.round(3).tolist()                    # the mean of C pi so far: the uniform policy
[0.333, 0.333, 0.333]
>>> opt.settle, settle_samples(32, 0.5)               # the step decays until 160 samples, or never
(160.0, 32.0)
>>> for _ in range(63):
...     opt.learn(1.0, False, np.zeros(2), np.zeros(3))
>>> opt.n_steps, opt.step                             # 0.5 * 32 / 64
(64, 0.25)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import kernel
from .validation import check_array, check_integer, check_positive

#: Iterates in the served mixture.
SNAPSHOTS = 16


def absent_share(memory: int, n_groups: int) -> float:
    """``min(1 / memory, 1 / (2K))``: a group whose share in use is below it is absent from the stream.

    Below ``1 / memory`` a group has less than one expected sample in the memory: its prediction
    law cannot be learned, and a constraint on it (a group declared but never seen, whose
    posterior is 0 everywhere) only tilts everyone's predictions.  An absent group's features are
    0, so it imposes no constraint and does not slow the step, until its share rises again.  The
    ``1 / (2K)`` keeps the largest group, whose share is at least ``1 / K``, present whatever
    ``memory``.

    >>> absent_share(2000, 3), absent_share(1, 2)
    (0.0005, 0.25)
    """
    return min(1.0 / memory, 0.5 / n_groups)


def settle_samples(memory: int, smallest_share: float) -> float:
    """``memory / min(1, 2 p_min)``: the samples after which the step stops decaying.

    By then a group of share ``p_min`` has had ``memory / 2`` samples, as each of two equal groups
    has in ``memory`` (see the module docstring).

    >>> settle_samples(2000, 0.05), settle_samples(2000, 0.6)
    (20000.0, 2000.0)
    """
    return memory / min(1.0, 2.0 * smallest_share)


class TrackingOptimizer:
    """Projected SGD on the dual with a bounded step schedule; serves the mixture of recent iterates' policies.

    Parameters
    ----------
    n_rows
        Number of constraint rows (atoms, or thresholds of the CDF constraints).
    slack
        Per-group slack, shape ``(K,)``.
    step
        The first SGD step (``1 / M`` in the post-processor); :attr:`step` is the current one.
    memory
        Samples covered by the served mixture (``SNAPSHOTS`` iterates, one every
        ``memory / SNAPSHOTS`` samples); also the length of a step-size window.
    smallest_share
        ``p_min``, the smallest group's share of the samples: the step decays until
        :func:`settle_samples` (``1/2`` or more: it never does).
    """

    def __init__(self, *, n_rows: int, slack: np.ndarray, step: float, memory: int, smallest_share: float):
        self.slack = np.asarray(slack, dtype=float)
        shape = (2, n_rows, self.slack.size)
        self.w = np.zeros(shape)
        self.snapshots = np.zeros((SNAPSHOTS,) + shape)
        self.n_snapshots = 0
        self.memory = int(memory)
        self.interval = max(1, self.memory // SNAPSHOTS)
        self.n_steps = 0
        self.first_step = float(step)
        self.settle = settle_samples(self.memory, smallest_share)
        self._set_step()
        self.baseline = np.zeros(n_rows)  # exponential average of the constraint rows C pi
        self.epoch_hook: Callable[[], None] | None = None  # called at each window end
        self.served_version = 0  # changes whenever the served points may have changed

    @property
    def served_points(self) -> np.ndarray:
        """The dual points whose policies the served predictor mixes uniformly: ``(k, 2, rows, K)``."""
        if self.n_snapshots == 0:
            return self.w[None]
        return self.snapshots[: min(self.n_snapshots, SNAPSHOTS)]

    @property
    def served(self) -> np.ndarray:
        """The mean of the served points (for the dual norms and the gradient-mapping certificate)."""
        return self.served_points.mean(axis=0)

    @property
    def output(self) -> np.ndarray:
        """The optimizer's output: the mean of the served points."""
        return self.served

    @property
    def mapping_step(self) -> float:
        """The ``alpha`` of the gradient-mapping certificate: the SGD step itself."""
        return self.step

    def retune(self, smoothness: float, mu: float, smallest_share: float) -> None:
        """Set the first step to ``1 / M`` for the smoothness ``M``, and ``p_min`` (``mu`` is not used by SGD)."""
        self.first_step = 1.0 / smoothness
        self.settle = settle_samples(self.memory, smallest_share)
        self._set_step()

    def _set_step(self) -> None:
        """The step of the current snapshot interval: ``first_step * memory / n``, ``n`` its start clipped to
        ``[memory, settle]`` (``first_step`` itself, bit for bit, while ``n <= memory`` or ``settle == memory``)."""
        start = self.n_steps - self.n_steps % self.interval
        self.step = self.first_step * (self.memory / min(max(start, self.memory), self.settle))

    def _baseline_count(self) -> int:
        """The baseline ``b`` moves towards this step's ``C pi`` by ``1 / min(steps, memory)`` (this step counted)."""
        return min(self.n_steps + 1, self.memory)

    def learn(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One projected step on one sample (group features ``t``, costs ``beta r``); a snapshot every ``interval``.

        The gradient is ``(+gap + slack, -gap + slack)`` with ``gap = outer(C pi - b, t)``, ``pi`` the
        policy at the iterate; ``cdf`` says which constraint family ``C`` is (:mod:`streamfair.kernel`).
        """
        kernel.tracking_learn(self.w, self.baseline, self.slack, self.step, beta, cdf, features, scaled_costs,
                              self._baseline_count())
        self.advance(1)

    def learn_rows(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """:meth:`learn` on each row in turn: the rows up to each snapshot or window end in one compiled loop."""
        start, n = 0, features.shape[0]
        while start < n:
            stop = min(n, start + min(self.interval - self.n_steps % self.interval, self.steps_left()))
            kernel.tracking_learn_rows(self.w, self.baseline, self.slack, self.step, beta, cdf, features[start:stop],
                                       scaled_costs[start:stop], self.n_steps, self.memory)
            self.advance(stop - start)
            start = stop

    def learn_batch(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One projected step on the mean gradient of a mini-batch (one sample per row); ``b`` moves by their mean."""
        kernel.tracking_learn_batch(self.w, self.baseline, self.slack, self.step, beta, cdf, features, scaled_costs,
                                    self._baseline_count())
        self.advance(1)

    def step_state(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, int]:
        """``(w, baseline, slack, step, n_steps)`` of the next step, for a compiled step that updates them in place.

        ``n_steps`` counts the steps before it (the baseline's count is ``min(n_steps + 1, memory)``);
        :meth:`advance` then counts the step.
        """
        return self.w, self.baseline, self.slack, self.step, self.n_steps

    def advance(self, steps: int) -> None:
        """Count ``steps`` steps, none of which but the last may end a snapshot interval or a window."""
        self.n_steps += steps
        if self.n_steps % self.interval == 0:
            self.snapshots[self.n_snapshots % SNAPSHOTS] = self.w
            self.n_snapshots += 1
            self.served_version += 1
            self._set_step()
        elif self.n_snapshots == 0:  # the live iterate is served
            self.served_version += 1
        if self.n_steps % self.memory == 0 and self.epoch_hook is not None:
            self.epoch_hook()

    def served_steps(self) -> int:
        """The next samples all served by the current points (at least 1): they may change only after the last one.

        A snapshot is taken after every ``interval``-th step; before the first one, the live iterate
        is served, which every step moves.
        """
        return self.interval - self.n_steps % self.interval if self.n_snapshots else 1

    def steps_left(self) -> int:
        """Steps until the current step-size window ends (the current step included)."""
        return self.memory - self.n_steps % self.memory

    @property
    def epoch(self) -> int:
        """Completed windows of ``memory`` samples."""
        return self.n_steps // self.memory

    @property
    def epoch_horizon(self) -> int:
        """Samples in a window: ``memory``."""
        return self.memory

    def progress(self) -> float:
        """Fraction of the current window already used, in ``[0, 1)``."""
        return (self.n_steps % self.memory) / self.memory

    def state_dict(self) -> dict:
        """Arrays and counters that restore the optimizer exactly (see :meth:`load_state_dict`)."""
        return {"w": self.w.copy(), "snapshots": self.snapshots.copy(), "n_snapshots": self.n_snapshots,
                "baseline": self.baseline.copy(), "step": self.first_step, "settle": self.settle,
                "n_steps": self.n_steps}

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned.

        A state written before the step decayed has no ``settle``: the configured one is kept.
        """
        for name in ("w", "snapshots", "baseline"):
            array = getattr(self, name)
            array[...] = check_array(f"state's {name}", state[name], array.shape)
        self.n_snapshots = check_integer("state's n_snapshots", state["n_snapshots"], 0)
        self.first_step = check_positive("state's step", state["step"])
        self.settle = check_positive("state's settle", state.get("settle", self.settle))
        if self.settle < self.memory:
            raise ValueError(f"state's settle must be at least memory={self.memory} samples, got {self.settle!r}")
        self.n_steps = check_integer("state's n_steps", state["n_steps"], 0)
        self._set_step()
        self.served_version += 1
