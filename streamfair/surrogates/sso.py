"""Target-based surrogates for stochastic optimisation (SSO; Lavington et al., ICML 2023).

The model maps parameters to *targets* ``z = X theta`` (predictions of a linear regressor or the
logits of a logistic regressor); the loss ``l(z)`` is separable over samples and its derivative
``dl/dz`` is the expensive part (an *oracle call*: labels from a feedback stream, or an external
scoring service).  One oracle call at ``z_t = X_B theta_t`` on a batch ``B`` builds the surrogate

    g_t(theta) = l_B(z_t) + mean_i[ g_i (f_i(theta) - z_t^i) + (f_i(theta) - z_t^i)^2 / (2 eta_t) ]
                 + l2 / 2 ||theta||^2,          g_i = dl_i/dz (z_t^i),

which is tight at ``theta_t`` and, for ``eta_t <= 1 / L`` (``L``: per-sample smoothness of the loss
in the target), an upper bound on the batch objective.  SSO then takes ``m`` cheap gradient steps on
``g_t`` -- no further oracle call.  Its first step equals the parametric SGD step, so ``m = 1``
reproduces :class:`SGD` bit for bit; exact minimisation (``m=None``) moves the batch targets to
``z_t - eta_t g`` when that is reachable (Lemma 4.1: projected SGD in target space).

Streaming use: when labels or an external loss arrive in batches, feed each
batch to :meth:`SSO.step` (or buffer single events with :meth:`SSO.learn_one`); each batch's target
gradient is reused for ``m`` parameter updates.  Small batches leave a bias that more inner steps
do not remove (Prop. 4.4); keep batches >= 125 and ``m <= 10`` unless the data nearly interpolate.

Examples
--------
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.standard_normal((500, 5)); y = X @ np.arange(1.0, 6.0)
>>> sso, sgd = SSO(5, m=10, eta=0.5), SGD(5, alpha=0.05)
>>> for start in range(0, 500, 50):
...     _ = sso.step(X[start:start + 50], y[start:start + 50])
...     _ = sgd.step(X[start:start + 50], y[start:start + 50])
>>> bool(sso.loss(X, y) < 0.01 * sgd.loss(X, y)), sso.n_oracle_calls, sso.n_inner_steps
(True, 10, 100)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from ..validation import check_array, check_finite, check_integer, check_non_negative, check_positive
from ._checks import check_finite_or_nan, check_label, check_labels

SCHEDULES = ("constant", "sqrt", "exponential", "armijo")
TARGET_LOSSES = ("logistic", "squared")

#: Armijo line searches: sufficient-decrease constant, backtracking factor, maximal backtracks.
ARMIJO_C, ARMIJO_BACKTRACK, ARMIJO_MAX_BACKTRACKS = 0.5, 0.5, 60


# ---------------------------------------------------------------------------------------- losses
@dataclass(frozen=True)
class TargetLoss:
    """A per-sample loss of the target ``z`` and its derivative; ``smoothness`` bounds ``l''``.

    Parameters
    ----------
    name
        ``"squared"`` or ``"logistic"``.
    smoothness
        ``L > 0``, a bound on the second derivative of the loss in the target.

    Examples
    --------
    >>> import numpy as np
    >>> squared, logistic = target_loss("squared"), target_loss("logistic")
    >>> z, y = np.array([3.0]), np.array([1.0])
    >>> squared.value(z, y).tolist(), squared.derivative(z, y).tolist()       # (3 - 1)^2 / 2, 3 - 1
    ([2.0], [2.0])
    >>> z, y = np.zeros(2), logistic.check_labels([1, -1])
    >>> logistic.value(z, y).round(6).tolist(), logistic.derivative(z, y).tolist()   # log 2, -y/2
    ([0.693147, 0.693147], [-0.5, 0.5])
    """

    name: str
    smoothness: float

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or self.name not in TARGET_LOSSES:
            raise ValueError(f"name must be one of {TARGET_LOSSES}, got {self.name!r}")
        check_positive("smoothness", self.smoothness)

    def check_labels(self, y: ArrayLike) -> np.ndarray:
        """Labels as floats; the logistic loss needs labels in ``{-1, +1}``.

        Parameters
        ----------
        y
            Labels, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The labels as floats.

        Raises
        ------
        ValueError
            For a non-finite label, or a label other than ``-1`` or ``+1`` for the logistic loss.
        """
        return check_labels("y", check_finite("y", y), self.name)

    def value(self, z: ArrayLike, y: ArrayLike) -> np.ndarray:
        """``l_i(z_i)`` for each sample.

        Parameters
        ----------
        z
            Targets, shape ``(n,)``.
        y
            Labels, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The losses.

        Raises
        ------
        ValueError
            For non-finite targets or labels, or labels of another shape than the targets.
        """
        return self._value(*self._checked(z, y))

    @staticmethod
    def _checked(z: ArrayLike, y: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
        """Finite targets and labels of one length (what :meth:`value` and :meth:`derivative` take)."""
        z = check_finite("z", z)
        return z, check_finite("y", y, z.size)

    def _value(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.name == "squared":
            return 0.5 * (z - y) ** 2
        return np.logaddexp(0.0, -y * z)

    def derivative(self, z: ArrayLike, y: ArrayLike) -> np.ndarray:
        """``dl_i / dz_i`` for each sample.

        Parameters
        ----------
        z
            Targets, shape ``(n,)``.
        y
            Labels, shape ``(n,)``.

        Returns
        -------
        ndarray of shape (n,)
            The derivatives.

        Raises
        ------
        ValueError
            For non-finite targets or labels, or labels of another shape than the targets.
        """
        return self._derivative(*self._checked(z, y))

    def _derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        if self.name == "squared":
            return z - y
        return -y / (1.0 + np.exp(y * z))


LOSSES = {"squared": TargetLoss("squared", 1.0), "logistic": TargetLoss("logistic", 0.25)}


def target_loss(name: str) -> TargetLoss:
    """The loss called ``name``: ``"squared"`` (``(z - y)^2 / 2``) or ``"logistic"`` (``log(1 + e^{-yz})``).

    Parameters
    ----------
    name
        ``"squared"`` or ``"logistic"``.

    Returns
    -------
    TargetLoss
        The loss, with its smoothness ``L`` (1 and 1/4).

    Raises
    ------
    ValueError
        For another name.

    Examples
    --------
    >>> target_loss("squared").smoothness, target_loss("logistic").smoothness
    (1.0, 0.25)
    >>> target_loss("hinge")
    Traceback (most recent call last):
    ...
    ValueError: loss must be one of ['logistic', 'squared'], got 'hinge'
    """
    if not isinstance(name, str) or name not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {name!r}")
    return LOSSES[name]


def _backprop(X: np.ndarray, dz: np.ndarray, theta: np.ndarray, l2: float) -> np.ndarray:
    """Gradient in ``theta`` of ``mean_i phi_i(x_i theta) + l2/2 ||theta||^2`` with ``phi_i' = dz_i``."""
    return X.T @ dz / X.shape[0] + l2 * theta


def _check_batch(X, n_features: int | str) -> np.ndarray:
    """A finite batch ``X`` of shape ``(n >= 1, n_features)`` (a ``str``: any number of columns)."""
    X = check_array("X", X, ("n >= 1", n_features))
    if X.shape[0] < 1:
        raise ValueError(f"X must have shape (n >= 1, {n_features}), got shape {X.shape}")
    return X


def _diverged(what: str, step_sizes: str) -> ValueError:
    """The error of a step that overflowed: the step sizes given are too large for the data."""
    return ValueError(
        f"the steps diverged ({what} would not be finite): lower the step size, {step_sizes}, or rescale X"
    )


def _check_finite_theta(theta: np.ndarray, step_sizes: str) -> np.ndarray:
    """``theta`` after a step, refused when the step diverged (an overflow to inf or nan)."""
    if not np.all(np.isfinite(theta)):
        raise _diverged("theta", step_sizes)
    return theta


# ------------------------------------------------------------------------------------- surrogate
@dataclass(frozen=True)
class TargetSurrogate:
    """The surrogate ``g_t`` built from one oracle call (all its methods are oracle-free).

    Parameters
    ----------
    X
        The batch, shape ``(b, d)``; the targets are ``f_B(theta) = X theta``.
    z
        The targets at which the oracle was queried, shape ``(b,)``.
    gradient_z
        The oracle's per-sample derivatives ``dl_i / dz`` at ``z``, shape ``(b,)``.
    eta
        Target-space step, ``> 0`` (the proximal term is ``||f_B - z||^2 / (2 eta b)``).
    loss_at_z
        ``l_B(z)`` (``nan`` when an external oracle gave only the gradient).
    l2
        Exact L2 term ``l2 / 2 ||theta||^2``, ``l2 >= 0``.

    Raises
    ------
    ValueError
        For ``X``, ``z`` or ``gradient_z`` not finite or of inconsistent shapes, ``eta <= 0``, an
        infinite ``loss_at_z`` or ``l2 < 0``.

    Examples
    --------
    The squared loss on the batch ``x = (1, 2)``, ``y = (1, 2)`` at ``theta = 0``: ``z = (0, 0)``,
    ``g = z - y = (-1, -2)`` and ``l_B(z) = (1 + 4) / 4``.  The surrogate is tight there, its gradient
    is the batch gradient ``x . g / 2``, and with ``eta = 1`` its minimiser ``theta = 1`` moves the
    targets to ``z - eta g = (1, 2)``.

    >>> import numpy as np
    >>> surrogate = SSO(1, eta=1.0).surrogate([[1.0], [2.0]], [1.0, 2.0])
    >>> surrogate.loss_at_z, surrogate.value(np.zeros(1)), surrogate.gradient(np.zeros(1)).tolist()
    (1.25, 1.25, [-2.5])
    >>> surrogate.minimize(np.zeros(1)).round(6).tolist(), surrogate.smoothness     # beta = (1 + 4) / 2
    ([1.0], 2.5)
    """

    X: np.ndarray
    z: np.ndarray
    gradient_z: np.ndarray
    eta: float
    loss_at_z: float
    l2: float

    def __post_init__(self) -> None:
        X = _check_batch(self.X, "d")
        object.__setattr__(self, "X", X)
        object.__setattr__(self, "z", check_finite("z", self.z, X.shape[0]))
        object.__setattr__(self, "gradient_z", check_finite("gradient_z", self.gradient_z, X.shape[0]))
        check_positive("eta", self.eta)
        check_finite_or_nan("loss_at_z", self.loss_at_z)
        check_non_negative("l2", self.l2)

    def _check_theta(self, theta: ArrayLike) -> np.ndarray:
        return check_finite("theta", theta, self.X.shape[1])

    def value(self, theta: ArrayLike) -> float:
        """``g_t(theta)``.

        Parameters
        ----------
        theta
            Parameters, shape ``(d,)``.

        Returns
        -------
        float
            The surrogate's value.
        """
        return self._value(self._check_theta(theta))

    def _value(self, theta: np.ndarray) -> float:
        r = self.X @ theta - self.z
        linear_and_proximal = np.mean(self.gradient_z * r + r * r / (2 * self.eta))
        return float(self.loss_at_z + linear_and_proximal + 0.5 * self.l2 * theta @ theta)

    def gradient(self, theta: ArrayLike) -> np.ndarray:
        """``grad g_t(theta)``; equals the batch gradient of the objective at the query point.

        Parameters
        ----------
        theta
            Parameters, shape ``(d,)``.

        Returns
        -------
        ndarray of shape (d,)
            The gradient.
        """
        return self._gradient(self._check_theta(theta))

    def _gradient(self, theta: np.ndarray) -> np.ndarray:
        return _backprop(self.X, self.gradient_z + (self.X @ theta - self.z) / self.eta, theta, self.l2)

    @property
    def smoothness(self) -> float:
        """``beta = lambda_max(X^T X) / (b eta) + l2``: the surrogate is a quadratic in ``theta``."""
        X = self.X
        gram = X @ X.T if X.shape[0] < X.shape[1] else X.T @ X
        return float(np.linalg.eigvalsh(gram)[-1]) / (X.shape[0] * self.eta) + self.l2

    def minimize(self, theta: ArrayLike) -> np.ndarray:
        """The exact minimiser closest to ``theta`` (what gradient descent from ``theta`` converges to).

        Parameters
        ----------
        theta
            The starting parameters, shape ``(d,)`` (it matters only when ``l2 = 0`` and the
            minimiser is not unique).

        Returns
        -------
        ndarray of shape (d,)
            The minimiser.
        """
        theta = self._check_theta(theta)
        X, b = self.X, self.X.shape[0]
        wanted = self.z - self.eta * self.gradient_z
        if self.l2 == 0.0:
            return theta + np.linalg.lstsq(X, wanted - X @ theta, rcond=None)[0]
        system = X.T @ X / (b * self.eta) + self.l2 * np.eye(X.shape[1])
        return np.linalg.solve(system, X.T @ wanted / (b * self.eta))


@dataclass(frozen=True)
class SSOStep:
    """Diagnostics of one SSO outer step (one oracle call).

    Parameters
    ----------
    t
        Outer steps before this one.
    eta
        Target-space step used.
    alpha
        Last inner step (``nan`` for the exact solve).
    inner_steps
        Inner gradient steps taken (``0`` for the exact solve).
    loss_at_z
        Batch loss at the query point (``nan`` with an external oracle).
    surrogate_decrease
        ``g_t(theta_t) - g_t(theta_{t+1}) >= 0``.
    target_step_norm
        ``||f_B(theta_{t+1}) - z_t||``.
    projection_gap
        ``||f_B(theta_{t+1}) - (z_t - eta g)||``: ``0`` under exact projection.

    Examples
    --------
    The batch of :class:`TargetSurrogate`'s example, solved exactly: the targets move from
    ``(0, 0)`` to ``(1, 2)`` (a step of length ``sqrt(5)``), where the surrogate is ``0``.

    >>> sso = SSO(1, m=None, eta=1.0)
    >>> step = sso.step([[1.0], [2.0]], [1.0, 2.0])
    >>> step.t, step.inner_steps, step.loss_at_z, round(step.surrogate_decrease, 6), round(step.projection_gap, 6)
    (0, 0, 1.25, 1.25, 0.0)
    >>> round(step.target_step_norm, 6), sso.theta.round(6).tolist()
    (2.236068, [1.0])
    """

    t: int
    eta: float
    alpha: float
    inner_steps: int
    loss_at_z: float
    surrogate_decrease: float
    target_step_norm: float
    projection_gap: float


# ------------------------------------------------------------------------------------ optimizers
class SGD:
    """Parametric mini-batch SGD on a linear or logistic model (the baseline SSO generalises).

    ``theta <- theta - alpha (X_B^T dl/dz (X_B theta) / b + l2 theta)``.

    Parameters
    ----------
    n_features
        ``d``; the model is ``f(X) = X theta``.
    loss
        ``"squared"`` or ``"logistic"`` (see :func:`target_loss`).
    alpha
        Step size.
    l2
        L2 term ``l2 / 2 ||theta||^2`` of the objective.
    theta0
        Initial parameters, shape ``(d,)``; ``None``: zeros.

    Attributes
    ----------
    theta : ndarray of shape (d,)
        Current parameters.
    n_oracle_calls : int
        Batches whose loss derivative was evaluated.

    Examples
    --------
    From ``theta = 0`` the squared-loss derivative on ``x = (1, 0)``, ``y = 2`` is ``-2``:

    >>> sgd = SGD(2, alpha=0.5)
    >>> sgd.step([[1.0, 0.0]], [2.0]).tolist()
    [1.0, 0.0]
    >>> sgd.predict([[1.0, 0.0]]).tolist(), sgd.loss([[1.0, 0.0]], [2.0]), sgd.n_oracle_calls
    ([1.0], 0.5, 1)
    """

    def __init__(
        self,
        n_features: int,
        *,
        loss: str = "squared",
        alpha: float = 0.01,
        l2: float = 0.0,
        theta0: ArrayLike | None = None,
    ):
        self.n_features = check_integer("n_features", n_features, 1)
        self.target_loss = target_loss(loss)
        self.alpha = check_positive("alpha", alpha)
        self.l2 = check_non_negative("l2", l2)
        self.theta = _initial_theta(theta0, self.n_features)
        self.n_oracle_calls = 0

    def step(self, X: ArrayLike, y: ArrayLike) -> np.ndarray:
        """One oracle call and one step on the batch ``(X, y)``; returns the new parameters.

        Parameters
        ----------
        X
            The batch, shape ``(b, d)``.
        y
            Labels, shape ``(b,)`` (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        ndarray of shape (d,)
            The new parameters.

        Raises
        ------
        ValueError
            For a bad batch, or when the step overflows (``alpha`` too large): nothing is updated.
        """
        X = _check_batch(X, self.n_features)
        y = self.target_loss.check_labels(check_finite("y", y, X.shape[0]))
        gradient_z = self.target_loss._derivative(X @ self.theta, y)
        theta = self.theta - self.alpha * _backprop(X, gradient_z, self.theta, self.l2)
        self.theta = _check_finite_theta(theta, f"alpha (got {self.alpha!r})")
        self.n_oracle_calls += 1
        return self.theta

    def predict(self, X: ArrayLike) -> np.ndarray:
        """Targets ``X theta`` (predictions or logits).

        Parameters
        ----------
        X
            Features, shape ``(n, d)``.

        Returns
        -------
        ndarray of shape (n,)
            The targets.
        """
        return _check_batch(X, self.n_features) @ self.theta

    def loss(self, X: ArrayLike, y: ArrayLike) -> float:
        """Objective on ``(X, y)``: mean loss plus the L2 term.

        Parameters
        ----------
        X
            Features, shape ``(n, d)``.
        y
            Labels, shape ``(n,)`` (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        float
            The objective.
        """
        return _objective(self.target_loss, self.predict(X), y, self.theta, self.l2)


class SSO:
    """Stochastic surrogate optimisation (Alg. 1 of the paper) for linear and logistic models.

    Parameters
    ----------
    n_features
        ``d``; the model is ``f(X) = X theta`` (add a column of ones for an intercept).
    loss
        ``"squared"`` (``(z - y)^2 / 2``, ``L = 1``) or ``"logistic"`` (logits, ``y`` in ``{-1, +1}``,
        ``L = 1/4``).
    m
        Inner gradient steps per oracle call; ``None``: exact minimisation of the surrogate.
    eta
        Target-space step; ``None``: ``1 / (2 L)`` (the paper's experiments).  For ``"armijo"`` the
        first step tried; ``None``: ``1 / L``.
    schedule
        ``"constant"``; ``"sqrt"``: ``eta / sqrt(t + 1)``; ``"exponential"``: ``eta a^t`` with
        ``a = (decay / horizon)^(1 / horizon)`` (Thm 4.2b); ``"armijo"``: stochastic line search in
        target space, backtracking until ``l_B(z - eta g) <= l_B(z) - eta/2 mean(g^2)`` (SSO-SLS).
    horizon, decay
        ``T`` (an integer >= 1) and ``beta`` (> 0) of the exponential schedule.
    alpha
        Inner step: ``"lipschitz"`` (``1 / beta``, the smoothness of the surrogate in ``theta``; the
        theory's choice), ``"armijo"`` (backtracking on the surrogate from ``alpha0``, the
        experiments' choice) or a number.
    alpha0
        First inner step tried by ``alpha="armijo"``, reset at every oracle call.
    l2
        Exact L2 term ``l2 / 2 ||theta||^2`` (part of the surrogate, not of the oracle).
    theta0
        Initial parameters; ``None``: zeros.
    batch_size
        Events buffered by :meth:`learn_one` before a step; ``None``: :meth:`learn_one` is disabled.

    Attributes
    ----------
    theta : ndarray of shape (d,)
        Current parameters.
    n_oracle_calls, n_inner_steps : int
        Oracle calls (outer steps) and inner gradient steps so far.
    last_step : SSOStep or None
        Diagnostics of the latest outer step.

    Examples
    --------
    One inner step is parametric SGD (the surrogate's gradient at the query point is the batch
    gradient), bit for bit:

    >>> import numpy as np
    >>> rng = np.random.default_rng(0)
    >>> X = rng.standard_normal((40, 3)); y = X @ [1.0, -2.0, 0.5]
    >>> sso, sgd = SSO(3, m=1, alpha=0.1), SGD(3, alpha=0.1)
    >>> for start in range(0, 40, 10):
    ...     _ = sso.step(X[start:start + 10], y[start:start + 10])
    ...     _ = sgd.step(X[start:start + 10], y[start:start + 10])
    >>> bool(np.array_equal(sso.theta, sgd.theta)), sso.n_oracle_calls, sso.n_inner_steps
    (True, 4, 4)

    Streaming events in batches of two, each surrogate minimised exactly: the batch ``x = (1, 2)``,
    ``y = (1, 2)`` is interpolated by ``theta = 1`` (see :class:`TargetSurrogate`).

    >>> streaming = SSO(1, m=None, eta=1.0, batch_size=2)
    >>> streaming.learn_one([1.0], 1.0) is None                       # buffered
    True
    >>> step = streaming.learn_one([2.0], 2.0)
    >>> streaming.theta.round(6).tolist(), streaming.predict([[3.0]]).round(6).tolist(), round(step.projection_gap, 6)
    ([1.0], [3.0], 0.0)
    """

    def __init__(
        self,
        n_features: int,
        *,
        loss: str = "squared",
        m: int | None = 10,
        eta: float | None = None,
        schedule: str = "constant",
        horizon: int | None = None,
        decay: float = 1.0,
        alpha: float | str = "lipschitz",
        alpha0: float = 10.0,
        l2: float = 0.0,
        theta0: ArrayLike | None = None,
        batch_size: int | None = None,
    ):
        self.n_features = check_integer("n_features", n_features, 1)
        self.target_loss = target_loss(loss)
        self.m: int | None = None if m is None else check_integer("m", m, 1)
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
        self.schedule = schedule
        default_eta = (1.0 if schedule == "armijo" else 0.5) / self.target_loss.smoothness
        self.eta = default_eta if eta is None else check_positive("eta", eta)
        self.horizon = None if horizon is None else check_integer("horizon", horizon, 1)
        if schedule == "exponential" and self.horizon is None:
            raise ValueError("horizon must be given for schedule='exponential', got None")
        self.decay = check_positive("decay", decay)
        self.alpha: float | str
        if isinstance(alpha, str):
            if alpha not in ("lipschitz", "armijo"):
                raise ValueError(f"alpha must be 'lipschitz', 'armijo' or a number > 0, got {alpha!r}")
            self.alpha = alpha
        else:
            self.alpha = check_positive("alpha", alpha)
        self.alpha0 = check_positive("alpha0", alpha0)
        self.l2 = check_non_negative("l2", l2)
        self.theta = _initial_theta(theta0, self.n_features)
        self.batch_size = None if batch_size is None else check_integer("batch_size", batch_size, 1)
        self._buffer: list[tuple[np.ndarray, float]] = []
        self.t = 0
        self.n_oracle_calls = 0
        self.n_inner_steps = 0
        self.last_step: SSOStep | None = None

    # ----------------------------------------------------------------------------- public API
    def predict(self, X: ArrayLike) -> np.ndarray:
        """Targets ``X theta`` (predictions or logits).

        Parameters
        ----------
        X
            Features, shape ``(n, d)``.

        Returns
        -------
        ndarray of shape (n,)
            The targets.
        """
        return _check_batch(X, self.n_features) @ self.theta

    def loss(self, X: ArrayLike, y: ArrayLike) -> float:
        """Objective on ``(X, y)``: mean loss plus the L2 term (evaluates the loss: not counted).

        Parameters
        ----------
        X
            Features, shape ``(n, d)``.
        y
            Labels, shape ``(n,)`` (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        float
            The objective.
        """
        return _objective(self.target_loss, self.predict(X), y, self.theta, self.l2)

    def surrogate(self, X: ArrayLike, y: ArrayLike) -> TargetSurrogate:
        """The surrogate ``g_t`` that :meth:`step` would minimise on ``(X, y)`` (nothing is updated).

        Parameters
        ----------
        X
            The batch, shape ``(b, d)``.
        y
            Labels, shape ``(b,)`` (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        TargetSurrogate
            The surrogate at the current parameters, with this step's ``eta``.
        """
        X = _check_batch(X, self.n_features)
        y = self.target_loss.check_labels(check_finite("y", y, X.shape[0]))
        z = X @ self.theta
        gradient_z = self.target_loss._derivative(z, y)
        loss_at_z = float(np.mean(self.target_loss._value(z, y)))
        if not math.isfinite(loss_at_z):
            raise _diverged("the batch loss at theta", self._step_sizes())
        return TargetSurrogate(X, z, gradient_z, self._target_step(z, y, gradient_z, loss_at_z), loss_at_z, self.l2)

    def step(self, X: ArrayLike, y: ArrayLike) -> SSOStep:
        """One oracle call on the labelled batch ``(X, y)`` and ``m`` inner steps.

        Parameters
        ----------
        X
            The batch, shape ``(b, d)``.
        y
            Labels, shape ``(b,)`` (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        SSOStep
            Diagnostics of the step (also in :attr:`last_step`).

        Raises
        ------
        ValueError
            For a bad batch, or when the step overflows (a step size too large): nothing is updated.
        """
        return self._inner(self.surrogate(X, y))

    def step_with_gradient(self, X: ArrayLike, gradient_z: ArrayLike) -> SSOStep:
        """One step from an external oracle's per-sample derivatives ``dl_i/dz`` at ``X theta``.

        Parameters
        ----------
        X
            The batch, shape ``(b, d)``.
        gradient_z
            The oracle's derivatives ``dl_i / dz`` at the current targets ``X theta``, shape ``(b,)``.

        Returns
        -------
        SSOStep
            Diagnostics of the step (``loss_at_z`` and ``surrogate_decrease`` are ``nan``).

        Raises
        ------
        ValueError
            With ``schedule="armijo"``, whose line search needs loss values; for a bad batch or
            gradient, or when the step overflows: nothing is updated.
        """
        if self.schedule == "armijo":
            raise ValueError("schedule='armijo' needs loss values; use step(X, y) or another schedule")
        X = _check_batch(X, self.n_features)
        gradient_z = check_finite("gradient_z", gradient_z, X.shape[0])
        z = X @ self.theta
        eta = self._target_step(z, None, gradient_z, math.nan)
        return self._inner(TargetSurrogate(X, z, gradient_z, eta, math.nan, self.l2))

    def learn_one(self, x: ArrayLike, y: float) -> SSOStep | None:
        """Buffer one labelled event; step when ``batch_size`` events are buffered.

        Parameters
        ----------
        x
            Features of the event, shape ``(d,)``.
        y
            Its label, a finite number (``-1`` or ``+1`` for the logistic loss).

        Returns
        -------
        SSOStep or None
            The step's diagnostics when the buffer was full, else ``None``.

        Raises
        ------
        ValueError
            If ``batch_size`` is ``None``, or for a bad event (which is not buffered).
        """
        if self.batch_size is None:
            raise ValueError("learn_one needs batch_size, got None")
        event = (check_finite("x", x, self.n_features), check_label("y", y, self.target_loss.name))
        if len(self._buffer) + 1 < self.batch_size:
            self._buffer.append(event)
            return None
        return self._step_on([*self._buffer, event])

    def flush(self) -> SSOStep | None:
        """Step on the buffered events, if any.

        Returns
        -------
        SSOStep or None
            The step's diagnostics, or ``None`` when the buffer was empty (a step that fails
            keeps the buffer).
        """
        return self._step_on(self._buffer) if self._buffer else None

    def _step_on(self, events: list[tuple[np.ndarray, float]]) -> SSOStep:
        """Step on ``events``, then empty the buffer (kept as it was if the step fails)."""
        step = self.step(np.stack([x for x, _ in events]), np.array([label for _, label in events]))
        self._buffer = []
        return step

    # ---------------------------------------------------------------------------- internals
    def _step_sizes(self) -> str:
        return f"alpha (got {self.alpha!r}) or eta (got {self.eta!r})"

    def _target_step(self, z, y, gradient_z, loss_at_z) -> float:
        t = self.t
        if self.schedule == "constant":
            return self.eta
        if self.schedule == "sqrt":
            return self.eta / math.sqrt(t + 1)
        if self.schedule == "exponential":
            horizon = self.horizon
            assert horizon is not None  # __init__ requires it for this schedule
            return self.eta * ((self.decay / horizon) ** (1.0 / horizon)) ** t
        eta, wanted = self.eta, 0.5 * float(np.mean(gradient_z**2))
        for _ in range(ARMIJO_MAX_BACKTRACKS):
            if np.mean(self.target_loss._value(z - eta * gradient_z, y)) <= loss_at_z - eta * wanted:
                break
            eta *= ARMIJO_BACKTRACK
        return eta

    def _inner(self, surrogate: TargetSurrogate) -> SSOStep:
        theta0 = self.theta
        start = surrogate._value(theta0)
        if self.m is None:
            theta, alpha, steps = surrogate.minimize(theta0), math.nan, 0
        else:
            theta, alpha, steps = self._descend(surrogate, theta0, self.m)
        self.theta = _check_finite_theta(theta, self._step_sizes())
        self.t += 1
        self.n_oracle_calls += 1
        self.n_inner_steps += steps
        targets = surrogate.X @ theta
        self.last_step = SSOStep(
            t=self.t - 1,
            eta=surrogate.eta,
            alpha=alpha,
            inner_steps=steps,
            loss_at_z=surrogate.loss_at_z,
            surrogate_decrease=start - surrogate._value(theta),
            target_step_norm=float(np.linalg.norm(targets - surrogate.z)),
            projection_gap=float(np.linalg.norm(targets - (surrogate.z - surrogate.eta * surrogate.gradient_z))),
        )
        return self.last_step

    def _descend(self, surrogate: TargetSurrogate, theta: np.ndarray, m: int) -> tuple[np.ndarray, float, int]:
        if self.alpha == "lipschitz":
            alpha = 1.0 / surrogate.smoothness
        elif isinstance(self.alpha, str):  # "armijo"
            alpha = self.alpha0
        else:
            alpha = self.alpha
        for _ in range(m):
            gradient = surrogate._gradient(theta)
            if self.alpha == "armijo":
                value, wanted = surrogate._value(theta), ARMIJO_C * float(gradient @ gradient)
                for _ in range(ARMIJO_MAX_BACKTRACKS):
                    if surrogate._value(theta - alpha * gradient) <= value - alpha * wanted:
                        break
                    alpha *= ARMIJO_BACKTRACK
            theta = theta - alpha * gradient
        return theta, alpha, m


def _objective(loss: TargetLoss, z: np.ndarray, y, theta: np.ndarray, l2: float) -> float:
    y = loss.check_labels(check_finite("y", y, z.size))
    return float(np.mean(loss._value(z, y)) + 0.5 * l2 * theta @ theta)


def _initial_theta(theta0, n_features: int) -> np.ndarray:
    if theta0 is None:
        return np.zeros(n_features)
    return check_finite("theta0", theta0, n_features).copy()
