"""The streaming demographic-parity post-processor, generic over its atoms and per-sample costs.

:class:`DualPostProcessor` is the engine shared by regression (atoms are grid points, costs are
squared errors to the base prediction) and classification (atoms are classes, costs are expected
losses).  Subclasses say how a base prediction becomes a cost vector; everything else -- the
stochastic dual updates, randomized predictions, diagnostics, state -- lives here.

The sensitive attribute S is never an input: each sample brings the base model's prediction and
the group posterior ``tau(x) = P(S = . | x)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from . import dual
from .keyed_random import Key, keyed_uniform, keyed_uniforms, sample_index, sample_indices
from .optimizer import DualOptimizer
from .schedule import Schedule
from .validation import (
    check_distribution,
    check_distributions,
    check_integer,
    check_positive,
    check_seed,
    check_slack,
)

#: Samples in epoch 0 when no horizon is given (also the ``T`` behind the default ``L`` and ``beta``).
REFERENCE_HORIZON = 2500

STATE_VERSION = 1


@dataclass(frozen=True)
class Diagnostics:
    """Live estimates computed from the post-processor's state, without S.

    The per-atom gaps are the mean of ``pi(l | x) t_s(x)`` over the last ``window`` samples, with
    ``pi`` the *served* predictor; its expectation is ``P(Y_hat = l) - P(Y_hat = l | S = s)``
    (paper eq. 15), and the other fairness estimates are derived from it.
    """

    n_samples: int
    n_clipped: int
    epoch: int
    epoch_horizon: int
    epoch_progress: float
    atom_gaps: np.ndarray  # (m, K), signed estimate of P(l) - P(l | s)
    group_unfairness: np.ndarray  # (K,), max_l |gap|: the paper's per-atom unfairness U_s
    group_ks: np.ndarray  # (K,), KS distance between the group-s and overall prediction CDFs
    group_proba: np.ndarray  # (m, K), estimate of P(Y_hat = l | S = s)
    group_mean: np.ndarray  # (K,), estimate of E[Y_hat | S = s]
    violation: float  # sqrt(sum_{l,s} (|gap| - eps_s)_+^2), the left side of Lemma 3.5
    gradient_mapping_norm: float  # ||G_alpha|| at the served point, plug-in gradient
    dual_norms: tuple[float, float]  # (||Lambda||, ||V||) of the served point


class DualPostProcessor:
    """Streaming DP post-processing over a finite set of atoms (the generic engine).

    Parameters
    ----------
    atoms
        The ``m`` output values.
    eps
        Per-atom unfairness slack: one number or one per group, each ``>= 0``.
    p
        Group marginals ``P(S = s)``, in the column order of ``tau``.  ``None``: estimated online
        as the running mean of ``tau`` (starting from one uniform pseudo-sample); the step sizes
        are then re-derived from the estimate at every epoch restart.
    n_groups
        ``K``; only needed when neither ``p`` nor a per-group ``eps`` gives it.
    beta
        Entropic parameter (larger: closer to the unregularized LP, rougher dual); ``None``:
        :func:`default_beta` of the horizon.
    horizon
        Samples in epoch 0 (the paper's ``T``); ``None``: ``REFERENCE_HORIZON``.  Later epochs
        double it, warm-started at the served dual.
    optimizer, inner
        ``"sgd"``, ``"acsa"``, ``"acsa2"`` or ``"sgd3"``; the inner solver of ``"sgd3"``.
    mu
        Strong-convexity parameter of the schedules; ``None``: the theory's ``2 sigma^2 / beta``.
    seed
        Seed of the randomized predictions.
    window
        Recent samples kept (a bounded buffer) for the live diagnostics.
    serve
        ``"epoch"``: predictions use the output of the last completed epoch (the paper's output
        after ``T`` samples; before it, the soft-rounded base prediction); ``"live"``: the running
        output, updated every sample (as the paper's convergence plots do; not covered by theory).
    """

    prediction_modes: tuple[str, ...] = ("sample", "mode")

    def __init__(
        self,
        atoms: np.ndarray,
        *,
        eps: float | Sequence[float],
        p: Sequence[float] | None,
        n_groups: int | None,
        beta: float | None,
        horizon: int | None,
        optimizer: str,
        inner: str,
        mu: float | None,
        seed: int,
        window: int,
        serve: str = "epoch",
    ):
        self.atoms = np.asarray(atoms, dtype=float)
        self.n_groups = self._infer_groups(p, eps, n_groups)
        self.eps = check_slack(eps, self.n_groups)
        self.p_given = None if p is None else check_distribution("p", p, self.n_groups, strictly_positive=True)
        self.horizon = REFERENCE_HORIZON if horizon is None else check_integer("horizon", horizon, 1)
        self.beta = default_beta(self.horizon) if beta is None else check_positive("beta", beta)
        self.mu_given = None if mu is None else check_positive("mu", mu)
        self.seed = check_seed(seed)
        self.window = check_integer("window", window, 1)
        k = self.n_groups
        self._tau_sum = np.full(k, 1.0 / k)  # running sum of tau, with one uniform pseudo-sample
        self._tau_count = 1
        smoothness, mu = self._step_constants()
        schedule = Schedule(optimizer, inner=inner, smoothness=smoothness, mu=mu, horizon=self.horizon)
        self._optimizer = DualOptimizer(schedule, n_atoms=self.atoms.size, eps=self.eps, serve=serve)
        if self.p_given is None:
            self._optimizer.epoch_hook = self._retune
        # The last `window` samples (base predictions and tau), for diagnostics at the served point.
        self._recent_predictions: np.ndarray | None = None
        self._recent_tau = np.zeros((self.window, k))
        self._recent_count = 0
        self.n_samples = 0
        self.n_clipped = 0
        self._draws = 0

    # ------------------------------------------------------------------ subclass hooks
    def _check_predictions(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        """Validate base predictions (one row per sample)."""
        raise NotImplementedError

    def _scaled_costs(self, predictions: np.ndarray, tau: np.ndarray, learning: bool) -> np.ndarray:
        """``beta * r(x)`` for each sample (``tau`` is its group posterior): shape ``(n, m)``."""
        raise NotImplementedError

    # ------------------------------------------------------------------ set-up helpers
    @staticmethod
    def _infer_groups(p, eps, n_groups) -> int:
        candidates = {}
        if p is not None:
            candidates["p"] = len(np.atleast_1d(np.asarray(p, dtype=object)))
        if np.ndim(eps) == 1:
            candidates["eps"] = len(eps)
        if n_groups is not None:
            candidates["n_groups"] = check_integer("n_groups", n_groups, 2)
        if not candidates:
            raise ValueError("the number of groups is unknown: give p, a per-group eps, or n_groups")
        if len(set(candidates.values())) > 1:
            raise ValueError(f"inconsistent numbers of groups: {candidates}")
        k = next(iter(candidates.values()))
        if k < 2:
            raise ValueError(f"at least 2 groups are needed, got {candidates}")
        return k

    @property
    def p(self) -> np.ndarray:
        """The group marginals in use: given, or the running estimate from ``tau``."""
        return self.p_given if self.p_given is not None else self._tau_sum / self._tau_count

    @property
    def sigma2(self) -> float:
        """``sigma^2 = sum_s (1 - p_s) / p_s``: variance bound of the stochastic gradient (Lemma 4.1)."""
        p = self.p
        return float(np.sum((1.0 - p) / p))

    def _step_constants(self) -> tuple[float, float]:
        """``(M, mu)``: smoothness ``2 beta sigma^2`` (Lemma 3.4) and the strong-convexity parameter."""
        sigma2 = self.sigma2
        mu = self.mu_given if self.mu_given is not None else 2.0 * sigma2 / self.beta
        return 2.0 * self.beta * sigma2, mu

    @property
    def schedule(self) -> Schedule:
        """The optimizer's step schedule (epoch, run, step)."""
        return self._optimizer.schedule

    @property
    def dual(self) -> np.ndarray:
        """The served dual ``(Lambda, V)``, shape ``(2, m, K)`` (read-only view)."""
        view = self._optimizer.served.view()
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ features
    def _check_tau(self, tau: Any, n_rows: int | None) -> np.ndarray:
        return check_distributions("tau", tau, n_rows, self.n_groups)

    def _learning_features(self, tau: np.ndarray) -> np.ndarray:
        """``[t(x) | 1]`` rows for learning; updates the running ``p`` estimate sample by sample."""
        if self.p_given is not None:
            p = self.p_given
        elif tau.shape[0] == 1:  # the row-1 case of the cumulative sums below, without building them
            sums = self._tau_sum + tau
            self._tau_count += 1
            p = sums / self._tau_count
            self._tau_sum = sums[0]
        else:
            sums = np.cumsum(np.vstack([self._tau_sum, tau]), axis=0)[1:]
            counts = self._tau_count + np.arange(1, tau.shape[0] + 1)
            p = sums / counts[:, None]
            self._tau_sum = sums[-1].copy()
            self._tau_count = int(counts[-1])
        return dual.group_features(tau, p)

    def _serving_features(self, tau: np.ndarray) -> np.ndarray:
        return dual.group_features(tau, self.p)

    def _remember(self, predictions: np.ndarray, tau: np.ndarray) -> None:
        """Keep the last ``window`` samples in a ring buffer (row ``n_samples % window`` is next)."""
        if self._recent_predictions is None:
            self._recent_predictions = np.zeros((self.window,) + predictions.shape[1:])
        n = tau.shape[0]
        if n == 1:
            slot = self.n_samples % self.window
            self._recent_predictions[slot], self._recent_tau[slot] = predictions[0], tau[0]
        else:
            keep = min(n, self.window)
            slots = (self.n_samples + np.arange(n - keep, n)) % self.window
            self._recent_predictions[slots], self._recent_tau[slots] = predictions[-keep:], tau[-keep:]
        self._recent_count = min(self.window, self._recent_count + n)

    # ------------------------------------------------------------------ learning
    def learn_one(self, prediction: Any, tau: Sequence[float]) -> None:
        """One unlabeled sample: one stochastic-gradient step of the optimizer."""
        predictions = self._check_predictions([prediction], 1)
        taus = check_distribution("tau", tau, self.n_groups)[None, :]
        costs = self._scaled_costs(predictions, taus, learning=True)
        self._remember(predictions, taus)
        features = self._learning_features(taus)
        self._step(features[0], costs[0])

    def learn_many(self, predictions: Any, tau: Any, batch_size: int | None = None) -> None:
        """Learn from ``n`` samples in order.

        With ``batch_size=None`` the result is bit-for-bit that of ``n`` calls to :meth:`learn_one`.
        With ``batch_size=b`` each step averages the stochastic gradient over ``b`` consecutive
        samples (variance ``sigma^2 / b``); the schedule then counts steps, not samples.  Each
        sample's features use the running ``p`` estimate after that sample, as in sequential mode;
        an epoch restart re-derives the step sizes from the estimate at the end of its last batch.
        """
        predictions = self._check_predictions(predictions, None)
        taus = self._check_tau(tau, predictions.shape[0])
        if batch_size is not None:
            batch_size = check_integer("batch_size", batch_size, 1)
        costs = self._scaled_costs(predictions, taus, learning=True)
        self._remember(predictions, taus)
        start, n = 0, taus.shape[0]
        while start < n:  # one chunk per epoch, so a restart sees the running p at its own sample
            chunk = batch_size or 1  # at least one step is left: a single chunk needs no look-up
            stop = n if n - start <= chunk else min(n, start + chunk * self.schedule.steps_left())
            features = self._learning_features(taus[start:stop])
            if batch_size is None:
                for i in range(features.shape[0]):
                    self._step(features[i], costs[start + i])
            else:
                for first in range(0, features.shape[0], batch_size):
                    rows = slice(first, first + batch_size)
                    self._step_batch(features[rows], costs[start:stop][rows])
            start = stop

    def _fusable(self) -> bool:
        """Whether the fused single-sample path computes what ``proba_one`` + ``learn_one`` do here."""
        cls = type(self)
        return (cls.learn_one is DualPostProcessor.learn_one and cls.proba_one is DualPostProcessor.proba_one
                and cls._proba is DualPostProcessor._proba)

    def proba_learn_one(self, prediction: Any, tau: Sequence[float]) -> np.ndarray:
        """``pi(. | x)`` at the current state, then learn the sample: :meth:`proba_one` then :meth:`learn_one`.

        The same distribution and the same state, bit for bit, as the two calls (prequential
        serving: the prediction never depends on its own sample), with the input validated and the
        costs computed once.  An invalid input raises ``ValueError`` before anything changes.
        Subclasses that override :meth:`learn_one` or :meth:`proba_one` get the two calls.

        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> proba = a.proba_one(0.3, [0.2, 0.8]); a.learn_one(0.3, [0.2, 0.8])
        >>> bool((b.proba_learn_one(0.3, [0.2, 0.8]) == proba).all()), a.n_samples == b.n_samples == 1
        (True, True)
        """
        if not self._fusable():
            proba = self.proba_one(prediction, tau)
            self.learn_one(prediction, tau)
            return proba
        predictions = self._check_predictions([prediction], 1)
        taus = check_distribution("tau", tau, self.n_groups)[None, :]
        costs = self._scaled_costs(predictions, taus, learning=True)  # ``learning`` only counts (e.g. clips)
        proba = self._served_proba(self._serving_features(taus), costs)[0]  # p before this sample, as proba_one
        self._remember(predictions, taus)
        self._step(self._learning_features(taus)[0], costs[0])
        return proba

    def proba_learn_many(self, predictions: Any, tau: Any) -> np.ndarray:
        """For each sample in order, ``pi(. | x_i)`` at the state that learned the samples before it, then learn it.

        Bit for bit the same rows and state as ``n`` calls to :meth:`proba_learn_one` (that is,
        :meth:`proba_one` then :meth:`learn_one` per sample), with the inputs validated at once as
        :meth:`learn_many` does (an invalid row raises ``ValueError`` before anything changes) and
        the group features of all samples computed together.  Shape ``(n, m)``.

        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> rows = [a.proba_learn_one(e, [0.3, 0.7]) for e in (0.1, -0.4, 0.8)]
        >>> bool((b.proba_learn_many([0.1, -0.4, 0.8], [[0.3, 0.7]] * 3) == rows).all())
        True
        """
        predictions = self._check_predictions(predictions, None)
        taus = self._check_tau(tau, predictions.shape[0])
        n = taus.shape[0]
        if not self._fusable():
            return np.array([self.proba_learn_one(predictions[i], taus[i]) for i in range(n)]).reshape(n, -1)
        if self.p_given is not None:
            serving = learning = dual.group_features(taus, self.p_given)
        else:  # the running p before and after each sample: the cumulative sums of learn_many
            sums = np.cumsum(np.vstack([self._tau_sum, taus]), axis=0)
            counts = self._tau_count + np.arange(n + 1)
            p = sums / counts[:, None]
            serving, learning = dual.group_features(taus, p[:-1]), dual.group_features(taus, p[1:])
        self._remember(predictions, taus)
        proba = np.empty((n, self.atoms.size))
        for i in range(n):
            rows = slice(i, i + 1)  # one-row blocks: the shapes, hence the floats, of proba_one and learn_one
            costs = self._scaled_costs(predictions[rows], taus[rows], learning=True)
            proba[i] = self._served_proba(serving[rows], costs)[0]
            if self.p_given is None:  # an epoch restart inside _step reads p, as after learn_one's update
                self._tau_sum, self._tau_count = sums[i + 1], int(counts[i + 1])
            self._step(learning[i], costs[0])
        if self.p_given is None and n:
            self._tau_sum = sums[n].copy()
        return proba

    def predict_learn_one(self, prediction: Any, tau: Sequence[float], mode: str = "sample", key: Key | None = None):
        """A fair prediction, then learn the sample: :meth:`predict_one` then :meth:`learn_one`, fused.

        The same prediction and state, bit for bit, as the two calls (see :meth:`proba_learn_one`).
        Subclasses whose :meth:`predict_one` maps atoms to something else (class labels) get the two calls.

        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> first = a.predict_one(0.3, [0.2, 0.8], key="m1"); a.learn_one(0.3, [0.2, 0.8])
        >>> bool(b.predict_learn_one(0.3, [0.2, 0.8], key="m1") == first)
        True
        """
        if type(self).predict_one is not DualPostProcessor.predict_one:
            output = self.predict_one(prediction, tau, mode, key)
            self.learn_one(prediction, tau)
            return output
        self._check_mode(mode)
        return self._reduce_one(self.proba_learn_one(prediction, tau), mode, key)

    def _step(self, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        scores = self._optimizer.begin_step(self.beta) @ features
        scores -= scaled_costs
        scores -= scores.max()
        np.exp(scores, out=scores)
        scores /= scores.sum()
        self._optimizer.end_step(np.multiply.outer(scores, features))
        self.n_samples += 1

    def _step_batch(self, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        n = features.shape[0]
        scores = features @ self._optimizer.begin_step(self.beta).T
        scores -= scaled_costs
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        gap = scores.T @ features
        gap /= n
        self._optimizer.end_step(gap)
        self.n_samples += n

    def _retune(self) -> None:
        """At an epoch restart, re-derive the step sizes from the current estimate of ``p``."""
        self.schedule.retune(*self._step_constants())

    # ------------------------------------------------------------------ prediction
    def _served_proba(self, features: np.ndarray, scaled_costs: np.ndarray) -> np.ndarray:
        served = self._optimizer.served
        scores = features @ (self.beta * (served[0] - served[1])).T
        scores -= scaled_costs
        scores -= scores.max(axis=1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=1, keepdims=True)
        return scores

    def proba_many(self, predictions: Any, tau: Any) -> np.ndarray:
        """``pi(l | x_i)`` for each sample: shape ``(n, m)``; the distribution DP is about."""
        predictions = self._check_predictions(predictions, None)
        return self._proba(predictions, self._check_tau(tau, predictions.shape[0]))

    def _proba(self, predictions: np.ndarray, taus: np.ndarray) -> np.ndarray:
        return self._served_proba(self._serving_features(taus), self._scaled_costs(predictions, taus, learning=False))

    def proba_one(self, prediction: Any, tau: Sequence[float]) -> np.ndarray:
        """``pi(. | x)`` over the atoms for one sample: shape ``(m,)``."""
        predictions = self._check_predictions([prediction], 1)
        return self._proba(predictions, check_distribution("tau", tau, self.n_groups)[None, :])[0]

    def _check_mode(self, mode: str) -> None:
        if mode not in self.prediction_modes:
            raise ValueError(f"mode must be one of {self.prediction_modes}, got {mode!r}")

    def _reduce(self, proba: np.ndarray, mode: str, keys: Sequence[Key] | None) -> np.ndarray:
        if mode == "mode":
            return self.atoms[proba.argmax(axis=1)]
        if mode == "mean":
            return proba @ self.atoms
        if keys is None:
            keys = [f"draw:{self._draws + i}" for i in range(proba.shape[0])]
            self._draws += proba.shape[0]
        elif len(keys) != proba.shape[0]:
            raise ValueError(f"keys must have one key per sample ({proba.shape[0]}), got {len(keys)}")
        return self.atoms[sample_indices(proba, keyed_uniforms(self.seed, keys))]

    def predict_many(self, predictions: Any, tau: Any, mode: str = "sample", keys: Sequence[Key] | None = None):
        """Fair predictions for ``n`` samples (see :meth:`predict_one` for ``mode`` and ``keys``)."""
        self._check_mode(mode)
        return self._reduce(self.proba_many(predictions, tau), mode, keys)

    def predict_one(self, prediction: Any, tau: Sequence[float], mode: str = "sample", key: Key | None = None):
        """A fair prediction for one sample.

        ``mode="sample"`` draws an atom from ``pi(. | x)``: the randomized predictor whose fairness
        the paper guarantees.  The draw is determined by ``(seed, key)``; pass the message id as
        ``key`` so that a replayed message gets the same draw.  Without a key an internal counter
        (part of the state) supplies one.  ``"mode"`` is the most likely atom; subclasses may add
        ``"mean"``.  Neither deterministic mode is covered by the DP guarantee.
        """
        self._check_mode(mode)
        return self._reduce_one(self.proba_one(prediction, tau), mode, key)

    def _reduce_one(self, proba: np.ndarray, mode: str, key: Key | None):
        """``_reduce`` of one row: the same value, without the batch machinery for a single draw."""
        if mode != "sample":
            return self._reduce(proba[None, :], mode, None)[0]
        if key is None:
            key = f"draw:{self._draws}"
            self._draws += 1
        return self.atoms[sample_index(proba, keyed_uniform(self.seed, key))]

    # ------------------------------------------------------------------ diagnostics
    def diagnostics(self) -> Diagnostics:
        """Live fairness and convergence estimates (no S needed); see :class:`Diagnostics`."""
        served = self._optimizer.served
        if self._recent_count:
            rows = slice(0, self._recent_count)
            tau = self._recent_tau[rows]
            costs = self._scaled_costs(self._recent_predictions[rows], tau, learning=False)
            features = self._serving_features(tau)
            proba = self._served_proba(features, costs)
            gaps, mean_proba = proba.T @ features / self._recent_count, proba.mean(axis=0)
        else:
            gaps, mean_proba = np.zeros((self.atoms.size, self.n_groups)), np.zeros(self.atoms.size)
        group_proba = mean_proba[:, None] - gaps
        gradient = np.stack([gaps + self.eps, -gaps + self.eps])
        schedule = self.schedule
        step = 1.0 / (2 ** (schedule.stages + 2) * schedule.mu)
        return Diagnostics(
            n_samples=self.n_samples,
            n_clipped=self.n_clipped,
            epoch=schedule.epoch,
            epoch_horizon=schedule.epoch_horizon,
            epoch_progress=schedule.progress(),
            atom_gaps=gaps,
            group_unfairness=np.abs(gaps).max(axis=0),
            group_ks=np.abs(np.cumsum(gaps, axis=0)).max(axis=0),
            group_proba=group_proba,
            group_mean=self.atoms @ group_proba,
            violation=float(np.sqrt(np.sum(np.maximum(np.abs(gaps) - self.eps, 0.0) ** 2))),
            gradient_mapping_norm=float(np.linalg.norm(dual.gradient_mapping(served, gradient, step))),
            dual_norms=(float(np.linalg.norm(served[0])), float(np.linalg.norm(served[1]))),
        )

    # ------------------------------------------------------------------ state
    def _config(self) -> dict:
        """Constructor arguments that rebuild an equivalent fresh object (subclasses extend it)."""
        schedule = self.schedule
        return {
            "eps": self.eps.tolist(),
            "p": None if self.p_given is None else self.p_given.tolist(),
            "n_groups": self.n_groups,
            "beta": self.beta,
            "horizon": self.horizon,
            "optimizer": schedule.optimizer,
            "inner": schedule.inner,
            "mu": self.mu_given,
            "seed": self.seed,
            "window": self.window,
            "serve": self._optimizer.serve,
        }

    def state_dict(self) -> dict:
        """Everything needed to continue exactly: configuration, arrays, counters, draw counter."""
        return {
            "version": STATE_VERSION,
            "class": type(self).__name__,
            "config": self._config(),
            "optimizer": self._optimizer.state(),
            "step_constants": (self.schedule.smoothness, self.schedule.mu),
            "recent_predictions": None if self._recent_predictions is None else self._recent_predictions.copy(),
            "recent_tau": self._recent_tau.copy(),
            "recent_count": self._recent_count,
            "tau_sum": self._tau_sum.copy(),
            "tau_count": self._tau_count,
            "n_samples": self.n_samples,
            "n_clipped": self.n_clipped,
            "draws": self._draws,
        }

    @classmethod
    def from_state_dict(cls, state: dict):
        """A new object that continues exactly as the one whose :meth:`state_dict` was taken."""
        if state.get("version") != STATE_VERSION or state.get("class") != cls.__name__:
            raise ValueError(
                f"state is for {state.get('class')!r} version {state.get('version')!r}, "
                f"expected {cls.__name__!r} version {STATE_VERSION}"
            )
        obj = cls(**state["config"])
        obj.schedule.retune(*state["step_constants"])
        obj._optimizer.load_state(state["optimizer"])
        recent = state["recent_predictions"]
        obj._recent_predictions = None if recent is None else np.array(recent, dtype=float)
        obj._recent_tau[...] = state["recent_tau"]
        obj._recent_count = int(state["recent_count"])
        obj._tau_sum = np.array(state["tau_sum"], dtype=float)
        obj._tau_count = int(state["tau_count"])
        obj.n_samples, obj.n_clipped, obj._draws = int(state["n_samples"]), int(state["n_clipped"]), int(state["draws"])
        return obj

    def __getstate__(self) -> dict:
        return self.state_dict()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(type(self).from_state_dict(state).__dict__)
        if self._optimizer.epoch_hook is not None:  # re-bind to self, not to the temporary object
            self._optimizer.epoch_hook = self._retune

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self._config().items())
        return f"{type(self).__name__}({args})"


def default_grid_size(horizon: int) -> int:
    """The paper's ``L = sqrt(T)`` (rounded down), at least 1."""
    return max(1, math.isqrt(horizon))


def default_beta(horizon: int) -> float:
    """The experiments' ``beta = sqrt(T) log2(sqrt(T))`` (App. G, C&C / Law), at least 1."""
    root = math.sqrt(horizon)
    return max(1.0, root * math.log2(root))
