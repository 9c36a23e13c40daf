"""Throughput of the post-processor's per-sample paths at L = 50 (101 atoms), K = 2, one core, in both profiles.

Rows: ``learn_one``; ``learn_many`` (exact: bit for bit the ``learn_one`` loop); the fused
``predict_learn_one`` with a keyed draw (one prediction and one step per sample); the same in polls
of 500 samples (``predict_learn_many``, the daemon's path at ``batch_size=1``); ``learn_many``
with mini-batches of 1,000.  Baseline, measured in the same run: a lean pure-numpy loop of the
same single-sample step on precomputed features and costs, written with the reference functions
(``dual.policy`` and the constraint maps): projected SGD with the control variate on the KS (CDF)
constraints for the ``anytime`` profile, AC-SA on the per-atom constraints for the ``paper`` one.  The goal column is
the target throughput.  Rates are per second of the process's CPU time (best of three runs), which
other jobs on the machine disturb much less than wall time.

Run: ``python benchmarks/bench_core.py`` or ``streamfair bench core``.
"""

from __future__ import annotations

import time

import numpy as np
from command_line import parser  # benchmarks/command_line.py
from timing import best_seconds  # benchmarks/timing.py

from streamfair import FairRegressionPostProcessor, dual
from streamfair.tracking import TrackingOptimizer

GOALS = {"learn_one": 300_000, "learn_many (exact)": 600_000, "fused predict + learn, keyed draw": 150_000,
         "fused, keyed draws, polls of 500 (predict_learn_many)": 150_000,
         "mini-batch (b=1000)": 2_000_000}


def numpy_tracking(fair: FairRegressionPostProcessor, features: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """The anytime step in numpy: the policy at ``C^T (Lambda - V)``, rows centred by their running mean ``b``,
    then ``w = (w - step grad)_+``."""
    optimizer, memory = fair._optimizer, fair.memory
    assert isinstance(optimizer, TrackingOptimizer) and memory is not None, "the anytime profile"
    constraints, beta, step, slack = fair.constraints, fair.beta, optimizer.step, fair.slack
    w = np.zeros((2, constraints.n_rows, slack.size))
    baseline = np.zeros(constraints.n_rows)
    for i, (t, r) in enumerate(zip(features, costs, strict=True)):
        per_atom = constraints.atoms_of(w[0] - w[1])
        pi = dual.policy(np.stack([per_atom, np.zeros_like(per_atom)]), t[None], r[None], beta)[0]
        centered = constraints.rows_of(pi) - baseline
        baseline += centered / min(i + 1, memory)
        gap = np.multiply.outer(centered, t)
        w = np.maximum(w - step * np.stack([gap + slack, slack - gap]), 0.0)
    return w


def numpy_acsa(fair: FairRegressionPostProcessor, features: np.ndarray, costs: np.ndarray) -> np.ndarray:
    """The paper's AC-SA step (Ghadimi & Lan's Alg. 2 on the dual) in numpy, at the schedule's constants."""
    big_m, mu, beta, eps = fair.schedule.smoothness, fair.schedule.mu, fair.beta, fair.slack
    w = np.zeros((2, fair.atoms.size, eps.size))
    w_ag = w.copy()
    for step, (t, r) in enumerate(zip(features, costs, strict=True), start=1):
        alpha, gamma = 2.0 / (step + 1), 4.0 * big_m / (step * (step + 1))
        den = gamma + (1.0 - alpha**2) * mu
        query = ((1 - alpha) * (mu + gamma) * w_ag + alpha * ((1 - alpha) * mu + gamma) * w) / den
        pi = dual.policy(query, t[None], r[None], beta)[0]
        gap = np.outer(pi, t)
        grad = np.stack([gap + eps, eps - gap])
        w = np.maximum((((1 - alpha) * mu + gamma) * w + alpha * mu * query - alpha * grad) / (mu + gamma), 0.0)
        w_ag = alpha * w + (1 - alpha) * w_ag
    return w_ag


def cpu_seconds(function) -> float:
    """The shortest CPU time of three runs of ``function()`` (wall time also counts the other jobs of the machine)."""
    return best_seconds(function, clock=time.process_time)


def rates(profile: str, n: int, batch_size: int) -> tuple[float, dict[str, float]]:
    """Samples per CPU second of the numpy baseline and of each path (best of three runs, fresh models)."""
    rng = np.random.default_rng(0)
    tau = rng.dirichlet([1.0, 1.0], n)
    eta = np.tanh(rng.standard_normal(n))
    eta_list, tau_list = eta.tolist(), tau.tolist()

    def make():
        return FairRegressionPostProcessor(L=50, p=[0.5, 0.5], profile=profile)

    warm = make()  # compiled functions loaded before any timing
    warm.learn_many(eta[:10], tau[:10])
    warm.predict_learn_one(eta_list[0], tau_list[0], key=0)
    m = n // 10
    features = dual.group_features(tau[:m], warm.p)
    costs = warm.beta * dual.squared_costs(eta[:m], warm.atoms)
    baseline = numpy_tracking if profile == "anytime" else numpy_acsa
    base_rate = m / cpu_seconds(lambda: baseline(warm, features, costs))

    def one():
        fair = make()
        for e, t in zip(eta_list, tau_list, strict=True):
            fair.learn_one(e, t)

    def fused():
        fair = make()
        for i, (e, t) in enumerate(zip(eta_list, tau_list, strict=True)):
            fair.predict_learn_one(e, t, key=i)

    def polls(size: int = 500):
        fair, keys = make(), list(range(n))
        for start in range(0, n, size):
            rows = slice(start, start + size)
            fair.predict_learn_many(eta_list[rows], tau_list[rows], keys=keys[rows])

    big_eta, big_tau = np.tile(eta, 20), np.tile(tau, (20, 1))
    paths = {
        "learn_one": n / cpu_seconds(one),
        "learn_many (exact)": n / cpu_seconds(lambda: make().learn_many(eta, tau)),
        "fused predict + learn, keyed draw": n / cpu_seconds(fused),
        "fused, keyed draws, polls of 500 (predict_learn_many)": n / cpu_seconds(polls),
        "mini-batch (b=1000)": 20 * n / cpu_seconds(
            lambda: make().learn_many(big_eta, big_tau, batch_size=batch_size)),
    }
    return base_rate, paths


def main(n: int = 20_000, batch_size: int = 1000) -> str:
    lines = [
        "| profile | path | samples per CPU second | CPU µs/sample | vs numpy step | goal |",
        "|---|---|---|---|---|---|",
    ]
    for profile in ("anytime", "paper"):
        base_rate, paths = rates(profile, n, batch_size)
        lines.append(f"| {profile} | numpy step (baseline) | {base_rate:,.0f} | {1e6 / base_rate:.2f} | 1.0x | |")
        for name, rate in paths.items():
            lines.append(f"| {profile} | {name} | {rate:,.0f} | {1e6 / rate:.2f} | {rate / base_rate:.1f}x "
                         f"| {GOALS[name]:,}/s |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
