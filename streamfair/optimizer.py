"""Projected stochastic dual iterates driven by a :class:`~streamfair.schedule.Schedule`.

The optimizer owns the arrays of the dual ``w = (Lambda, V)`` (shape ``(2, m, K)``): the iterate
``w``, the aggregate ``w_ag`` (the *served* point: AC-SA's output, or SGD's iterate average) and the
SGD3 prox centre.  A step takes the schedule's coefficients, evaluates the stochastic gradient of
one sample or of a mini-batch at the query point and updates the arrays, in one compiled call
(:mod:`streamfair.kernel`):

>>> import numpy as np
>>> from streamfair.schedule import Schedule
>>> opt = DualOptimizer(Schedule("sgd", inner="acsa", smoothness=2.0, mu=1.0, horizon=10),
...                     n_rows=3, eps=np.array([0.1, 0.1]))
>>> opt.learn(1.0, False, np.zeros(2), np.zeros(3))   # t = 0: no gap, only eps pushes, and w stays at 0
>>> float(opt.served.max()), opt.steps_left()
(0.0, 9)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import kernel
from .schedule import Run, Schedule
from .validation import check_array, check_entries, check_non_negative, check_positive

#: What predictions use: the last completed epoch's output, or the running output.
SERVING = ("epoch", "live")


class DualOptimizer:
    """Dual iterates, their restarts (runs, SGD3 stages, epochs) and the generic update.

    Parameters
    ----------
    schedule
        The step schedule (it is advanced by each step).
    n_rows
        The constraints per group: ``m`` (one per atom) or ``m - 1`` (one per threshold of the CDF).
    eps
        Per-group slack, shape ``(K,)``.
    serve
        One of :data:`SERVING`: what predictions use (see :attr:`served`).
    """

    def __init__(self, schedule: Schedule, *, n_rows: int, eps: np.ndarray, serve: str = "epoch"):
        if serve not in SERVING:
            raise ValueError(f"serve must be one of {SERVING}, got {serve!r}")
        self.schedule = schedule
        self.serve = serve
        self.eps = np.asarray(eps, dtype=float)
        shape = (2, n_rows, self.eps.size)
        # One contiguous block [w, w_ag, c - eps]: the compiled step's operand.
        self._stack = np.zeros((3,) + shape)
        self.w, self.w_ag, self._offset = self._stack
        self._epoch_output = np.zeros(shape)  # output of the last completed epoch (0 before)
        self.prox_centre = np.zeros(shape)  # c = sum_i mu_i w_i of SGD3 (zero otherwise)
        self.prox_weight = 0.0  # mu_tilde = sum_i mu_i
        self.epoch_hook: Callable[[], None] | None = None  # called at each epoch restart, first
        self.served_version = 0  # changes whenever the served point may have changed
        self._start_epoch()

    @property
    def served(self) -> np.ndarray:
        """The dual point that predictions use.

        ``serve="epoch"``: the output of the last completed epoch (zero, i.e. the soft-rounded base
        prediction, before the first one) -- exactly the paper's output after ``T`` samples, and a
        restart never degrades it.  ``serve="live"``: the running output ``w_ag``.
        """
        return self.w_ag if self.serve == "live" else self._epoch_output

    @property
    def served_points(self) -> np.ndarray:
        """The served point as the one-point mixture ``(1, 2, m, K)`` (see the tracking optimizer)."""
        return self.served[None]

    @property
    def output(self) -> np.ndarray:
        """The running output ``w_ag`` (AC-SA's aggregate, SGD's iterate average)."""
        return self.w_ag

    @property
    def mapping_step(self) -> float:
        """The ``alpha = 1 / (2^(J+2) mu)`` of the gradient-mapping certificate (Thm C.2/C.3)."""
        return 1.0 / (2 ** (self.schedule.stages + 2) * self.schedule.mu)

    @property
    def epoch(self) -> int:
        """Completed epochs."""
        return self.schedule.epoch

    @property
    def epoch_horizon(self) -> int:
        """Samples in the current epoch."""
        return self.schedule.epoch_horizon

    def progress(self) -> float:
        """Fraction of the current epoch already used, in ``[0, 1)``."""
        return self.schedule.progress()

    def steps_left(self) -> int:
        """Steps until the current epoch ends (the current step included)."""
        return self.schedule.steps_left()

    def served_steps(self) -> int:
        """The next samples all served by the current point (at least 1): it may change only after the last one.

        ``serve="epoch"``: the rest of the epoch; ``serve="live"``: every step moves the served point.
        """
        return self.steps_left() if self.serve == "epoch" else 1

    def retune(self, smoothness: float, mu: float, smallest_share: float) -> None:
        """Re-derive the schedule's step sizes from ``M`` and ``mu`` (at an epoch restart; the paper's
        schedules do not use ``smallest_share``)."""
        self.schedule.retune(smoothness, mu)

    def _start_epoch(self) -> None:
        """Restart the schedule at the served point; SGD3 anchors its first prox term there."""
        self.w[...] = self.w_ag
        if self.schedule.optimizer == "sgd3":
            self.prox_weight = self.schedule.mu
            np.multiply(self.w_ag, self.schedule.mu, out=self.prox_centre)
        else:
            self.prox_weight = 0.0
            self.prox_centre[...] = 0.0
        self._refresh_offset()

    def _refresh_offset(self) -> None:
        np.subtract(self.prox_centre, self.eps, out=self._offset)

    def _restart(self, ended: Run) -> None:
        if self.schedule.run_index == 0:
            self._epoch_output[...] = self.w_ag
            self.served_version += 1
            if self.epoch_hook is not None:
                self.epoch_hook()
            self._start_epoch()
            return
        if ended.stage_prox:
            self.prox_weight += ended.stage_prox
            self.prox_centre += ended.stage_prox * self.w_ag
            self._refresh_offset()
        self.w[...] = self.w_ag

    def learn(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One step on one sample (group features ``t``, costs ``beta r``), then the schedule moves on.

        The stochastic gradient at the query point is ``(+gap + eps, -gap + eps)`` with ``gap = outer(C pi, t)``,
        plus the SGD3 prox term; ``cdf`` says which constraint family ``C`` is (:mod:`streamfair.kernel`).
        """
        kernel.dual_learn(self._stack, self.schedule.coefficients(self.prox_weight), beta, cdf, features, scaled_costs)
        self._advance()

    def learn_rows(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """:meth:`learn` on each row in turn (each step has its own schedule coefficients)."""
        for i in range(features.shape[0]):
            self.learn(beta, cdf, features[i], scaled_costs[i])

    def learn_batch(self, beta: float, cdf: bool, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One step on the mean gradient of a mini-batch (one sample per row), then the schedule moves on."""
        kernel.dual_learn_batch(self._stack, self.schedule.coefficients(self.prox_weight), beta, cdf, features,
                                scaled_costs)
        self._advance()

    def _advance(self) -> None:
        if self.serve == "live":
            self.served_version += 1
        ended = self.schedule.advance()
        if ended is not None:
            self._restart(ended)

    def state_dict(self) -> dict:
        """Arrays and counters that restore the optimizer exactly (see :meth:`load_state_dict`)."""
        return {
            "step_constants": (self.schedule.smoothness, self.schedule.mu),
            "w": self.w.copy(),
            "w_ag": self.w_ag.copy(),
            "epoch_output": self._epoch_output.copy(),
            "prox_centre": self.prox_centre.copy(),
            "prox_weight": self.prox_weight,
            "schedule": self.schedule.state_dict(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Restore what :meth:`state_dict` returned."""
        smoothness, mu = check_entries("state's step_constants", state["step_constants"], 2)
        self.schedule.retune(check_positive("state's smoothness", smoothness), check_positive("state's mu", mu))
        for name in ("w", "w_ag", "epoch_output", "prox_centre"):
            array = self._epoch_output if name == "epoch_output" else getattr(self, name)
            array[...] = check_array(f"state's {name}", state[name], self.w.shape)
        self.prox_weight = check_non_negative("state's prox_weight", state["prox_weight"])
        self.schedule.load_state_dict(state["schedule"])
        self._refresh_offset()
        self.served_version += 1
