"""Memory of the many-sample methods on long arrays: what they allocate beyond their inputs and outputs.

``learn_many`` (exact and in mini-batches of 1,000) and ``predict_many`` on ``n`` samples at
L = 50 (101 atoms), K = 2: the peak of the memory Python and numpy allocate during the call
(``tracemalloc``), the inputs excluded (they exist before the call).  The methods work in pieces
of ``CHUNK_ROWS`` rows and check their inputs in pieces too, so learning allocates the same
whatever ``n``; ``predict_many`` adds its output (``n`` numbers).
Baseline, measured in the same run: what building the ``n x m`` matrix of the samples' costs at
once allocates (``dual.squared_costs`` of the whole array).  The goal is at most 100 MB added by
``learn_many`` of 1,000,000 samples.

Run: ``python benchmarks/bench_memory.py`` or ``streamfair bench memory``.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
from command_line import parser  # benchmarks/command_line.py

from streamfair import FairRegressionPostProcessor, dual

GOAL_MB = 100.0
SIZES = (100_000, 1_000_000)


def peak_mb(function: Callable[[], Any]) -> float:
    """The peak of the memory traced while ``function()`` runs, in MB (what existed before is not counted)."""
    tracemalloc.start()
    try:
        function()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def peaks(n: int) -> dict[str, float]:
    """The baseline's and each call's peak, in MB, on ``n`` samples (fresh post-processors)."""
    rng = np.random.default_rng(0)
    eta, tau = np.tanh(rng.standard_normal(n)), rng.dirichlet([1.0, 1.0], n)

    def fresh() -> FairRegressionPostProcessor:
        fair = FairRegressionPostProcessor(L=50, p=[0.5, 0.5])
        fair.learn_many(eta[:10], tau[:10])  # buffers that exist whatever n is
        return fair

    atoms = fresh().atoms
    learn, batches, predict = fresh(), fresh(), fresh()
    return {"the n x m cost matrix at once (baseline)": peak_mb(lambda: dual.squared_costs(eta, atoms)),
            "learn_many (exact)": peak_mb(lambda: learn.learn_many(eta, tau)),
            "learn_many (mini-batches of 1,000)": peak_mb(lambda: batches.learn_many(eta, tau, batch_size=1000)),
            "predict_many": peak_mb(lambda: predict.predict_many(eta, tau))}


def main(sizes: tuple[int, ...] = SIZES) -> str:
    lines = ["| n | call | peak MB added | vs the n x m cost matrix | goal |", "|---:|---|---:|---:|---|"]
    for n in sizes:
        measured = peaks(n)
        base = measured["the n x m cost matrix at once (baseline)"]
        for name, mb in measured.items():
            goal = f"≤ {GOAL_MB:.0f} MB" if name.startswith("learn_many") and n == 1_000_000 else ""
            lines.append(f"| {n:,} | {name} | {mb:,.1f} | {mb / base:.3f} | {goal} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
