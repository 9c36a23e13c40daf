"""Streaming versions of the complex-metric algorithms of Narasimhan et al. (derived, not in the paper).

* **Mode A** -- :class:`WindowedRefit`: keep a window of labelled tuples ``(eta_hat, y, group)``,
  refit a batch algorithm on it every ``refit_every`` arrivals, serve the latest mixture.  The
  paper's guarantees apply per refit when the window is i.i.d.
* **Mode B** -- :class:`StreamingFrankWolfe`: Frank-Wolfe with one-sample oracle estimates.  The
  state is a running estimate ``C_t`` of the deployed policy's confusion; each arrival is predicted
  by the plug-in for ``grad psi(C_t)`` and, when its label arrives (possibly later), ``C_t`` moves
  towards ``e_a e_y e_yhat`` with step ``1 / t`` (so ``C_t`` is the empirical confusion of the
  predictions made) or a constant step (an exponentially weighted estimate that tracks drift).
* **Mode C** -- :class:`OnlinePrimalDual`: the same plus one multiplier per constraint row,
  updated by projected ascent on the one-sample constraint estimate ``A Phi e_t - b``; the served
  cost is ``grad psi + A^T nu``.  For a linear metric this is the standard online primal-dual method; for
  demographic parity (and coverage with a known target) no update reads a label: without ``y`` the
  confusion update uses ``eta_hat`` as a label surrogate, exact for those coordinates, and with
  ``tau`` in place of the group the policy is unaware of S.

Modes B and C are one engine (:class:`StreamingPlugIn`); B is C without constraints.  Both keep
periodic snapshots of their cost matrices: :meth:`StreamingPlugIn.classifier` serves their uniform
mixture (the time average the theory is about) with keyed draws.

>>> import numpy as np
>>> from streamfair.complex_metrics import HMean
>>> rng = np.random.default_rng(0)
>>> y = rng.choice(3, 3000, p=[0.8, 0.15, 0.05])
>>> proba = np.eye(3)[y] * 0.3 + rng.dirichlet([4, 1, 0.5], 3000) * 0.7
>>> stream = StreamingFrankWolfe(HMean(), n_classes=3)
>>> predictions = stream.run(proba, y)                  # predict each sample, then learn its label
>>> bool(stream.objective() < HMean()(np.eye(3)[y].T @ np.eye(3)[proba.argmax(axis=1)] / 3000))
True
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..keyed_random import Key
from ..validation import (
    check_array,
    check_choice,
    check_distributions,
    check_index,
    check_instance,
    check_integer,
    check_positive,
    check_seed,
    float_array,
    is_real,
    show,
)
from .confusion import Sample, check_labels, plug_in, zero_one_scores
from .constraints import LinearConstraint
from .fit import Fit
from .mixture import GROUPINGS, RandomizedClassifier
from .performance import Metric, as_tensor
from .problem import Layout, Problem, check_constraints

__all__ = ["WindowedRefit", "StreamingPlugIn", "StreamingFrankWolfe", "OnlinePrimalDual"]

STATE_VERSION = 1
#: The entries of :meth:`StreamingPlugIn.state_dict` besides ``version``.
STATE_KEYS = frozenset({"confusion", "multipliers", "n_labels", "snapshots", "scores", "joint"})


def _check_grouping(grouping: str, n_groups: int) -> str:
    """One of ``GROUPINGS``, ``"none"`` exactly when there is one group."""
    check_choice("grouping", grouping, GROUPINGS)
    if (grouping == "none") != (n_groups == 1):
        raise ValueError(f"grouping {grouping!r} does not fit n_groups={n_groups}")
    return grouping


def _check_vector(name: str, value: Any, size: int, what: str) -> np.ndarray:
    """One sample's probability vector of length ``size`` (within ``1e-6`` of summing to one)."""
    try:
        vector = float_array(value)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{name} must be {size} {what} summing to 1, got {value!r}") from None
    if vector.shape != (size,):
        raise ValueError(f"{name} must be {size} {what} summing to 1, got {show(vector)}")
    values = vector.tolist()  # element by element in Python: faster than numpy reductions for a few entries
    if not all(0.0 <= v <= 1.0 for v in values) or abs(sum(values) - 1) > 1e-6:
        raise ValueError(f"{name} must be {size} {what} summing to 1, got {values}")
    return vector


def _check_proba(n_classes: int, proba: Any) -> np.ndarray:
    """One sample's class probabilities."""
    return _check_vector("proba", proba, n_classes, "class probabilities")


def _check_group_and_tau(n_groups: int, group: Any, tau: Any) -> tuple[int | None, np.ndarray | None]:
    """One sample's group (an integer in ``0..m-1``) and group posterior ``tau``, each ``None`` if not given."""
    checked_group = None if group is None else check_index("group", group, n_groups)
    return checked_group, None if tau is None else _check_vector("tau", tau, n_groups, "probabilities")


def _membership(n_groups: int, group: int | None, tau: np.ndarray | None) -> np.ndarray:
    """The sample's group weights ``G[a]``: one-hot ``group`` if given, else ``tau`` (``[1]`` without groups)."""
    if n_groups == 1:
        return np.ones(1)
    if group is not None:
        return np.eye(n_groups)[group]
    if tau is None:
        raise ValueError("each sample needs its group or its group posterior tau")
    return tau


class StreamingPlugIn:
    """The streaming plug-in engine of modes B and C (see the module docstring).

    Parameters
    ----------
    metric
        The objective ``psi``.
    constraints
        Linear constraints (none: mode B).
    n_classes, n_groups
        ``n`` and ``m`` (``m = 1`` without groups).
    grouping
        ``"none"``, ``"aware"`` (predictions use the group) or ``"unaware"`` (they use ``tau``; the
        confusion update also uses ``tau`` unless the group is given with the label).
    step
        Confusion-estimate step: ``None`` for ``1 / t`` (running mean), or a constant in ``(0, 1]``.
    dual_step
        Multiplier step ``eta_0``; the ``t``-th update uses ``eta_0 / sqrt(t)``.
    prior_count
        Weight, in samples, of the uniform initial confusion estimate.
    refresh_every
        Recompute the served cost matrix every this many label arrivals (1: every arrival; larger:
        a mini-batch variant, cheaper).
    remap_every
        Re-derive the coordinates ``Phi, A, b`` at the current marginals (priors, group shares)
        every this many label arrivals; they change slowly and cost more than a refresh.
    snapshot_every
        Keep the served cost matrix every this many label arrivals for :meth:`classifier`.
    seed
        Seed of the keyed draws of :meth:`classifier`.
    """

    def __init__(
        self,
        metric: Metric,
        constraints: Sequence[LinearConstraint] = (),
        *,
        n_classes: int,
        n_groups: int = 1,
        grouping: str = "none",
        step: float | None = None,
        dual_step: float = 0.1,
        prior_count: float = 1.0,
        refresh_every: int = 1,
        remap_every: int = 100,
        snapshot_every: int = 100,
        seed: int = 0,
    ):
        self.metric = check_instance("metric", metric, Metric)
        self.constraints = check_constraints(constraints)
        self.n_classes = check_integer("n_classes", n_classes, 2)
        self.n_groups = check_integer("n_groups", n_groups, 1)
        self.grouping = _check_grouping(grouping, self.n_groups)
        if step is not None and (not is_real(step) or not 0 < step <= 1):
            raise ValueError(f"step must be None or in (0, 1], got {step!r}")
        self.step = step
        self.dual_step = check_positive("dual_step", dual_step)
        self.prior_count = check_positive("prior_count", prior_count)
        self.refresh_every = check_integer("refresh_every", refresh_every, 1)
        self.remap_every = check_integer("remap_every", remap_every, 1)
        self.snapshot_every = check_integer("snapshot_every", snapshot_every, 1)
        self.seed = check_seed(seed)
        m, n = self.n_groups, self.n_classes
        self.confusion = np.full((m, n, n), 1.0 / (m * n * n))
        self.n_labels = 0
        self._structure(self.confusion.sum(axis=2))
        self.multipliers = np.zeros(self._b.size)
        self._snapshots: list[np.ndarray] = []
        self._refresh()

    # ------------------------------------------------------------------ structure
    def _structure(self, joint: np.ndarray, layout: Layout | None = None) -> None:
        """``Phi``, ``A``, ``b`` at the marginals ``joint`` (their ``layout``, if already built), and ``A Phi``."""
        self._joint = joint
        layout = Layout.build(self.metric, self.constraints, joint) if layout is None else layout
        self._phi, self._metric_size, self._a, self._b = layout.matrix, layout.metric_size, layout.A, layout.b
        self._constraint_map = self._a @ self._phi  # (K, m n n): one-sample constraint estimates

    def _refresh(self) -> None:
        """The served cost matrix ``Phi^T (grad psi(v) + A^T nu)``."""
        v = self._phi @ self.confusion.ravel()
        w = self._a.T @ self.multipliers
        w[: self._metric_size] += self.metric.gradient(v[: self._metric_size])
        self.scores = (self._phi.T @ w).reshape(-1, self.n_classes)

    # ------------------------------------------------------------------ serving and learning
    def predict_one(self, proba: Any, group: int | None = None, tau: Any = None) -> int:
        """The deterministic prediction of the current policy (aware: needs ``group``; unaware: ``tau``).

        Parameters
        ----------
        proba
            ``(n,)`` class probabilities ``eta_hat(x)``.
        group
            The sample's group, an integer in ``0..m-1`` (``"aware"`` grouping; checked, not used,
            otherwise).
        tau
            ``(m,)`` group posterior (``"unaware"`` grouping; checked, not used, otherwise).

        Returns
        -------
        int
            The plug-in prediction for the served cost matrix.
        """
        proba = _check_proba(self.n_classes, proba)
        group, tau = _check_group_and_tau(self.n_groups, group, tau)
        if self.grouping == "aware":
            if group is None:
                raise ValueError("this policy is group-aware: each sample needs its group")
            return self._predict(proba, np.eye(self.n_groups)[group])
        if self.grouping == "unaware":
            if tau is None:
                raise ValueError("this policy is group-unaware: each sample needs its group posterior tau")
            return self._predict(proba, tau)
        return self._predict(proba, None)

    def _predict(self, proba: np.ndarray, membership: np.ndarray | None) -> int:
        """The plug-in prediction for a checked sample, with the group weights the policy reads (or none)."""
        features = proba if membership is None else np.outer(membership, proba)
        return int(plug_in(features.reshape(1, -1), self.scores)[0])

    def learn_one(
        self, proba: Any, prediction: int, y: int | None = None, group: int | None = None, tau: Any = None
    ) -> None:
        """Fold in one served sample: its prediction and, if known, its label (else ``proba`` stands in).

        Parameters
        ----------
        proba
            ``(n,)`` class probabilities ``eta_hat(x)`` of the sample.
        prediction
            The class that was served for it, in ``0..n-1``.
        y
            Its label, in ``0..n-1``; ``None``: unknown (``proba`` is used in its place).
        group
            Its group, an integer in ``0..m-1``, if known (it takes precedence over ``tau``).
        tau
            ``(m,)`` its group posterior, used when ``group`` is not given.
        """
        proba = _check_proba(self.n_classes, proba)
        prediction = check_index("prediction", prediction, self.n_classes, "a class")
        label = None if y is None else check_index("y", y, self.n_classes, "a class")
        group, tau = _check_group_and_tau(self.n_groups, group, tau)
        self._learn(proba, prediction, label, _membership(self.n_groups, group, tau))

    def _learn(self, proba: np.ndarray, prediction: int, y: int | None, membership: np.ndarray) -> None:
        """:meth:`learn_one` for a checked sample and its group weights ``membership``."""
        if y is None:
            labels = proba
        else:
            labels = np.zeros(self.n_classes)
            labels[y] = 1.0
        weights = np.outer(membership, labels).ravel()  # the sample's mass in cells (a, i, prediction)
        cells = np.arange(weights.size) * self.n_classes + prediction
        self.n_labels += 1
        rate = self.step if self.step is not None else 1.0 / (self.n_labels + self.prior_count)
        self.confusion *= 1.0 - rate
        self.confusion.ravel()[cells] += rate * weights
        if self._b.size:
            estimate = self._constraint_map[:, cells] @ weights - self._b
            self.multipliers = np.maximum(self.multipliers + self.dual_step / np.sqrt(self.n_labels) * estimate, 0.0)
        if self.n_labels % self.remap_every == 0:
            self._structure(self.confusion.sum(axis=2))
        if self.n_labels % self.refresh_every == 0:
            self._refresh()
        if self.n_labels % self.snapshot_every == 0:
            self._snapshots.append(self.scores.copy())

    def run(self, proba: Any, y: Any = None, groups: Any = None, tau: Any = None, delay: int = 0) -> np.ndarray:
        """Serve a stream in order: predict sample ``t``, learn the label of sample ``t - delay``.

        At the end the labels of the last ``delay`` samples are learned too.  Every argument is
        checked before the first sample is served: a rejected stream leaves the object unchanged.

        Parameters
        ----------
        proba
            ``(N, n)`` class probabilities, in arrival order.
        y
            ``(N,)`` integer labels in ``0..n-1``; ``None``: learn without labels.
        groups
            ``(N,)`` integer groups in ``0..m-1`` (``"aware"`` grouping, or with ``tau`` for the
            confusion update).
        tau
            ``(N, m)`` group posteriors (``"unaware"`` grouping).
        delay
            How many arrivals later each label comes.

        Returns
        -------
        ndarray of shape (N,)
            The predictions made.
        """
        proba = check_distributions("proba", proba, None, self.n_classes)
        n, m = proba.shape[0], self.n_groups
        labels = None if y is None else check_labels("y", y, n, self.n_classes)
        groups = None if groups is None else check_labels("groups", groups, n, m)
        tau = None if tau is None else check_distributions("tau", tau, n, m)
        delay = check_integer("delay", delay, 0)
        if self.grouping == "aware" and groups is None:
            raise ValueError("this policy is group-aware: run needs groups")
        if self.grouping == "unaware" and tau is None:
            raise ValueError("this policy is group-unaware: run needs tau")
        onehot = None if groups is None else np.eye(m)[groups]
        served = {"none": None, "aware": onehot, "unaware": tau}[self.grouping]
        learned = np.ones((n, 1)) if m == 1 else (onehot if onehot is not None else tau)
        assert learned is not None  # m > 1: the grouping is aware (groups given) or unaware (tau given)
        predictions = np.empty(n, dtype=np.intp)

        def learn(t):
            self._learn(proba[t], int(predictions[t]), None if labels is None else int(labels[t]), learned[t])

        for t in range(n):
            predictions[t] = self._predict(proba[t], None if served is None else served[t])
            if t >= delay:
                learn(t - delay)
        for t in range(max(n - delay, 0), n):
            learn(t)
        return predictions

    # ------------------------------------------------------------------ outputs
    def objective(self) -> float:
        """``psi`` of the running confusion estimate (with ``1 / t``: of the predictions made).

        Returns
        -------
        float
            The metric's value.
        """
        v = self._phi @ self.confusion.ravel()
        return self.metric.value(v[: self._metric_size])

    def violation(self) -> float:
        """``max_k phi_k`` of the running confusion estimate (0 without constraints).

        Returns
        -------
        float
            The largest constraint row ``A v - b`` (``<= 0``: met).
        """
        if not self._b.size:
            return 0.0
        return float(np.max(self._a @ (self._phi @ self.confusion.ravel()) - self._b))

    def classifier(self, last: int | None = None) -> RandomizedClassifier:
        """The uniform mixture of the (last ``last``) snapshots of the served policy, or the current one.

        Parameters
        ----------
        last
            Mix only the last this many snapshots (an integer ``>= 0``); ``None`` (or 0): all of them.

        Returns
        -------
        RandomizedClassifier
            The mixture (the current policy alone before the first snapshot), drawing with ``seed``.
        """
        last = None if last is None else check_integer("last", last, 0)
        snapshots = self._snapshots[-last:] if last else self._snapshots
        scores = np.stack(snapshots) if snapshots else self.scores[None]
        return RandomizedClassifier(np.full(len(scores), 1.0 / len(scores)), scores, self.grouping, self.seed)

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """Arrays and counters that continue the stream exactly (the metric and constraints are not included).

        Returns
        -------
        dict
            ``version``, ``confusion``, ``multipliers``, ``n_labels``, ``snapshots``, ``scores`` and
            ``joint`` (copies).
        """
        return {
            "version": STATE_VERSION,
            "confusion": self.confusion.copy(),
            "multipliers": self.multipliers.copy(),
            "n_labels": self.n_labels,
            "snapshots": [s.copy() for s in self._snapshots],
            "scores": self.scores.copy(),
            "joint": self._joint.copy(),
        }

    def load_state_dict(self, state: dict) -> None:
        """Continue from :meth:`state_dict` (on an object built with the same arguments).

        Every entry is checked before any is loaded: a rejected state leaves the object unchanged.

        Parameters
        ----------
        state
            A :meth:`state_dict`.
        """
        if not isinstance(state, dict):
            raise ValueError(f"state must be a dict from state_dict(), got {type(state).__name__}")
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"state version must be {STATE_VERSION}, got {state.get('version')!r}")
        missing = sorted(STATE_KEYS - state.keys())
        if missing:
            raise ValueError(f"state is missing {missing}")
        m, n = self.n_groups, self.n_classes
        confusion = np.array(as_tensor(state["confusion"], (m, n, n)))
        n_labels = check_integer("n_labels", state["n_labels"], 0)
        joint = check_array("joint", state["joint"], (m, n), copy=True)
        layout = Layout.build(self.metric, self.constraints, joint)
        multipliers = check_array("multipliers", state["multipliers"], layout.b.shape, copy=True)
        if multipliers.size and multipliers.min() < 0:
            raise ValueError(f"multipliers must be >= 0, got {multipliers.tolist()[:8]}")
        if not isinstance(state["snapshots"], (list, tuple)):
            raise ValueError(f"snapshots must be a list of score matrices, got {type(state['snapshots']).__name__}")
        snapshots = [check_array("snapshots", s, (m * n, n), copy=True) for s in state["snapshots"]]
        scores = check_array("scores", state["scores"], (m * n, n), copy=True)
        self.confusion, self.n_labels = confusion, n_labels
        self._structure(joint, layout)
        self.multipliers, self._snapshots, self.scores = multipliers, snapshots, scores


class StreamingFrankWolfe(StreamingPlugIn):
    """Mode B: streaming Frank-Wolfe for an unconstrained metric (see :class:`StreamingPlugIn`).

    Parameters
    ----------
    metric
        The objective ``psi``.
    n_classes
        ``n``.
    **kwargs
        Further keyword arguments of :class:`StreamingPlugIn` (``n_groups``, ``grouping``,
        ``step``, ``refresh_every``, ``snapshot_every``, ``seed``, ...).

    Examples
    --------
    >>> import numpy as np
    >>> from streamfair.complex_metrics import HMean, Sample
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(2000, seed=0)
    >>> proba = posterior(x)
    >>> stream = StreamingFrankWolfe(HMean(), n_classes=3, refresh_every=10)
    >>> predictions = stream.run(proba, y)                  # predict each sample, then learn its label
    >>> made = HMean()(Sample(proba, y).confusion(predictions))
    >>> HMean()(Sample(proba, y).confusion(proba.argmax(axis=1))), bool(made < 0.6)   # vs argmax eta
    (1.0, True)

    With the step ``1 / t`` the running estimate is the confusion of the predictions made (up to
    the uniform prior of weight one sample); the served mixture has a snapshot per 100 labels.

    >>> bool(abs(stream.objective() - made) < 1e-3)
    True
    >>> h = stream.classifier()
    >>> h.n_components, round(float(h.weights.sum()), 9)
    (20, 1.0)
    """

    def __init__(self, metric: Metric, *, n_classes: int, **kwargs: Any):
        super().__init__(metric, (), n_classes=n_classes, **kwargs)


class OnlinePrimalDual(StreamingPlugIn):
    """Mode C: online primal-dual for constraints (see :class:`StreamingPlugIn`).

    Parameters
    ----------
    metric
        The objective ``psi``.
    constraints
        The linear constraints (at least one; use :class:`StreamingFrankWolfe` otherwise).
    n_classes
        ``n``.
    **kwargs
        Further keyword arguments of :class:`StreamingPlugIn` (``n_groups``, ``grouping``,
        ``dual_step``, ``refresh_every``, ``snapshot_every``, ``seed``, ...).

    Examples
    --------
    0-1 error under demographic parity within 0.05, learned without a single label.  The
    predictions made meet the constraint up to ``1 / sqrt(T)`` (the online primal-dual rate);
    ``argmax eta`` misses it by more than 0.1.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import DemographicParity, Sample, ZeroOneError
    >>> from streamfair.complex_metrics.synthetic import sample_two_groups
    >>> data = sample_two_groups(1000, seed=0)
    >>> eta, groups = data["eta_aware"], data["a"]
    >>> online = OnlinePrimalDual(
    ...     ZeroOneError(), [DemographicParity(eps=0.05)], n_classes=3, n_groups=2, grouping="aware",
    ...     dual_step=1.0, refresh_every=10,
    ... )
    >>> predictions = online.run(eta, None, groups)         # no labels
    >>> parity, unlabeled = DemographicParity(eps=0.05), Sample(eta, groups=groups)
    >>> bool(parity(unlabeled.confusion(eta.argmax(axis=1))) > 0.1)
    True
    >>> bool(parity(unlabeled.confusion(predictions)) <= 1 / np.sqrt(1000))
    True
    """

    def __init__(
        self, metric: Metric, constraints: Sequence[LinearConstraint], *, n_classes: int, **kwargs: Any
    ):
        if not constraints:
            raise ValueError("OnlinePrimalDual needs at least one constraint (use StreamingFrankWolfe otherwise)")
        super().__init__(metric, constraints, n_classes=n_classes, **kwargs)


class WindowedRefit:
    """Mode A: refit a batch algorithm on a window of labelled tuples, serve the latest mixture.

    Parameters
    ----------
    fit
        ``problem -> Fit``, e.g. ``lambda p: constrained_gda(p, 2000)``; must be deterministic.
    metric, constraints
        The problem refitted on each window.
    n_classes, n_groups, grouping
        As for :class:`StreamingPlugIn`; ``"aware"`` tuples carry the group, ``"unaware"`` ones
        ``tau`` (and the group, when known, for the confusion estimates).
    window
        Tuples kept (a sliding window; only class probabilities, labels and groups are stored).
    refit_every
        Arrivals between refits.
    seed
        Seed of the served classifiers' draws.

    Examples
    --------
    >>> from streamfair.complex_metrics import HMean, Sample, frank_wolfe
    >>> from streamfair.complex_metrics.synthetic import posterior, sample_three_class
    >>> x, y = sample_three_class(2000, seed=0)
    >>> proba = posterior(x)
    >>> refit = WindowedRefit(
    ...     lambda problem: frank_wolfe(problem, 50), HMean(), n_classes=3, window=1000, refit_every=1000
    ... )
    >>> refit.predict_one(proba[0], key="m0") == int(proba[0].argmax())   # before the first refit: argmax
    True
    >>> for row, label in zip(proba, y):
    ...     refit.learn_one(row, int(label))
    >>> refit.n_arrivals, refit.classifier.n_components                    # two refits of 50 iterations
    (2000, 50)
    >>> window = Sample(proba[1000:], y[1000:])                            # what the last refit saw
    >>> bool(abs(HMean()(refit.classifier.confusion(window)) - refit.last_fit.objective) < 1e-9)
    True
    """

    def __init__(
        self,
        fit: Callable[[Problem], Fit],
        metric: Metric,
        constraints: Sequence[LinearConstraint] = (),
        *,
        n_classes: int,
        n_groups: int = 1,
        grouping: str = "none",
        window: int = 10_000,
        refit_every: int = 1000,
        seed: int = 0,
    ):
        if not callable(fit):
            raise ValueError(f"fit must be a function of a Problem returning a Fit, got {fit!r}")
        self.fit = fit
        self.metric = check_instance("metric", metric, Metric)
        self.constraints = check_constraints(constraints)
        self.n_classes = check_integer("n_classes", n_classes, 2)
        self.n_groups = check_integer("n_groups", n_groups, 1)
        self.grouping = _check_grouping(grouping, self.n_groups)
        self.window = check_integer("window", window, 1)
        self.refit_every = check_integer("refit_every", refit_every, 1)
        self.seed = check_seed(seed)
        self._buffer: deque = deque(maxlen=self.window)
        self.n_arrivals = 0
        self.last_fit: Fit | None = None
        scores = zero_one_scores(self.n_classes, self.n_groups)[None]
        self.classifier = RandomizedClassifier(np.ones(1), scores, grouping, self.seed)

    def learn_one(self, proba: Any, y: int | None, group: int | None = None, tau: Any = None) -> None:
        """Add one tuple (``y=None``: unlabeled, the label-free surrogate is used); refit when due.

        Parameters
        ----------
        proba
            ``(n,)`` class probabilities ``eta_hat(x)``.
        y
            The label, in ``0..n-1``; ``None``: unlabeled.  A window with any unlabeled tuple is
            refitted without labels.
        group
            The group, an integer in ``0..m-1``: required with ``"aware"``; with ``"unaware"``, used
            for the confusion estimates when every tuple of the window has it; not used with ``"none"``.
        tau
            ``(m,)`` group posterior: required with ``"unaware"``, not used otherwise.
        """
        proba = _check_proba(self.n_classes, proba)
        label = None if y is None else check_index("y", y, self.n_classes, "a class")
        group, tau = _check_group_and_tau(self.n_groups, group, tau)
        if self.grouping == "aware" and group is None:
            raise ValueError("this refit is group-aware: each tuple needs its group")
        if self.grouping == "unaware" and tau is None:
            raise ValueError("this refit is group-unaware: each tuple needs its group posterior tau")
        self._buffer.append((proba, label, group, tau))
        self.n_arrivals += 1
        if self.n_arrivals % self.refit_every == 0:
            self.refit()

    def refit(self) -> Fit:
        """Fit on the current window and serve the result.

        Returns
        -------
        Fit
            The fit on the window (also kept as ``last_fit``); its classifier is served with this
            object's ``seed``.
        """
        if not self._buffer:
            raise ValueError("refit needs at least one tuple in the window: call learn_one first")
        proba, y, groups, tau = zip(*self._buffer, strict=True)
        labelled = all(label is not None for label in y)
        grouped = self.grouping != "none" and all(group is not None for group in groups)
        sample = Sample(
            np.stack(proba),
            np.array(y) if labelled else None,
            np.array(groups) if grouped else None,
            np.stack(tau) if self.grouping == "unaware" else None,
            n_groups=self.n_groups,
        )
        fit = self.fit(Problem(self.metric, sample, self.constraints))
        self.last_fit = check_instance("the result of fit", fit, Fit)
        fitted = self.last_fit.classifier
        self.classifier = RandomizedClassifier(fitted.weights, fitted.scores, fitted.grouping, self.seed)
        return self.last_fit

    def predict_one(self, proba: Any, group: int | None = None, tau: Any = None, key: Key | None = None) -> int:
        """The latest mixture's prediction, drawn by ``key``.

        Parameters
        ----------
        proba
            ``(n,)`` class probabilities ``eta_hat(x)``.
        group
            The group, an integer in ``0..m-1`` (``"aware"``; checked, not used, otherwise).
        tau
            ``(m,)`` group posterior (``"unaware"``; checked, not used, otherwise).
        key
            The message's key (the same key, the same component); ``None``: the classifier's
            internal counter.

        Returns
        -------
        int
            The predicted class.
        """
        return self.classifier.predict_one(proba, group, tau, key)
