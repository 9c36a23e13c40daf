"""The fair River regressor: demographic-parity post-processing of any River regressor."""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
from river import base

from connectors.river.wrapper import CHECK_AFTER, FairWrapper
from streamfair import FairRegressionPostProcessor
from streamfair.validation import is_real


class FairRegressor(FairWrapper, base.Regressor):
    """Demographic-parity post-processing of a River regressor (Chzhen, Hebiri & Taturyan, 2024).

    The sensitive attribute S travels in ``x`` under the key ``sensitive``.  It is removed from the
    features before they reach either base model and is never used to predict:

    * ``learn_one(x, y)``: the post-processor learns from ``(eta(x), tau(x))`` computed *before*
      the base models see the sample (as an unlabeled sample), then the classifier learns S (if
      present in ``x``) and the regressor learns ``y`` (if not ``None``, so that
      ``Pipeline.learn_one(x)`` feeds an unlabeled sample through the whole pipeline);
    * ``learn_unlabeled_one(x)``: only the post-processor learns;
    * ``predict_one(x)``: a fair prediction on the grid of ``2L + 1`` values over the target range
      ``B``, without reading S and without changing any state.

    ``tau(x)`` is the classifier's ``predict_proba_one`` read in the order of ``groups``; groups
    absent from it get probability 0 and the rest is renormalized.  When the classifier gives no
    mass to any group (River classifiers return ``{}`` before learning), ``tau(x)`` falls back to
    the frequencies of the S values learned so far, smoothed by one pseudo-count per group spread
    as the given ``p`` (``p`` at the start; uniform when ``p`` is estimated).  A base model's
    output that is not a finite number (``eta``) or a probability in ``[0, 1]`` (``tau``) raises
    ``ValueError`` naming the model, and a NaN or infinite number in ``x`` one naming its key,
    before anything learns.

    Parameters
    ----------
    regressor
        River regressor for ``eta``, in the target's units.  Its output should lie in the target
        range ``B``; values outside are clipped and counted in ``diagnostics().n_clipped``.
    group_classifier
        River classifier of S from the other features; binary ones (such as
        ``linear_model.LogisticRegression``) need ``groups=(0, 1)`` or ``(False, True)`` (other
        groups are refused): use a multiclass one for other labels.  Its probabilities are
        ``tau``: the post-processor is only as fair as they are calibrated.
    sensitive
        The key of S in ``x``.
    groups
        The S values, in a fixed order (the column order of ``tau``, ``p``, a per-group ``eps``
        and the diagnostics).  Learning a sample whose S is not one of them raises ``ValueError``.
        A group the stream does not show (the classifier gives it no probability) imposes no
        constraint, and its live KS reads 0, until its share rises above ``1 / memory``.
    B, L, ks, eps, beta, p, profile, memory, horizon, optimizer, inner, mu
        Passed to :class:`streamfair.FairRegressionPostProcessor`: the target range in its units
        (``(low, high)``, or a half-width for ``[-B, B]``) and the grid size, the fairness target
        (``ks``: the KS distance between a group's predictions and all predictions that the
        predictor is steered to, 0.05 by default; or the paper's per-atom ``eps``), entropic parameter, group marginals
        (``None``: estimated from ``tau``), the profile of defaults (``"anytime"``: corrected
        from the first samples, follows drift over about ``memory`` samples; ``"paper"``: the
        paper's settings), and the paper optimizers' first-epoch length, optimizer, inner solver
        and strong-convexity parameter.
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
    On River's Friedman stream with an added group (:func:`friedman_with_group`, a target in
    ``[0, 30]``), a regressor that never sees S still predicts higher values in group 1.  The
    wrapped models may be pipelines (here with their own scalers).

    >>> import numpy as np
    >>> from river import linear_model, preprocessing
    >>> from streamfair import evaluate, evaluate_deterministic
    >>> from connectors.river import FairRegressor, friedman_with_group
    >>> def scaled(model):
    ...     return preprocessing.StandardScaler() | model
    >>> base_model = scaled(linear_model.LinearRegression())
    >>> fair = FairRegressor(scaled(linear_model.LinearRegression()), scaled(linear_model.LogisticRegression()),
    ...                      B=(0, 30), sensitive="group", groups=(0, 1), seed=0)
    >>> for x, y in friedman_with_group(5000, seed=1):
    ...     fair.learn_one(x, y)
    ...     base_model.learn_one({k: v for k, v in x.items() if k != "group"}, y)

    Audit both on fresh samples with the true S, which the models do not get (the fair model
    through the law ``pi(. | x)`` of its randomized prediction):

    >>> test = list(friedman_with_group(2000, seed=2))
    >>> y, s = np.array([y for _, y in test]), np.array([x.pop("group") for x, _ in test])
    >>> before = evaluate_deterministic([base_model.predict_one(x) for x, _ in test], y, s)
    >>> after = evaluate([fair.proba_one(x) for x, _ in test], fair.atoms, y, s)
    >>> bool(after.max_ks < 0.7 * before.max_ks), bool(after.risk < before.risk + 5)
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
        B: float | tuple[float, float] = 1.0,
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

    def _uncorrected(self, x: dict) -> Iterator[str]:
        """Also: most base predictions outside the target range ``B``, clipped to it (``B`` not given)."""
        yield from super()._uncorrected(x)
        clipped = self._postprocessor.n_clipped
        if 2 * clipped > CHECK_AFTER:
            yield (f"{clipped} of the first {CHECK_AFTER} base predictions were outside the target range B={self.B!r} "
                   f"and were clipped to it: give B as the range of y (e.g. B=(0, 30) for y in [0, 30])")

    @property
    def _group_model(self) -> base.Classifier:
        if self.group_classifier is None:  # neither group_classifier nor its deprecated name was given
            raise ValueError("group_classifier must be a River classifier, got None")
        return self.group_classifier

    @property
    def atoms(self) -> np.ndarray:
        """The prediction grid: ``2L + 1`` evenly spaced values over the target range ``B``."""
        return self._postprocessor.atoms

    @property
    def _outcomes(self) -> tuple:
        return tuple(float(a) for a in self.atoms)

    def _base_prediction(self, features: dict, kwargs: dict) -> float:
        eta = self.regressor.predict_one(features, **kwargs)
        if not is_real(eta):
            raise ValueError(f"regressor.predict_one(x) must give a finite number, got {eta!r} "
                             "(is a feature of x NaN or infinite?)")
        return eta

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict, y: float | None = None, w: float = 1.0, **kwargs: Any) -> None:
        """Learn from one sample; ``y=None`` (an unlabeled sample) leaves the regressor as it is.

        The post-processor learns first, from the base models' outputs before they see the
        sample; then the group classifier learns S (if ``x`` holds it) and the regressor ``y``.

        Parameters
        ----------
        x
            The features; S, under the key ``sensitive``, is removed before either base model
            sees them (without it, the group classifier does not learn).
        y
            The target, a finite number in its own units; ``None``: an unlabeled sample.
        w
            The sample weight (a finite number >= 0), for the regressor only: the group
            classifier and the post-processor estimate population quantities (``P(S | X)`` and
            the law of the predictions), so they stay unweighted.  ``w != 1`` with a regressor
            whose ``learn_one`` takes no ``w`` raises ``ValueError``.
        **kwargs
            Passed to the regressor's ``predict_one`` and ``learn_one`` (as River pipelines
            pass them).
        """
        if y is not None and not is_real(y):
            raise ValueError(f"y must be a finite number or None, got {y!r}")
        self._learn(x, y, w, kwargs)

    # ------------------------------------------------------------------ prediction
    def proba_one(self, x: dict, **kwargs: Any) -> np.ndarray:
        """``pi(. | x)`` over :attr:`atoms`: the law of the randomized fair prediction (for audits).

        S is ignored and no state changes.

        Parameters
        ----------
        x
            The features (S, if present, is not read).
        **kwargs
            Passed to the regressor's ``predict_one``.

        Returns
        -------
        ndarray of shape (2L + 1,)
            The probability of each value of :attr:`atoms`, summing to one.
        """
        return self._pi(x, kwargs)

    def predict_one(self, x: dict, **kwargs: Any) -> float:
        """The fair prediction for ``x`` (see ``mode``); S is ignored and no state changes.

        Parameters
        ----------
        x
            The features (S, if present, is not read).
        **kwargs
            Passed to the regressor's ``predict_one``.

        Returns
        -------
        float
            A value of :attr:`atoms` (``mode="sample"``: a draw from ``pi(. | x)``, the same for
            the same ``x``; ``"mode"``: the likeliest), or the mean of ``pi(. | x)``
            (``mode="mean"``).
        """
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
            "B": (0.0, 100.0),
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
