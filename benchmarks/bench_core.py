"""Throughput of the DP regression post-processor's per-sample update.

Rows: K = 2 groups, L in {25, 50, 100} (2L + 1 atoms), SGD3 + AC-SA^2 (the default optimizer).
Baseline, measured in the same run: the same AC-SA step written naively, one numpy call per formula
term with fresh arrays each time, as a paper's prototype would.

Run: ``python benchmarks/bench_core.py`` or ``streamfair bench core``.
"""

from __future__ import annotations

import time

import numpy as np

from streamfair import FairRegressionPostProcessor


def naive_acsa(eta, tau, p, eps, beta, L, big_m, mu):
    """A literal transcription of the paper's AC-SA (Alg. 2) on F: fresh arrays for every term."""
    atoms = np.arange(-L, L + 1) / L
    lam, nu = np.zeros((2 * L + 1, p.size)), np.zeros((2 * L + 1, p.size))
    lam_ag, nu_ag = lam.copy(), nu.copy()
    for t_step, (e, ta) in enumerate(zip(eta, tau), start=1):
        alpha = 2 / (t_step + 1)
        gamma = 4 * big_m / (t_step * (t_step + 1))
        den = gamma + (1 - alpha**2) * mu
        lam_md = (1 - alpha) * (mu + gamma) / den * lam_ag + alpha * ((1 - alpha) * mu + gamma) / den * lam
        nu_md = (1 - alpha) * (mu + gamma) / den * nu_ag + alpha * ((1 - alpha) * mu + gamma) / den * nu
        t = 1 - ta / p
        r = (e - atoms) ** 2
        a = beta * ((lam_md - nu_md) @ t - r)
        pi = np.exp(a - np.max(a))
        pi = pi / np.sum(pi)
        grad_lam = np.outer(pi, t) + eps
        grad_nu = -np.outer(pi, t) + eps
        c1, c2, c3 = ((1 - alpha) * mu + gamma) / (mu + gamma), alpha * mu / (mu + gamma), alpha / (mu + gamma)
        lam = np.maximum(c1 * lam + c2 * lam_md - c3 * grad_lam, 0)
        nu = np.maximum(c1 * nu + c2 * nu_md - c3 * grad_nu, 0)
        lam_ag = alpha * lam + (1 - alpha) * lam_ag
        nu_ag = alpha * nu + (1 - alpha) * nu_ag
    return lam_ag, nu_ag


def _rate(function, n: int, repeats: int = 3) -> float:
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        best = min(best, time.perf_counter() - start)
    return n / best


def main(n: int = 20_000, batch_size: int = 1000) -> str:
    rng = np.random.default_rng(0)
    tau = rng.dirichlet([1.0, 1.0], n)
    eta = np.tanh(rng.standard_normal(n))
    p, eps = np.array([0.5, 0.5]), 0.005
    rows = [
        "| L | atoms | naive AC-SA step | learn_one | learn_many (exact) | mini-batch (b=%d) | exact / naive |" % batch_size,
        "|---|---|---|---|---|---|---|",
    ]
    for L in (25, 50, 100):
        def make():
            return FairRegressionPostProcessor(L=L, eps=eps, p=p, horizon=n, profile="paper")

        probe = make()
        big_m, mu = probe.schedule.smoothness, probe.schedule.mu
        m = n // 4
        naive = _rate(lambda: naive_acsa(eta[:m], tau[:m], p, eps, probe.beta, L, big_m, mu), m)

        def one():
            f = make()
            for e, ta in zip(eta[:m], tau[:m]):
                f.learn_one(e, ta)

        exact = _rate(lambda: make().learn_many(eta, tau), n)
        batch = _rate(lambda: make().learn_many(np.tile(eta, 10), np.tile(tau, (10, 1)), batch_size=batch_size), 10 * n)
        single = _rate(one, m)
        rows.append(
            f"| {L} | {2 * L + 1} | {naive:,.0f}/s | {single:,.0f}/s | {exact:,.0f}/s | {batch:,.0f}/s | {exact / naive:.2f}x |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    print(main())
