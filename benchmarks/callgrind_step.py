"""Instruction counts of the per-sample paths, for ``valgrind --tool=callgrind`` (stable on a shared machine).

Runs ``n`` samples through one path after a warm-up; the difference of the totals of two runs
with different ``n`` divided by the difference of ``n`` is the count per sample (the start-up
cost cancels).  See docs/performance.md for the command.

Run: ``python benchmarks/callgrind_step.py PROFILE PATH N`` with ``PATH`` one of ``learn_one``,
``learn_many``, ``batch`` (``learn_many`` in mini-batches of 500), ``fused``
(``predict_learn_one`` with a key), ``polls`` (``predict_learn_many`` in polls of 500, the
daemon's path), ``task`` (the daemon's partition task on recorded score messages in polls of 500:
parse, predict, learn, encode; ``PROFILE`` must be ``anytime``).
"""

from __future__ import annotations

import numpy as np
from bench_task import recorded  # benchmarks/bench_task.py
from command_line import parser  # benchmarks/command_line.py

from connectors.kafka.codec import InputParser
from connectors.kafka.task import PartitionTask
from streamfair import FairRegressionPostProcessor
from streamfair.profiles import PROFILES

#: The per-sample paths (see the module docstring).
PATHS = ("learn_one", "learn_many", "batch", "fused", "polls", "task")


def main(profile: str, path: str, n: int) -> None:
    rng = np.random.default_rng(0)
    total = n + 100
    eta = np.tanh(rng.standard_normal(total))
    tau = rng.dirichlet([1.0, 1.0], total)
    fair = FairRegressionPostProcessor(L=50, p=[0.5, 0.5], profile=profile)
    eta_list, tau_list = eta.tolist(), tau.tolist()
    for i in range(100):  # warm-up: compiled functions loaded, buffers allocated
        fair.predict_learn_one(eta_list[i], tau_list[i], key=i)
    fair.learn_many(eta[:100], tau[:100])
    if path == "learn_one":
        for i in range(100, total):
            fair.learn_one(eta_list[i], tau_list[i])
    elif path == "learn_many":
        fair.learn_many(eta[100:], tau[100:])
    elif path == "batch":
        fair.learn_many(eta[100:], tau[100:], batch_size=500)
    elif path == "fused":
        for i in range(100, total):
            fair.predict_learn_one(eta_list[i], tau_list[i], key=i)
    elif path == "task":
        task = PartitionTask("in", 0, FairRegressionPostProcessor(B=1, p=[0.7, 0.3]), parser=InputParser(2, 10_000))
        records = recorded(total)
        task.process(records[:100])
        for start in range(100, total, 500):
            task.process(records[start : start + 500])
    elif path == "polls":
        for start in range(100, total, 500):
            rows = slice(start, min(total, start + 500))
            fair.predict_learn_many(eta_list[rows], tau_list[rows], keys=list(range(rows.start, rows.stop)))
    else:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")


if __name__ == "__main__":
    command = parser(__doc__)
    command.add_argument("profile", choices=PROFILES, help="the post-processor's profile")
    command.add_argument("path", choices=PATHS, help="the per-sample path to run")
    command.add_argument("n", type=int, help="samples after the warm-up")
    args = command.parse_args()
    main(args.profile, args.path, args.n)
