"""What the fair River wrappers share: S handling, ``tau``, keyed draws, the post-processor.

:class:`FairRegressor` wraps a River regressor (the estimate ``eta(x)`` of ``E[Y | X = x]``) and
:class:`FairClassifier` a River classifier (the class probabilities ``P(Y = . | X = x)``); both
also wrap a River classifier of the sensitive attribute (the group posterior
``tau(x) = P(S = . | X = x)``) and feed both outputs to a streaming post-processor
(:class:`streamfair.FairRegressionPostProcessor`, :class:`streamfair.FairClassificationPostProcessor`),
which learns, from every sample whether labeled or not, a randomized prediction rule whose law is
(up to ``eps``) the same in every group.  What the two share -- removing S, reading ``tau``,
keyed draws, the post-processor and its diagnostics -- lives in :class:`FairWrapper`;
:mod:`connectors.river.regressor` and :mod:`connectors.river.classifier` hold the two estimators.
"""

from __future__ import annotations

import inspect
import math
import random
import warnings
from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np
from river import base, compose

from connectors.river.draw_keys import DrawKeys
from streamfair import Diagnostics, FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.validation import check_integer, check_non_negative, floats

#: The number types whose values may be NaN or infinite.
REALS = (float, np.floating)
#: Samples after which a wrapper that corrects nothing says why (a ``UserWarning``, once).
CHECK_AFTER = 1000


class FairWrapper(base.Wrapper):
    """What the fair River wrappers share: S handling, ``tau``, keyed draws, the post-processor.

    A subclass stores its constructor arguments as attributes (River's convention), then calls
    :meth:`_start`.  It provides ``_wrapped_model`` (the base model), ``_group_model`` (the
    classifier of S), ``_base_prediction`` (what the post-processor reads from the base model)
    and the class attribute ``_model_kind`` (``base.Regressor`` or ``base.Classifier``).

    Examples
    --------
    What every fair wrapper offers, here on a :class:`~connectors.river.FairRegressor`: the
    group classifier learns S from the labelled samples, the post-processor learns from every
    sample (unlabeled ones included, which need no S), and :meth:`debug_one` shows the steps of
    one prediction.

    >>> from river import linear_model
    >>> from connectors.river import FairRegressor, friedman_with_group
    >>> fair = FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(),
    ...                      sensitive="group", groups=(0, 1), B=(0, 30), L=4, seed=0)
    >>> stream = list(friedman_with_group(300, seed=1))
    >>> for x, y in stream[:200]:
    ...     fair.learn_one(x, y)
    >>> for x, _ in stream[200:]:
    ...     fair.learn_unlabeled_one(x)
    >>> fair.group_counts, fair.diagnostics().n_samples
    ({0: 105, 1: 95}, 300)
    >>> by_group = fair.diagnostics_by_group()
    >>> list(by_group), sorted(by_group[0]), len(by_group[0]["proba"])      # 2 L + 1 = 9 grid values
    ([0, 1], ['gap', 'ks', 'mean', 'present', 'proba', 'target'], 9)
    >>> print(fair.debug_one(stream[0][0], n_decimals=2, top=3))
    eta (base regressor): 12.70
    tau = P(S | x): 0: 0.51, 1: 0.49
    pi(. | x), 3 likeliest of 9: 11.25: 0.83, 15.00: 0.17, 7.50: 0.00
    prediction (mode='sample'): 11.25
    S = 0 is in x and was not read
    """

    # What _watch has seen of tau (class defaults: instances pickled before them read these).
    _first_tau: list[float] | None = None
    _tau_varies = False

    _model_kind: type
    # The constructor arguments the subclasses store and the methods they provide.
    sensitive: Hashable
    groups: tuple
    eps: float | tuple[float, ...] | None
    beta: float | None
    p: tuple[float, ...] | None
    profile: str
    memory: int | None
    horizon: int | None
    optimizer: str | None
    inner: str | None
    mu: float | None
    mode: str
    seed: int | None
    window: int
    serve: str | None
    predict_one: Callable[..., Any]

    @property
    @abstractmethod
    def _wrapped_model(self) -> base.Regressor | base.Classifier:
        """The base model: the regressor or the classifier of ``y``."""

    @property
    @abstractmethod
    def _group_model(self) -> base.Classifier:
        """The classifier of S."""

    @abstractmethod
    def _base_prediction(self, features: dict, kwargs: dict) -> Any:
        """The base model's output on ``features`` (without S), as the post-processor reads it."""

    @property
    @abstractmethod
    def _outcomes(self) -> tuple:
        """What the post-processor's law ``pi(. | x)`` is over: the grid values or the classes."""

    @property
    def _kind(self) -> str:
        return self._model_kind.__name__.lower()

    def _start(
        self,
        engine: type[FairRegressionPostProcessor] | type[FairClassificationPostProcessor],
        group_name: str,
        **engine_params,
    ) -> None:
        """Validate the shared parameters and build the post-processor (``engine_params``: its own ones)."""
        if not isinstance(self._wrapped_model, self._model_kind):
            raise ValueError(f"{self._kind} must be a River {self._kind}, got {self._wrapped_model!r}")
        if not isinstance(self._group_model, base.Classifier):
            raise ValueError(f"{group_name} must be a River classifier, got {self._group_model!r}")
        try:
            hash(self.sensitive)
        except TypeError:
            raise ValueError(f"sensitive must be a hashable key of x, got {self.sensitive!r}") from None
        self._group_index = label_index("groups", self.groups, "S values")
        for name in ("eps", "ks", "p"):
            check_per_group(name, getattr(self, name, None), self.groups)
        check_binary_labels(group_name, self._group_model, "groups", self.groups, "S")
        if self.mode not in engine.prediction_modes:
            raise ValueError(f"mode must be one of {engine.prediction_modes}, got {self.mode!r}")
        self._seed = random.SystemRandom().getrandbits(63) if self.seed is None else self.seed
        self._postprocessor = engine(
            eps=self.eps,
            beta=self.beta,
            p=self.p,
            n_groups=len(self.groups),
            profile=self.profile,
            memory=self.memory,
            horizon=self.horizon,
            optimizer=self.optimizer,
            inner=self.inner,
            mu=self.mu,
            seed=self._seed,
            window=self.window,
            serve=self.serve,
            **engine_params,
        )
        self._group_counts = [0] * len(self.groups)
        self._last_inputs: tuple | None = None  # (features, kwargs, (eta, tau)) of the last x, until models learn
        self._draw_keys = DrawKeys()
        self._model_takes_w = takes_weights(self._wrapped_model)

    def __getstate__(self) -> dict:
        """The state without the caches of the last x (so that predicting leaves the pickled state as it was)."""
        return {**self.__dict__, "_last_inputs": None, "_draw_keys": DrawKeys()}

    @property
    def group_counts(self) -> dict:
        """Samples per group the group classifier has learned from (S present in ``x``)."""
        return dict(zip(self.groups, self._group_counts, strict=True))

    def diagnostics(self) -> Diagnostics:
        """Live fairness and convergence estimates, computed without S (group order: ``groups``).

        See :class:`streamfair.Diagnostics`: plug-in per-group unfairness (``group_unfairness``,
        ``group_ks``, ``group_proba``, ``group_mean``), constraint ``violation``,
        ``gradient_mapping_norm``, epoch progress and ``n_clipped``.  :meth:`diagnostics_by_group`
        gives the per-group ones keyed by group.
        """
        return self._postprocessor.diagnostics()

    def diagnostics_by_group(self) -> dict:
        """The live per-group estimates of :meth:`diagnostics`, keyed by the S values of ``groups``.

        ``{group: {"gap": ..., "ks": ..., "target": ..., "mean": ..., "present": ..., "proba": {outcome:
        P(prediction = outcome | S = group)}}}``: the worst per-outcome gap ``max |P(pred = v | S = s) -
        P(pred = v)|``, the KS distance between the group's law of the predictions and the overall one, the
        group's fairness target (``ks``, or the per-outcome ``eps``: what the gap or the KS distance is held
        to), the group's mean prediction (regression; the mean class index for a classifier), whether the
        group is present in the stream (``False``: not constrained, its gap and KS read 0 and say nothing
        about it) and the group's law of the predictions, all estimated without S.
        """
        d = self.diagnostics()
        return {
            group: {
                "gap": float(d.group_unfairness[s]),
                "ks": float(d.group_ks[s]),
                "target": float(d.target[s]),
                "mean": float(d.group_mean[s]),
                "present": bool(d.group_present[s]),
                "proba": dict(zip(self._outcomes, d.group_proba[:, s].tolist(), strict=True)),
            }
            for s, group in enumerate(self.groups)
        }

    def debug_one(self, x: dict, n_decimals: int = 4, top: int = 5, **kwargs) -> str:
        """What the model computes for ``x``: the base output ``eta``, ``tau``, the fair law ``pi`` and the prediction.

        ``pi(. | x)`` is shown by its ``top`` most likely outcomes (an integer >= 1), numbers with
        ``n_decimals`` decimals (an integer >= 0).  River's ``Pipeline.debug_one`` prints it as the
        last step.  Nothing is learned.
        """
        check_integer("n_decimals", n_decimals, 0)
        check_integer("top", top, 1)
        features = self._features(x)
        eta, tau = self._inputs(features, kwargs)
        pi = self._postprocessor.proba_one(eta, tau)
        def number(value: Any) -> str:
            return f"{value:.{n_decimals}f}" if isinstance(value, float) else str(value)

        if isinstance(eta, list):
            eta_text = ", ".join(f"{number(label)}: {number(q)}" for label, q in zip(self._outcomes, eta, strict=True))
        else:
            eta_text = number(float(eta))
        likeliest = np.argsort(-pi, kind="stable")[:top]
        lines = [
            f"eta (base {self._kind}): {eta_text}",
            "tau = P(S | x): " + ", ".join(f"{group}: {number(q)}" for group, q in zip(self.groups, tau, strict=True)),
            f"pi(. | x), {min(top, pi.size)} likeliest of {pi.size}: "
            + ", ".join(f"{number(self._outcomes[i])}: {number(float(pi[i]))}" for i in likeliest),
            f"prediction (mode={self.mode!r}): {self.predict_one(x, **kwargs)}",
        ]
        if self.sensitive in x:
            lines.append(f"S = {x[self.sensitive]!r} is in x and was not read")
        return "\n".join(lines)

    # ------------------------------------------------------------------ inputs of the post-processor
    def _features(self, x: dict) -> dict:
        """``x`` without S, in the order of ``x``: a new dict, which the cache of the last x may keep.

        A NaN or infinite number in it raises ``ValueError``: a base model that has not learned yet
        may still give a finite output for it, and learn it into a state no later output recovers from.
        """
        try:
            features = dict(x)
        except (TypeError, ValueError):
            raise ValueError(f"x must be a dict of features, got {x!r}") from None
        features.pop(self.sensitive, None)
        key = non_finite_key(features)
        if key is not None:
            raise ValueError(f"x[{key!r}] must be a finite number, got {features[key]!r} (nothing was learned from x)")
        return features

    def _tau(self, features: dict) -> list[float]:
        proba = self._group_model.predict_proba_one(features)
        return posterior_in_order(proba, self.groups, self._group_counts, "group_classifier.predict_proba_one(x)",
                                  self._postprocessor.p_given)

    def _inputs(self, features: dict, kwargs: dict) -> tuple[Any, list[float]]:
        """``(eta, tau)`` of ``features``; the base models are asked once per x until one of them learns."""
        last = self._last_inputs
        if last is not None and last[0] == features and last[1] == kwargs:
            return last[2]
        inputs = self._base_prediction(features, kwargs), self._tau(features)
        self._last_inputs = (features, kwargs, inputs)  # both new dicts of this call (kwargs: its ``**kwargs``)
        return inputs

    def _group_of(self, x: dict) -> int | None:
        if self.sensitive not in x:
            return None
        s = x[self.sensitive]
        try:
            return self._group_index[s]
        except (KeyError, TypeError):
            raise ValueError(
                f"x[{self.sensitive!r}] must be one of groups={self.groups!r}, got {s!r} (keep S out of the "
                f"numeric transformers before this step: scale inside the wrapped models, or route S around "
                f"the scaler as shown in docs/river.md, 'Scalers must leave S alone')"
            ) from None

    # ------------------------------------------------------------------ learning
    def _learn(self, x: dict, y: Any, w: float, kwargs: dict) -> None:
        """The post-processor learns ``x`` unlabeled, the group classifier S, the base model ``y``."""
        features = self._features(x)
        group = self._group_of(x)
        if w != 1.0:
            self._check_weight(w)
        inputs = self._inputs(features, kwargs)
        self._postprocessor.learn_one(*inputs)
        self._last_inputs = None  # the base models change now
        self._watch(inputs[1], x)
        if group is not None:
            self._group_model.learn_one(features, self.groups[group])
            self._group_counts[group] += 1
        if y is not None:
            if w != 1.0:
                kwargs = {**kwargs, "w": w}
            self._wrapped_model.learn_one(features, y, **kwargs)

    def _check_weight(self, w: Any) -> None:
        """A sample weight other than 1: finite, >= 0, for a base model whose ``learn_one`` takes ``w``."""
        if not self._model_takes_w:
            raise ValueError(f"w must be 1 for a {self._kind} whose learn_one takes no w, got w={w!r}")
        check_non_negative("w", w)

    def learn_unlabeled_one(self, x: dict, **kwargs) -> None:
        """Learn from one unlabeled sample: only the post-processor learns (S, if present, is ignored)."""
        inputs = self._inputs(self._features(x), kwargs)
        self._postprocessor.learn_one(*inputs)
        self._watch(inputs[1], x)

    def _watch(self, tau: list[float], x: dict) -> None:
        """After :data:`CHECK_AFTER` samples, a ``UserWarning`` (once) for each reason nothing is corrected.

        Only the first :data:`CHECK_AFTER` samples are watched: nothing is done after them.
        """
        n_samples = self._postprocessor.n_samples
        if n_samples > CHECK_AFTER:
            return
        if not self._tau_varies:
            if self._first_tau is None:
                self._first_tau = tau
            elif tau != self._first_tau:
                self._tau_varies = True
        if n_samples == CHECK_AFTER:
            for reason in self._uncorrected(x):
                warnings.warn(reason, UserWarning, stacklevel=3)

    def _uncorrected(self, x: dict) -> Iterator[str]:
        """Why the post-processor corrects nothing after :data:`CHECK_AFTER` samples (``x``: the last one)."""
        if self._tau_varies:
            return
        reason = (f"tau(x) = {self._first_tau} for each of the first {CHECK_AFTER} samples: the post-processor cannot "
                  f"tell the groups apart and corrects nothing. ")
        if sum(self._group_counts):
            yield reason + (f"The group classifier learned S from {sum(self._group_counts)} samples and still gives "
                            f"every x the same probabilities.")
        else:
            yield reason + (f"No x held S under the key sensitive={self.sensitive!r}, so the group classifier learned "
                            f"nothing (the keys of the last x: {list(x)[:20]}): set sensitive to the key "
                            f"of S, and keep S away from transformers in front of this step (a OneHotEncoder renames "
                            f"it).")

    # ------------------------------------------------------------------ prediction
    def _pi(self, x: dict, kwargs: dict) -> np.ndarray:
        """``pi(. | x)``: the law of the randomized fair prediction, over the post-processor's atoms."""
        return self._postprocessor.proba_one(*self._inputs(self._features(x), kwargs))

    def _fair_prediction(self, x: dict, kwargs: dict) -> Any:
        """The post-processor's prediction in ``mode``; a draw is keyed by ``(seed, x without S)``."""
        features = self._features(x)
        key = self._draw_keys(features) if self.mode == "sample" else None
        return self._postprocessor.predict_one(*self._inputs(features, kwargs), mode=self.mode, key=key)


def label_index(name: str, labels: Any, what: str) -> dict:
    """``{label: position}`` for a tuple of at least 2 distinct hashable labels, else ``ValueError``.

    >>> label_index("groups", ("a", "b"), "S values")
    {'a': 0, 'b': 1}
    >>> label_index("groups", ("a", "a"), "S values")
    Traceback (most recent call last):
    ...
    ValueError: groups must be a tuple of at least 2 distinct S values, got ('a', 'a')
    """
    try:
        index = {label: i for i, label in enumerate(labels)}
    except TypeError:
        raise ValueError(f"{name} must be a tuple of hashable {what}, got {labels!r}") from None
    if not isinstance(labels, tuple) or len(labels) < 2 or len(index) != len(labels):
        raise ValueError(f"{name} must be a tuple of at least 2 distinct {what}, got {labels!r}")
    return index


def non_finite_key(features: dict) -> Hashable | None:
    """The first key of ``features`` whose value is a NaN or infinite number (``None``: there is none).

    >>> non_finite_key({"a": 1.0, "b": "text", "c": float("nan")}), non_finite_key({"a": 1.0, "b": 2})
    ('c', None)
    """
    try:
        if math.isfinite(sum(features.values())):  # the common case, all finite numbers: one loop in C
            return None
    except (TypeError, OverflowError):  # text or other values, or numbers too large to add
        pass
    for key, value in features.items():
        if isinstance(value, REALS) and not math.isfinite(value):
            return key
    return None


def takes_weights(model: Any) -> bool:
    """Whether ``model.learn_one`` uses a sample weight ``w``: a pipeline routes it to its last step
    only if that step takes one (River drops it otherwise).

    >>> from river import linear_model, neighbors, preprocessing
    >>> takes_weights(linear_model.LinearRegression()), takes_weights(neighbors.KNNRegressor())
    (True, False)
    >>> takes_weights(preprocessing.StandardScaler() | neighbors.KNNRegressor())
    False
    """
    while isinstance(model, compose.Pipeline):
        model = list(model.steps.values())[-1]
    signature = inspect.signature(model.learn_one).parameters.values()
    return any(p.name == "w" or p.kind is p.VAR_KEYWORD for p in signature)


def check_binary_labels(model_name: str, model: base.Classifier, labels_name: str, labels: tuple, what: str) -> None:
    """A binary River classifier (``_multiclass`` false) learns ``what`` as False/True: ``labels`` must be 0/1.

    Other labels would all read as True (tau or the class always the same) or fail once it learns.

    >>> from river import linear_model
    >>> check_binary_labels("classifier", linear_model.LogisticRegression(), "classes", ("no", "yes"), "y")
    ... # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: classifier is a binary classifier, which learns y as False/True: classes must then be (0, 1) ...
    """
    if not getattr(model, "_multiclass", True) and set(labels) not in ({0, 1}, {False, True}):
        raise ValueError(
            f"{model_name} is a binary classifier, which learns {what} as False/True: {labels_name} must then be "
            f"(0, 1) or (False, True), got {labels_name}={labels!r} (name them 0 and 1, or use a multiclass "
            f"classifier, e.g. multiclass.OneVsRestClassifier; River marks one with _multiclass = True)")


def check_per_group(name: str, value: Any, groups: tuple) -> None:
    """A per-group parameter given as a sequence (``eps``, ``ks``, ``p``) has one value per group of ``groups``.

    >>> check_per_group("p", (0.2, 0.3, 0.5), (0, 1))
    Traceback (most recent call last):
    ...
    ValueError: p must have one value per group of groups=(0, 1), got (0.2, 0.3, 0.5)
    """
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, str) and len(value) != len(groups):
        raise ValueError(f"{name} must have one value per group of groups={groups!r}, got {value!r}")


def posterior_in_order(proba: dict, labels: tuple, counts: list[int], source: str = "proba",
                       prior: Iterable[float] | None = None) -> list[float]:
    """A River ``predict_proba_one`` output read in the order of ``labels``, renormalized.

    Labels absent from ``proba`` get 0 (and labels not in ``labels`` are dropped).  Without mass
    on any label (River classifiers return ``{}`` before learning) it is the frequencies
    ``counts`` of the labels learned so far, smoothed by one pseudo-count each, spread as
    ``prior`` (the known shares of the labels; ``None``: evenly), so that it is ``prior`` before
    anything is learned.  ``proba`` must be a dict whose values for ``labels`` are probabilities
    in ``[0, 1]`` (numbers, not text), else ``ValueError`` naming ``source`` (where ``proba``
    comes from).

    >>> posterior_in_order({"b": 0.6, "c": 0.2, "z": 0.5}, ("a", "b", "c"), [0, 0, 0])
    [0.0, 0.7499999999999999, 0.25]
    >>> posterior_in_order({}, ("a", "b"), [2, 0])             # (2 + 1) / 4 and (0 + 1) / 4
    [0.75, 0.25]
    >>> posterior_in_order({}, ("a", "b"), [2, 0], prior=[0.9, 0.1])  # (2 + 1.8) / 4 and (0 + 0.2) / 4
    [0.95, 0.05]
    >>> posterior_in_order({"a": float("nan")}, ("a", "b"), [0, 0], "clf")
    Traceback (most recent call last):
    ...
    ValueError: clf must give probabilities in [0, 1], got {'a': nan} (is a feature of x NaN or infinite?)
    """
    try:
        mass = floats([proba.get(label, 0.0) for label in labels])
    except (AttributeError, TypeError, ValueError, OverflowError):
        raise ValueError(f"{source} must give a dict of probabilities, got {proba!r}") from None
    for m in mass:  # a loop, not numpy: a handful of labels per sample
        if not 0.0 <= m <= 1.0:  # False for NaN
            raise ValueError(f"{source} must give probabilities in [0, 1], got {proba!r} "
                             "(is a feature of x NaN or infinite?)")
    total = math.fsum(mass)
    if total > 0.0:
        return [m / total for m in mass]
    pseudo = [1.0] * len(labels) if prior is None else [len(labels) * float(share) for share in prior]
    n = sum(counts) + len(labels)
    return [(count + extra) / n for count, extra in zip(counts, pseudo, strict=True)]
