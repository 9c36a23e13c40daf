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

from ..validation import check_finite, check_integer, check_positive

SCHEDULES = ("constant", "sqrt", "exponential", "armijo")

#: Armijo line searches: sufficient-decrease constant, backtracking factor, maximal backtracks.
ARMIJO_C, ARMIJO_BACKTRACK, ARMIJO_MAX_BACKTRACKS = 0.5, 0.5, 60


# ---------------------------------------------------------------------------------------- losses
@dataclass(frozen=True)
class TargetLoss:
    """A per-sample loss of the target ``z`` and its derivative; ``smoothness`` bounds ``l''``."""

    name: str
    smoothness: float

    def check_labels(self, y) -> np.ndarray:
        """Labels as floats; the logistic loss needs labels in ``{-1, +1}``."""
        y = check_finite("y", y)
        if self.name == "logistic" and not np.all(np.abs(y) == 1.0):
            bad = y[np.abs(y) != 1.0][0]
            raise ValueError(f"y must be -1 or +1 for the logistic loss, got {bad!r}")
        return y

    def value(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``l_i(z_i)`` for each sample."""
        if self.name == "squared":
            return 0.5 * (z - y) ** 2
        return np.logaddexp(0.0, -y * z)

    def derivative(self, z: np.ndarray, y: np.ndarray) -> np.ndarray:
        """``dl_i / dz_i`` for each sample."""
        if self.name == "squared":
            return z - y
        return -y / (1.0 + np.exp(y * z))


LOSSES = {"squared": TargetLoss("squared", 1.0), "logistic": TargetLoss("logistic", 0.25)}


def target_loss(name: str) -> TargetLoss:
    """The loss called ``name``: ``"squared"`` (``(z - y)^2 / 2``) or ``"logistic"`` (``log(1 + e^{-yz})``)."""
    if name not in LOSSES:
        raise ValueError(f"loss must be one of {sorted(LOSSES)}, got {name!r}")
    return LOSSES[name]


def _backprop(X: np.ndarray, dz: np.ndarray, theta: np.ndarray, l2: float) -> np.ndarray:
    """Gradient in ``theta`` of ``mean_i phi_i(x_i theta) + l2/2 ||theta||^2`` with ``phi_i' = dz_i``."""
    return X.T @ dz / X.shape[0] + l2 * theta


def _check_batch(X, n_features: int) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError(f"X must be an array of numbers, got {type(X).__name__}") from None
    if X.ndim != 2 or X.shape[1] != n_features or X.shape[0] < 1:
        raise ValueError(f"X must have shape (n >= 1, {n_features}), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite")
    return X


# ------------------------------------------------------------------------------------- surrogate
@dataclass(frozen=True)
class TargetSurrogate:
    """The surrogate ``g_t`` built from one oracle call (all its methods are oracle-free).

    Attributes
    ----------
    X : ndarray of shape (b, d)
        The batch; the targets are ``f_B(theta) = X theta``.
    z : ndarray of shape (b,)
        The targets at which the oracle was queried.
    gradient_z : ndarray of shape (b,)
        The oracle's per-sample derivatives ``dl_i / dz`` at ``z``.
    eta : float
        Target-space step (the proximal term is ``||f_B - z||^2 / (2 eta b)``).
    loss_at_z : float
        ``l_B(z)`` (``nan`` when an external oracle gave only the gradient).
    l2 : float
        Exact L2 term ``l2 / 2 ||theta||^2``.
    """

    X: np.ndarray
    z: np.ndarray
    gradient_z: np.ndarray
    eta: float
    loss_at_z: float
    l2: float

    def value(self, theta: np.ndarray) -> float:
        """``g_t(theta)``."""
        r = self.X @ theta - self.z
        linear_and_proximal = np.mean(self.gradient_z * r + r * r / (2 * self.eta))
        return float(self.loss_at_z + linear_and_proximal + 0.5 * self.l2 * theta @ theta)

    def gradient(self, theta: np.ndarray) -> np.ndarray:
        """``grad g_t(theta)``; equals the batch gradient of the objective at the query point."""
        return _backprop(self.X, self.gradient_z + (self.X @ theta - self.z) / self.eta, theta, self.l2)

    @property
    def smoothness(self) -> float:
        """``beta = lambda_max(X^T X) / (b eta) + l2``: the surrogate is a quadratic in ``theta``."""
        X = self.X
        gram = X @ X.T if X.shape[0] < X.shape[1] else X.T @ X
        return float(np.linalg.eigvalsh(gram)[-1]) / (X.shape[0] * self.eta) + self.l2

    def minimize(self, theta: np.ndarray) -> np.ndarray:
        """The exact minimiser closest to ``theta`` (what gradient descent from ``theta`` converges to)."""
        X, b = self.X, self.X.shape[0]
        wanted = self.z - self.eta * self.gradient_z
        if self.l2 == 0.0:
            return theta + np.linalg.lstsq(X, wanted - X @ theta, rcond=None)[0]
        system = X.T @ X / (b * self.eta) + self.l2 * np.eye(X.shape[1])
        return np.linalg.solve(system, X.T @ wanted / (b * self.eta))


@dataclass(frozen=True)
class SSOStep:
    """Diagnostics of one SSO outer step (one oracle call)."""

    t: int  # outer steps before this one
    eta: float  # target-space step used
    alpha: float  # last inner step (nan for the exact solve)
    inner_steps: int  # inner gradient steps taken (0 for the exact solve)
    loss_at_z: float  # batch loss at the query point (nan with an external oracle)
    surrogate_decrease: float  # g_t(theta_t) - g_t(theta_{t+1}) >= 0
    target_step_norm: float  # ||f_B(theta_{t+1}) - z_t||
    projection_gap: float  # ||f_B(theta_{t+1}) - (z_t - eta g)||: 0 under exact projection


# ------------------------------------------------------------------------------------ optimizers
class SGD:
    """Parametric mini-batch SGD on a linear or logistic model (the baseline SSO generalises).

    ``theta <- theta - alpha (X_B^T dl/dz (X_B theta) / b + l2 theta)``.

    Examples
    --------
    >>> sgd = SGD(2, alpha=0.5)
    >>> sgd.step([[1.0, 0.0]], [2.0]).tolist()
    [1.0, 0.0]
    """

    def __init__(self, n_features: int, *, loss: str = "squared", alpha: float = 0.01, l2: float = 0.0, theta0=None):
        self.n_features = check_integer("n_features", n_features, 1)
        self.target_loss = target_loss(loss)
        self.alpha = check_positive("alpha", alpha)
        self.l2 = _check_l2(l2)
        self.theta = _initial_theta(theta0, self.n_features)
        self.n_oracle_calls = 0

    def step(self, X, y) -> np.ndarray:
        """One oracle call and one step on the batch ``(X, y)``; returns the new parameters."""
        X = _check_batch(X, self.n_features)
        y = self.target_loss.check_labels(check_finite("y", y, X.shape[0]))
        gradient_z = self.target_loss.derivative(X @ self.theta, y)
        self.n_oracle_calls += 1
        self.theta = self.theta - self.alpha * _backprop(X, gradient_z, self.theta, self.l2)
        return self.theta

    def predict(self, X) -> np.ndarray:
        """Targets ``X theta`` (predictions or logits)."""
        return _check_batch(X, self.n_features) @ self.theta

    def loss(self, X, y) -> float:
        """Objective on ``(X, y)``: mean loss plus the L2 term."""
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
        ``T`` and ``beta`` of the exponential schedule.
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
    n_oracle_calls, n_inner_steps : int
    last_step : SSOStep or None
        Diagnostics of the latest outer step.
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
        theta0=None,
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
        self.horizon: int | None
        self.alpha: float | str
        if schedule == "exponential":
            if horizon is None:
                raise ValueError("horizon must be given for schedule='exponential', got None")
            self.horizon = check_integer("horizon", horizon, 1)
            self.decay = check_positive("decay", decay)
        else:
            self.horizon, self.decay = horizon, decay
        if isinstance(alpha, str):
            if alpha not in ("lipschitz", "armijo"):
                raise ValueError(f"alpha must be 'lipschitz', 'armijo' or a number > 0, got {alpha!r}")
            self.alpha = alpha
        else:
            self.alpha = check_positive("alpha", alpha)
        self.alpha0 = check_positive("alpha0", alpha0)
        self.l2 = _check_l2(l2)
        self.theta = _initial_theta(theta0, self.n_features)
        self.batch_size = None if batch_size is None else check_integer("batch_size", batch_size, 1)
        self._buffer: list[tuple[np.ndarray, float]] = []
        self.t = 0
        self.n_oracle_calls = 0
        self.n_inner_steps = 0
        self.last_step: SSOStep | None = None

    # ----------------------------------------------------------------------------- public API
    def predict(self, X) -> np.ndarray:
        """Targets ``X theta`` (predictions or logits)."""
        return _check_batch(X, self.n_features) @ self.theta

    def loss(self, X, y) -> float:
        """Objective on ``(X, y)``: mean loss plus the L2 term (evaluates the loss: not counted)."""
        return _objective(self.target_loss, self.predict(X), y, self.theta, self.l2)

    def surrogate(self, X, y) -> TargetSurrogate:
        """The surrogate ``g_t`` that :meth:`step` would minimise on ``(X, y)`` (nothing is updated)."""
        X = _check_batch(X, self.n_features)
        y = self.target_loss.check_labels(check_finite("y", y, X.shape[0]))
        z = X @ self.theta
        gradient_z = self.target_loss.derivative(z, y)
        loss_at_z = float(np.mean(self.target_loss.value(z, y)))
        return TargetSurrogate(X, z, gradient_z, self._target_step(z, y, gradient_z, loss_at_z), loss_at_z, self.l2)

    def step(self, X, y) -> SSOStep:
        """One oracle call on the labelled batch ``(X, y)`` and ``m`` inner steps."""
        return self._inner(self.surrogate(X, y))

    def step_with_gradient(self, X, gradient_z) -> SSOStep:
        """One step from an external oracle's per-sample derivatives ``dl_i/dz`` at ``X theta``."""
        if self.schedule == "armijo":
            raise ValueError("schedule='armijo' needs loss values; use step(X, y) or another schedule")
        X = _check_batch(X, self.n_features)
        gradient_z = check_finite("gradient_z", gradient_z, X.shape[0])
        z = X @ self.theta
        eta = self._target_step(z, None, gradient_z, math.nan)
        return self._inner(TargetSurrogate(X, z, gradient_z, eta, math.nan, self.l2))

    def learn_one(self, x, y: float) -> SSOStep | None:
        """Buffer one labelled event; step when ``batch_size`` events are buffered."""
        if self.batch_size is None:
            raise ValueError("learn_one needs batch_size, got None")
        x = check_finite("x", x, self.n_features)
        self._buffer.append((x, float(y)))
        if len(self._buffer) < self.batch_size:
            return None
        return self.flush()

    def flush(self) -> SSOStep | None:
        """Step on the buffered events, if any."""
        if not self._buffer:
            return None
        X = np.stack([x for x, _ in self._buffer])
        y = np.array([label for _, label in self._buffer])
        self._buffer = []
        return self.step(X, y)

    # ---------------------------------------------------------------------------- internals
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
            if np.mean(self.target_loss.value(z - eta * gradient_z, y)) <= loss_at_z - eta * wanted:
                break
            eta *= ARMIJO_BACKTRACK
        return eta

    def _inner(self, surrogate: TargetSurrogate) -> SSOStep:
        theta0 = self.theta
        start = surrogate.value(theta0)
        if self.m is None:
            theta, alpha, steps = surrogate.minimize(theta0), math.nan, 0
        else:
            theta, alpha, steps = self._descend(surrogate, theta0, self.m)
        self.theta = theta
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
            surrogate_decrease=start - surrogate.value(theta),
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
            gradient = surrogate.gradient(theta)
            if self.alpha == "armijo":
                value, wanted = surrogate.value(theta), ARMIJO_C * float(gradient @ gradient)
                for _ in range(ARMIJO_MAX_BACKTRACKS):
                    if surrogate.value(theta - alpha * gradient) <= value - alpha * wanted:
                        break
                    alpha *= ARMIJO_BACKTRACK
            theta = theta - alpha * gradient
        return theta, alpha, m


def _objective(loss: TargetLoss, z: np.ndarray, y, theta: np.ndarray, l2: float) -> float:
    y = loss.check_labels(check_finite("y", y, z.size))
    return float(np.mean(loss.value(z, y)) + 0.5 * l2 * theta @ theta)


def _check_l2(l2) -> float:
    if isinstance(l2, (int, float)) and not isinstance(l2, bool) and l2 == 0:
        return 0.0
    try:
        return check_positive("l2", l2)
    except ValueError:
        raise ValueError(f"l2 must be a finite number >= 0, got {l2!r}") from None


def _initial_theta(theta0, n_features: int) -> np.ndarray:
    if theta0 is None:
        return np.zeros(n_features)
    return check_finite("theta0", theta0, n_features).copy()
