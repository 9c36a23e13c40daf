"""River linear models trained through surrogates: per-cell sample weights (A-1) and SSO (B-1).

* :class:`WeightedLinearLearner` trains a River linear model with the per-sample loss weights that
  :class:`streamfair.surrogates.MetricWeightTuner` publishes (``learn_one(x, y, w=...)``), feeding
  the tuner the same labelled events; it adopts each new version atomically and records which
  version trained each sample.
* :class:`RiverSSO` runs target-based surrogate optimisation on a River ``LinearRegression`` or
  ``LogisticRegression``: one oracle call (the loss derivative at the model's raw outputs, or an
  external per-sample gradient) per batch, then ``m`` passes of the model's *own* optimizer over the
  surrogate loss ``g_i (f_i - z_i) + (f_i - z_i)^2 / (2 eta)``.  With ``m = 1`` and single samples it
  is bit for bit ``model.learn_one``.

Both read the model's raw score through River's ``GLM._raw_dot_one`` (River >= 0.26), since the
surrogate lives on the raw score (the logit for a classifier), not on the predicted probability.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from numbers import Real

import numpy as np
from river import base, linear_model, optim

from streamfair.surrogates import MetricWeightTuner, PublishedWeights
from streamfair.validation import check_finite, check_index, check_integer, check_positive


def _check_glm(model) -> None:
    if not isinstance(model, (linear_model.LinearRegression, linear_model.LogisticRegression)):
        raise ValueError(f"model must be a river LinearRegression or LogisticRegression, got {type(model).__name__}")


def _check_features(x, name: str = "x") -> dict:
    """A sample's features: a dict of finite numbers (a missing feature is simply absent)."""
    if not isinstance(x, dict):
        raise ValueError(f"{name} must be a dict of features, got {x!r}")
    for key, value in x.items():
        if not isinstance(value, Real) or not math.isfinite(value):
            raise ValueError(f"{name}[{key!r}] must be a finite number, got {value!r}")
    return x


def _check_target(model, y, name: str = "y"):
    """A label: a finite number for a ``LinearRegression``, a bool (or 0 or 1) for a ``LogisticRegression``."""
    if isinstance(model, linear_model.LogisticRegression):
        if not isinstance(y, (bool, np.bool_, Real)) or y not in (0, 1):
            raise ValueError(f"{name} must be a bool (or 0 or 1) for a LogisticRegression, got {y!r}")
    elif isinstance(y, (bool, np.bool_)) or not isinstance(y, Real) or not math.isfinite(y):
        raise ValueError(f"{name} must be a finite number for a LinearRegression, got {y!r}")
    return y


def linear_parameters(model, features: Sequence[Hashable]) -> np.ndarray:
    """``theta = (w_f for f in features) + (intercept,)`` of a River linear model.

    >>> from river import linear_model
    >>> model = linear_model.LinearRegression()
    >>> set_linear_parameters(model, ["a", "b"], [1.0, 2.0, 0.5])
    >>> linear_parameters(model, ["a", "b"]).tolist(), model.predict_one({"a": 1.0, "b": 1.0})
    ([1.0, 2.0, 0.5], 3.5)
    """
    _check_glm(model)
    weights = model.weights
    return np.array([float(weights.get(f, 0.0)) for f in features] + [float(model.intercept)])


def set_linear_parameters(model, features: Sequence[Hashable], theta) -> None:
    """Set a River linear model's weights and intercept from ``theta`` (see :func:`linear_parameters`).

    ``theta`` holds one weight per feature, then the intercept:

    >>> from river import linear_model
    >>> model = linear_model.LinearRegression()
    >>> set_linear_parameters(model, ["a", "b"], [1.0, -2.0, 0.5])
    >>> model.weights, model.intercept
    ({'a': 1.0, 'b': -2.0}, 0.5)
    >>> set_linear_parameters(model, ["a", "b"], [1.0, -2.0])
    Traceback (most recent call last):
    ...
    ValueError: theta must have shape (3,), got (2,)
    """
    _check_glm(model)
    try:
        theta = np.asarray(theta, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"theta must be numbers, got {theta!r}") from None
    if theta.shape != (len(features) + 1,):
        raise ValueError(f"theta must have shape ({len(features) + 1},), got {theta.shape}")
    theta = check_finite("theta", theta)
    for feature, value in zip(features, theta[:-1], strict=True):
        model._weights[feature] = float(value)
    model.intercept = float(theta[-1])


def feature_vector(x: dict, features: Sequence[Hashable]) -> np.ndarray:
    """``(x[f] for f in features) + (1,)``: the row a numpy linear component sees (missing: 0).

    Features of ``x`` outside ``features`` are left out:

    >>> feature_vector({"b": 2, "c": 5.0}, ["a", "b"]).tolist()
    [0.0, 2.0, 1.0]
    """
    return _feature_vector(_check_features(x), features)


def _feature_vector(x: dict, features: Sequence[Hashable]) -> np.ndarray:
    return np.array([float(x.get(f, 0.0)) for f in features] + [1.0])


class WeightedLinearLearner:
    """A River linear model trained with a tuner's versioned per-cell loss weights.

    Parameters
    ----------
    model
        A River ``LinearRegression`` or ``LogisticRegression`` (the upstream base model).
    features
        Feature names, in the order of the tuner's parameters (an intercept column is appended).
    tuner
        The :class:`~streamfair.surrogates.MetricWeightTuner` to feed, or ``None`` to only apply
        versions given to :meth:`apply`.

    Attributes
    ----------
    weights : PublishedWeights
        The version in use.
    trained_by_version : dict
        Samples learned under each version.

    Examples
    --------
    >>> import numpy as np
    >>> from river import linear_model, optim
    >>> from streamfair.surrogates import PublishedWeights
    >>> learner = WeightedLinearLearner(linear_model.LinearRegression(optimizer=optim.SGD(0.1)), ["a"])
    >>> learner.apply(PublishedWeights(1, np.zeros(2), np.array([0.0, 2.0]), np.array([0.5, 0.5]), 0.0, 0))
    >>> learner.learn_one({"a": 1.0}, 1.0, cell=0)     # weight 0: no update
    >>> learner.model.weights, learner.trained_by_version
    ({'a': 0.0}, {1: 1})
    """

    def __init__(self, model: linear_model.LinearRegression | linear_model.LogisticRegression,
                 features: Sequence[Hashable], tuner: MetricWeightTuner | None = None):
        _check_glm(model)
        self.model = model
        self.features = list(features)
        if tuner is not None and not isinstance(tuner, MetricWeightTuner):
            raise ValueError(f"tuner must be a MetricWeightTuner or None, got {tuner!r}")
        if tuner is not None and tuner.n_features != len(self.features) + 1:
            raise ValueError(
                f"tuner must have n_features = {len(self.features) + 1} (features + intercept), got {tuner.n_features}"
            )
        self.tuner = tuner
        self.weights = tuner.weights if tuner is not None else None
        self.trained_by_version: dict[int, int] = {}

    def apply(self, weights: PublishedWeights) -> None:
        """Adopt a published version (older versions than the current one are ignored).

        Parameters
        ----------
        weights
            A version the tuner published (e.g. received from another process).

        Raises
        ------
        ValueError
            If ``weights`` is not a :class:`~streamfair.surrogates.PublishedWeights`.
        """
        if not isinstance(weights, PublishedWeights):
            raise ValueError(f"weights must be a PublishedWeights, got {weights!r}")
        if self.weights is None or weights.version >= self.weights.version:
            self.weights = weights

    def learn_one(self, x: dict, y: float, cell: int) -> None:
        """Learn one labelled sample with its cell's weight; feed the tuner (which may publish).

        The tuner sees the sample first; a version it publishes then weighs this very sample.

        Parameters
        ----------
        x
            The features, finite numbers (those outside ``features`` reach the model but not the
            tuner; a missing one counts as 0 for the tuner).
        y
            The label: a finite number (``LinearRegression``) or a bool (``LogisticRegression``;
            the tuner sees it as ``+1`` or ``-1`` for its ``"logistic"`` and ``"hinge"`` losses,
            as ``1`` or ``0`` for ``"squared"``).
        cell
            The sample's cell ``0 .. K - 1`` among the tuner's cells; the version in use gives
            it the sample weight ``w_k / (K share_k)`` (1 while no version is in use).

        Raises
        ------
        ValueError
            For a bad sample, which is then neither learned nor given to the tuner.
        """
        _check_features(x)
        _check_target(self.model, y)
        cell = self._check_cell(cell)
        if self.tuner is not None:
            published = self.tuner.observe(_feature_vector(x, self.features), self._tuner_label(y), cell)
            if published is not None:
                self.apply(published)
        w = 1.0 if self.weights is None else self.weights.sample_weight(cell)
        version = 0 if self.weights is None else self.weights.version
        self.trained_by_version[version] = self.trained_by_version.get(version, 0) + 1
        self.model.learn_one(x, y, w=w)

    def _check_cell(self, cell) -> int:
        """A cell of the tuner (or of the version in use); without either, an integer >= 0."""
        if self.tuner is not None:
            return check_index("cell", cell, self.tuner.n_cells)
        if self.weights is not None:
            return check_index("cell", cell, self.weights.cell_weights.size)
        return check_integer("cell", cell, 0)

    def _tuner_label(self, y) -> float:
        """The label as the tuner's loss reads it: a classifier's bool is ``+-1`` unless the loss is squared."""
        assert self.tuner is not None  # only called to feed the tuner
        if isinstance(self.model, linear_model.LogisticRegression) and self.tuner.loss != "squared":
            return 1.0 if y else -1.0
        return float(y)

    def predict_one(self, x: dict) -> base.typing.Target | None:
        """The model's prediction for ``x``.

        Parameters
        ----------
        x
            The features, finite numbers.

        Returns
        -------
        float or bool
            ``model.predict_one(x)``: a number, or a class for a ``LogisticRegression``.
        """
        return self.model.predict_one(_check_features(x))


class _SurrogateLoss:
    """The per-sample surrogate ``g_i (f - z_i) + (f - z_i)^2 / (2 eta)`` seen by River's optimizer.

    ``y_true`` carries the sample's index in the current batch.
    """

    def __init__(self, gradient_z: np.ndarray, z: np.ndarray, eta: float):
        self.gradient_z, self.z, self.eta = gradient_z, z, eta

    def gradient(self, y_true, y_pred):
        return self.gradient_z[y_true] + (y_pred - self.z[y_true]) / self.eta


class RiverSSO:
    """SSO on a River linear model, reusing the model's own optimizer for the inner steps.

    Parameters
    ----------
    model
        River ``LinearRegression`` (target: the prediction) or ``LogisticRegression`` (the logit).
    m
        Passes over the batch per oracle call.
    eta
        Target-space step; ``None``: ``1 / (2 L)`` with ``L`` the smoothness of the model's loss in
        River's convention (``Squared``: ``(p - y)^2``, ``L = 2``; ``Log``: ``L = 1/4``).

    Attributes
    ----------
    n_oracle_calls, n_inner_steps : int
        Batches whose gradient was queried, and per-sample optimizer updates made.
    last_target_step_norm : float
        ``||f_B(theta_{t+1}) - z_t||`` of the latest batch.

    Examples
    --------
    Five passes of SGD per oracle call fit ``y = 2 x + 1`` in 20 calls:

    >>> from river import linear_model, optim
    >>> sso = RiverSSO(linear_model.LinearRegression(optimizer=optim.SGD(0.05)), m=5)
    >>> sso.eta                                        # 1 / (2 L), L = 2 for River's squared loss
    0.25
    >>> xs = [{"x": i / 10} for i in range(10)]
    >>> for _ in range(20):
    ...     sso.learn_batch(xs, ys=[2 * x["x"] + 1 for x in xs])
    >>> sso.n_oracle_calls, sso.n_inner_steps, round(sso.raw_one({"x": 0.5}), 2)
    (20, 1000, 2.0)

    With ``m = 1``, one sample at a time is River's own update:

    >>> sso, plain = RiverSSO(linear_model.LinearRegression(), m=1), linear_model.LinearRegression()
    >>> for x in xs:
    ...     sso.learn_one(x, 2 * x["x"] + 1)
    ...     plain.learn_one(x, 2 * x["x"] + 1)
    >>> sso.model.weights == plain.weights and sso.model.intercept == plain.intercept
    True

    An external oracle gives the derivatives of its metric with respect to the raw scores (the
    logits of a ``LogisticRegression``) instead of labels:

    >>> sso = RiverSSO(linear_model.LogisticRegression(), m=1)
    >>> sso.learn_batch([{"x": 1.0}, {"x": -1.0}], gradients=[-1.0, 1.0])
    >>> sso.raw_one({"x": 1.0}) > 0 > sso.raw_one({"x": -1.0})
    True
    """

    def __init__(self, model: linear_model.LinearRegression | linear_model.LogisticRegression, m: int = 10,
                 eta: float | None = None):
        _check_glm(model)
        self.model = model
        self.m = check_integer("m", m, 1)
        if eta is None:
            smoothness_of: dict[type, float] = {optim.losses.Squared: 2.0, optim.losses.Log: 0.25}
            smoothness = smoothness_of.get(type(model.loss))
            if smoothness is None:
                raise ValueError(f"eta must be given for the loss {type(model.loss).__name__}, got None")
            eta = 0.5 / smoothness
        self.eta = check_positive("eta", eta)
        self.n_oracle_calls = 0
        self.n_inner_steps = 0
        self.last_target_step_norm = math.nan

    def raw_one(self, x: dict) -> float:
        """The model's raw score (prediction or logit): the target ``f(x)``.

        Parameters
        ----------
        x
            The features, finite numbers.

        Returns
        -------
        float
            ``w . x + intercept``: the prediction of a ``LinearRegression``, the logit of a
            ``LogisticRegression``.
        """
        return self.model._raw_dot_one(_check_features(x))

    def learn_one(self, x: dict, y: float) -> None:
        """SSO on a batch of one labelled sample (``m = 1``: exactly ``model.learn_one(x, y)``).

        Parameters
        ----------
        x
            The features, finite numbers.
        y
            The label: a finite number (``LinearRegression``) or a bool (``LogisticRegression``).
        """
        self.learn_batch([_check_features(x)], ys=[_check_target(self.model, y)])

    def learn_batch(self, xs: Sequence[dict], ys: Sequence[float] | None = None,
                    gradients: Sequence[float] | np.ndarray | None = None) -> None:
        """One oracle call for the batch, then ``m`` passes of the model's optimizer on the surrogate.

        Give exactly one of ``ys`` and ``gradients``.

        Parameters
        ----------
        xs
            The batch's features, at least one sample, each a dict of finite numbers.
        ys
            Their labels: the oracle is then the model's loss derivative at the current raw scores.
            Finite numbers (``LinearRegression``) or bools (``LogisticRegression``).
        gradients
            Or an external oracle's per-sample derivatives of its loss with respect to the raw
            score, one finite number per sample.

        Raises
        ------
        ValueError
            For a bad batch, found before the model learns anything.
        """
        if (ys is None) == (gradients is None):
            raise ValueError("give exactly one of ys and gradients")
        xs = list(xs)
        if not xs:
            raise ValueError("xs must hold at least one sample, got 0")
        for index, x in enumerate(xs):
            _check_features(x, f"xs[{index}]")
        z = np.array([self.model._raw_dot_one(x) for x in xs])
        if gradients is None:
            assert ys is not None  # exactly one of them was given
            if not hasattr(ys, "__len__") or len(ys) != len(xs):
                raise ValueError(f"ys must have {len(xs)} labels, got {ys!r}")
            for index, y in enumerate(ys):
                _check_target(self.model, y, f"ys[{index}]")
            gradient_z = np.array(
                [self.model.loss.gradient(y_true=y, y_pred=zi) for y, zi in zip(ys, z, strict=True)], dtype=float
            )
        else:
            try:
                gradient_z = np.asarray(gradients, dtype=float)
            except (TypeError, ValueError, OverflowError):
                raise ValueError(f"gradients must be {len(xs)} finite numbers, got {gradients!r}") from None
            if gradient_z.shape != (len(xs),):
                raise ValueError(f"gradients must be {len(xs)} finite numbers, got shape {gradient_z.shape}")
            bad = np.flatnonzero(~np.isfinite(gradient_z))
            if bad.size:
                value = float(gradient_z[bad[0]])
                raise ValueError(f"gradients must be {len(xs)} finite numbers; entry {bad[0]} is {value!r}")
        self.n_oracle_calls += 1
        surrogate, original = _SurrogateLoss(gradient_z, z, self.eta), self.model.loss
        self.model.loss = surrogate
        try:
            for _ in range(self.m):
                for index, x in enumerate(xs):
                    self.model.learn_one(x, index)
                    self.n_inner_steps += 1
        finally:
            self.model.loss = original
        self.last_target_step_norm = float(np.linalg.norm([self.model._raw_dot_one(x) for x in xs] - z))
