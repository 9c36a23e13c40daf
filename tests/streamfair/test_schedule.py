"""The optimizers against a literal transcription of the pseudo-code of Chzhen, Hebiri & Taturyan (App. C).

The reference below is written naively from the pseudo-code of AC-SA (``w_md``, ``w``, ``w_ag``),
AC-SA^2 (two AC-SA runs of ``T/2``, the second started afresh at the first's output) and
SGD3-refined (``J = floor(log2(M / mu))`` stages of ``floor(T / J)`` samples, stage ``j`` running the
inner solver on ``F + mu_0/2 ||w - w_0||^2 + sum_{i<j} mu_i/2 ||w - w_i||^2`` with strong convexity
``mu_{j-1} = 2^(j-1) mu`` and smoothness ``2(M + mu)``), plus projected SGD with step ``1/M`` and
iterate averaging, and the documented doubling trick: epoch ``e`` reruns the schedule with horizon
``2^e T`` from the served point of epoch ``e - 1``.  The post-processor's served dual (``f.dual``)
must follow the reference after every sample.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from streamfair import FairRegressionPostProcessor, dual
from streamfair.schedule import Run, Schedule

OPTIMIZERS = [("sgd", None), ("acsa", None), ("acsa2", None), ("sgd3", "acsa"), ("sgd3", "acsa2")]


def stream(n, k, seed):
    """An unfair stream: eta depends on the hidden group, tau is its (noisy) posterior."""
    rng = np.random.default_rng(seed)
    s = rng.integers(0, k, n)
    eta = np.clip(0.9 * (s / (k - 1)) - 0.45 + 0.3 * rng.standard_normal(n), -1.2, 1.2)  # a few clipped
    tau = np.full((n, k), 0.1 / (k - 1))
    tau[np.arange(n), s] = 0.9
    tau = 0.7 * tau + 0.3 * rng.dirichlet(np.ones(k), n)
    return eta, tau


class Oracle:
    """One-sample stochastic gradients (the paper's eq. (11)) from a finite sequence, with ``p`` given or running."""

    def __init__(self, eta, tau, p, eps, beta, atoms, bound, batch=1):
        self.eta, self.tau, self.p, self.eps, self.beta = eta, tau, p, eps, beta
        self.atoms, self.bound, self.batch = atoms, bound, batch
        k = tau.shape[1]
        self.tau_sum, self.tau_count = np.full(k, 1.0 / k), 1  # running p: one uniform pseudo-sample
        self.used = 0

    def current_p(self):
        return self.p if self.p is not None else self.tau_sum / self.tau_count

    def __call__(self, w):
        if self.used >= self.eta.size:
            raise StopIteration
        grads = []
        for i in range(self.used, min(self.used + self.batch, self.eta.size)):
            self.tau_sum = self.tau_sum + self.tau[i]
            self.tau_count += 1
            t = 1.0 - self.tau[i] / self.current_p()
            r = (min(max(self.eta[i], -self.bound), self.bound) - self.atoms) ** 2
            a = (w[0] - w[1]) @ t - r
            e = np.exp(self.beta * (a - a.max()))
            pi = e / e.sum()
            big_g = np.outer(pi, t)
            grads.append(np.stack([big_g + self.eps, -big_g + self.eps]))
            self.used += 1
        return sum(grads) / len(grads)


def acsa(grad, w0, mu, big_m, horizon, served):
    """Algorithm 2 (AC-SA), projected on the orthant; appends ``w_ag`` after every step to ``served``."""
    w_ag, w = w0.copy(), w0.copy()
    for t in range(1, horizon + 1):
        alpha = 2.0 / (t + 1)
        gamma = 4.0 * big_m / (t * (t + 1))
        den = gamma + (1 - alpha**2) * mu
        w_md = ((1 - alpha) * (mu + gamma) / den) * w_ag + (alpha * ((1 - alpha) * mu + gamma) / den) * w
        g = grad(w_md)
        w = np.maximum(
            0.0,
            (((1 - alpha) * mu + gamma) / (mu + gamma)) * w
            + (alpha * mu / (mu + gamma)) * w_md
            - (alpha / (mu + gamma)) * g,
        )
        w_ag = alpha * w + (1 - alpha) * w_ag
        served.append(w_ag)
    return w_ag


def acsa2(grad, w0, mu, big_m, horizon, served):
    """Algorithm 3 (AC-SA^2): AC-SA for floor(T/2) steps, then AC-SA restarted at its output."""
    w1 = acsa(grad, w0, mu, big_m, horizon // 2, served)
    return acsa(grad, w1, mu, big_m, horizon - horizon // 2, served)


def sgd3(grad, w0, mu, big_m, horizon, inner, served):
    """Algorithm 4 (SGD3-refined) with the prox terms written out as a list."""
    stages = math.floor(math.log2(big_m / mu))
    per_stage = horizon // stages
    prox = [(mu, w0)]  # F^(0) = F + mu/2 ||w - w0||^2
    w_hat, mu_j = w0, mu
    for _ in range(stages):

        def grad_j(w, terms=tuple(prox)):
            return grad(w) + sum(weight * (w - centre) for weight, centre in terms)

        w_hat = inner(grad_j, w_hat, mu_j, 2 * (big_m + mu), per_stage, served)
        mu_j = 2 * mu_j
        prox.append((mu_j, w_hat))
    return w_hat


def sgd(grad, w0, big_m, horizon, served):
    """Projected SGD with constant step 1/M; the served point is the average of the iterates."""
    w, total = w0.copy(), np.zeros_like(w0)
    for t in range(1, horizon + 1):
        w = np.maximum(0.0, w - grad(w) / big_m)
        total = total + w
        served.append(total / t)
    return total / horizon


def reference_trajectory(optimizer, inner, oracle, horizon, beta, mu_given, shape, epoch_outputs=None):
    """Running outputs after every oracle call, epochs of horizon 2^e T warm-started at the last output.

    ``epoch_outputs``, if given, receives ``(oracle calls so far, output)`` at the end of every epoch.
    """
    served = []
    w = np.zeros(shape)
    epoch = 0
    try:
        while True:
            p = oracle.current_p()
            sigma2 = np.sum((1 - p) / p)
            big_m = 2 * beta * sigma2
            mu = mu_given if mu_given is not None else 2 * sigma2 / beta
            horizon_e = horizon * 2**epoch
            if optimizer == "sgd":
                w = sgd(oracle, w, big_m, horizon_e, served)
            elif optimizer == "acsa":
                w = acsa(oracle, w, mu, big_m, horizon_e, served)
            elif optimizer == "acsa2":
                w = acsa2(oracle, w, mu, big_m, horizon_e, served)
            else:
                w = sgd3(oracle, w, mu, big_m, horizon_e, acsa if inner == "acsa" else acsa2, served)
            epoch += 1
            if epoch_outputs is not None:
                epoch_outputs.append((len(served), w))
    except StopIteration:
        return np.array(served)


CONFIG = dict(B=1.0, L=3, beta=8.0, horizon=40, eps=0.01, serve="live")


@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
@pytest.mark.parametrize("known_p", [True, False])
def test_served_dual_follows_the_papers_pseudo_code(optimizer, inner, known_p):
    k, n = 3, 320
    eta, tau = stream(n, k, seed=1)
    p = tau.mean(axis=0) if known_p else None
    f = FairRegressionPostProcessor(**CONFIG, p=p, n_groups=k, optimizer=optimizer, inner=inner)
    trajectory = []
    for i in range(n):
        f.learn_one(eta[i], tau[i])
        trajectory.append(f.dual.copy())
    trajectory = np.array(trajectory)
    oracle = Oracle(eta, tau, p, f.eps, f.beta, f.atoms, f.B)
    expected = reference_trajectory(optimizer, inner, oracle, CONFIG["horizon"], f.beta, None, (2, f.atoms.size, k))
    assert expected.shape == trajectory.shape
    assert f.schedule.epoch >= 2  # the run went through epoch restarts
    assert expected[-1].max() > 0.05  # the duals moved: the comparison is not between zeros
    assert np.abs(trajectory - expected).max() <= 1e-12 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
def test_epoch_serving_serves_the_last_completed_epochs_output(optimizer, inner):
    """serve="epoch": the paper's output after each completed epoch, zero before the first."""
    k, n = 2, 320
    eta, tau = stream(n, k, seed=7)
    p = tau.mean(axis=0)
    f = FairRegressionPostProcessor(**{**CONFIG, "serve": "epoch"}, p=p, optimizer=optimizer, inner=inner)
    outputs = []
    oracle = Oracle(eta, tau, p, f.eps, f.beta, f.atoms, f.B)
    reference_trajectory(optimizer, inner, oracle, CONFIG["horizon"], f.beta, None, (2, f.atoms.size, k), outputs)
    assert len(outputs) >= 2
    scale = max(1.0, max(np.abs(w).max() for _, w in outputs))
    for i in range(n):
        f.learn_one(eta[i], tau[i])
        done = [w for used, w in outputs if used <= i + 1]
        expected = done[-1] if done else np.zeros_like(f.dual)
        assert np.abs(f.dual - expected).max() <= 1e-12 * scale
        if not done:
            assert np.array_equal(f.dual, np.zeros_like(f.dual))


@pytest.mark.parametrize("optimizer,inner", [("acsa", None), ("sgd3", "acsa2"), ("sgd", None)])
def test_given_mu_is_used_by_every_run(optimizer, inner):
    k, n = 2, 200
    eta, tau = stream(n, k, seed=2)
    p = tau.mean(axis=0)
    f = FairRegressionPostProcessor(**CONFIG, p=p, optimizer=optimizer, inner=inner, mu=0.3)
    f.learn_many(eta, tau)
    oracle = Oracle(eta, tau, p, f.eps, f.beta, f.atoms, f.B)
    expected = reference_trajectory(optimizer, inner, oracle, CONFIG["horizon"], f.beta, 0.3, (2, f.atoms.size, k))
    assert np.abs(f.dual - expected[-1]).max() <= 1e-12 * max(1.0, np.abs(expected).max())


@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
def test_mini_batch_steps_average_the_gradient_over_the_batch(optimizer, inner):
    """learn_many(batch_size=b): one step per b samples with the mean gradient; the schedule counts steps."""
    k, n, b = 2, 500, 7  # 500 = 71 * 7 + 3: the last batch is partial
    eta, tau = stream(n, k, seed=3)
    p = tau.mean(axis=0)
    f = FairRegressionPostProcessor(**CONFIG, p=p, optimizer=optimizer, inner=inner)
    f.learn_many(eta, tau, batch_size=b)
    oracle = Oracle(eta, tau, p, f.eps, f.beta, f.atoms, f.B, batch=b)
    expected = reference_trajectory(optimizer, inner, oracle, CONFIG["horizon"], f.beta, None, (2, f.atoms.size, k))
    assert expected.shape[0] == math.ceil(n / b)
    assert f.n_samples == n
    assert np.abs(f.dual - expected[-1]).max() <= 1e-12 * max(1.0, np.abs(expected).max())
    # batch_size=1 is the sequential algorithm
    one = FairRegressionPostProcessor(**CONFIG, p=p, optimizer=optimizer, inner=inner)
    one.learn_many(eta, tau, batch_size=1)
    seq = FairRegressionPostProcessor(**CONFIG, p=p, optimizer=optimizer, inner=inner)
    seq.learn_many(eta, tau)
    assert np.abs(one.dual - seq.dual).max() <= 1e-12 * max(1.0, np.abs(seq.dual).max())


def test_mini_batch_with_running_p_uses_the_per_sample_estimate():
    k, n, b = 3, 300, 8
    eta, tau = stream(n, k, seed=4)
    f = FairRegressionPostProcessor(**CONFIG, n_groups=k, optimizer="sgd3", inner="acsa")
    f.learn_many(eta, tau, batch_size=b)
    oracle = Oracle(eta, tau, None, f.eps, f.beta, f.atoms, f.B, batch=b)
    expected = reference_trajectory("sgd3", "acsa", oracle, CONFIG["horizon"], f.beta, None, (2, f.atoms.size, k))
    assert np.abs(f.dual - expected[-1]).max() <= 1e-12 * max(1.0, np.abs(expected).max())
    np.testing.assert_allclose(f.p, (tau.sum(axis=0) + 1 / k) / (n + 1), rtol=1e-14)


# ---------------------------------------------------------------- the schedule itself
def test_runs_of_each_optimizer():
    big_m, mu = 10.0, 10.0 / 2**5.5  # M / mu = 45.25: J = 5
    assert Schedule("sgd", inner="acsa", smoothness=big_m, mu=mu, horizon=103).runs(103) == [Run(103, mu, big_m)]
    assert Schedule("acsa", inner="acsa", smoothness=big_m, mu=mu, horizon=103).runs(103) == [Run(103, mu, big_m)]
    assert Schedule("acsa2", inner="acsa", smoothness=big_m, mu=mu, horizon=103).runs(103) == [
        Run(51, mu, big_m),
        Run(52, mu, big_m),
    ]
    s = Schedule("sgd3", inner="acsa", smoothness=big_m, mu=mu, horizon=103)
    assert s.stages == 5
    assert s.runs(103) == [Run(20, mu * 2 ** (j - 1), 2 * (big_m + mu), mu * 2**j) for j in range(1, 6)]
    s = Schedule("sgd3", inner="acsa2", smoothness=big_m, mu=mu, horizon=103)
    expected = []
    for j in range(1, 6):  # floor(103 / 5) = 20 per stage, two AC-SA halves of 10
        mu_in, big_m_in = mu * 2 ** (j - 1), 2 * (big_m + mu)
        expected += [Run(10, mu_in, big_m_in), Run(10, mu_in, big_m_in, mu * 2**j)]
    assert s.runs(103) == expected
    assert sum(run.length for run in s.runs(103)) == 5 * (103 // 5) == 100  # floor rounding: 3 samples left over


@pytest.mark.parametrize(
    "ratio,stages", [(2.0, 1), (3.99, 1), (4.0, 2), (8.0, 3), (8.0 * (1 - 1e-12), 2), (1e4, 13), (2.0**20, 20)]
)
def test_number_of_stages_is_floor_log2_of_condition_number(ratio, stages):
    s = Schedule("sgd3", inner="acsa", smoothness=ratio * 0.5, mu=0.5, horizon=100)
    assert s.stages == stages == math.floor(math.log2(ratio))
    assert Schedule("acsa", inner="acsa", smoothness=ratio * 0.5, mu=0.5, horizon=100).stages == 1


def test_minimum_horizon_gives_every_run_a_step():
    kwargs = dict(smoothness=64.0, mu=1.0)  # J = 6
    assert Schedule("sgd3", inner="acsa", horizon=6, **kwargs).min_horizon == 6
    assert Schedule("sgd3", inner="acsa2", horizon=12, **kwargs).min_horizon == 12
    assert Schedule("acsa2", inner="acsa", horizon=2, **kwargs).min_horizon == 2
    assert Schedule("sgd", inner="acsa", horizon=1, **kwargs).min_horizon == 1
    too_small = (("sgd3", "acsa", 5), ("sgd3", "acsa2", 11), ("acsa2", "acsa", 1), ("acsa", "acsa", 0))
    for optimizer, inner, horizon in too_small:
        with pytest.raises(ValueError, match=rf"horizon must be an integer >= \d+ .*got {horizon}"):
            Schedule(optimizer, inner=inner, horizon=horizon, **kwargs)


@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
def test_epochs_double_the_horizon_and_consume_floor_rounded_runs(optimizer, inner):
    horizon = 37
    s = Schedule(optimizer, inner=inner or "acsa", smoothness=40.0, mu=1.0, horizon=horizon)  # J = 5
    boundaries, run_starts, step = [], [0], 0
    while s.epoch < 4:
        assert 0.0 <= s.progress() < 1.0
        assert s.epoch_horizon == horizon * 2**s.epoch
        ended = s.advance()
        step += 1
        if ended is not None:
            run_starts.append(step)
            if s.run_index == 0:
                boundaries.append(step)
    per_epoch = [sum(run.length for run in s.runs(horizon * 2**e)) for e in range(4)]
    assert boundaries == list(np.cumsum(per_epoch))
    for e, used in enumerate(per_epoch):
        horizon_e = horizon * 2**e
        assert used == (5 * (horizon_e // 5) if optimizer == "sgd3" else horizon_e)
    runs = sum((s.runs(horizon * 2**e) for e in range(4)), [])
    assert run_starts == [0] + list(np.cumsum([run.length for run in runs]))


def test_acsa_coefficients_are_the_papers_step_sizes():
    big_m, mu, prox = 12.0, 0.7, 0.0
    s = Schedule("acsa", inner="acsa", smoothness=big_m, mu=mu, horizon=50)
    for t in range(1, 50):
        qa, qw, k1, k2, b3, avg = s.coefficients(prox)
        alpha, gamma = 2 / (t + 1), 4 * big_m / (t * (t + 1))
        den = gamma + (1 - alpha**2) * mu
        assert qa == pytest.approx((1 - alpha) * (mu + gamma) / den, rel=1e-14, abs=1e-300)
        assert qw == pytest.approx(alpha * ((1 - alpha) * mu + gamma) / den, rel=1e-14)
        assert b3 == pytest.approx(alpha / (mu + gamma), rel=1e-14)
        assert avg == pytest.approx(alpha, rel=1e-15)
        b1, b2 = ((1 - alpha) * mu + gamma) / (mu + gamma), alpha * mu / (mu + gamma)
        assert k1 == pytest.approx(b1 + b2 * qw, rel=1e-13) and k2 == pytest.approx(b2 * qa, rel=1e-13, abs=1e-300)
        s.advance()
    assert Schedule("acsa", inner="acsa", smoothness=big_m, mu=mu, horizon=5).coefficients(0.0)[:2] == (0.0, 1.0)
    assert Schedule("sgd", inner="acsa", smoothness=big_m, mu=mu, horizon=5).coefficients(0.0) == (
        0.0,
        1.0,
        1.0,
        0.0,
        1 / big_m,
        1.0,
    )


def test_schedule_state_round_trip():
    a = Schedule("sgd3", inner="acsa2", smoothness=40.0, mu=1.0, horizon=30)
    for _ in range(77):
        a.advance()
    b = Schedule("sgd3", inner="acsa2", smoothness=40.0, mu=1.0, horizon=30)
    b.load_state_dict(a.state_dict())
    for _ in range(200):
        assert (b.epoch, b.run_index, b.step, b.run) == (a.epoch, a.run_index, a.step, a.run)
        assert b.coefficients(0.5) == a.coefficients(0.5)
        assert (a.advance() is None) == (b.advance() is None)


@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
def test_post_processor_epochs_start_after_floor_rounded_horizons(optimizer, inner):
    k, n, horizon = 2, 400, 50
    eta, tau = stream(n, k, seed=5)
    f = FairRegressionPostProcessor(profile="paper",
        B=1.0, L=3, beta=8.0, eps=0.01, p=[0.5, 0.5], horizon=horizon, optimizer=optimizer, inner=inner
    )
    stages = math.floor(math.log2(8.0**2)) if optimizer == "sgd3" else 1  # M / mu = beta^2
    assert f.schedule.stages == stages
    epochs = []
    for i in range(n):
        f.learn_one(eta[i], tau[i])
        epochs.append(f.schedule.epoch)
    lengths = [stages * (horizon * 2**e // stages) for e in range(3)]
    starts = np.flatnonzero(np.diff(np.r_[0, epochs])) + 1  # samples seen when the epoch changed
    assert list(starts[:2]) == list(np.cumsum(lengths)[:2])
    assert f.diagnostics().epoch_horizon == horizon * 2 ** f.schedule.epoch


# ---------------------------------------------------------------- continuity at restarts
@pytest.mark.parametrize("optimizer,inner", OPTIMIZERS)
def test_served_dual_moves_by_one_step_at_an_epoch_restart(optimizer, inner):
    """The new epoch starts at the served point: its first step is Proj(w0 - g / (mu + 2M)) (or w0 - g/M)."""
    k, n = 2, 400
    eta, tau = stream(n, k, seed=6)
    p = tau.mean(axis=0)
    f = FairRegressionPostProcessor(**CONFIG, p=p, optimizer=optimizer, inner=inner)
    checked = 0
    for i in range(n):
        before, run = f.dual.copy(), f.schedule.run
        epoch_start = f.schedule.epoch > 0 and f.schedule.run_index == 0 and f.schedule.step == 1
        t, r = dual.group_features(tau[i], p), dual.squared_costs(np.clip(eta[i], -1, 1), f.atoms)
        g = dual.stochastic_gradient(before, t, r, f.eps, f.beta)
        f.learn_one(eta[i], tau[i])
        move = np.linalg.norm(f.dual - before)
        if epoch_start:
            bound = np.linalg.norm(g) / (f.schedule.smoothness if optimizer == "sgd" else run.mu + 2 * run.smoothness)
            assert before.max() > 0  # warm start: the epoch does not restart from zero
            assert move <= bound * (1 + 1e-9) + 1e-15
            checked += 1
    assert checked >= 2
