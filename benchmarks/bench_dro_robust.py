"""Group-robust DP regression post-processor against the plain one: worst-group risk, fairness, cost per sample.

The stream (``minority_stream``, also the scenario of ``tests/streamfair/dro/test_dro_robust.py``):
15% minority samples at ``eta = 0.5``, majority samples at ``eta = -0.3``, both with N(0, 0.1^2)
noise, clipped to [-1, 1]; the group posterior ``tau`` is 0.95 on the true group.  Settings: the
``paper`` profile, L = 10, eps = 0.005, horizon 1e4, p = (0.85, 0.15).  For each seed ``s`` the models
learn 30 000 samples of seed ``s`` and are evaluated on 4 000 held-out samples of seed ``100 + s``;
risk is measured against ``eta`` (what post-processing costs each group, ``sum_l pi(l | x) (y_l - eta)^2``).
Models: the plain post-processor, the robust one with the softmax updater (T = 0.01, the default) and
with the exponentiated updater (step 0.05).  ``q_1 / p_1`` is the factor on a minority sample's costs
at the end (the minority's DRO weight over its share).  The cost is the CPU time of ``learn_many`` on
the 30 000 samples (best of three fresh fits, after one untimed fit), per sample.

Prints one row per seed and model, then the table of ``docs/dro.md`` (ranges over the seeds; the
cost is the median over the seeds).

Run: ``python benchmarks/bench_dro_robust.py`` (seeds 0, 1, 2: under 10 s on two shared cores) or
``--seeds=0,1,2,3,4``.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
from command_line import parser  # benchmarks/command_line.py
from timing import best_seconds  # benchmarks/timing.py

from streamfair import FairRegressionPostProcessor, evaluate
from streamfair.dro import GroupRobustFairRegressionPostProcessor

#: The settings both post-processors share.
CONFIG: dict[str, Any] = dict(L=10, p=[0.85, 0.15], horizon=10_000, eps=0.005)
N_TRAIN, N_TEST, TEST_SEED_OFFSET = 30_000, 4_000, 100
MODELS: dict[str, Callable[[], FairRegressionPostProcessor]] = {
    "plain post-processor": lambda: FairRegressionPostProcessor(**{"profile": "paper", **CONFIG}),
    "robust, softmax (T = 0.01)": lambda: GroupRobustFairRegressionPostProcessor(**{"profile": "paper", **CONFIG}),
    "robust, exponentiated (step 0.05)": lambda: GroupRobustFairRegressionPostProcessor(
        **{"profile": "paper", **CONFIG}, updater="exponentiated", step=0.05),
}


def minority_stream(n: int, seed: int, minority: float = 0.15) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Groups ``s``, posteriors ``tau`` and base predictions ``eta``: group 1 (15%) far from the majority.

    The plain fair solution moves the minority's predictions most.

    >>> s, tau, eta = minority_stream(4, seed=0)
    >>> s.tolist(), tau[0].tolist(), bool(np.all(np.abs(eta) <= 1))
    ([0, 0, 1, 1], [0.95, 0.05], True)
    """
    rng = np.random.default_rng(seed)
    s = (rng.random(n) < minority).astype(int)
    tau = np.where(s[:, None] == 1, [0.05, 0.95], [0.95, 0.05])
    eta = np.clip(np.where(s == 1, 0.5, -0.3) + 0.1 * rng.standard_normal(n), -1, 1)
    return s, tau, eta


class Measured(NamedTuple):
    group_risk: np.ndarray  # (majority, minority)
    risk: float
    max_ks: float
    max_atom_gap: float
    cost_scale: float  # q_1 / p_1, the factor on a minority sample's costs (1 for the plain post-processor)
    us_per_sample: float


def measure(seed: int) -> dict[str, Measured]:
    """Each model of :data:`MODELS` fitted on seed ``seed``'s stream, evaluated on seed ``100 + seed``'s."""
    _, tau, eta = minority_stream(N_TRAIN, seed)
    s_test, tau_test, eta_test = minority_stream(N_TEST, TEST_SEED_OFFSET + seed)
    results = {}
    for name, make in MODELS.items():
        model = make()
        model.learn_many(eta, tau)  # also compiles what the timed fits use
        report = evaluate(model.proba_many(eta_test, tau_test), model.atoms, eta_test, s_test)

        def fit(make: Callable[[], FairRegressionPostProcessor] = make) -> None:
            make().learn_many(eta, tau)

        seconds = best_seconds(fit, clock=time.process_time)
        weights = model.dro_diagnostics().weights if isinstance(model, GroupRobustFairRegressionPostProcessor) else None
        results[name] = Measured(report.group_risk, report.risk, report.max_ks, float(report.atom_unfairness.max()),
                                 1.0 if weights is None else float(weights[1] / model.p[1]), 1e6 * seconds / N_TRAIN)
    return results


def _span(values: list[float], digits: int = 3) -> str:
    """``"low – high"`` to ``digits`` decimals (one number when they agree)."""
    low, high = f"{min(values):.{digits}f}", f"{max(values):.{digits}f}"
    return low if low == high else f"{low} – {high}"


def table(runs: dict[int, dict[str, Measured]]) -> str:
    """The markdown table of ``docs/dro.md``: ranges over the seeds, the median cost."""
    lines = ["| model | worst-group risk | group risks (majority, minority) | mean risk | max KS | max per-atom gap "
             "| q_1 / p_1 | µs / sample |", "|---|---|---|---|---|---|---|---|"]
    for name in MODELS:
        rows = [run[name] for run in runs.values()]
        majority, minority = ([float(row.group_risk[g]) for row in rows] for g in (0, 1))
        lines.append(
            f"| {name} | {_span([float(row.group_risk.max()) for row in rows])} "
            f"| ({_span(majority)}, {_span(minority)}) | {_span([row.risk for row in rows])} "
            f"| {_span([row.max_ks for row in rows])} | {_span([row.max_atom_gap for row in rows])} "
            f"| {_span([row.cost_scale for row in rows], 2)} | {np.median([row.us_per_sample for row in rows]):.1f} |")
    return "\n".join(lines)


def main(seeds: list[int]) -> None:
    runs = {}
    for seed in seeds:
        runs[seed] = measure(seed)
        for name, row in runs[seed].items():
            print(f"seed {seed} | {name}: group risks {np.round(row.group_risk, 3).tolist()}, mean risk "
                  f"{row.risk:.3f}, max KS {row.max_ks:.3f}, max per-atom gap {row.max_atom_gap:.3f}, "
                  f"q_1 / p_1 {row.cost_scale:.2f}, {row.us_per_sample:.2f} µs / sample", flush=True)
    print()
    print(f"seeds {seeds}:")
    print(table(runs))


def _seeds(text: str) -> list[int]:
    try:
        seeds = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"seeds must be integers separated by commas, got {text!r}") from None
    if not seeds or min(seeds) < 0:
        raise argparse.ArgumentTypeError(f"seeds must be integers >= 0, got {text!r}")
    return seeds


if __name__ == "__main__":
    command = parser(__doc__)
    command.add_argument("--seeds", type=_seeds, default=[0, 1, 2], help="training seeds, e.g. 0,1,2 (default)")
    main(command.parse_args().seeds)
