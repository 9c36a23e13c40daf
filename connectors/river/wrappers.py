"""River estimators: demographic-parity post-processing of any River regressor or classifier, one sample at a time.

:class:`FairRegressor` wraps a River regressor (the estimate ``eta(x)`` of ``E[Y | X = x]``) and
:class:`FairClassifier` a River classifier (the class probabilities ``P(Y = . | X = x)``); both
also wrap a River classifier of the sensitive attribute (the group posterior
``tau(x) = P(S = . | X = x)``) and feed both outputs to a streaming post-processor
(:class:`streamfair.FairRegressionPostProcessor`, :class:`streamfair.FairClassificationPostProcessor`),
which learns, from every sample whether labeled or not, a randomized prediction rule whose law is
(up to ``eps``) the same in every group.  What the two share -- removing S, reading ``tau``,
keyed draws, the post-processor and its diagnostics -- lives in :class:`_FairWrapper`.
"""

from __future__ import annotations

import inspect
import math
import random
import struct
import warnings
from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterator
from numbers import Real
from typing import Any

import numpy as np
from river import base, datasets

from streamfair import Diagnostics, FairClassificationPostProcessor, FairRegressionPostProcessor

__all__ = ["FairClassifier", "FairRegressor", "friedman_with_group", "logistic_with_group"]


class _FairWrapper(base.Wrapper):
    """What the fair River wrappers share: S handling, ``tau``, keyed draws, the post-processor.

    A subclass stores its constructor arguments as attributes (River's convention), then calls
    :meth:`_start`.  It provides ``_wrapped_model`` (the base model), ``_group_model`` (the
    classifier of S), ``_base_prediction`` (what the post-processor reads from the base model)
    and the class attribute ``_model_kind`` (``base.Regressor`` or ``base.Classifier``).
    """

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
        self._group_index = _label_index("groups", self.groups, "S values")
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
        self._draw_keys = _DrawKeys()
        signature = inspect.signature(self._wrapped_model.learn_one).parameters.values()
        self._model_takes_w = any(p.name == "w" or p.kind is p.VAR_KEYWORD for p in signature)

    def __getstate__(self) -> dict:
        """The state without the caches of the last x (so that predicting leaves the pickled state as it was)."""
        return {**self.__dict__, "_last_inputs": None, "_draw_keys": _DrawKeys()}

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

        ``{group: {"gap": ..., "ks": ..., "mean": ..., "proba": {outcome: P(prediction = outcome | S = group)}}}``:
        the worst per-outcome gap ``max |P(pred = v | S = s) - P(pred = v)|``, the KS distance between the
        group's law of the predictions and the overall one, the group's mean prediction (regression; the
        mean class index for a classifier) and the group's law of the predictions, all estimated without S.
        """
        d = self.diagnostics()
        return {
            group: {
                "gap": float(d.group_unfairness[s]),
                "ks": float(d.group_ks[s]),
                "mean": float(d.group_mean[s]),
                "proba": dict(zip(self._outcomes, d.group_proba[:, s].tolist(), strict=True)),
            }
            for s, group in enumerate(self.groups)
        }

    def debug_one(self, x: dict, n_decimals: int = 4, top: int = 5, **kwargs) -> str:
        """What the model computes for ``x``: the base output ``eta``, ``tau``, the fair law ``pi`` and the prediction.

        ``pi(. | x)`` is shown by its ``top`` most likely outcomes.  River's ``Pipeline.debug_one`` prints it
        as the last step.  Nothing is learned.
        """
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
        if self.sensitive in x:
            return {k: v for k, v in x.items() if k != self.sensitive}
        return x

    def _tau(self, features: dict) -> list[float]:
        return _posterior(self._group_model.predict_proba_one(features), self.groups, self._group_counts)

    def _inputs(self, features: dict, kwargs: dict) -> tuple[Any, list[float]]:
        """``(eta, tau)`` of ``features``; the base models are asked once per x until one of them learns."""
        last = self._last_inputs
        if last is not None and last[0] == features and last[1] == kwargs:
            return last[2]
        inputs = self._base_prediction(features, kwargs), self._tau(features)
        self._last_inputs = (dict(features), dict(kwargs), inputs)
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
        group = self._group_of(x)
        if w != 1.0 and not self._model_takes_w:
            raise ValueError(f"w must be 1 for a {self._kind} whose learn_one takes no w, got w={w!r}")
        features = self._features(x)
        self._postprocessor.learn_one(*self._inputs(features, kwargs))
        self._last_inputs = None  # the base models change now
        if group is not None:
            self._group_model.learn_one(features, self.groups[group])
            self._group_counts[group] += 1
        if y is not None:
            if w != 1.0:
                kwargs = {**kwargs, "w": w}
            self._wrapped_model.learn_one(features, y, **kwargs)

    def learn_unlabeled_one(self, x: dict, **kwargs) -> None:
        """Learn from one unlabeled sample: only the post-processor learns (S, if present, is ignored)."""
        self._postprocessor.learn_one(*self._inputs(self._features(x), kwargs))

    # ------------------------------------------------------------------ prediction
    def _pi(self, x: dict, kwargs: dict) -> np.ndarray:
        """``pi(. | x)``: the law of the randomized fair prediction, over the post-processor's atoms."""
        return self._postprocessor.proba_one(*self._inputs(self._features(x), kwargs))

    def _fair_prediction(self, x: dict, kwargs: dict) -> Any:
        """The post-processor's prediction in ``mode``; a draw is keyed by ``(seed, x without S)``."""
        features = self._features(x)
        key = self._draw_keys(features) if self.mode == "sample" else None
        return self._postprocessor.predict_one(*self._inputs(features, kwargs), mode=self.mode, key=key)


class FairRegressor(_FairWrapper, base.Regressor):
    """Demographic-parity post-processing of a River regressor (Chzhen, Hebiri & Taturyan, 2024).

    The sensitive attribute S travels in ``x`` under the key ``sensitive``.  It is removed from the
    features before they reach either base model and is never used to predict:

    * ``learn_one(x, y)``: the post-processor learns from ``(eta(x), tau(x))`` computed *before*
      the base models see the sample (as an unlabeled sample), then the classifier learns S (if
      present in ``x``) and the regressor learns ``y`` (if not ``None``, so that
      ``Pipeline.learn_one(x)`` feeds an unlabeled sample through the whole pipeline);
    * ``learn_unlabeled_one(x)``: only the post-processor learns;
    * ``predict_one(x)``: a fair prediction on the grid ``{l B / L : l = -L..L}``, without
      reading S and without changing any state.

    ``tau(x)`` is the classifier's ``predict_proba_one`` read in the order of ``groups``; groups
    absent from it get probability 0 and the rest is renormalized.  When the classifier gives no
    mass to any group (River classifiers return ``{}`` before learning), ``tau(x)`` falls back to
    the frequencies of the S values learned so far, smoothed by one pseudo-count per group
    (uniform at the start).

    Parameters
    ----------
    regressor
        River regressor for ``eta``.  Its output should lie in ``[-B, B]`` (scale the target,
        or raise ``B``); values outside are clipped and counted in ``diagnostics().n_clipped``.
    group_classifier
        River classifier of S from the other features; binary ones (such as
        ``linear_model.LogisticRegression``) suit ``groups=(0, 1)`` or ``(False, True)``, use a
        multiclass one for other labels.  Its probabilities are ``tau``: the post-processor is
        only as fair as they are calibrated.
    sensitive
        The key of S in ``x``.
    groups
        The S values, in a fixed order (the column order of ``tau``, ``p``, a per-group ``eps``
        and the diagnostics).  Learning a sample whose S is not one of them raises ``ValueError``.
    B, L, ks, eps, beta, p, profile, memory, horizon, optimizer, inner, mu
        Passed to :class:`streamfair.FairRegressionPostProcessor`: grid half-width and size, the
        fairness target (``ks``: the largest KS distance between a group's predictions and all
        predictions, 0.05 by default; or the paper's per-atom ``eps``), entropic parameter, group
        marginals (``None``: estimated from ``tau``), the profile of defaults (``"anytime"``:
        corrected from the first samples, follows drift over about ``memory`` samples;
        ``"paper"``: the paper's settings), and the paper optimizers' first-epoch length,
        optimizer, inner solver and strong-convexity parameter.
    mode
        What ``predict_one`` returns.  ``"sample"``: a draw from ``pi(. | x)``, the randomized
        predictor the fairness guarantee is about.  The draw is a keyed hash of ``(seed, x
        without S)``, so ``predict_one`` stays pure and replaying ``x`` gives the same
        prediction.  ``"mean"`` (the mean of ``pi(. | x)``: lower squared error) and ``"mode"``
        (its most likely atom) are deterministic and not covered by the guarantee.
    seed
        Seed of the draws of ``mode="sample"``; ``None``: drawn from the operating system at
        construction (River's convention for an unseeded model).
    window
        Recent samples behind the live :meth:`diagnostics` (passed to the post-processor).
    serve
        The paper's optimizers only: ``"epoch"`` (``None``): predictions use the post-processor's
        output at the end of its last completed epoch (before the first one, ``horizon`` samples,
        the base prediction rounded to the grid); ``"live"``: its running output.
    classifier
        Deprecated name of ``group_classifier`` (a ``DeprecationWarning``; ``FairClassifier``'s
        ``classifier`` is the model of ``y``).

    Attributes
    ----------
    atoms : ndarray of shape (2L + 1,)
        The prediction grid.
    group_counts : dict
        How many samples of each group the classifier has learned from.

    Examples
    --------
    On River's Friedman stream with an added group (:func:`friedman_with_group`), a regressor
    that never sees S still predicts higher values in group 1.  The wrapped models may be
    pipelines (here with their own scalers).

    >>> import numpy as np
    >>> from river import linear_model, preprocessing
    >>> from streamfair import evaluate, evaluate_deterministic
    >>> from connectors.river.wrappers import FairRegressor, friedman_with_group
    >>> def scaled(model):
    ...     return preprocessing.StandardScaler() | model
    >>> base_model = scaled(linear_model.LinearRegression())
    >>> fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(linear_model.LogisticRegression()),
    ...                      sensitive="group", groups=(0, 1), L=10, seed=0)
    >>> for x, y in friedman_with_group(5000, seed=1):
    ...     fair.learn_one(x, y)
    ...     base_model.learn_one({k: v for k, v in x.items() if k != "group"}, y)

    Audit both on fresh samples with the true S, which the models do not get (the fair model
    through the law ``pi(. | x)`` of its randomized prediction):

    >>> test = list(friedman_with_group(2000, seed=2))
    >>> y, s = np.array([y for _, y in test]), np.array([x.pop("group") for x, _ in test])
    >>> before = evaluate_deterministic([base_model.predict_one(x) for x, _ in test], y, s)
    >>> after = evaluate([fair.proba_one(x) for x, _ in test], fair.atoms, y, s)
    >>> bool(after.max_ks < 0.7 * before.max_ks), bool(after.risk < before.risk + 0.05)
    (True, True)

    Predictions ignore S when it is present, and the live diagnostics need no S either:

    >>> x, _ = test[0]
    >>> fair.predict_one(x) == fair.predict_one({**x, "group": 0}) == fair.predict_one({**x, "group": 1})
    True
    >>> d = fair.diagnostics()
    >>> d.n_samples, d.group_ks.shape
    (5000, (2,))
    """

    _model_kind = base.Regressor

    def __init__(
        self,
        regressor: base.Regressor,
        group_classifier: base.Classifier | None = None,
        sensitive: Hashable = "group",
        groups: tuple = (0, 1),
        B: float = 1.0,
        L: int | None = None,
        ks: float | tuple[float, ...] | None = None,
        eps: float | tuple[float, ...] | None = None,
        beta: float | None = None,
        p: tuple[float, ...] | None = None,
        profile: str = "anytime",
        memory: int | None = None,
        horizon: int | None = None,
        optimizer: str | None = None,
        inner: str | None = None,
        mu: float | None = None,
        mode: str = "sample",
        seed: int | None = None,
        window: int = 1000,
        serve: str | None = None,
        classifier: base.Classifier | None = None,
    ):
        if classifier is not None:
            if group_classifier is not None:
                raise ValueError("give group_classifier only (classifier is its deprecated name), not both")
            warnings.warn("FairRegressor(classifier=...) is deprecated: the classifier of S is now group_classifier",
                          DeprecationWarning, stacklevel=2)
            group_classifier = classifier
        self.regressor = regressor
        self.group_classifier = group_classifier
        self.classifier = None
        self.sensitive = sensitive
        self.groups = groups
        self.B = B
        self.L = L
        self.ks = ks
        self.eps = eps
        self.beta = beta
        self.p = p
        self.profile = profile
        self.memory = memory
        self.horizon = horizon
        self.optimizer = optimizer
        self.inner = inner
        self.mu = mu
        self.mode = mode
        self.seed = seed
        self.window = window
        self.serve = serve
        self._start(FairRegressionPostProcessor, "group_classifier", B=B, L=L, ks=ks)

    @property
    def _wrapped_model(self) -> base.Regressor:
        return self.regressor

    @property
    def _group_model(self) -> base.Classifier:
        if self.group_classifier is None:  # neither group_classifier nor its deprecated name was given
            raise ValueError("group_classifier must be a River classifier, got None")
        return self.group_classifier

    @property
    def atoms(self) -> np.ndarray:
        """The prediction grid ``{l B / L : l = -L..L}``."""
        return self._postprocessor.atoms

    @property
    def _outcomes(self) -> tuple:
        return tuple(float(a) for a in self.atoms)

    def _base_prediction(self, features: dict, kwargs: dict) -> float:
        return self.regressor.predict_one(features, **kwargs)

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict, y: float | None = None, w: float = 1.0, **kwargs) -> None:
        """Learn from one sample; ``y=None`` (an unlabeled sample) leaves the regressor as it is.

        The sample weight ``w`` goes to the regressor only: the classifier and the post-processor
        estimate population quantities (``P(S | X)`` and the law of the predictions), so they stay
        unweighted.  ``w != 1`` with a regressor whose ``learn_one`` takes no ``w`` raises
        ``ValueError``.  ``kwargs`` are passed to the regressor's ``predict_one`` and ``learn_one``.
        """
        self._learn(x, y, w, kwargs)

    # ------------------------------------------------------------------ prediction
    def proba_one(self, x: dict, **kwargs) -> np.ndarray:
        """``pi(. | x)`` over :attr:`atoms`: the law of the randomized fair prediction (for audits)."""
        return self._pi(x, kwargs)

    def predict_one(self, x: dict, **kwargs) -> float:
        """The fair prediction for ``x`` (see ``mode``); S is ignored and no state changes."""
        return float(self._fair_prediction(x, kwargs))

    @classmethod
    def _unit_test_params(cls):
        from river import linear_model, naive_bayes, tree

        yield {"regressor": linear_model.LinearRegression(), "group_classifier": linear_model.LogisticRegression()}
        yield {
            "regressor": tree.HoeffdingTreeRegressor(),
            "group_classifier": naive_bayes.GaussianNB(),
            "sensitive": "s",
            "groups": ("a", "b", "c"),
            "B": 60.0,
            "L": 12,
            "eps": (0.01, 0.02, 0.03),
            "beta": 30.0,
            "p": (0.2, 0.3, 0.5),
            "profile": "paper",
            "horizon": 100,
            "optimizer": "acsa",
            "mode": "mean",
            "seed": 3,
            "window": 50,
            "serve": "live",
        }


class FairClassifier(_FairWrapper, base.Classifier):
    """Multiclass demographic-parity post-processing of a River classifier (Chzhen et al., 2024, Remark 2.2).

    The wrapped classifier's ``predict_proba_one`` gives the class probabilities ``P(Y = . | x)``,
    read in the order of ``classes``; :class:`streamfair.FairClassificationPostProcessor` turns
    them, with the group posterior ``tau(x)``, into a randomized prediction ``pi(. | x)`` over the
    classes whose law is (up to ``eps`` per class) the same in every group:
    ``|P(Y_hat = c | S = s) - P(Y_hat = c)| <= eps_s``, at the least expected cost (0-1 loss or
    ``cost_matrix``) under the wrapped classifier's probabilities.  S is handled as by
    :class:`FairRegressor`: it travels in ``x`` under the key ``sensitive`` and is removed before
    either base model sees ``x``; it is never used to predict.

    * ``learn_one(x, y)``: the post-processor learns from ``(P(Y = . | x), tau(x))`` computed
      before the base models see the sample (as an unlabeled sample), then the group classifier
      learns S (if present) and the classifier learns ``y`` (if not ``None``);
    * ``learn_unlabeled_one(x)``: only the post-processor learns;
    * ``predict_one(x)`` / ``predict_proba_one(x)``: a fair label / ``pi(. | x)`` as a dict over
      ``classes``, without reading S and without changing any state.

    Class probabilities and ``tau`` are read alike: labels absent from ``predict_proba_one`` get 0
    (labels outside ``classes`` are dropped) and the rest is renormalized; without mass on any of
    them (River classifiers return ``{}`` before learning) the frequencies of the labels learned
    so far, smoothed by one pseudo-count each.

    Parameters
    ----------
    classifier
        River classifier of ``y`` (multiclass for more than 2 ``classes``).
    group_classifier
        River classifier of S from the other features (as for :class:`FairRegressor`).
    sensitive, groups
        The key of S in ``x`` and the S values in a fixed order, as for :class:`FairRegressor`.
    classes
        The labels, in a fixed order (the rows and columns of ``cost_matrix``, the order of the
        diagnostics' ``group_proba``); the default suits River's binary classifiers and datasets.
        Learning a ``y`` that is not one of them raises ``ValueError``.
    cost_matrix
        ``cost_matrix[i][j]``: the cost of predicting ``classes[j]`` when the truth is
        ``classes[i]`` (a tuple of tuples); ``None``: the 0-1 loss.
    eps, beta, p, profile, memory, horizon, optimizer, inner, mu
        Passed to :class:`streamfair.FairClassificationPostProcessor` (same defaults): the fairness
        target, the largest per-class rate gap between a group and everyone (a float or one per
        group, 0.02 by default), entropic parameter, group marginals, the profile of defaults and
        memory (as for :class:`FairRegressor`), and the paper optimizers' first-epoch length,
        optimizer, inner solver, strong-convexity parameter.
    mode
        What ``predict_one`` returns.  ``"sample"``: a draw from ``pi(. | x)``, the randomized
        predictor the fairness guarantee is about, keyed by ``(seed, x without S)`` so that
        ``predict_one`` is pure and replay-stable; ``"mode"``: the most likely class of
        ``pi(. | x)`` (deterministic, not covered by the guarantee).
    seed, window, serve
        As for :class:`FairRegressor`.

    Attributes
    ----------
    group_counts, class_counts : dict
        Samples per group the group classifier, and per class the classifier, has learned from.

    Examples
    --------
    On a stream (:func:`logistic_with_group`) whose positive rate grows with a feature that is
    likelier high in group 1, a classifier that never sees S still predicts 1 more often in group 1.

    >>> import numpy as np
    >>> from river import linear_model, preprocessing
    >>> from connectors.river.wrappers import FairClassifier, logistic_with_group
    >>> def scaled(model):
    ...     return preprocessing.StandardScaler() | model
    >>> base_model = scaled(linear_model.LogisticRegression())
    >>> fair = FairClassifier(scaled(linear_model.LogisticRegression()), scaled(linear_model.LogisticRegression()),
    ...                       sensitive="group", groups=(0, 1), classes=(0, 1), seed=0)
    >>> for x, y in logistic_with_group(4000, seed=1):
    ...     fair.learn_one(x, y)
    ...     base_model.learn_one({k: v for k, v in x.items() if k != "group"}, y)

    Audit on fresh samples with the true S: the gap between the groups' rates of predicting 1
    (for the fair model, through the law ``pi(. | x)`` of its randomized prediction).

    >>> test = list(logistic_with_group(2000, seed=2))
    >>> s = np.array([x.pop("group") for x, _ in test])
    >>> before = np.array([base_model.predict_one(x) for x, _ in test], dtype=float)
    >>> after = np.array([fair.predict_proba_one(x)[1] for x, _ in test])
    >>> gap = lambda rate: abs(rate[s == 1].mean() - rate[s == 0].mean())
    >>> bool(gap(after) < 0.5 * gap(before))
    True
    >>> x, _ = test[0]
    >>> fair.predict_one(x) == fair.predict_one({**x, "group": 0}) == fair.predict_one({**x, "group": 1})
    True
    """

    _model_kind = base.Classifier

    def __init__(
        self,
        classifier: base.Classifier,
        group_classifier: base.Classifier,
        sensitive: Hashable = "group",
        groups: tuple = (0, 1),
        classes: tuple = (False, True),
        cost_matrix: tuple[tuple[float, ...], ...] | None = None,
        eps: float | tuple[float, ...] | None = None,
        beta: float | None = None,
        p: tuple[float, ...] | None = None,
        profile: str = "anytime",
        memory: int | None = None,
        horizon: int | None = None,
        optimizer: str | None = None,
        inner: str | None = None,
        mu: float | None = None,
        mode: str = "sample",
        seed: int | None = None,
        window: int = 1000,
        serve: str | None = None,
    ):
        self.classifier = classifier
        self.group_classifier = group_classifier
        self.sensitive = sensitive
        self.groups = groups
        self.classes = classes
        self.cost_matrix = cost_matrix
        self.eps = eps
        self.beta = beta
        self.p = p
        self.profile = profile
        self.memory = memory
        self.horizon = horizon
        self.optimizer = optimizer
        self.inner = inner
        self.mu = mu
        self.mode = mode
        self.seed = seed
        self.window = window
        self.serve = serve
        self._class_index = _label_index("classes", classes, "labels")
        self._start(
            FairClassificationPostProcessor, "group_classifier", n_classes=len(classes), cost_matrix=cost_matrix
        )
        self._class_counts = [0] * len(classes)

    @property
    def _wrapped_model(self) -> base.Classifier:
        return self.classifier

    @property
    def _group_model(self) -> base.Classifier:
        return self.group_classifier

    @property
    def _outcomes(self) -> tuple:
        return self.classes

    @property
    def _multiclass(self) -> bool:
        return len(self.classes) > 2

    @property
    def class_counts(self) -> dict:
        """Samples per class the classifier has learned from."""
        return dict(zip(self.classes, self._class_counts, strict=True))

    def _base_prediction(self, features: dict, kwargs: dict) -> list[float]:
        return _posterior(self.classifier.predict_proba_one(features, **kwargs), self.classes, self._class_counts)

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict, y: Hashable | None = None, w: float = 1.0, **kwargs) -> None:
        """Learn from one sample; ``y=None`` (an unlabeled sample) leaves the classifier as it is.

        ``w`` goes to the classifier only (the group classifier and the post-processor estimate
        population quantities); ``w != 1`` with a classifier whose ``learn_one`` takes no ``w``
        raises ``ValueError``.  ``kwargs`` go to the classifier's ``predict_proba_one`` and
        ``learn_one``.
        """
        label = None
        if y is not None:
            try:
                label = self._class_index[y]
            except (KeyError, TypeError):
                raise ValueError(f"y must be one of classes={self.classes!r}, got {y!r}") from None
        self._learn(x, y, w, kwargs)
        if label is not None:
            self._class_counts[label] += 1

    # ------------------------------------------------------------------ prediction
    def predict_proba_one(self, x: dict, **kwargs) -> dict:
        """``pi(. | x)`` as ``{class: probability}``: the law of the randomized fair prediction."""
        return {label: float(q) for label, q in zip(self.classes, self._pi(x, kwargs), strict=True)}

    def predict_one(self, x: dict, **kwargs) -> base.typing.ClfTarget:
        """The fair label for ``x`` (see ``mode``), one of ``classes``; S is ignored and no state changes."""
        return self.classes[int(self._fair_prediction(x, kwargs))]

    @classmethod
    def _unit_test_params(cls):
        from river import linear_model, naive_bayes, tree

        yield {"classifier": linear_model.LogisticRegression(), "group_classifier": linear_model.LogisticRegression()}
        # River also exercises multiclass classifiers on ImageSegments: its 7 labels plus Phishing's 2.
        classes = (False, True, "brickface", "cement", "foliage", "grass", "path", "sky", "window")
        yield {
            "classifier": naive_bayes.GaussianNB(),
            "group_classifier": tree.HoeffdingTreeClassifier(),
            "sensitive": "s",
            "groups": ("a", "b", "c"),
            "classes": classes,
            "cost_matrix": tuple(tuple(float(abs(i - j)) for j in range(len(classes))) for i in range(len(classes))),
            "eps": (0.01, 0.02, 0.03),
            "beta": 30.0,
            "p": (0.2, 0.3, 0.5),
            "profile": "paper",
            "horizon": 100,
            "optimizer": "acsa",
            "mode": "mode",
            "seed": 3,
            "window": 50,
            "serve": "live",
        }


def _label_index(name: str, labels: Any, what: str) -> dict:
    """``{label: position}`` for a tuple of at least 2 distinct hashable labels, else ``ValueError``."""
    try:
        index = {label: i for i, label in enumerate(labels)}
    except TypeError:
        raise ValueError(f"{name} must be a tuple of hashable {what}, got {labels!r}") from None
    if not isinstance(labels, tuple) or len(labels) < 2 or len(index) != len(labels):
        raise ValueError(f"{name} must be a tuple of at least 2 distinct {what}, got {labels!r}")
    return index


def _posterior(proba: dict, labels: tuple, counts: list[int]) -> list[float]:
    """A River ``predict_proba_one`` output read in the order of ``labels``, renormalized.

    Labels absent from ``proba`` get 0 (and labels not in ``labels`` are dropped).  Without mass
    on any label (River classifiers return ``{}`` before learning) it is the frequencies
    ``counts`` of the labels learned so far, smoothed by one pseudo-count each.
    """
    mass = [float(proba.get(label, 0.0)) for label in labels]
    total = math.fsum(mass)
    if total > 0.0 and math.isfinite(total):
        return [m / total for m in mass]
    n = sum(counts) + len(labels)
    return [(count + 1) / n for count in counts]


class _DrawKeys:
    """The key of a sampled prediction: the features by name, order-free, numbers by value.

    Real values (``bool`` and ``int`` included) are packed as doubles in the order of the sorted
    names' reprs; that order is worked out once per set of names (a stream keeps its names).
    Other values fall back to a text of every ``(name, value)`` pair.

    >>> keys = _DrawKeys()
    >>> keys({"a": 1, "b": 2.5}) == keys({"b": 2.5, "a": 1.0}) != keys({"a": 1, "b": 2.0})
    True
    >>> keys({"a": "x"}) == keys({"a": "x"}) != keys({"a": "y"})
    True
    """

    def __init__(self) -> None:
        self._names: tuple = ()
        self._order: list[int] = []
        self._prefix = b""

    def __call__(self, features: dict) -> bytes | str:
        names = tuple(features)
        if names != self._names:
            texts = [repr(name) for name in names]
            self._order = sorted(range(len(names)), key=texts.__getitem__)
            self._prefix = "\x1f".join(texts[i] for i in self._order).encode("utf-8") + b"\x1e"
            self._names = names
        values = list(features.values())
        try:
            return self._prefix + struct.pack(f"<{len(values)}d", *[_real(values[i]) for i in self._order])
        except TypeError:
            items = sorted((repr(k), _number_text(v)) for k, v in features.items())
            return "\x1f".join([f"{k}\x1e{v}" for k, v in items])


def _real(value: Any) -> float:
    """``value`` as a float if it is a real number, else ``TypeError`` (strings, ``None``, ...)."""
    if type(value) is float or isinstance(value, Real):
        return float(value)
    raise TypeError(f"not a real number: {value!r}")


def _number_text(value: Any) -> str:
    """``repr(float(value))`` for a real number (``bool`` included), else ``repr(value)``."""
    kind = type(value)
    if kind is float:  # the usual feature values first: no ABC check
        return repr(value)
    if kind is int or kind is bool:
        return repr(float(value))
    return repr(float(value)) if isinstance(value, Real) else repr(value)


def friedman_with_group(n: int, seed: int, sensitive: Hashable = "group") -> Iterator[tuple[dict, float]]:
    """River's ``datasets.synth.Friedman`` stream with a binary group S added to ``x``.

    ``S = 1`` with probability ``1 / (1 + exp(10 (0.5 - x[3])))``: likelier when feature 3, which
    raises the target by ``10 x[3]``, is high, so predictions from the features alone differ by
    group.  The target is rescaled to ``(y - 14) / 10`` (about ``[-1.3, 1.5]``, variance about
    0.25) to suit the default grid ``[-1, 1]``.

    >>> [(x["group"], round(y, 3)) for x, y in friedman_with_group(3, seed=1)]
    [(0, -0.353), (1, -0.644), (0, 0.121)]
    """
    rng = random.Random(seed)
    for x, y in datasets.synth.Friedman(seed=seed).take(n):
        x[sensitive] = int(rng.random() < 1 / (1 + math.exp(10 * (0.5 - x[3]))))
        yield x, (y - 14) / 10


def logistic_with_group(
    n: int, seed: int, n_classes: int = 2, sensitive: Hashable = "group"
) -> Iterator[tuple[dict, int]]:
    """A synthetic classification stream whose labels depend on a binary group S through the features.

    Five features ``x[0..4]`` are independent standard normals; ``y`` takes the value
    ``j = 0..n_classes - 1`` with probability proportional to ``exp(j u)``,
    ``u = 2 x[0] + x[1] - x[2] / 2`` (for 2 classes, ``P(y = 1 | x) = 1 / (1 + exp(-u))``), so
    higher ``x[0]`` means higher labels.  ``S = 1`` with probability ``1 / (1 + exp(-3 x[0]))``:
    likelier when ``x[0]`` is high, so a classifier of ``y`` from the features alone predicts
    higher labels in group 1.

    >>> [(x["group"], y) for x, y in logistic_with_group(4, seed=1)]
    [(1, 1), (1, 1), (0, 0), (1, 0)]
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    rng = random.Random(seed)
    for _ in range(n):
        x: dict[Hashable, float] = {i: rng.gauss(0.0, 1.0) for i in range(5)}
        u = 2 * x[0] + x[1] - x[2] / 2
        top = max(0.0, (n_classes - 1) * u)
        weights = [math.exp(j * u - top) for j in range(n_classes)]
        draw, y = rng.random() * math.fsum(weights), 0
        while y < n_classes - 1 and draw >= weights[y]:
            draw -= weights[y]
            y += 1
        x[sensitive] = int(rng.random() < 1 / (1 + math.exp(-3 * x[0])))
        yield x, y
