"""Projected stochastic dual iterates driven by a :class:`~streamfair.schedule.Schedule`.

The optimizer owns the arrays of the dual ``w = (Lambda, V)`` (shape ``(2, m, K)``): the iterate
``w``, the aggregate ``w_ag`` (the *served* point: AC-SA's output, or SGD's iterate average) and the
SGD3 prox centre.  A step is split in two so that the caller can evaluate the stochastic gradient
in between, for one sample or for a mini-batch:

>>> import numpy as np
>>> from streamfair.schedule import Schedule
>>> opt = DualOptimizer(Schedule("sgd", inner="acsa", smoothness=2.0, mu=1.0, horizon=10),
...                     n_atoms=3, eps=np.array([0.1, 0.1]))
>>> scores = opt.begin_step(beta=1.0)         # beta * (Lambda - V) at the query point
>>> opt.end_step(np.zeros((3, 2)))            # E[pi t] = 0: only eps pushes, and w stays at 0
>>> float(opt.served.max())
0.0
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from .schedule import Run, Schedule

#: What predictions use: the last completed epoch's output, or the running output.
SERVING = ("epoch", "live")


class DualOptimizer:
    """Dual iterates, their restarts (runs, SGD3 stages, epochs) and the generic update.

    Parameters
    ----------
    schedule
        The step schedule (it is advanced by :meth:`end_step`).
    n_atoms
        ``m``, the number of atoms.
    eps
        Per-group slack, shape ``(K,)``.
    """

    def __init__(self, schedule: Schedule, *, n_atoms: int, eps: np.ndarray, serve: str = "epoch"):
        if serve not in SERVING:
            raise ValueError(f"serve must be one of {SERVING}, got {serve!r}")
        self.schedule = schedule
        self.serve = serve
        self.eps = np.asarray(eps, dtype=float)
        shape = (2, n_atoms, self.eps.size)
        # One contiguous block [w, w_ag, c - eps] so that each linear combination is a single gemv.
        self._stack = np.zeros((3,) + shape)
        self._flat = self._stack.reshape(3, -1)
        self.w, self.w_ag, self._offset = self._stack
        self._epoch_output = np.zeros(shape)  # output of the last completed epoch (0 before)
        self.prox_centre = np.zeros(shape)  # c = sum_i mu_i w_i of SGD3 (zero otherwise)
        self.prox_weight = 0.0  # mu_tilde = sum_i mu_i
        self._tmp = np.empty(shape)
        self._scores = np.empty(shape[1:])
        self._scaled_gap = np.empty(shape[1:])
        self._coefficients = (0.0,) * 6
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

    def retune(self, smoothness: float, mu: float) -> None:
        """Re-derive the schedule's step sizes from ``M`` and ``mu`` (at an epoch restart)."""
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

    @staticmethod
    def center(rows: np.ndarray) -> np.ndarray:
        """The constraint rows ``C pi`` of the step's policy, as the paper's estimator uses them: unchanged."""
        return rows

    def begin_step(self, beta: float) -> np.ndarray:
        """Compute this step's coefficients; return ``beta * (Lambda - V)`` at the query point.

        The returned ``(m, K)`` array is a buffer owned by the optimizer, valid until the next call.
        """
        qa, qw, *_ = self._coefficients = self.schedule.coefficients(self.prox_weight)
        qa, qw = qa * beta, qw * beta
        np.dot((qw, -qw, qa, -qa), self._flat[:2].reshape(4, -1), out=self._scores.reshape(-1))
        return self._scores

    def end_step(self, gap: np.ndarray) -> None:
        """Finish the step given ``gap = E[pi(l | X) t_s(X)]`` (shape ``(m, K)``) at the query point.

        The stochastic gradient is ``(+gap + eps, -gap + eps)`` plus the SGD3 prox term.
        """
        _, _, k1, k2, b3, avg = self._coefficients
        tmp, flat_tmp = self._tmp, self._tmp.reshape(-1)
        np.dot((k1, k2, b3), self._flat, out=flat_tmp)
        np.multiply(gap, b3, out=self._scaled_gap)
        tmp[0] -= self._scaled_gap
        tmp[1] += self._scaled_gap
        np.maximum(tmp, 0.0, out=self.w)
        np.dot((avg, 1.0 - avg), self._flat[:2], out=flat_tmp)
        self.w_ag[...] = tmp
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
        self.schedule.retune(*state["step_constants"])
        for name in ("w", "w_ag", "_epoch_output", "prox_centre"):
            value = np.asarray(state[name.lstrip("_")], dtype=float)
            if value.shape != self.w.shape:
                raise ValueError(f"state {name!r} has shape {value.shape}, expected {self.w.shape}")
            getattr(self, name)[...] = value
        self.prox_weight = float(state["prox_weight"])
        self.schedule.load_state_dict(state["schedule"])
        self._refresh_offset()
        self.served_version += 1
