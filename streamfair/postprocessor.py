"""The streaming demographic-parity post-processor, generic over its atoms, costs and sample weights.

:class:`DualPostProcessor` is the engine shared by every variant: regression (atoms are grid
points, costs are squared errors to the base prediction), classification (atoms are classes, costs
are expected losses) and group-robust regression (costs weighted by worst-case group weights).
The stochastic dual updates, randomized predictions, diagnostics and state live here; a variant is
made of three parts, each with a fixed contract, so that every public method -- the fused
``proba_learn_one``, ``proba_learn_many``, ``predict_learn_one`` and ``predict_learn_many``
included -- is valid for every variant without the engine inspecting which methods a subclass
overrides:

* the **constraint family** (:mod:`streamfair.constraints`), chosen by name;
* the **cost model** (:mod:`streamfair.costs`), given to the constructor: validation of the base
  predictions, their per-atom costs, the output labels and the prediction modes;
* the **sample weighting**, a set of hooks a subclass overrides (uniform here).  It is hooks rather
  than a separate object because the group-robust weights are learned from the engine's own
  running policy.  The contract:

  ``_sample_weights(tau, p)``
      ``omega(x) >= 0`` for each row of ``tau`` (a row's weight never depends on the other rows),
      or ``None`` for uniform weights; the scaled costs are ``beta omega(x) r(x)``.  ``p`` is the
      group shares a sample is learned or served with (one row per sample), so that costs computed
      for many samples at once are those of one sample at a time; ``None``: :attr:`p` for every
      row (left to the hook, so that uniform weights never compute it).
  ``_reweight_horizon()``
      How many more samples may be learned before ``_sample_weights`` may change (``None``: never).
      The engine learns in runs that never cross it, with the costs of a run computed at once.
  ``_learned(predictions, tau, keys)``
      Called after each such run is learned, with its validated rows and keys (``None`` or one key
      or ``None`` per row); the only place the weights may change.
  ``learn_label(key, y)`` and ``uses_labels``
      A delayed label of a sample learned under ``key``; ``uses_labels`` says whether it does anything.
  ``uniform_weights``
      ``False`` in a variant that overrides the hooks above: ``True`` lets one regression sample
      take the compiled one-call path (:func:`streamfair.kernel.tracking_sample`).

Every variant has the same signatures (``key`` names a sample: the draw of a sampled prediction,
and the sample a later ``learn_label`` refers to) and the capability attributes ``labels``,
``prediction_input`` and ``uses_labels``, which adapters read instead of testing classes.
:mod:`streamfair.checks` verifies the contract on any post-processor.

The sensitive attribute S is never an input: each sample brings the base model's prediction and
the group posterior ``tau(x) = P(S = . | x)``.

Two *profiles* set the defaults (:mod:`streamfair.profiles`):

* ``"anytime"`` (the default): the :class:`~streamfair.tracking.TrackingOptimizer` (the paper's
  projected SGD with step ``1 / M``, decaying where a group is small, served as the mixture of
  the policies at snapshots of the dual over the last ``memory`` samples): predictions are
  corrected from the first samples on and follow a drifting stream; with given shares ``p``,
  ``tau`` is corrected to them by its own mean over the last ``memory`` samples
  (:meth:`DualPostProcessor._serving_features`);
  ``beta`` is chosen so that the entropic randomization costs at most ``RISK_BUDGET`` of the
  cost scale (Lemma 3.3), with no horizon.
* ``"paper"``: the settings of Chzhen, Hebiri & Taturyan (NeurIPS 2024) -- SGD3 with AC-SA^2, ``L``
  and ``beta`` from a horizon ``T``, outputs served per completed epoch -- for reproduction.

State: :meth:`DualPostProcessor.state_dict` and the classmethod :meth:`DualPostProcessor.from_state_dict`
(a self-describing state); the optimizers it owns save with ``state_dict()`` too and restore in
place with ``load_state_dict(state)``, since their configuration belongs to the post-processor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self, overload

import numpy as np

from . import dual, kernel
from .constraints import CONSTRAINTS, Constraints
from .costs import PLAIN_NUMBERS, ExpectedCosts, SquaredCosts
from .evaluation import gap_measures
from .keyed_random import Key, counter_key, keyed_uniform, keyed_uniforms
from .optimizer import DualOptimizer
from .profiles import (
    DEFAULT_MEMORY,
    OPTIMIZERS,
    PROFILE_OPTIMIZER,
    PROFILES,
    anytime_beta,
    default_beta,
    reference_horizon,
)
from .schedule import Schedule
from .tracking import TrackingOptimizer, absent_share
from .validation import (
    check_array,
    check_choice,
    check_distribution,
    check_distributions,
    check_integer,
    check_key,
    check_positive,
    check_seed,
    check_slack,
    float_array,
    restores_state,
    show,
)

#: One sample's group posterior ``tau(x)``: ``K`` probabilities.
TauRow = Sequence[float] | np.ndarray
#: The name of each constraint family's slack, as the constructors call it.
SLACK_NAMES = {"atom": "eps", "cdf": "ks"}
#: Rows the many-sample methods hold costs and policies for at once: their memory is O(CHUNK_ROWS m), whatever n.
CHUNK_ROWS = 4096

#: Version 2 adds the profile, the constraint family and the tracking optimizer; version 1 restores as ``paper``.
STATE_VERSION = 2


@dataclass(frozen=True)
class Diagnostics:
    """Live estimates computed from the post-processor's state, without S.

    The fairness estimates are those of the *served* predictor ``pi`` on the last ``window``
    samples, each sample weighed into group ``s`` by its posterior ``tau_s(x)`` (as the features
    use it: corrected to the given shares ``p``, see :meth:`DualPostProcessor._serving_features`):
    ``P(Y_hat = l | S = s)`` is estimated by ``sum pi(l | x) tau_s(x) / sum tau_s(x)``, a
    distribution over the atoms, what :func:`streamfair.evaluate` reports with ``tau`` as the
    groups.  The constraint rows, their ``violation`` and the certificate are those the optimizer
    learns: the means of ``pi(l | x) t_s(x)`` (paper eq. 15), which divide by ``p`` rather than by
    the window's own ``sum tau_s`` and so also carry that sum's sampling noise.  A group with no
    ``tau`` mass in the window reads the overall law (gaps 0), and so does a group absent from the
    stream (less than one expected sample in the memory), which is not constrained: a KS of 0 for
    a group says nothing about a group the stream does not show (``group_present`` tells which
    groups it shows).  Below, ``m`` is the number of atoms and ``K`` the number of groups.

    Parameters
    ----------
    n_samples
        Samples learned so far.
    n_clipped
        Samples learned whose base prediction was outside the target range and was clipped to it
        (regression; always 0 for classification).
    epoch
        Completed epochs (the paper's optimizers) or windows of ``memory`` samples (tracking).
    epoch_horizon
        Samples in the current epoch (the paper's optimizers) or in a window: ``memory`` (tracking).
    epoch_progress
        Fraction of the current epoch or window already learned, in ``[0, 1)``.
    atom_gaps
        Shape ``(m, K)``: the signed estimate of ``P(Y_hat = l) - P(Y_hat = l | S = s)``.
    group_unfairness
        Shape ``(K,)``: ``max_l |gap|``, the paper's per-atom unfairness ``U_s``.
    group_ks
        Shape ``(K,)``: the KS distance between the group's prediction CDF and the overall one.
    group_proba
        Shape ``(m, K)``: the estimate of ``P(Y_hat = l | S = s)``.
    group_mean
        Shape ``(K,)``: the estimate of ``E[Y_hat | S = s]`` (the mean class index for a classifier).
    target
        Shape ``(K,)``: the slack, the per-atom ``eps_s`` or the KS target ``ks_s``.
    violation
        ``sqrt(sum_{rows, s} (|constraint| - slack_s)_+^2)``, the left side of Lemma 3.5: 0 when
        every estimated constraint holds.
    gradient_mapping_norm
        ``||G_alpha||`` at the served dual point, from the plug-in gradient: the convergence
        certificate (0 at the optimum).
    mapping_step
        The ``alpha`` of the gradient mapping.
    dual_norms
        ``(||Lambda||, ||V||)``, the norms of the served dual multipliers.
    group_present
        Shape ``(K,)``: whether the group is present in the stream, so constrained.  ``False``
        for a group the tracking optimizer finds absent (less than one expected sample in the
        memory, see :func:`streamfair.tracking.absent_share`): its KS and gaps read 0 and say
        nothing about it.  The paper's optimizers constrain every group (all ``True``).

    Examples
    --------
    Two groups whose base predictions differ by 0.8 on average; S is never shown, only ``tau``:

    >>> import numpy as np
    >>> from streamfair import FairRegressionPostProcessor
    >>> rng = np.random.default_rng(0)
    >>> s = rng.random(2000) < 0.5
    >>> eta = np.where(s, 0.4, -0.4) + 0.2 * rng.standard_normal(2000)
    >>> tau = np.where(s[:, None], [0.1, 0.9], [0.9, 0.1])
    >>> model = FairRegressionPostProcessor(B=1.0, p=[0.5, 0.5], seed=0)
    >>> model.learn_many(eta, tau)
    >>> report = model.diagnostics()
    >>> report.n_samples, report.target.tolist()  # the KS target, next to its estimate
    (2000, [0.05, 0.05])
    >>> report.group_ks.round(3).tolist()
    [0.064, 0.057]
    >>> report.group_mean.round(3).tolist()  # the base model's, estimated the same way: -0.306, 0.343
    [-0.065, 0.09]
    >>> report.group_present.tolist()  # both groups are seen, so constrained
    [True, True]
    """

    n_samples: int
    n_clipped: int
    epoch: int
    epoch_horizon: int
    epoch_progress: float
    atom_gaps: np.ndarray
    group_unfairness: np.ndarray
    group_ks: np.ndarray
    group_proba: np.ndarray
    group_mean: np.ndarray
    target: np.ndarray
    violation: float
    gradient_mapping_norm: float
    mapping_step: float
    dual_norms: tuple[float, float]
    group_present: np.ndarray


class DualPostProcessor:
    """Streaming DP post-processing over a finite set of atoms (the generic engine).

    The post-processors subclass it with their cost model
    (:class:`~streamfair.FairRegressionPostProcessor`,
    :class:`~streamfair.FairClassificationPostProcessor`); their :meth:`get_params`,
    :meth:`state_dict` and :meth:`from_state_dict` rebuild them from JSON values.  The engine
    alone, whose ``cost`` is an object, is not rebuilt that way.

    Parameters
    ----------
    cost
        The cost model (:mod:`streamfair.costs`): the ``m`` atoms, the base predictions' validation
        and costs, the output labels and prediction modes, the cost scale ``risk_scale`` (``B^2``
        for regression on ``[-B, B]``, the largest misclassification cost for classification) of
        the ``anytime`` default of ``beta``.
    slack
        The constraints' slack: one number or one per group, each ``>= 0``.
    constraint
        ``"cdf"``: the KS distance of each group's prediction CDF to the overall one is at most the
        slack; ``"atom"``: the paper's per-atom probability gaps are (see :mod:`streamfair.constraints`).
    slack_at_most
        The largest slack accepted: ``1`` where the slack is the user's fairness target (a KS
        distance, a gap between rates), so that ``5`` meant as 5 points is refused rather than
        constraining nothing; ``inf`` for the paper's per-atom ``eps``, whose dual is defined (and
        tested) for any slack ``>= 0``.
    p
        Group marginals ``P(S = s)``, in the column order of ``tau``.  ``None``: estimated online
        as the running mean of ``tau`` (starting from one uniform pseudo-sample); the step sizes
        are then re-derived from the estimate at every epoch restart.
    n_groups
        ``K``; only needed when neither ``p`` nor a per-group ``eps`` gives it.
    beta
        Entropic parameter (larger: closer to the unregularized LP, rougher dual); ``None``: the
        profile's (:func:`anytime_beta` of ``risk_scale``, or :func:`default_beta` of the horizon).
    profile
        ``"anytime"`` or ``"paper"``: which defaults apply (see the module docstring).
    optimizer
        ``"tracking"`` (the ``anytime`` profile's), or one of the paper's ``"sgd"``, ``"acsa"``,
        ``"acsa2"``, ``"sgd3"`` (the ``paper`` profile's); ``None``: the profile's.
    memory
        ``optimizer="tracking"`` only: the samples whose dual iterates the served mixture covers
        (how fast the predictor follows a drifting stream); ``None``: ``DEFAULT_MEMORY``.  Where the
        smallest group share ``p_min`` is under ``1/2``, the step then decays until
        ``memory / (2 p_min)`` samples, which narrows the fluctuation of the small groups
        (:mod:`streamfair.tracking`).
    horizon
        The paper's optimizers only: samples in epoch 0 (the paper's ``T``); ``None``:
        ``REFERENCE_HORIZON``.  Later epochs double it, warm-started at the served dual.
    inner
        The paper's ``"sgd3"`` only (refused with the others): its inner solver ``"acsa2"`` (``None``) or ``"acsa"``.
    mu
        The paper's optimizers only: strong-convexity parameter of the schedules; ``None``: the
        theory's ``2 sigma^2 / beta``.
    seed
        Seed of the randomized predictions.
    window
        Recent samples kept (a bounded buffer) for the live diagnostics.
    serve
        The paper's optimizers only: ``"epoch"`` (``None``): predictions use the output of the last
        completed epoch (the paper's output after ``T`` samples; before it, the soft-rounded base
        prediction); ``"live"``: the running output, updated every sample (as the paper's
        convergence plots do; not covered by theory).

    Attributes
    ----------
    atoms : ndarray of shape (m,)
        The outcomes as floats (grid points, or class indices).
    labels : ndarray of shape (m,)
        What the predictions are reported in (the atoms, or class labels).
    prediction_input : str
        ``"eta"`` (a number per sample) or ``"proba"`` (a probability row per sample).
    prediction_modes : tuple of str
        The ``mode`` values of the ``predict_*`` methods.
    uses_labels : bool
        Whether :meth:`learn_label` does anything.

    Examples
    --------
    The variants are this engine with a cost model; adapters read its capability attributes:

    >>> from streamfair import FairRegressionPostProcessor
    >>> model = FairRegressionPostProcessor(B=1.0, L=4, p=[0.5, 0.5], seed=0)
    >>> isinstance(model, DualPostProcessor), model.prediction_input, model.uses_labels
    (True, 'eta', False)
    >>> model.atoms.tolist()
    [-1.0, -0.75, -0.5, -0.25, 0.0, 0.25, 0.5, 0.75, 1.0]
    >>> model.prediction_modes
    ('sample', 'mean', 'mode')

    Every variant learns and predicts through the same methods: ``pi(. | x)`` is a law over the
    atoms, ``"mean"`` is its mean, and a keyed draw is the same when it is replayed.

    >>> model.learn_many([0.5, -0.5] * 100, [[0.2, 0.8], [0.8, 0.2]] * 100)
    >>> proba = model.proba_one(0.3, [0.2, 0.8])
    >>> model.n_samples, round(float(proba.sum()), 9)
    (200, 1.0)
    >>> bool(abs(model.predict_one(0.3, [0.2, 0.8], mode="mean") - proba @ model.atoms) < 1e-12)
    True
    >>> bool(model.predict_one(0.3, [0.2, 0.8], key="m1") == model.predict_one(0.3, [0.2, 0.8], key="m1"))
    True
    """

    #: Whether :meth:`learn_label` does anything (a variant whose weighting learns from labels sets it).
    uses_labels = False
    #: Whether the sample weights are uniform (a variant that overrides the weighting hooks sets it to ``False``).
    uniform_weights = True
    #: The ``mode`` values of the ``predict_*`` methods: a variant names its cost model's (readable on the class).
    prediction_modes: tuple[str, ...] = ("sample", "mode")

    def __init__(
        self,
        cost: SquaredCosts | ExpectedCosts,
        *,
        slack: float | Sequence[float] | np.ndarray,
        constraint: str,
        slack_at_most: float = math.inf,
        p: Sequence[float] | np.ndarray | None,
        n_groups: int | None,
        beta: float | None,
        profile: str,
        optimizer: str | None,
        memory: int | None,
        horizon: int | None,
        inner: str | None,
        mu: float | None,
        seed: int,
        window: int,
        serve: str | None,
    ):
        mu_arg = mu
        self.cost = cost
        self.atoms = cost.atoms
        self.profile = check_choice("profile", profile, PROFILES)
        self.constraints: Constraints = CONSTRAINTS[constraint](self.atoms.size)
        self.n_groups = self._infer_groups(p, slack, n_groups, SLACK_NAMES[constraint])
        self.slack = check_slack(slack, self.n_groups, SLACK_NAMES[constraint], at_most=slack_at_most)
        self.p_given = None if p is None else check_distribution("p", p, self.n_groups, strictly_positive=True)
        if optimizer is None:
            optimizer = PROFILE_OPTIMIZER[profile]
        optimizer = check_choice("optimizer", optimizer, OPTIMIZERS)
        tracking = optimizer == "tracking"
        self.horizon = None if tracking else reference_horizon(horizon)
        if beta is None:
            paper = profile == "paper"
            beta = default_beta(reference_horizon(horizon)) if paper else anytime_beta(self.atoms.size, cost.risk_scale)
        self.beta = check_positive("beta", beta)
        self.mu_given = None if mu is None else check_positive("mu", mu)
        self.seed = check_seed(seed)
        self.window = check_integer("window", window, 1)
        k = self.n_groups
        self._tau_sum = np.full(k, 1.0 / k)  # running sum of tau, with one uniform pseudo-sample
        self._tau_count = 1
        # The tracking optimizer with given shares corrects tau to them (see _serving_features) by the
        # mean of tau over its memory (row 0, one pseudo-sample at p to start with) as of the last change
        # of the served points (row 1, the mean in use); no columns: no correction.
        shares = self.p_given if tracking and self.p_given is not None else np.empty(0)
        self._tau_means = np.stack([shares, shares])
        if tracking:
            for name, value in (("horizon", horizon), ("inner", inner), ("mu", mu_arg), ("serve", serve)):
                if value is not None:
                    raise ValueError(
                        f"{name} applies to the paper's optimizers, not to optimizer='tracking'; got {value!r}")
            self.memory: int | None = DEFAULT_MEMORY if memory is None else check_integer("memory", memory, 1)
        elif memory is not None:
            raise ValueError(f"memory applies to optimizer='tracking', not to {optimizer!r}; got {memory!r}")
        elif inner is not None and optimizer != "sgd3":
            raise ValueError(f"inner is the inner solver of optimizer='sgd3', not of {optimizer!r}; got {inner!r}")
        else:
            self.memory = None
        # The share below which a group is absent from the stream (the tracking optimizer's, see _present).
        self._absent_below = 0.0 if self.memory is None else absent_share(self.memory, k)
        smoothness, mu, smallest_share = self._step_constants()
        if not math.isfinite(smoothness):
            raise ValueError(f"beta is too large: the dual's smoothness 2 beta sigma^2 overflows (a step of 0), "
                             f"got {beta!r}")
        if self.memory is not None:
            self._optimizer: DualOptimizer | TrackingOptimizer = TrackingOptimizer(
                n_rows=self.constraints.n_rows, slack=self.slack, step=1.0 / smoothness, memory=self.memory,
                smallest_share=smallest_share,
            )
        else:
            schedule = Schedule(optimizer, inner=inner or "acsa2", smoothness=smoothness, mu=mu,
                                horizon=reference_horizon(horizon))
            self._optimizer = DualOptimizer(
                schedule, n_rows=self.constraints.n_rows, eps=self.slack, serve=serve or "epoch"
            )
        if self.p_given is None or tracking:  # a group's presence may change the step constants too
            self._optimizer.epoch_hook = self._retune
        # The last `window` samples (base predictions and tau), for diagnostics at the served point.
        self._recent_predictions: np.ndarray | None = None
        self._recent_tau = np.zeros((self.window, k))
        self._recent_count = 0
        self.n_samples = 0
        self.n_clipped = 0
        self._draws = 0
        self._cdf = self.constraints.name == "cdf"  # which constraint family the compiled steps apply
        # One regression sample of the tracking optimizer under uniform weights is one compiled call.
        self._one_call = tracking and isinstance(cost, SquaredCosts) and self.uniform_weights
        self._p_or_empty = np.empty(0) if self.p_given is None else self.p_given
        self._coefficients = np.empty((0, k, self.atoms.size))  # see _served_coefficients
        self._coefficients_version = -1

    # ------------------------------------------------------------------ capabilities
    @property
    def labels(self) -> np.ndarray:
        """What the predictions are reported in: the atoms (regression) or the class labels."""
        return self.cost.labels

    @property
    def prediction_input(self) -> str:
        """What base prediction a sample carries: ``"eta"`` (a number) or ``"proba"`` (class probabilities)."""
        return self.cost.prediction_input

    # ------------------------------------------------------------------ costs and weighting hooks
    def _check_predictions(self, predictions: Any, n_rows: int | None) -> np.ndarray:
        """Validate base predictions (one row per sample)."""
        return self.cost.check(predictions, n_rows)

    def _scaled_costs(self, predictions: np.ndarray, tau: np.ndarray, learning: bool,
                      p: np.ndarray | None = None) -> np.ndarray:
        """``beta omega(x) r(x)`` for each sample (``tau`` is its group posterior): shape ``(n, m)``.

        ``learning``: count the clipped predictions in ``n_clipped``.  ``p``: the group shares in
        use at each row, shape ``(n, K)`` (``None``: :attr:`p` for every row).
        """
        costs, clipped = self.cost.scaled_costs(predictions, self.beta)
        if learning:
            self.n_clipped += clipped
        weights = self._sample_weights(tau, p)
        if weights is not None:
            costs *= weights[:, None]
        return costs

    def _sample_weights(self, tau: np.ndarray, p: np.ndarray | None) -> np.ndarray | None:
        """The weights ``omega(x)`` of the rows of ``tau`` under the shares ``p`` (``None``: :attr:`p`), or ``None``."""
        return None

    def _reweight_horizon(self) -> int | None:
        """Samples that may still be learned before the weights change; ``None``: they never do."""
        return None

    def _learned(self, predictions: np.ndarray, tau: np.ndarray, keys: Sequence[Hashable | None] | None) -> None:
        """Samples just learned (in order, within the reweight horizon): a weighting updates here."""

    def learn_label(self, key: Hashable, y: Any) -> bool:
        """The label ``y`` of the sample learned under ``key``; ``False`` if it is not used.

        The engine's uniform weighting uses no labels (``uses_labels`` is ``False``); a variant
        whose weighting does returns ``True`` when it matched the key.

        Parameters
        ----------
        key
            The key the sample was learned under (``learn_one(..., key=key)`` or one of the
            ``keys`` of a many-sample method).
        y
            The sample's label, which arrived after the sample was learned.

        Returns
        -------
        bool
            Whether the label was used: always ``False`` here.
        """
        return False

    # ------------------------------------------------------------------ set-up helpers
    @staticmethod
    def _infer_groups(p, slack, n_groups, slack_name: str) -> int:
        candidates = {}
        if p is not None:
            if _dimensions("p", p) != 1:
                raise ValueError(f"p must be one share per group, got {show(p)}")
            candidates["p"] = len(p)
        if _dimensions(slack_name, slack) == 1:
            candidates[slack_name] = len(slack)
        if n_groups is not None:
            candidates["n_groups"] = check_integer("n_groups", n_groups, 2)
        if not candidates:
            raise ValueError(f"the number of groups is unknown: give p, a per-group {slack_name}, or n_groups")
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
        """``sigma^2 = sum_s (1 - p_s) / p_s``: variance bound of the stochastic gradient (Lemma 4.1).

        The sum runs over the groups present in the stream (:meth:`_present_shares`): an absent
        group's features are 0.
        """
        p = self._present_shares()
        return float(np.sum((1.0 - p) / p))

    def _present_shares(self) -> np.ndarray:
        """The shares in use of the groups present (:meth:`_present`), renormalized to sum to one if any is absent.

        With one group present no constraint binds (its features are 0 wherever ``tau`` gives it
        mass): the shares of all groups then keep the step finite.
        """
        present = self._present()
        if present.all() or present.sum() < 2:
            return self.p
        shares = self.p[present]
        return shares / shares.sum()

    def _present(self) -> np.ndarray:
        """Which groups are present in the stream (the tracking optimizer's notion; the paper's constrain all).

        A group is absent while its share in use is below :func:`streamfair.tracking.absent_share`,
        less than one expected sample in the memory: its features are 0, so it imposes no
        constraint.  The share in use is the mean of ``tau`` over the memory when ``tau`` is
        corrected to given shares (a group declared in ``p`` but never seen falls below it after
        about ``p_s memory`` samples), and the mean of ``tau`` so far, without the pseudo-sample,
        when ``p`` is estimated (a group never seen is absent from the first sample on).  A state
        written before ``tau`` was corrected to given shares continues as written: every group present.
        """
        if self.p_given is None:
            return ~self._estimated_absent(self._tau_sum, self._tau_count)
        if not self._prior_shift:  # the paper's optimizers, or a state written before the correction
            return np.ones(self.n_groups, dtype=bool)
        return self._tau_means[1] >= self._absent_below

    def _step_constants(self) -> tuple[float, float, float]:
        """``(M, mu, p_min)``: smoothness ``2 beta sigma^2`` (Lemma 3.4), the strong-convexity parameter, and
        the smallest group share in use (how long the tracking optimizer's step decays)."""
        sigma2 = self.sigma2
        mu = self.mu_given if self.mu_given is not None else 2.0 * sigma2 / self.beta
        return 2.0 * self.beta * sigma2, mu, float(self._present_shares().min())

    @property
    def schedule(self) -> Schedule:
        """The step schedule (epoch, run, step) of the paper's optimizers.

        Raises ``AttributeError`` for ``optimizer="tracking"``, which has no schedule.
        """
        if not isinstance(self._optimizer, DualOptimizer):
            raise AttributeError("optimizer='tracking' has no schedule (it has a memory)")
        return self._optimizer.schedule

    @property
    def optimizer(self) -> str:
        """The optimizer's name: ``"tracking"`` or one of the paper's."""
        return "tracking" if isinstance(self._optimizer, TrackingOptimizer) else self._optimizer.schedule.optimizer

    @property
    def eps(self) -> np.ndarray | None:
        """The per-atom slack of ``constraint="atom"`` (``None`` with the KS constraints)."""
        return self.slack if self.constraints.name == "atom" else None

    @property
    def ks(self) -> np.ndarray | None:
        """The KS target of ``constraint="cdf"`` (``None`` with the per-atom constraints)."""
        return self.slack if self.constraints.name == "cdf" else None

    @property
    def dual(self) -> np.ndarray:
        """The served dual ``(Lambda, V)``, shape ``(2, m, K)`` (read-only view)."""
        view = self._optimizer.served.view()
        view.flags.writeable = False
        return view

    # ------------------------------------------------------------------ features
    def _check_tau(self, tau: Any, n_rows: int | None) -> np.ndarray:
        return check_distributions("tau", tau, n_rows, self.n_groups)

    def _learning_features(self, tau: np.ndarray, serving: np.ndarray | None = None) -> np.ndarray:
        """``t(x)`` rows for learning; moves the running ``p`` estimate (or the mean of ``tau``) sample by sample.

        ``serving``: the :meth:`_serving_features` of ``tau`` just computed, which are the learning
        features when ``p`` is given.
        """
        if self._prior_shift:
            return self._shifted_features(tau, move=True)
        if self.p_given is not None:
            return self._given_features(tau) if serving is None else serving
        if tau.shape[0] == 1:  # the row-1 case of the cumulative sums below, without building them
            sums = self._tau_sum + tau
            self._tau_count += 1
            features = self._estimated_features(tau, sums, self._tau_count)
            self._tau_sum = sums[0]
            return features
        sums, counts = self._tau_sums(tau)
        self._tau_sum = sums[-1].copy()
        self._tau_count = int(counts[-1])
        return self._estimated_features(tau, sums[1:], counts[1:, None])

    def _serving_features(self, tau: np.ndarray) -> np.ndarray:
        """The group features ``t(x) = 1 - tau(x) / p`` of each row at the current state.

        With the tracking optimizer and given shares ``p``, ``tau`` is first corrected to them:
        ``tau'_s = tau_s (p_s / q_s) / Z`` with ``q`` the mean of ``tau`` over the last ``memory``
        samples (Saerens, Latinne & Decaestecker's adjustment to new priors, Neural Computation
        2002; :func:`streamfair.kernel.prior_shift_features`).  A posterior whose mean is not ``p``
        (a group classifier still learning its intercept, or trained on another population) then
        gives features of mean zero, as the dual's gradient assumes; a calibrated one is left as
        it is (``q = p``).  The ``q`` in use is the one of the last change of the served points, so
        that the served law still changes only then.  The features of a group absent from the
        stream are 0 and its term is left out of ``Z`` (:meth:`_present`): on a row without its
        mass, the other groups' features are the same whether it is present or absent.
        """
        if self._prior_shift:
            return self._shifted_features(tau, move=False)
        if self.p_given is not None:
            return self._given_features(tau)
        return self._estimated_features(tau, self._tau_sum, self._tau_count)

    def _row_features(self, taus: np.ndarray) -> np.ndarray:
        """The group features of each row of a run the same points serve, at the state that learned the rows
        before it; nothing is updated.  The mean of ``tau`` in use changes only with the served points: in
        such a run, not at all."""
        if self._prior_shift or self.p_given is not None:
            return self._serving_features(taus)
        sums, counts = self._tau_sums(taus)
        return self._estimated_features(taus, sums[:-1], counts[:-1, None])

    def _given_features(self, taus: np.ndarray) -> np.ndarray:
        """``t = 1 - tau / p`` for the given ``p`` (:func:`streamfair.dual.group_features`), every group present.

        (The paper's optimizers, or a tracking state written before ``tau`` was corrected to ``p``.)
        """
        assert self.p_given is not None  # by the callers
        return dual.group_features(taus, self.p_given)

    def _estimated_features(self, taus: np.ndarray, sums: Any, counts: Any) -> np.ndarray:
        """``t = 1 - tau / p`` for the running estimate ``p = sums / counts``, 0 for an absent group."""
        features = dual.group_features(taus, sums / counts)
        absent = self._estimated_absent(sums, counts)
        return np.where(absent, 0.0, features) if absent.any() else features

    def _estimated_absent(self, sums: Any, counts: Any) -> np.ndarray:
        """Whether each group is absent by the running sums of ``tau`` (one uniform pseudo-sample included).

        It is while the mean of its ``tau`` beyond the pseudo-sample, ``(sums - 1/K) / (counts - 1)``,
        is below the absent share (:meth:`_present`).
        """
        return sums - 1.0 / self.n_groups < (counts - 1) * self._absent_below

    def _shifted_features(self, taus: np.ndarray, move: bool) -> np.ndarray:
        """:func:`streamfair.kernel.prior_shift_features` of ``taus``; with ``move``, the rows move the means of tau."""
        optimizer = self._optimizer
        assert self.p_given is not None and isinstance(optimizer, TrackingOptimizer)  # by _prior_shift
        features = np.empty(taus.shape)
        kernel.prior_shift_features(taus.ravel(), self.p_given, self._tau_means, self._absent_below, self.n_samples,
                                    optimizer.interval, optimizer.memory, move, features.ravel())
        return features

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
    def _check_one(self, prediction: Any, tau: TauRow) -> tuple[np.ndarray, np.ndarray]:
        """One sample's validated prediction and ``tau``, as one-row arrays."""
        return self.cost.check_one(prediction), check_distribution("tau", tau, self.n_groups)[None, :]

    def _check_many(self, predictions: Any, tau: Any, keys: Sequence | None) -> tuple[np.ndarray, np.ndarray]:
        """``n`` samples' validated predictions and ``tau`` rows; ``keys`` (if any) must be ``n``."""
        predictions = self._check_predictions(predictions, None)
        taus = self._check_tau(tau, predictions.shape[0])
        check_keys(keys, taus.shape[0], kept=self.uses_labels)
        return predictions, taus

    def learn_one(self, prediction: Any, tau: TauRow, key: Hashable | None = None) -> None:
        """One unlabeled sample: one stochastic-gradient step of the optimizer.

        Parameters
        ----------
        prediction
            The base model's prediction for the sample (see :attr:`prediction_input`): the
            estimate ``eta(x)``, a number (regression), or the class probabilities
            ``P(Y = . | x)``, ``m`` numbers summing to one (classification).
        tau
            The group posterior ``tau(x) = P(S = . | x)``: ``K`` probabilities summing to one, in
            the column order of :attr:`p`.
        key
            Names the sample (e.g. its message id) for a later :meth:`learn_label`; ``None``:
            no label will refer to it (a hashable value).
        """
        if key is not None and self.uses_labels:  # kept for learn_label
            check_key("key", key)
        if self._one_sample(prediction, tau, None, draw=False, learn=True) is not None:  # uniform weights: no key
            return
        predictions, taus = self._check_one(prediction, tau)
        costs = self._scaled_costs(predictions, taus, learning=True)
        self._remember(predictions, taus)
        self._step(self._learning_features(taus)[0], costs[0])
        self._learned(predictions, taus, None if key is None else [key])

    @property
    def _prior_shift(self) -> bool:
        """Whether ``tau`` is corrected to the given shares (see :meth:`_serving_features`)."""
        return self._tau_means.size > 0

    def _one_call_inputs(self, prediction: Any, tau: TauRow) -> tuple[float, np.ndarray] | None:
        """``(eta, tau row)`` of a sample the compiled one-call paths may take, or ``None`` for the general path.

        They take a regression sample of the tracking optimizer under uniform weights, once a sample
        was learned, whose prediction is a plain finite number (the compiled calls check ``tau``; a
        ``tau`` of text goes to the general path, which refuses it).
        """
        if not self._one_call or type(prediction) not in PLAIN_NUMBERS or self._recent_predictions is None:
            return None
        try:
            eta, row = float(prediction), float_array(tau)
        except (TypeError, ValueError, OverflowError):  # the general path names what is wrong
            return None
        if not math.isfinite(eta) or row.ndim != 1:
            return None
        return eta, row

    def _one_sample(self, prediction: Any, tau: TauRow, key: Key | None, draw: bool, learn: bool) -> int | None:
        """A keyed draw (``draw``), then :meth:`learn_one` (``learn``), of one sample in one compiled call.

        It applies to a regression sample of the tracking optimizer under uniform weights whose
        prediction is a plain finite number and whose ``tau`` the compiled check takes (the same
        floats as the general path, see :func:`streamfair.kernel.tracking_sample`).  Returns the
        drawn index (-1 without a draw), or ``None``, with nothing changed, for the general path.
        """
        inputs = self._one_call_inputs(prediction, tau)
        if inputs is None:
            return None
        eta, row = inputs
        draws = self._draws
        u = self._uniform(key) if draw else -1.0
        coefficients = self._served_coefficients() if draw else self._coefficients
        optimizer, cost = self._optimizer, self.cost
        assert isinstance(optimizer, TrackingOptimizer) and isinstance(cost, SquaredCosts)  # by _one_call
        w, baseline, slack, step, n_steps = optimizer.step_state()
        clipped, index = kernel.tracking_sample(
            w, baseline, slack, step, self.beta, self._cdf, n_steps, self.atoms, cost.low, cost.high, eta, row,
            self._p_or_empty, self._tau_means, self.n_samples, optimizer.interval, optimizer.memory, self._absent_below,
            self._tau_sum, self._tau_count, self._recent_predictions, self._recent_tau, coefficients, u, learn)
        if clipped < 0:  # a tau for the general path to judge
            self._draws = draws
            return None
        if not learn:
            return index
        if self.p_given is None:
            self._tau_count += 1
        self.n_clipped += clipped
        self._recent_count = min(self.window, self._recent_count + 1)
        optimizer.advance(1)
        self.n_samples += 1
        return index

    def learn_many(self, predictions: Any, tau: Any, batch_size: int | None = None,
                   keys: Sequence[Hashable | None] | None = None) -> None:
        """Learn from ``n`` samples in order.

        With ``batch_size=None`` the result is bit-for-bit that of ``n`` calls to :meth:`learn_one`.
        With ``batch_size=b`` each step averages the stochastic gradient over ``b`` consecutive
        samples (variance ``sigma^2 / b``); the schedule then counts steps, not samples.  Each
        sample's features use the running ``p`` estimate after that sample, as in sequential mode;
        an epoch restart re-derives the step sizes from the estimate at the end of its last batch.
        Mini-batches never straddle a change of the sample weights.

        Parameters
        ----------
        predictions
            The base model's predictions, one per sample: shape ``(n,)`` of ``eta(x)``
            (regression) or ``(n, m)`` class probabilities (classification).
        tau
            The group posteriors ``P(S = . | x)``, shape ``(n, K)``, rows summing to one.
        batch_size
            Samples per stochastic-gradient step; ``None``: one step per sample.
        keys
            ``None``, or one key (or ``None``) per sample, as the ``key`` of :meth:`learn_one`.
        """
        predictions, taus = self._check_many(predictions, tau, keys)
        if batch_size is not None:
            batch_size = check_integer("batch_size", batch_size, 1)
        step_rows = batch_size or 1
        piece_rows = step_rows * max(1, CHUNK_ROWS // step_rows)  # whole mini-batches: none straddles two pieces
        start, n = 0, taus.shape[0]
        while start < n:  # runs within which the sample weights stay put
            horizon = self._reweight_horizon()
            stop = n if horizon is None else min(n, start + horizon)
            for piece in chunks(stop - start, piece_rows):
                rows = slice(start + piece.start, start + piece.stop)
                self._learn_piece(predictions[rows], taus[rows], batch_size)
            self._learned(predictions[start:stop], taus[start:stop], None if keys is None else keys[start:stop])
            start = stop

    def _running_p(self, taus: np.ndarray) -> np.ndarray:
        """The group shares in use before each sample of ``taus`` (given, or the running estimate): ``(n, K)``.

        Nothing is updated: :meth:`_learning_features` moves the estimate when the samples are learned.
        """
        if self.p_given is not None:
            return np.broadcast_to(self.p_given, taus.shape)
        sums, counts = self._tau_sums(taus)
        return sums[:-1] / counts[:-1, None]

    def _tau_sums(self, taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The running sum of ``tau`` and its count before each row of ``taus`` and after the last: ``n + 1`` rows."""
        return np.cumsum(np.vstack([self._tau_sum, taus]), axis=0), self._tau_count + np.arange(taus.shape[0] + 1)

    def _learning_costs(self, predictions: np.ndarray, taus: np.ndarray) -> np.ndarray:
        """The scaled costs of samples about to be learned in order, each under the shares in use before it."""
        running_p = None if self.p_given is not None else self._running_p(taus)
        return self._scaled_costs(predictions, taus, True, running_p)

    def _learn_piece(self, predictions: np.ndarray, taus: np.ndarray, batch_size: int | None,
                     costs: np.ndarray | None = None) -> None:
        """:meth:`learn_many` of at most ``CHUNK_ROWS`` (validated) samples: their costs exist at once.

        ``costs``: their :meth:`_learning_costs`, if already computed.
        """
        if costs is None:
            costs = self._learning_costs(predictions, taus)
        self._remember(predictions, taus)
        start, n = 0, taus.shape[0]
        while start < n:  # one chunk per epoch, so a restart sees the running p at its own sample
            chunk = batch_size or 1  # at least one step is left: a single chunk needs no look-up
            stop = n if n - start <= chunk else min(n, start + chunk * self._optimizer.steps_left())
            features = self._learning_features(taus[start:stop])
            if batch_size is None:
                self._optimizer.learn_rows(self.beta, self._cdf, features, costs[start:stop])
                self.n_samples += features.shape[0]
            else:
                for first in range(0, features.shape[0], batch_size):
                    rows = slice(first, first + batch_size)
                    self._step_batch(features[rows], costs[start:stop][rows])
            start = stop

    def proba_learn_one(self, prediction: Any, tau: TauRow, key: Hashable | None = None) -> np.ndarray:
        """``pi(. | x)`` at the current state, then learn the sample: :meth:`proba_one` then :meth:`learn_one`.

        The same distribution and the same state, bit for bit, as the two calls (prequential
        serving: the prediction never depends on its own sample), with the input validated and the
        costs computed once.  An invalid input raises ``ValueError`` before anything changes.

        Parameters
        ----------
        prediction, tau
            The base model's prediction and the group posterior of the sample, as for
            :meth:`learn_one`.
        key
            Names the sample for a later :meth:`learn_label`, as for :meth:`learn_one`.

        Returns
        -------
        ndarray of shape (m,)
            ``pi(. | x)`` over :attr:`atoms`, served before the sample was learned.

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> proba = a.proba_one(0.3, [0.2, 0.8]); a.learn_one(0.3, [0.2, 0.8])
        >>> bool((b.proba_learn_one(0.3, [0.2, 0.8]) == proba).all()), a.n_samples == b.n_samples == 1
        (True, True)
        """
        if key is not None and self.uses_labels:  # kept for learn_label
            check_key("key", key)
        predictions, taus = self._check_one(prediction, tau)
        costs = self._scaled_costs(predictions, taus, learning=True)  # ``learning`` only counts (e.g. clips)
        serving = self._serving_features(taus)  # p before this sample, as proba_one
        proba = self._served_proba(serving, costs)[0]
        self._remember(predictions, taus)
        self._step(self._learning_features(taus, serving)[0], costs[0])
        self._learned(predictions, taus, None if key is None else [key])
        return proba

    def proba_learn_many(self, predictions: Any, tau: Any, keys: Sequence[Hashable | None] | None = None) -> np.ndarray:
        """For each sample in order, ``pi(. | x_i)`` at the state that learned the samples before it, then learn it.

        Bit for bit the same rows and state as ``n`` calls to :meth:`proba_learn_one` (that is,
        :meth:`proba_one` then :meth:`learn_one` per sample, with its key), with the inputs
        validated at once as :meth:`learn_many` does (an invalid row raises ``ValueError`` before
        anything changes) and the group features of all samples computed together.

        Parameters
        ----------
        predictions, tau
            The base model's predictions and the group posteriors, one row per sample, as for
            :meth:`learn_many`.
        keys
            ``None``, or one key (or ``None``) per sample, as the ``key`` of :meth:`learn_one`.

        Returns
        -------
        ndarray of shape (n, m)
            Row ``i`` is ``pi(. | x_i)`` over :attr:`atoms`, served before sample ``i`` was learned.

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> rows = [a.proba_learn_one(e, [0.3, 0.7]) for e in (0.1, -0.4, 0.8)]
        >>> bool((b.proba_learn_many([0.1, -0.4, 0.8], [[0.3, 0.7]] * 3) == rows).all())
        True
        """
        predictions, taus = self._check_many(predictions, tau, keys)
        proba = np.empty((taus.shape[0], self.atoms.size))

        def serve(rows: slice, features: np.ndarray, costs: np.ndarray) -> None:
            proba[rows] = self._served_proba(features, costs)

        self._serve_then_learn(predictions, taus, keys, serve)
        return proba

    @overload
    def predict_learn_many(self, predictions: Any, tau: Any, mode: str = ..., keys: Sequence[Key | None] | None = ...,
                           return_proba: Literal[False] = ...) -> np.ndarray: ...

    @overload
    def predict_learn_many(self, predictions: Any, tau: Any, mode: str = ..., keys: Sequence[Key | None] | None = ...,
                           *, return_proba: Literal[True]) -> tuple[np.ndarray, np.ndarray]: ...

    @overload  # return_proba known only at run time: either
    def predict_learn_many(self, predictions: Any, tau: Any, mode: str = ..., keys: Sequence[Key | None] | None = ...,
                           return_proba: bool = ...) -> Any: ...

    def predict_learn_many(self, predictions: Any, tau: Any, mode: str = "sample",
                           keys: Sequence[Key | None] | None = None,
                           return_proba: bool = False) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
        """For each sample in order, a fair prediction at the state that learned the samples before it, then learn it.

        Bit for bit the same predictions and state as ``n`` calls to :meth:`predict_learn_one` (that
        is, :meth:`predict_one` then :meth:`learn_one` per sample, with its key; a ``None`` key
        draws from the counter), validated at once.

        Parameters
        ----------
        predictions, tau
            The base model's predictions and the group posteriors, one row per sample, as for
            :meth:`learn_many`.
        mode
            One of :attr:`prediction_modes`, as for :meth:`predict_one`.
        keys
            ``None``, or one key (or ``None``) per sample, each as the ``key`` of
            :meth:`predict_learn_one`: it determines the sample's draw and names it for
            :meth:`learn_label`.
        return_proba
            Also return the served probabilities of each sample, as :meth:`proba_learn_many` does.

        Returns
        -------
        ndarray of shape (n,) or tuple of two ndarrays
            The fair predictions, in :attr:`labels` (numbers for ``mode="mean"``); with
            ``return_proba``, ``(predictions, proba)`` with ``proba`` of shape ``(n, m)``.

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> one = [a.predict_learn_one(e, [0.3, 0.7], key=k) for e, k in ((0.1, "m1"), (-0.4, "m2"))]
        >>> b.predict_learn_many([0.1, -0.4], [[0.3, 0.7]] * 2, keys=["m1", "m2"]).tolist() == one
        True
        """
        self._check_mode(mode)
        if mode != "sample":
            served = self.proba_learn_many(predictions, tau, keys)
            fair = np.array([self._reduce(row[None, :], mode)[0] for row in served])  # one-row products: predict_one's
            return (fair, served) if return_proba else fair
        predictions, taus = self._check_many(predictions, tau, keys)
        n = taus.shape[0]
        u = self._uniforms(n, keys)
        indices = np.empty(n, dtype=np.intp)
        proba = np.empty((n, self.atoms.size)) if return_proba else None

        def serve(rows: slice, features: np.ndarray, costs: np.ndarray) -> None:
            indices[rows] = self._sample_indices(features, costs, u[rows])
            if proba is not None:
                proba[rows] = self._served_proba(features, costs)

        self._serve_then_learn(predictions, taus, keys, serve)
        if return_proba:
            assert proba is not None  # made above when return_proba
            return self.labels[indices], proba
        return self.labels[indices]

    def _serve_then_learn(self, predictions: np.ndarray, taus: np.ndarray, keys: Sequence | None,
                          serve: Callable[[slice, np.ndarray, np.ndarray], None]) -> None:
        """Learn validated samples in order, each served first by ``serve(rows, features, costs)``.

        The samples go in runs that the same points serve (and the same weights weigh): each run is
        served at once, at the state before its first sample, then learned.
        """
        start, n = 0, taus.shape[0]
        while start < n:
            stop = min(n, start + self._optimizer.served_steps(), start + CHUNK_ROWS)
            horizon = self._reweight_horizon()
            if horizon is not None:
                stop = min(stop, start + horizon)
            rows = slice(start, stop)
            costs = self._learning_costs(predictions[rows], taus[rows])
            serve(rows, self._row_features(taus[rows]), costs)
            self._learn_piece(predictions[rows], taus[rows], None, costs)
            self._learned(predictions[rows], taus[rows], None if keys is None else keys[rows])
            start = stop

    def predict_learn_one(self, prediction: Any, tau: TauRow, mode: str = "sample", key: Key | None = None) -> Any:
        """A fair prediction, then learn the sample: :meth:`predict_one` then :meth:`learn_one` (with ``key``), fused.

        The same prediction and state, bit for bit, as the two calls (see :meth:`proba_learn_one`).

        Parameters
        ----------
        prediction, tau
            The base model's prediction and the group posterior of the sample, as for
            :meth:`learn_one`.
        mode
            One of :attr:`prediction_modes`, as for :meth:`predict_one`.
        key
            The draw key, as for :meth:`predict_one`; it also names the sample for a later
            :meth:`learn_label`.

        Returns
        -------
        object
            The fair prediction, one of :attr:`labels` (a number for ``mode="mean"``).

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> a, b = FairRegressionPostProcessor(L=5, n_groups=2), FairRegressionPostProcessor(L=5, n_groups=2)
        >>> first = a.predict_one(0.3, [0.2, 0.8], key="m1"); a.learn_one(0.3, [0.2, 0.8], key="m1")
        >>> bool(b.predict_learn_one(0.3, [0.2, 0.8], key="m1") == first)
        True
        """
        self._check_mode(mode)
        if mode != "sample":
            return self._reduce(self.proba_learn_one(prediction, tau, key)[None, :], mode)[0]
        drawn = self._one_sample(prediction, tau, key, draw=True, learn=True)
        if drawn is not None:
            return self.labels[drawn]
        predictions, taus = self._check_one(prediction, tau)
        u = self._uniform(key)  # as predict_one; an invalid key raises before anything changes
        costs = self._scaled_costs(predictions, taus, learning=True)  # ``learning`` only counts (e.g. clips)
        serving = self._serving_features(taus)
        index = self._sample_index(serving, costs, u)
        self._remember(predictions, taus)
        self._step(self._learning_features(taus, serving)[0], costs[0])
        self._learned(predictions, taus, None if key is None else [key])
        return self.labels[index]

    def _step(self, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One optimizer step on one sample (its learning features and scaled costs)."""
        self._optimizer.learn(self.beta, self._cdf, features, scaled_costs)
        self.n_samples += 1

    def _step_batch(self, features: np.ndarray, scaled_costs: np.ndarray) -> None:
        """One optimizer step on the mean gradient of the rows (a mini-batch)."""
        self._optimizer.learn_batch(self.beta, self._cdf, features, scaled_costs)
        self.n_samples += features.shape[0]

    def _retune(self) -> None:
        """At an epoch restart, re-derive the step sizes from the current estimate of ``p``."""
        self._optimizer.retune(*self._step_constants())

    # ------------------------------------------------------------------ prediction
    def _served_coefficients(self) -> np.ndarray:
        """``(beta C^T (Lambda - V))^T`` of each served point, shape ``(k, K, m)``; kept until the points change."""
        version = self._optimizer.served_version
        if self._coefficients_version != version:
            points = np.ascontiguousarray(self._optimizer.served_points)  # (k, 2, R, K)
            self._coefficients = np.empty((points.shape[0],) + self._coefficients.shape[1:])
            kernel.served_coefficients(points, self.beta, self._cdf, self._coefficients)
            self._coefficients_version = version
        return self._coefficients

    def _served_proba(self, features: np.ndarray, scaled_costs: np.ndarray) -> np.ndarray:
        """The served policy: the uniform mixture of the policies at the optimizer's ``k`` served points."""
        proba = np.empty(scaled_costs.shape)
        kernel.served_proba(self._served_coefficients(), features, scaled_costs, proba)
        return proba

    def _sample_indices(self, features: np.ndarray, scaled_costs: np.ndarray, u: np.ndarray) -> np.ndarray:
        """One atom index per row, drawn from the served law at the uniforms ``u``.

        ``u`` picks one of the ``k`` served points and draws from its policy by the inverse CDF
        (:mod:`streamfair.kernel`): the law of :meth:`_served_proba`, one policy computed per row.
        """
        indices = np.empty(u.size, dtype=np.int64)
        kernel.served_draws(self._served_coefficients(), features, scaled_costs, u, indices)
        return indices

    def _sample_index(self, features: np.ndarray, scaled_costs: np.ndarray, u: float) -> int:
        """:meth:`_sample_indices` of one row (``features`` and ``scaled_costs`` with one row): the same index."""
        return kernel.served_draw(self._served_coefficients(), features[0], scaled_costs[0], u)

    def proba_many(self, predictions: Any, tau: Any) -> np.ndarray:
        """``pi(l | x_i)`` for each sample: the distribution DP is about.  Nothing is learned.

        Parameters
        ----------
        predictions, tau
            The base model's predictions and the group posteriors, one row per sample, as for
            :meth:`learn_many`.

        Returns
        -------
        ndarray of shape (n, m)
            Row ``i`` is ``pi(. | x_i)`` over :attr:`atoms`.
        """
        predictions = self._check_predictions(predictions, None)
        return self._proba(predictions, self._check_tau(tau, predictions.shape[0]))

    def _proba(self, predictions: np.ndarray, taus: np.ndarray) -> np.ndarray:
        proba = np.empty((taus.shape[0], self.atoms.size))
        for rows in chunks(taus.shape[0]):
            costs = self._scaled_costs(predictions[rows], taus[rows], learning=False)
            proba[rows] = self._served_proba(self._serving_features(taus[rows]), costs)
        return proba

    def proba_one(self, prediction: Any, tau: TauRow) -> np.ndarray:
        """``pi(. | x)`` over the atoms for one sample.  Nothing is learned.

        A sample of the one-call paths (see :meth:`_one_sample`) is one compiled call
        (:func:`streamfair.kernel.tracking_proba`), with the floats of the general path.

        Parameters
        ----------
        prediction, tau
            The base model's prediction and the group posterior of the sample, as for
            :meth:`learn_one`.

        Returns
        -------
        ndarray of shape (m,)
            The law of the randomized fair prediction over :attr:`atoms`.
        """
        inputs = self._one_call_inputs(prediction, tau)
        if inputs is not None:
            proba = np.empty(self.atoms.size)
            cost = self.cost
            assert isinstance(cost, SquaredCosts)  # by _one_call
            if kernel.tracking_proba(self.atoms, cost.low, cost.high, self.beta, *inputs, self._p_or_empty,
                                     self._tau_means, self._absent_below, self._tau_sum, self._tau_count,
                                     self._served_coefficients(), proba):
                return proba
        return self._proba(*self._check_one(prediction, tau))[0]

    def _check_mode(self, mode: str) -> None:
        if mode not in self.prediction_modes:
            raise ValueError(f"mode must be one of {self.prediction_modes}, got {mode!r}")

    def _reduce(self, proba: np.ndarray, mode: str) -> np.ndarray:
        """The deterministic modes of the rows of ``proba``: the label of the most likely atom, or the mean atom."""
        return self.labels[proba.argmax(axis=1)] if mode == "mode" else proba @ self.atoms

    def _uniform(self, key: Key | None) -> float:
        """The keyed uniform of one draw; without a key the draw counter (part of the state) supplies one."""
        return keyed_uniform(self.seed, self._counter_key() if key is None else key)

    def _uniforms(self, n: int, keys: Sequence[Key | None] | None) -> np.ndarray:
        """:meth:`_uniform` of ``n`` draws (``keys``: ``None`` or ``n`` keys, each ``None`` for the counter)."""
        if keys is None:
            named: Sequence[Key] = [counter_key(self._draws + i) for i in range(n)]
            self._draws += n
        else:  # each missing key from the counter, in order
            named = [self._counter_key() if key is None else key for key in keys]
        return keyed_uniforms(self.seed, named)

    def _counter_key(self) -> str:
        """The key of the next unkeyed draw (the counter moves on)."""
        self._draws += 1
        return counter_key(self._draws - 1)

    def predict_many(self, predictions: Any, tau: Any, mode: str = "sample",
                     keys: Sequence[Key | None] | None = None) -> np.ndarray:
        """Fair predictions for ``n`` samples, in :attr:`labels`.  Nothing is learned.

        Parameters
        ----------
        predictions, tau
            The base model's predictions and the group posteriors, one row per sample, as for
            :meth:`learn_many`.
        mode
            One of :attr:`prediction_modes`, as for :meth:`predict_one`.
        keys
            ``None``, or one draw key (or ``None``) per sample, each as the ``key`` of
            :meth:`predict_one`.

        Returns
        -------
        ndarray of shape (n,)
            The fair predictions, in :attr:`labels` (numbers for ``mode="mean"``).
        """
        self._check_mode(mode)
        predictions, taus = self._check_many(predictions, tau, keys)
        n, labels = taus.shape[0], self.labels
        fair = np.empty(n, dtype=float if mode == "mean" else labels.dtype)
        for rows in chunks(n):
            if mode == "sample":
                u = self._uniforms(rows.stop - rows.start, None if keys is None else keys[rows])
                costs = self._scaled_costs(predictions[rows], taus[rows], learning=False)
                fair[rows] = labels[self._sample_indices(self._serving_features(taus[rows]), costs, u)]
            else:
                fair[rows] = self._reduce(self._proba(predictions[rows], taus[rows]), mode)
        return fair

    def predict_one(self, prediction: Any, tau: TauRow, mode: str = "sample", key: Key | None = None) -> Any:
        """A fair prediction for one sample.  Nothing is learned.

        Parameters
        ----------
        prediction, tau
            The base model's prediction and the group posterior of the sample, as for
            :meth:`learn_one`.
        mode
            ``"sample"`` draws an atom from ``pi(. | x)``: the randomized predictor whose fairness
            the paper guarantees.  ``"mode"`` is the most likely atom; regression adds ``"mean"``,
            the mean of ``pi(. | x)`` (see :attr:`prediction_modes`).  Neither deterministic mode
            is covered by the DP guarantee.
        key
            The draw key (``mode="sample"``): an ``int``, ``str`` or ``bytes``.  The draw is
            determined by ``(seed, key)``; pass the message id so that a replayed message gets
            the same draw.  ``None``: an internal counter (part of the state) supplies one.

        Returns
        -------
        object
            The fair prediction, one of :attr:`labels` (a number for ``mode="mean"``).
        """
        self._check_mode(mode)
        if mode != "sample":
            return self._reduce(self.proba_one(prediction, tau)[None, :], mode)[0]
        drawn = self._one_sample(prediction, tau, key, draw=True, learn=False)
        if drawn is not None:
            return self.labels[drawn]
        predictions, taus = self._check_one(prediction, tau)
        costs = self._scaled_costs(predictions, taus, learning=False)
        return self.labels[self._sample_index(self._serving_features(taus), costs, self._uniform(key))]

    # ------------------------------------------------------------------ diagnostics
    def diagnostics(self) -> Diagnostics:
        """Live fairness and convergence estimates (no S needed); see :class:`Diagnostics`.

        The estimates are exact plug-in means over the samples in the window (all of them before
        it fills), at the served point.  The gradient is the plug-in gradient of the constraint
        rows ``+-C gaps + slack`` (the gaps of eq. 15), and the certificate is its gradient mapping
        at ``mapping_step``.

        Returns
        -------
        Diagnostics
            The estimates at the served point (zero gaps before the first sample).
        """
        served, constrained = self._optimizer.served, self._present()
        if self._recent_count and self._recent_predictions is not None:
            rows = slice(0, self._recent_count)
            tau = self._recent_tau[rows]
            costs = self._scaled_costs(self._recent_predictions[rows], tau, learning=False)
            features = self._serving_features(tau)
            proba = self._served_proba(features, costs)
            mean_proba, constraint_gaps = proba.mean(axis=0), proba.T @ features / self._recent_count
            membership = self.p * (1.0 - features)  # tau as the features weigh it
            mass = membership.sum(axis=0)
            seen = (mass > 0) & constrained
            group_proba = np.where(seen, proba.T @ membership / np.where(seen, mass, 1.0), mean_proba[:, None])
        else:
            mean_proba, constraint_gaps = np.zeros(self.atoms.size), np.zeros((self.atoms.size, self.n_groups))
            group_proba = np.zeros((self.atoms.size, self.n_groups))
        gaps = mean_proba[:, None] - group_proba
        group_unfairness, group_ks = gap_measures(gaps.T)
        rows_gaps = self.constraints.rows_of(constraint_gaps.T).T
        gradient = np.stack([rows_gaps + self.slack, -rows_gaps + self.slack])
        optimizer = self._optimizer
        return Diagnostics(
            n_samples=self.n_samples,
            n_clipped=self.n_clipped,
            epoch=optimizer.epoch,
            epoch_horizon=optimizer.epoch_horizon,
            epoch_progress=optimizer.progress(),
            atom_gaps=gaps,
            group_unfairness=group_unfairness,
            group_ks=group_ks,
            group_proba=group_proba,
            group_mean=self.atoms @ group_proba,
            target=self.slack.copy(),
            violation=float(np.sqrt(np.sum(np.maximum(np.abs(rows_gaps) - self.slack, 0.0) ** 2))),
            gradient_mapping_norm=float(
                np.linalg.norm(dual.gradient_mapping(served, gradient, optimizer.mapping_step))),
            mapping_step=optimizer.mapping_step,
            dual_norms=(float(np.linalg.norm(served[0])), float(np.linalg.norm(served[1]))),
            group_present=constrained,
        )

    # ------------------------------------------------------------------ state
    def get_params(self) -> dict[str, Any]:
        """The constructor arguments that rebuild an equivalent fresh object (its settings, no state).

        Returns
        -------
        dict
            Keyword arguments of the post-processor's constructor, as JSON values (numbers,
            strings, ``None`` and lists), as :meth:`state_dict` stores them: the engine's settings
            here, to which each subclass adds its own (``B`` and ``L``, the classes).

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.1, seed=3)
        >>> params = fair.get_params()
        >>> params["L"], params["ks"], params["seed"]
        (5, [0.1, 0.1], 3)
        >>> type(fair)(**params).get_params() == params
        True
        """
        optimizer = self._optimizer
        if isinstance(optimizer, DualOptimizer):
            schedule = optimizer.schedule
            mechanics = {"horizon": self.horizon, "inner": schedule.inner if schedule.optimizer == "sgd3" else None,
                         "mu": self.mu_given, "serve": optimizer.serve}
        else:
            mechanics = {"memory": self.memory}
        return {
            SLACK_NAMES[self.constraints.name]: self.slack.tolist(),
            "p": None if self.p_given is None else self.p_given.tolist(),
            "n_groups": self.n_groups,
            "beta": self.beta,
            "profile": self.profile,
            "optimizer": self.optimizer,
            **mechanics,
            "seed": self.seed,
            "window": self.window,
        }

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue exactly: configuration, arrays, counters, draw counter.

        Returns
        -------
        dict
            A self-describing state (its class name, a format version, :meth:`get_params`, the
            optimizer's state, arrays and counters) that :meth:`from_state_dict` restores.

        Examples
        --------
        >>> from streamfair import FairRegressionPostProcessor
        >>> fair = FairRegressionPostProcessor(L=5, n_groups=2, seed=1)
        >>> fair.learn_many([0.2, -0.6, 0.9], [[0.3, 0.7], [0.8, 0.2], [0.5, 0.5]])
        >>> copy = FairRegressionPostProcessor.from_state_dict(fair.state_dict())
        >>> copy.learn_one(0.4, [0.1, 0.9]); fair.learn_one(0.4, [0.1, 0.9])     # both continue alike
        >>> copy.n_samples, bool((copy.proba_one(0.1, [0.4, 0.6]) == fair.proba_one(0.1, [0.4, 0.6])).all())
        (4, True)
        """
        return {
            "version": STATE_VERSION,
            "class": type(self).__name__,
            "config": self.get_params(),
            "optimizer": self._optimizer.state_dict(),
            "recent_predictions": None if self._recent_predictions is None else self._recent_predictions.copy(),
            "recent_tau": self._recent_tau.copy(),
            "recent_count": self._recent_count,
            "tau_sum": self._tau_sum.copy(),
            "tau_count": self._tau_count,
            "tau_mean": self._tau_means[0].copy(),
            "tau_reference": self._tau_means[1].copy(),
            "n_samples": self.n_samples,
            "n_clipped": self.n_clipped,
            "draws": self._draws,
        }

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict[str, Any]) -> Self:
        """A new object that continues exactly as the one whose :meth:`state_dict` was taken.

        A version-1 state (written before the profiles existed) restores as the ``paper`` profile.

        Parameters
        ----------
        state
            What :meth:`state_dict` returned on an object of this class.

        Returns
        -------
        DualPostProcessor
            An object of this class, in the state ``state`` describes.
        """
        if state.get("version") == 1:
            state = upgrade_state_v1(state)
        if state.get("version") != STATE_VERSION or state.get("class") != cls.__name__:
            raise ValueError(
                f"state is for {state.get('class')!r} version {state.get('version')!r}, "
                f"expected {cls.__name__!r} version {STATE_VERSION}"
            )
        config = dict(state["config"])
        if config.get("optimizer") != "sgd3" and config.get("inner") is not None:
            config["inner"] = None  # written when every paper optimizer kept SGD3's (unused) inner solver
        obj = cls(**config)
        obj._optimizer.load_state_dict(state["optimizer"])
        # the window's rows, which the compiled calls write without bounds checks; copies, never the state's arrays
        recent, row = state["recent_predictions"], () if obj.prediction_input == "eta" else obj.atoms.shape
        obj._recent_predictions = (None if recent is None else
                                   check_array("state's recent_predictions", recent, (obj.window, *row), copy=True))
        obj._recent_tau[...] = _check_within("state's recent_tau", state["recent_tau"], obj._recent_tau.shape, 0.0)
        counts = {name: check_integer(f"state's {name}", state[name], minimum) for name, minimum in (
            ("recent_count", 0), ("tau_count", 1), ("n_samples", 0), ("n_clipped", 0), ("draws", 0))}
        if counts["recent_count"] > obj.window:
            raise ValueError(f"state's recent_count must be at most the window, {obj.window}, "
                             f"got {counts['recent_count']}")
        obj._recent_count, obj._tau_count = counts["recent_count"], counts["tau_count"]
        obj._tau_sum = check_array("state's tau_sum", state["tau_sum"], (obj.n_groups,), copy=True)
        if np.any(obj._tau_sum < 0):
            raise ValueError(f"state's tau_sum must be >= 0, got {show(obj._tau_sum)}")
        # A state written before the prior shift has neither mean: it continues without it, exactly as written.
        obj._tau_means = _check_within("state's tau_mean and tau_reference",
                                       [state.get("tau_mean", ()), state.get("tau_reference", ())],
                                       obj._tau_means.shape, kernel.TAU_MEAN_FLOOR, (2, 0))
        obj.n_samples, obj.n_clipped, obj._draws = counts["n_samples"], counts["n_clipped"], counts["draws"]
        return obj

    def __getstate__(self) -> dict:
        return self.state_dict()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(type(self).from_state_dict(state).__dict__)
        if self._optimizer.epoch_hook is not None:  # re-bind to self, not to the temporary object
            self._optimizer.epoch_hook = self._retune

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"


def upgrade_state_v1(state: dict) -> dict:
    """A version-1 :meth:`DualPostProcessor.state_dict` as version 2 (the ``paper`` profile).

    >>> old = {"version": 1, "class": "X", "config": {"eps": [0.1, 0.1]}, "optimizer": {"w": 0},
    ...        "step_constants": (2.0, 0.5)}
    >>> new = upgrade_state_v1(old)
    >>> new["version"], new["config"]["profile"], new["optimizer"]["step_constants"]
    (2, 'paper', (2.0, 0.5))
    """
    upgraded = {key: value for key, value in state.items() if key != "step_constants"}
    upgraded["version"] = STATE_VERSION
    upgraded["config"] = {**state["config"], "profile": "paper"}
    upgraded["optimizer"] = {**state["optimizer"], "step_constants": tuple(state["step_constants"])}
    return upgraded


def _check_within(name: str, value: Any, shape: tuple[int, ...], low: float, *other: tuple[int, ...]) -> np.ndarray:
    """:func:`check_array` of a state's array of probabilities (a copy): every entry in ``[low, 1]``."""
    array = check_array(name, value, shape, *other, copy=True)
    if np.any(array < low) or np.any(array > 1.0):
        raise ValueError(f"{name} must be in [{low:g}, 1], got {show(array)}")
    return array


def _dimensions(name: str, value: Any) -> int:
    """``np.ndim(value)``; a ragged sequence gets a ``ValueError`` naming ``name``.

    >>> _dimensions("ks", [0.1, 0.2])
    1
    >>> _dimensions("ks", [[0.1], [0.1, 0.2]])
    Traceback (most recent call last):
    ...
    ValueError: ks must be one number or one per group, got [[0.1], [0.1, 0.2]]
    """
    try:
        return int(np.ndim(value))
    except ValueError:
        raise ValueError(f"{name} must be one number or one per group, got {show(value)}") from None


def check_keys(keys: Sequence | None, n: int, kept: bool = False) -> None:
    """``None``, or one key per sample, hashable if ``kept`` (they name samples for ``learn_label``): else
    ``ValueError`` naming ``keys``.

    >>> check_keys(["a"], 2)
    Traceback (most recent call last):
    ...
    ValueError: keys must have one key per sample (2), got 1
    """
    if keys is None:
        return
    if isinstance(keys, (str, bytes, Mapping)) or not (hasattr(keys, "__len__") and hasattr(keys, "__getitem__")):
        raise ValueError(f"keys must be None or a sequence of one key per sample ({n}), got {show(keys)}")
    if len(keys) != n:
        raise ValueError(f"keys must have one key per sample ({n}), got {len(keys)}")
    if kept:
        for key in keys:
            check_key("keys", key)


def chunks(n: int, size: int = CHUNK_ROWS):
    """Consecutive slices of ``range(n)`` of ``size`` rows (the last one shorter).

    >>> [(rows.start, rows.stop) for rows in chunks(10, 4)]
    [(0, 4), (4, 8), (8, 10)]
    """
    for start in range(0, n, size):
        yield slice(start, min(n, start + size))
