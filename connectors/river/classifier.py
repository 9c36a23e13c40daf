"""The fair River classifier: demographic-parity post-processing of any River classifier."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

from river import base

from connectors.river.wrapper import FairWrapper, check_binary_labels, label_index, posterior_in_order
from streamfair import FairClassificationPostProcessor


class FairClassifier(FairWrapper, base.Classifier):
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
    so far, smoothed by one pseudo-count each (for ``tau`` spread as the given ``p``, so ``p``
    at the start).  A probability outside ``[0, 1]`` (NaN included)
    raises ``ValueError`` naming the model, and a NaN or infinite number in ``x`` one naming its
    key, before anything learns.

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
    >>> from connectors.river import FairClassifier, logistic_with_group
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
        self._class_index = label_index("classes", classes, "labels")
        check_binary_labels("classifier", classifier, "classes", self.classes, "y")
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
        proba = self.classifier.predict_proba_one(features, **kwargs)
        return posterior_in_order(proba, self.classes, self._class_counts, "classifier.predict_proba_one(x)")

    # ------------------------------------------------------------------ learning
    def learn_one(self, x: dict, y: Hashable | None = None, w: float = 1.0, **kwargs: Any) -> None:
        """Learn from one sample; ``y=None`` (an unlabeled sample) leaves the classifier as it is.

        The post-processor learns first, from the base models' outputs before they see the
        sample; then the group classifier learns S (if ``x`` holds it) and the classifier ``y``.

        Parameters
        ----------
        x
            The features; S, under the key ``sensitive``, is removed before either base model
            sees them (without it, the group classifier does not learn).
        y
            The label, one of ``classes`` (else ``ValueError``); ``None``: an unlabeled sample.
        w
            The sample weight (a finite number >= 0), for the classifier only (the group
            classifier and the post-processor estimate population quantities); ``w != 1`` with
            a classifier whose ``learn_one`` takes no ``w`` raises ``ValueError``.
        **kwargs
            Passed to the classifier's ``predict_proba_one`` and ``learn_one`` (as River
            pipelines pass them).
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
    def predict_proba_one(self, x: dict, **kwargs: Any) -> dict:
        """``pi(. | x)`` as ``{class: probability}``: the law of the randomized fair prediction.

        S is ignored and no state changes.

        Parameters
        ----------
        x
            The features (S, if present, is not read).
        **kwargs
            Passed to the classifier's ``predict_proba_one``.

        Returns
        -------
        dict
            ``{class: probability}`` over ``classes``, summing to one.
        """
        return {label: float(q) for label, q in zip(self.classes, self._pi(x, kwargs), strict=True)}

    def predict_one(self, x: dict, **kwargs: Any) -> base.typing.ClfTarget:
        """The fair label for ``x`` (see ``mode``); S is ignored and no state changes.

        Parameters
        ----------
        x
            The features (S, if present, is not read).
        **kwargs
            Passed to the classifier's ``predict_proba_one``.

        Returns
        -------
        object
            One of ``classes``: with ``mode="sample"`` a draw from ``pi(. | x)``, the same for
            the same ``x``.
        """
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
