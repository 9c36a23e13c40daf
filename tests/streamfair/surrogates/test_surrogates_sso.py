"""SSO (Lavington et al., ICML 2023).

``m = 1`` is SGD bit for bit; the target-space projection of Lemma 4.1; majorization and descent; with
the squared loss and ``eta = 1`` the surrogate is the batch loss; the bias of exact SSO (Prop. 4.4);
oracle efficiency near interpolation; the plateau of noisy small batches; step sizes, options and
input validation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamfair.surrogates import SGD, SSO


def least_squares(seed: int = 0, n: int = 2000, d: int = 50, kappa: float = 1e3, noise: float = 0.01):
    """A synthetic least-squares problem: Gaussian design with condition number ``kappa`` of X^T X / n."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) * np.logspace(0, -0.5 * np.log10(kappa), d)
    y = X @ rng.standard_normal(d) + noise * rng.standard_normal(n)
    return X, y


def relative_gaps(optimizer, X, y, batch: int, calls: int, seed: int, target: float | None = None):
    """``(h - h*) / (h(0) - h*)`` after each oracle call; stops once ``target`` is reached."""
    theta = np.linalg.lstsq(X, y, rcond=None)[0]
    best, start = 0.5 * np.mean((X @ theta - y) ** 2), 0.5 * np.mean(y**2)
    rng = np.random.default_rng(seed)
    gaps = []
    for _ in range(calls):
        rows = rng.choice(X.shape[0], batch, replace=False)
        optimizer.step(X[rows], y[rows])
        gaps.append((optimizer.loss(X, y) - best) / (start - best))
        if target is not None and gaps[-1] <= target:
            break
    return gaps


def batches(seed: int, n_steps: int, b: int, d: int, logistic: bool):
    rng = np.random.default_rng(seed)
    truth = rng.standard_normal(d)
    for _ in range(n_steps):
        X = rng.standard_normal((b, d))
        y = np.sign(X @ truth + 0.5 * rng.standard_normal(b)) if logistic else X @ truth + 0.1 * rng.standard_normal(b)
        yield X, y


# ----------------------------------------------------------------------------------- B-T1
@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("l2", [0.0, 0.01])
def test_bt1_m1_reproduces_sgd_bit_for_bit(loss, l2):
    theta0 = np.random.default_rng(1).standard_normal(6)
    sso = SSO(6, loss=loss, m=1, alpha=0.07, l2=l2, theta0=theta0)
    sgd = SGD(6, loss=loss, alpha=0.07, l2=l2, theta0=theta0)
    by_hand = theta0.copy()
    for X, y in batches(2, 100, 8, 6, loss == "logistic"):
        sso.step(X, y)
        sgd.step(X, y)
        z = X @ by_hand
        dz = z - y if loss == "squared" else -y / (1 + np.exp(y * z))
        by_hand = by_hand - 0.07 * (X.T @ dz / 8 + l2 * by_hand)
        assert np.array_equal(sso.theta, sgd.theta)
    assert np.max(np.abs(sso.theta - by_hand)) <= 1e-12
    assert not np.array_equal(sso.theta, theta0)


def test_bt1_more_inner_steps_differ_from_sgd():
    """The identity is specific to m = 1 (so the test above can fail)."""
    sso, sgd = SSO(6, m=2, alpha=0.07), SGD(6, alpha=0.07)
    X, y = next(batches(2, 1, 8, 6, False))
    sso.step(X, y)
    sgd.step(X, y)
    assert np.max(np.abs(sso.theta - sgd.theta)) > 1e-3


# ----------------------------------------------------------------------------------- B-T2
@pytest.mark.parametrize("loss", ["squared", "logistic"])
@pytest.mark.parametrize("b", [1, 3])
@pytest.mark.parametrize("m", [3000, None])
def test_bt2_lemma_4_1_affine_projection(loss, b, m):
    rng = np.random.default_rng(b)
    d = 8
    theta0 = rng.standard_normal(d)
    X = rng.standard_normal((b, d))
    y = rng.choice([-1.0, 1.0], b) if loss == "logistic" else rng.standard_normal(b)
    sso = SSO(d, loss=loss, m=m, eta=0.7, theta0=theta0)
    surrogate = sso.surrogate(X, y)
    step = sso.step(X, y)
    wanted_targets = surrogate.z - 0.7 * surrogate.gradient_z
    assert np.max(np.abs(X @ sso.theta - wanted_targets)) <= 1e-10
    nlms = theta0 - 0.7 * X.T @ np.linalg.solve(X @ X.T, surrogate.gradient_z)
    assert np.max(np.abs(sso.theta - nlms)) <= 1e-10
    assert step.projection_gap <= 1e-9
    assert step.target_step_norm == pytest.approx(0.7 * np.linalg.norm(surrogate.gradient_z), rel=1e-9)


def test_bt2_single_sample_new_target_is_sgd_in_target_space():
    x, theta0 = np.array([1.0, -2.0, 0.5]), np.array([0.3, 0.1, -0.4])
    sso = SSO(3, m=None, eta=0.25, theta0=theta0)
    z = x @ theta0
    sso.step([x], [2.0])
    assert x @ sso.theta == pytest.approx(z - 0.25 * (z - 2.0), abs=1e-12)
    assert np.allclose(sso.theta, theta0 - 0.25 * (z - 2.0) * x / (x @ x), atol=1e-12)


# ----------------------------------------------------------------------------------- B-T3
@pytest.mark.parametrize("loss, eta", [("squared", 1.0), ("logistic", 4.0)])
def test_bt3_majorisation(loss, eta):
    rng = np.random.default_rng(3)
    X, y = next(batches(4, 1, 40, 5, loss == "logistic"))
    sso = SSO(5, loss=loss, eta=eta, theta0=rng.standard_normal(5))
    surrogate = sso.surrogate(X, y)
    assert surrogate.value(sso.theta) == pytest.approx(sso.loss(X, y), abs=1e-12)
    probe = SSO(5, loss=loss)
    for scale in (0.01, 0.3, 3.0, 30.0):
        for theta in sso.theta + scale * rng.standard_normal((250, 5)):
            probe.theta = theta
            assert surrogate.value(theta) >= probe.loss(X, y) - 1e-9


def test_bt3_majorisation_fails_beyond_one_over_l():
    """With eta > 1/L the surrogate is no upper bound: the check above can fail."""
    X, y = next(batches(4, 1, 40, 5, False))
    sso = SSO(5, eta=3.0)
    surrogate = sso.surrogate(X, y)
    probe = SSO(5)
    violations = 0
    for theta in np.random.default_rng(0).standard_normal((100, 5)):
        probe.theta = theta
        violations += surrogate.value(theta) < probe.loss(X, y) - 1e-9
    assert violations > 50


@pytest.mark.parametrize("loss, eta", [("squared", 1.0), ("logistic", 4.0)])
@pytest.mark.parametrize("m", [1, 5, 50])
def test_bt3_deterministic_descent(loss, eta, m):
    X, y = next(batches(5, 1, 200, 6, loss == "logistic"))
    sso = SSO(6, loss=loss, eta=eta, m=m, alpha="lipschitz", theta0=np.full(6, 2.0))
    previous = sso.loss(X, y)
    for _ in range(30):
        step = sso.step(X, y)
        assert step.surrogate_decrease >= -1e-12
        current = sso.loss(X, y)
        assert current <= previous + 1e-12
        previous = current
    assert previous < 0.5 * SSO(6, loss=loss, theta0=np.full(6, 2.0)).loss(X, y)


# ----------------------------------------------------------------------------------- B-T4
@pytest.mark.parametrize("l2", [0.0, 0.1])
def test_bt4_squared_loss_eta_one_is_the_batch_loss(l2):
    rng = np.random.default_rng(6)
    X, y = next(batches(6, 1, 30, 4, False))
    sso = SSO(4, eta=1.0, l2=l2, theta0=rng.standard_normal(4))
    surrogate = sso.surrogate(X, y)
    probe = SSO(4, l2=l2)
    for theta in 5 * rng.standard_normal((200, 4)):
        probe.theta = theta
        assert abs(surrogate.value(theta) - probe.loss(X, y)) <= 1e-9


# ----------------------------------------------------------------------------------- B-T5
def affine_map(make, X, y, t: int) -> tuple[float, float]:
    """``theta_{t+1} = a theta_t + c`` for one sample, read off two library steps at step ``t``."""
    images = []
    for start in (0.0, 1.0):
        optimizer = make(start)
        optimizer.t = t
        optimizer.step(X, y)
        images.append(float(optimizer.theta[0]))
    return images[1] - images[0], images[0]


def prop_4_4_mean(make, horizon: int, runs: int, seed: int) -> float:
    """Mean of theta_T over ``runs`` with h = (h1 + h2) / 2, h1 = (t - 1)^2 / 2, h2 = (2t + 1/2)^2 / 2."""
    samples = ((np.array([[1.0]]), np.array([1.0])), (np.array([[2.0]]), np.array([-0.5])))
    rng = np.random.default_rng(seed)
    theta = np.ones(runs)
    for t in range(horizon):
        maps = [affine_map(make, X, y, t) for X, y in samples]
        pick = rng.integers(0, 2, runs)
        theta = np.where(pick == 0, maps[0][0] * theta + maps[0][1], maps[1][0] * theta + maps[1][1])
    return float(theta.mean())


@pytest.mark.slow
@pytest.mark.parametrize("schedule, eta", [("constant", 0.5), ("sqrt", 1.0)])
def test_bt5_prop_4_4_bias_of_exact_sso(schedule, eta):
    make = lambda start: SSO(1, m=None, eta=eta, schedule=schedule, theta0=[start])  # noqa: E731
    assert 0.365 <= prop_4_4_mean(make, 2000, 20000, 0) <= 0.385


@pytest.mark.slow
def test_bt5_parametric_sgd_with_decaying_steps_is_unbiased():
    class DecayingSGD(SGD):
        def __init__(self, start):
            super().__init__(1, alpha=0.2, theta0=[start])
            self.t = 0

        def step(self, X, y):
            self.alpha = 0.2 / math.sqrt(self.t + 1)
            return super().step(X, y)

    assert abs(prop_4_4_mean(DecayingSGD, 2000, 20000, 0)) <= 0.01


# ----------------------------------------------------------------------------------- B-T6
@pytest.mark.slow
def test_bt6_oracle_efficiency_near_interpolation():
    X, y = least_squares()
    n = X.shape[0]
    smooth = float(np.linalg.eigvalsh(X.T @ X / n)[-1])
    smooth_max = float((X**2).sum(axis=1).max())
    calls = {}
    for alpha in (1 / (2 * smooth_max), 0.5 / smooth, 1 / smooth, 2 / smooth):
        gaps = relative_gaps(SGD(50, alpha=alpha), X, y, 125, 3000, 1, 1e-3)
        calls[alpha] = len(gaps) if gaps[-1] <= 1e-3 else math.inf
    best_sgd = min(calls.values())
    assert math.isfinite(best_sgd)
    sso = {m: len(relative_gaps(SSO(50, m=m, eta=0.5), X, y, 125, 3000, 1, 1e-3)) for m in (10, 100)}
    assert sso[100] <= best_sgd / 10
    assert sso[10] < best_sgd


# ----------------------------------------------------------------------------------- B-T7
@pytest.mark.slow
def test_bt7_noisy_small_batches_more_inner_steps_do_not_lower_the_plateau():
    X, y = least_squares(noise=1.0)
    plateau = {
        m: np.mean([np.mean(relative_gaps(SSO(50, m=m, eta=0.5), X, y, 5, 300, seed)[-50:]) for seed in range(3)])
        for m in (1, 100)
    }
    assert plateau[100] >= plateau[1]


# ----------------------------------------------------------------------------------- options
def test_step_size_schedules():
    X, y = next(batches(7, 1, 20, 3, False))
    sqrt = SSO(3, eta=0.8, schedule="sqrt")
    expo = SSO(3, eta=0.8, schedule="exponential", horizon=100, decay=2.0)
    for t in range(5):
        assert sqrt.step(X, y).eta == pytest.approx(0.8 / math.sqrt(t + 1))
        assert expo.step(X, y).eta == pytest.approx(0.8 * (2.0 / 100) ** (t / 100))


def test_armijo_target_step_satisfies_the_condition_and_backtracks():
    X, y = next(batches(8, 1, 20, 3, True))
    sso = SSO(3, loss="logistic", eta=50.0, schedule="armijo", theta0=[3.0, -3.0, 3.0])
    surrogate = sso.surrogate(X, y)
    shifted = sso.target_loss.value(surrogate.z - surrogate.eta * surrogate.gradient_z, y).mean()
    assert surrogate.eta < 50.0
    assert shifted <= surrogate.loss_at_z - 0.5 * surrogate.eta * np.mean(surrogate.gradient_z**2)
    assert surrogate.eta / 0.5 > 50.0 * 0.5 ** 60  # it stopped before the backtracking limit


def test_inner_armijo_decreases_the_surrogate_and_counts_steps():
    sso = SSO(4, m=7, alpha="armijo", alpha0=100.0)
    for X, y in batches(9, 5, 16, 4, False):
        step = sso.step(X, y)
        assert step.surrogate_decrease > 0 and step.alpha < 100.0
    assert (sso.n_oracle_calls, sso.n_inner_steps) == (5, 35)


def test_external_oracle_equals_labelled_step():
    X, y = next(batches(10, 1, 12, 4, False))
    labelled, external = SSO(4, m=5), SSO(4, m=5)
    labelled.step(X, y)
    external.step_with_gradient(X, X @ external.theta - y)
    assert np.array_equal(labelled.theta, external.theta)
    assert math.isnan(external.last_step.loss_at_z)


def test_learn_one_buffers_a_batch():
    X, y = next(batches(11, 1, 6, 3, False))
    streamed, batched = SSO(3, m=4, batch_size=3), SSO(3, m=4)
    results = [streamed.learn_one(x, label) for x, label in zip(X, y, strict=True)]
    batched.step(X[:3], y[:3])
    batched.step(X[3:], y[3:])
    assert results[0] is None and results[1] is None and results[2] is not None
    assert np.array_equal(streamed.theta, batched.theta)
    assert streamed.flush() is None


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"m": 0}, "m must be an integer >= 1, got 0"),
        ({"eta": -1.0}, "eta must be a finite number > 0, got -1.0"),
        ({"schedule": "cosine"}, "schedule must be one of"),
        ({"schedule": "exponential"}, "horizon must be given"),
        ({"alpha": "newton"}, "alpha must be 'lipschitz', 'armijo' or a number > 0, got 'newton'"),
        ({"loss": "hinge"}, "loss must be one of"),
        ({"l2": -0.1}, "l2 must be a finite number >= 0, got -0.1"),
        ({"theta0": [1.0]}, "theta0 must have shape (3,)"),
    ],
)
def test_invalid_configuration(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        SSO(3, **kwargs)


def test_invalid_batches():
    sso = SSO(3, loss="logistic")
    with pytest.raises(ValueError, match=r"X must have shape \(n >= 1, 3\)"):
        sso.step(np.ones((2, 2)), [1.0, -1.0])
    with pytest.raises(ValueError, match="y must be -1 or"):
        sso.step(np.ones((2, 3)), [1.0, 0.0])
    with pytest.raises(ValueError, match="learn_one needs batch_size"):
        sso.learn_one([1.0, 2.0, 3.0], 1.0)
    with pytest.raises(ValueError, match="schedule='armijo' needs loss values"):
        SSO(3, schedule="armijo").step_with_gradient(np.ones((1, 3)), [0.5])
