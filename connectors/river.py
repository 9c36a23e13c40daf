"""River estimator: demographic-parity post-processing of any River regressor, one sample at a time.

:class:`FairRegressor` wraps a River regressor (the estimate ``eta(x)`` of ``E[Y | X = x]``) and a
River classifier (the group posterior ``tau(x) = P(S = . | X = x)``) and feeds both to
:class:`streamfair.FairRegressionPostProcessor`, which learns, from every sample whether labeled
or not, a randomized prediction rule whose law is (up to ``eps``) the same in every group.
"""

from __future__ import annotations

import inspect
import math
import random
from numbers import Real
from typing import Hashable, Iterator

import numpy as np
from river import base, datasets

from streamfair import Diagnostics, FairRegressionPostProcessor

__all__ = ["FairRegressor", "friedman_with_group"]


class FairRegressor(base.Wrapper, base.Regressor):
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
    classifier
        River classifier of S from the other features; binary ones (such as
        ``linear_model.LogisticRegression``) suit ``groups=(0, 1)`` or ``(False, True)``, use a
        multiclass one for other labels.
    sensitive
        The key of S in ``x``.
    groups
        The S values, in a fixed order (the column order of ``tau``, ``p``, a per-group ``eps``
        and the diagnostics).  Learning a sample whose S is not one of them raises ``ValueError``.
    B, L, eps, beta, p, horizon, optimizer, inner, mu
        Passed to :class:`streamfair.FairRegressionPostProcessor`: grid half-width and size,
        allowed per-atom unfairness (a float or one per group), entropic parameter, group
        marginals (``None``: estimated from ``tau``), first-epoch length, optimizer, inner
        solver, strong-convexity parameter.
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
        ``"epoch"``: predictions use the post-processor's output at the end of its last completed
        epoch (before the first one, ``horizon`` samples, the base prediction rounded to the grid);
        ``"live"``: its running output, updated at every sample.

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
    >>> from connectors.river import FairRegressor, friedman_with_group
    >>> def scaled(model):
    ...     return preprocessing.StandardScaler() | model
    >>> base_model = scaled(linear_model.LinearRegression())
    >>> fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(linear_model.LogisticRegression()),
    ...                      sensitive="group", groups=(0, 1), L=10, horizon=5000, seed=0)
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
    >>> d.n_samples, d.epoch, d.group_ks.shape
    (5000, 1, (2,))
    """

    def __init__(
        self,
        regressor: base.Regressor,
        classifier: base.Classifier,
        sensitive: Hashable = "group",
        groups: tuple = (0, 1),
        B: float = 1.0,
        L: int | None = None,
        eps: float | tuple[float, ...] = 0.001,
        beta: float | None = None,
        p: tuple[float, ...] | None = None,
        horizon: int | None = None,
        optimizer: str = "sgd3",
        inner: str = "acsa2",
        mu: float | None = None,
        mode: str = "sample",
        seed: int | None = None,
        window: int = 1000,
        serve: str = "epoch",
    ):
        if not isinstance(regressor, base.Regressor):
            raise ValueError(f"regressor must be a River regressor, got {regressor!r}")
        if not isinstance(classifier, base.Classifier):
            raise ValueError(f"classifier must be a River classifier, got {classifier!r}")
        try:
            hash(sensitive)
        except TypeError:
            raise ValueError(f"sensitive must be a hashable key of x, got {sensitive!r}") from None
        try:
            index = {group: i for i, group in enumerate(groups)}
        except TypeError:
            raise ValueError(f"groups must be a tuple of hashable S values, got {groups!r}") from None
        if not isinstance(groups, tuple) or len(groups) < 2 or len(index) != len(groups):
            raise ValueError(f"groups must be a tuple of at least 2 distinct S values, got {groups!r}")
        if mode not in FairRegressionPostProcessor.prediction_modes:
            raise ValueError(f"mode must be one of {FairRegressionPostProcessor.prediction_modes}, got {mode!r}")
        self.regressor = regressor
        self.classifier = classifier
        self.sensitive = sensitive
        self.groups = groups
        self.B = B
        self.L = L
        self.eps = eps
        self.beta = beta
        self.p = p
        self.horizon = horizon
        self.optimizer = optimizer
        self.inner = inner
        self.mu = mu
        self.mode = mode
        self.seed = seed
        self.window = window
        self.serve = serve
        self._seed = random.SystemRandom().getrandbits(63) if seed is None else seed
        self._postprocessor = FairRegressionPostProcessor(
            B=B,
            L=L,
            eps=eps,
            beta=beta,
            p=p,
            n_groups=len(groups),
            horizon=horizon,
            optimizer=optimizer,
            inner=inner,
            mu=mu,
            seed=self._seed,
            window=window,
            serve=serve,
        )
        self._group_index = index
        self._group_counts = [0] * len(groups)
        signature = inspect.signature(regressor.learn_one).parameters.values()
        self._regressor_takes_w = any(p.name == "w" or p.kind is p.VAR_KEYWORD for p in signature)

    @property
    def _wrapped_model(self) -> base.Regressor:
        return self.regressor

    @property
    def atoms(self) -> np.ndarray:
        """The prediction grid ``{l B / L : l = -L..L}``."""
        return self._postprocessor.atoms

    @property
    def group_counts(self) -> dict:
        """Samples per group the classifier has learned from (S present in ``x``)."""
        return dict(zip(self.groups, self._group_counts))

    def diagnostics(self) -> Diagnostics:
        """Live fairness and convergence estimates, computed without S (group order: ``groups``).

        See :class:`streamfair.Diagnostics`: plug-in per-group unfairness (``group_unfairness``,
        ``group_ks``, ``group_mean``), constraint ``violation``, ``gradient_mapping_norm``, epoch
        progress and ``n_clipped``.
        """
        return self._postprocessor.diagnostics()

    # ------------------------------------------------------------------ inputs of the post-processor
    def _features(self, x: dict) -> dict:
        if self.sensitive in x:
            return {k: v for k, v in x.items() if k != self.sensitive}
        return x

    def _tau(self, features: dict) -> list[float]:
        proba = self.classifier.predict_proba_one(features)
        mass = [float(proba.get(group, 0.0)) for group in self.groups]
        total = math.fsum(mass)
        if total > 0.0 and math.isfinite(total):
            return [m / total for m in mass]
        n = sum(self._group_counts) + len(self.groups)
        return [(count + 1) / n for count in self._group_counts]

    def _inputs(self, features: dict, kwargs: dict) -> tuple[float, list[float]]:
        return self.regressor.predict_one(features, **kwargs), self._tau(features)

    def _group_of(self, x: dict) -> int | None:
        if self.sensitive not in x:
            return None
        s = x[self.sensitive]
        try:
            return self._group_index[s]
        except (KeyError, TypeError):
            raise ValueError(
                f"x[{self.sensitive!r}] must be one of groups={self.groups!r}, got {s!r} (keep S out of the "
                f"numeric transformers before this step, e.g. "
                f"(compose.Discard({self.sensitive!r}) | preprocessing.StandardScaler()) + compose.Select({self.sensitive!r}))"
            ) from None

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict, y: float | None = None, w: float = 1.0, **kwargs) -> None:
        """Learn from one sample; ``y=None`` (an unlabeled sample) leaves the regressor as it is.

        The sample weight ``w`` goes to the regressor only: the classifier and the post-processor
        estimate population quantities (``P(S | X)`` and the law of the predictions), so they stay
        unweighted.  ``w != 1`` with a regressor whose ``learn_one`` takes no ``w`` raises
        ``ValueError``.  ``kwargs`` are passed to the regressor's ``predict_one`` and ``learn_one``.
        """
        group = self._group_of(x)
        if w != 1.0 and not self._regressor_takes_w:
            raise ValueError(f"w must be 1 for a regressor whose learn_one takes no w, got w={w!r}")
        features = self._features(x)
        self._postprocessor.learn_one(*self._inputs(features, kwargs))
        if group is not None:
            self.classifier.learn_one(features, self.groups[group])
            self._group_counts[group] += 1
        if y is not None:
            if w != 1.0:
                kwargs = {**kwargs, "w": w}
            self.regressor.learn_one(features, y, **kwargs)

    def learn_unlabeled_one(self, x: dict, **kwargs) -> None:
        """Learn from one unlabeled sample: only the post-processor learns (S, if present, is ignored)."""
        self._postprocessor.learn_one(*self._inputs(self._features(x), kwargs))

    # ------------------------------------------------------------------ prediction
    def proba_one(self, x: dict, **kwargs) -> np.ndarray:
        """``pi(. | x)`` over :attr:`atoms`: the law of the randomized fair prediction (for audits)."""
        return self._postprocessor.proba_one(*self._inputs(self._features(x), kwargs))

    def predict_one(self, x: dict, **kwargs) -> float:
        """The fair prediction for ``x`` (see ``mode``); S is ignored and no state changes."""
        features = self._features(x)
        eta, tau = self._inputs(features, kwargs)
        key = _draw_key(features) if self.mode == "sample" else None
        return float(self._postprocessor.predict_one(eta, tau, mode=self.mode, key=key))

    @classmethod
    def _unit_test_params(cls):
        from river import linear_model, naive_bayes, tree

        yield {"regressor": linear_model.LinearRegression(), "classifier": linear_model.LogisticRegression()}
        yield {
            "regressor": tree.HoeffdingTreeRegressor(),
            "classifier": naive_bayes.GaussianNB(),
            "sensitive": "s",
            "groups": ("a", "b", "c"),
            "B": 60.0,
            "L": 12,
            "eps": (0.01, 0.02, 0.03),
            "beta": 30.0,
            "p": (0.2, 0.3, 0.5),
            "horizon": 100,
            "optimizer": "acsa",
            "mode": "mean",
            "seed": 3,
            "window": 50,
            "serve": "live",
        }


def _draw_key(features: dict) -> str:
    """A canonical text of ``features`` (order-free; numbers by value): the key of a sampled prediction."""
    items = sorted((repr(k), repr(float(v)) if isinstance(v, Real) else repr(v)) for k, v in features.items())
    return "\x1f".join(f"{k}\x1e{v}" for k, v in items)


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
