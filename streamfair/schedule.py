"""Step-size schedules of the paper's stochastic optimizers, as a streaming state machine.

The paper (App. C) runs one of four optimizers for a horizon of ``T`` stochastic gradients:

* ``"sgd"``   projected SGD with constant step ``1 / M``; the served point is the iterate average;
* ``"acsa"``  AC-SA (Ghadimi & Lan 2012, Alg. 2) with strong-convexity parameter ``mu``;
* ``"acsa2"`` AC-SA^2 (Alg. 3): two AC-SA runs of ``T / 2``, the second warm-started at the first;
* ``"sgd3"``  SGD3-refined (Alg. 4): ``J = floor(log2(M / mu))`` stages (Theorems C.2 and C.3
  write ``log2``; Alg. 4 writes ``log``) of ``floor(T / J)`` samples each, stage ``j`` running the
  inner solver (AC-SA or AC-SA^2) on ``F + sum_i mu_i / 2 ||w - w_i||^2`` with
  ``mu_{j-1} = 2^(j-1) mu`` and smoothness ``2 (M + mu)``.

Alg. 4 gives each stage ``T / J`` samples and Alg. 3 each half ``T / 2``, without saying how to
round when these are not integers.  Here AC-SA^2 splits ``n`` samples into ``floor(n / 2)`` and
``n - floor(n / 2)`` (all ``n`` used), while SGD3 gives every stage ``floor(T / J)`` samples, the
rounding of the authors' public code (github.com/taturyan/unaware-fair-reg).  An SGD3 epoch of
horizon ``T`` therefore ends after ``J floor(T / J)`` samples, up to ``J - 1`` fewer than ``T``;
the rest belong to the next epoch.

A stream has no horizon, so the schedule works in *epochs*: epoch 0 has the given horizon ``T``
(or a reference one) and runs the schedule above; epoch ``e`` has horizon ``2^e T`` and restarts
the same schedule warm-started at the served point of the previous epoch (a doubling trick).
Epoch ``e`` uses ``2^e T`` samples, or ``J floor(2^e T / J)`` with SGD3: with ``T = 2500`` and
``J = 16``, epochs end after 2,496, 7,488, 17,488, 37,488, ... samples, not 2,500, 7,500, ...
Every run starts at the served point, so the served dual moves by one small step at a restart
and predictions do not jump.

A :class:`Schedule` yields, for each stochastic step, the scalars of one generic update

    query  = qa * w_ag + qw * w                       (beta folded in by the caller)
    w      = (k1 * w + k2 * w_ag + b3 * (c - eps) - b3 * sign * E[pi t])_+
    w_ag   = avg * w + (1 - avg) * w_ag

which covers AC-SA (with the SGD3 prox term ``mu_tilde * w - c`` folded into ``k1, k2``) and
projected SGD with iterate averaging (``qa = 0, qw = 1, k1 = 1, k2 = 0, b3 = 1/M, avg = 1/t``).

Examples
--------
>>> s = Schedule("acsa2", inner="acsa", smoothness=4.0, mu=0.5, horizon=6)
>>> [(run.length, run.mu) for run in s.runs(6)]
[(3, 0.5), (3, 0.5)]
>>> s.coefficients(0.0)[-1]      # the first AC-SA step averages with weight 1
1.0
>>> s = Schedule("sgd3", inner="acsa", smoothness=8.0, mu=1.0, horizon=10)
>>> s.stages, [run.length for run in s.runs(10)]   # J = 3 stages of floor(10 / 3): 9 of 10 samples
(3, [3, 3, 3])
"""

from __future__ import annotations

import math
from typing import NamedTuple

from .validation import check_integer

OPTIMIZERS = ("sgd", "acsa", "acsa2", "sgd3")
INNER_SOLVERS = ("acsa", "acsa2")


class Run(NamedTuple):
    """One restart of a base solver: ``length`` steps with parameters ``mu`` and ``smoothness``.

    ``stage_prox`` is the weight ``mu_j`` of the SGD3 prox term added, centred at the run's output,
    when the run ends a stage (0 otherwise).
    """

    length: int
    mu: float
    smoothness: float
    stage_prox: float = 0.0


class Schedule:
    """Which step of which run of which epoch the optimizer is at, and its step coefficients.

    Parameters
    ----------
    optimizer
        One of ``"sgd", "acsa", "acsa2", "sgd3"``.
    inner
        The inner solver of ``"sgd3"``: ``"acsa"`` or ``"acsa2"``.
    smoothness
        ``M = 2 beta sigma^2``, the Lipschitz constant of the dual gradient (Lemma 3.4).
    mu
        The strong-convexity / prox parameter (``2 sigma^2 / beta`` in the paper's theory).
    horizon
        The horizon ``T`` of epoch 0 (stochastic gradients); later epochs double it.  Epoch 0
        uses all ``T`` samples, except with ``"sgd3"``: ``J floor(T / J)`` of them.
    """

    def __init__(self, optimizer: str, *, inner: str, smoothness: float, mu: float, horizon: int):
        if optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {optimizer!r}")
        if inner not in INNER_SOLVERS:
            raise ValueError(f"inner must be one of {INNER_SOLVERS}, got {inner!r}")
        if not (math.isfinite(smoothness) and smoothness > 0):
            raise ValueError(f"smoothness must be a positive number, got {smoothness!r}")
        if not (math.isfinite(mu) and mu > 0):
            raise ValueError(f"mu must be a positive number, got {mu!r}")
        self.optimizer = optimizer
        self.inner = inner
        self._set_constants(smoothness, mu)
        if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < self.min_horizon:
            raise ValueError(
                f"horizon must be an integer >= {self.min_horizon} for optimizer {optimizer!r}"
                f" (J={self.stages} stages), got {horizon!r}"
            )
        self.horizon = horizon
        self.epoch = 0
        self.run_index = 0
        self.step = 1  # 1-based step counter inside the current run
        self._enter_run()

    def _set_constants(self, smoothness: float, mu: float) -> None:
        self.smoothness = float(smoothness)
        self.mu = float(mu)
        self.stages = max(1, math.floor(math.log2(self.smoothness / self.mu))) if self.optimizer == "sgd3" else 1

    def retune(self, smoothness: float, mu: float) -> None:
        """Replace ``M`` and ``mu`` (at an epoch start), keeping every stage at least one step long."""
        self._set_constants(smoothness, mu)
        halves = self.min_horizon // self.stages
        self.stages = max(1, min(self.stages, self.epoch_horizon // halves))
        self._enter_run()

    @property
    def min_horizon(self) -> int:
        """The smallest horizon for which every run has at least one step."""
        halves = 2 if (self.optimizer == "acsa2" or (self.optimizer == "sgd3" and self.inner == "acsa2")) else 1
        return halves * self.stages

    @property
    def epoch_horizon(self) -> int:
        """The horizon of the current epoch: ``horizon * 2**epoch``."""
        return self.horizon << self.epoch

    def runs(self, horizon: int) -> list[Run]:
        """The runs that make up one epoch of the given horizon ``T`` (the paper's schedule for ``T``).

        Their lengths add up to ``T``, except with ``"sgd3"``: ``J`` stages of ``floor(T / J)``.
        """
        mu, big_m = self.mu, self.smoothness
        if self.optimizer in ("sgd", "acsa"):
            return [Run(horizon, mu, big_m)]
        if self.optimizer == "acsa2":
            return [Run(horizon // 2, mu, big_m), Run(horizon - horizon // 2, mu, big_m)]
        per_stage = horizon // self.stages
        plan = []
        for j in range(1, self.stages + 1):
            mu_in, big_m_in, prox = mu * 2 ** (j - 1), 2 * (big_m + mu), mu * 2**j
            if self.inner == "acsa":
                plan.append(Run(per_stage, mu_in, big_m_in, prox))
            else:
                half = per_stage // 2
                plan += [Run(half, mu_in, big_m_in), Run(per_stage - half, mu_in, big_m_in, prox)]
        return plan

    def _enter_run(self) -> None:
        plan = self.runs(self.epoch_horizon)
        self.run = plan[self.run_index]
        self._last_run = self.run_index == len(plan) - 1

    def coefficients(self, prox_weight: float) -> tuple[float, float, float, float, float, float]:
        """Scalars ``(qa, qw, k1, k2, b3, avg)`` of the current step (see the module docstring).

        ``prox_weight`` is ``mu_tilde``, the total weight of the SGD3 prox terms (0 otherwise).
        """
        t = self.step
        if self.optimizer == "sgd":
            return 0.0, 1.0, 1.0, 0.0, 1.0 / self.smoothness, 1.0 / t
        mu, big_m = self.run.mu, self.run.smoothness
        alpha = 2.0 / (t + 1)
        gamma = 4.0 * big_m / (t * (t + 1))
        den = gamma + (1.0 - alpha * alpha) * mu
        qa = (1.0 - alpha) * (mu + gamma) / den
        qw = alpha * ((1.0 - alpha) * mu + gamma) / den
        b1 = ((1.0 - alpha) * mu + gamma) / (mu + gamma)
        b2 = alpha * mu / (mu + gamma)
        b3 = alpha / (mu + gamma)
        k = b2 - b3 * prox_weight
        return qa, qw, b1 + k * qw, k * qa, b3, alpha

    def advance(self) -> Run | None:
        """Move past the current step; return the run that just ended, or ``None`` mid-run.

        After a run ends, ``run_index == 0`` means a new epoch began; otherwise a run with a
        non-zero ``stage_prox`` closed an SGD3 stage and the next run of the same epoch began.
        """
        if self.step < self.run.length:
            self.step += 1
            return None
        ended = self.run
        self.step = 1
        if self._last_run:
            self.epoch += 1
            self.run_index = 0
        else:
            self.run_index += 1
        self._enter_run()
        return ended

    def progress(self) -> float:
        """Fraction of the current epoch's samples already used, in ``[0, 1)``."""
        total = sum(run.length for run in self.runs(self.epoch_horizon))
        return 1.0 - self.steps_left() / total

    def steps_left(self) -> int:
        """Steps until the current epoch ends (the current step included)."""
        plan = self.runs(self.epoch_horizon)
        return sum(run.length for run in plan[self.run_index :]) - self.step + 1

    def state_dict(self) -> dict:
        """Counters that, with the constructor arguments and ``M, mu``, restore the schedule exactly.

        ``stages`` is included because :meth:`retune` may have capped it for an earlier epoch.
        """
        return {"epoch": self.epoch, "run_index": self.run_index, "step": self.step, "stages": self.stages}

    def load_state_dict(self, state: dict) -> None:
        """Restore counters produced by :meth:`state_dict` (after :meth:`retune` to the saved ``M, mu``)."""
        self.epoch = check_integer("state's schedule epoch", state["epoch"], 0)
        self.run_index = check_integer("state's schedule run_index", state["run_index"], 0)
        self.step = check_integer("state's schedule step", state["step"], 1)
        self.stages = check_integer("state's schedule stages", state["stages"], 1)
        lengths = [run.length for run in self.runs(self.epoch_horizon)]
        if min(lengths) < 1 or self.run_index >= len(lengths) or self.step > lengths[self.run_index]:
            raise ValueError(f"state's schedule (run {self.run_index}, step {self.step}, {self.stages} stages) is "
                             f"not a step of epoch {self.epoch}: runs of {lengths} steps")
        self._enter_run()
