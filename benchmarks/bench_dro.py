"""DRO benchmark: suboptimality vs first-order oracle calls, and the per-sample cost of the online updaters.

Part 1: synthetic hinge-loss classification (d = 20, G = 1, box radius 1 for group
DRO with 5 imbalanced groups and 10% label flips; radius 3 without flips for CVaR at alpha = 0.1,
the chi-square ball rho = 1 and the KL ball rho = 0.5), reference optimum by LP (HiGHS) or certified
cutting planes.  For each solver and N, the median over seeds of the number of loss + gradient
evaluations until the output is within eps of the optimum (objective evaluated outside the count),
the median and IQR of the suboptimality at the budget, and the share of the calls spent on full
passes over the N losses.  Solvers: the subgradient method, primal-dual stochastic mirror descent
(group DRO), dual SGD (CVaR) and the ball-oracle accelerated method (practical profile, eps = 0.02).

Part 2: per-sample cost of the online DRO updaters against the DP post-processor's per-sample
update measured in the same run (ratio).

Run: ``python benchmarks/bench_dro.py`` (reduced protocol: N = 1e3, 3 seeds, 1.5e5 evaluations,
< 60 s) or ``python benchmarks/bench_dro.py --full`` (N in {1e3, 1e4, 1e5}, 10 / 10 / 5 seeds, budgets
1e6 / 2e6 / 5e6 evaluations; more than an hour on two cores;
writes one log-log plot per problem to ``docs/img/dro_suboptimality_<kind>.png``).
``--kinds=group,cvar`` and ``--sizes=1e3,1e4`` pick problems and sizes; ``--full`` keeps each seed's
curves in ``benchmarks/.cache/dro`` and reuses them, so runs resume and add up; ``--full --cached``
only tabulates and plots what the cache holds.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sparse
from command_line import parser  # benchmarks/command_line.py
from scipy.optimize import linprog
from timing import best_seconds

from streamfair import FairRegressionPostProcessor
from streamfair.dro.online_divergence import ChiSquareTracker, CVaRTracker, KLTracker
from streamfair.dro.online_group import ExponentiatedGroupWeights, SoftmaxGroupWeights
from streamfair.dro.problem import (
    ChiSquareSet,
    CVaRSet,
    GroupSet,
    KLSet,
    LinearDROProblem,
    imbalanced_groups,
    make_synthetic,
)
from streamfair.dro.solvers import solve

TARGETS = (3e-2, 1e-2, 3e-3)
ACCELERATED_EPSILON = 0.02
#: evaluations per run and seeds in the full protocol (only 5 seeds at N = 1e5, where a run costs the most)
FULL_BUDGETS = {1_000: 1_000_000, 10_000: 2_000_000, 100_000: 5_000_000}
FULL_SEEDS = {1_000: range(10), 10_000: range(10), 100_000: range(5)}


def lp_optimum(problem: LinearDROProblem) -> float:
    """The exact optimum of a hinge-loss CVaR or group-DRO problem on the box, by linear programming.

    Variables ``x`` (box), ``t_i >= max(0, 1 - b_i a_i.x)``; CVaR adds ``eta`` and
    ``s_i >= t_i - eta`` with objective ``eta + sum s / (alpha N)`` (Rockafellar-Uryasev); group DRO
    adds ``u >= mean_{i in g} t_i`` with objective ``u``.
    """
    n, d = problem.n, problem.dim
    robust = problem.robust
    identity = sparse.identity(n, format="csr")
    hinge = sparse.hstack([-sparse.csr_matrix(problem.signed), -identity])  # -b a.x - t <= -1
    if isinstance(robust, CVaRSet):
        rows = [
            sparse.hstack([hinge, sparse.csr_matrix((n, 1 + n))]),
            sparse.hstack([sparse.csr_matrix((n, d)), identity, -np.ones((n, 1)), -identity]),
        ]
        cost = np.concatenate([np.zeros(d + n), [1.0], np.full(n, 1.0 / (robust.alpha * n))])
        bounds = [(-problem.radius, problem.radius)] * d + [(0, None)] * n + [(None, None)] + [(0, None)] * n
        rhs = np.concatenate([-np.ones(n), np.zeros(n)])
    elif isinstance(robust, GroupSet):
        m = robust.n_groups
        means = sparse.csr_matrix((1.0 / robust.sizes[robust.groups], (robust.groups, np.arange(n))), shape=(m, n))
        rows = [
            sparse.hstack([hinge, sparse.csr_matrix((n, 1))]),
            sparse.hstack([sparse.csr_matrix((m, d)), means, -np.ones((m, 1))]),
        ]
        cost = np.concatenate([np.zeros(d + n), [1.0]])
        bounds = [(-problem.radius, problem.radius)] * d + [(0, None)] * n + [(None, None)]
        rhs = np.concatenate([-np.ones(n), np.zeros(m)])
    else:
        raise ValueError(f"no LP for {type(robust).__name__}")
    result = linprog(cost, A_ub=sparse.vstack(rows).tocsr(), b_ub=rhs, bounds=bounds, method="highs-ipm")
    if result.status != 0:
        raise RuntimeError(f"LP failed: {result.message}")
    return float(result.fun)


def cutting_plane_optimum(problem: LinearDROProblem, tolerance: float = 1e-6, max_cuts: int = 2000) -> float:
    """The optimum of any convex DRO problem on the box by Kelley's cutting-plane method, certified.

    ``F(x) = problem.objective(x)`` is convex with subgradient ``sum_i q*_i grad l_i(x)`` (Danskin),
    so every cut ``F(x_k) + g_k.(x - x_k)`` lies below ``F``: the LP ``min u`` over the cuts on the box
    is a lower bound, the best ``F(x_k)`` an upper bound.  Stops when they are ``tolerance`` apart
    and returns their midpoint.  ``d + 1`` LP variables whatever ``N``.
    """
    d, box = problem.dim, problem.radius
    all_rows = slice(None)
    x = np.zeros(d)
    cuts, offsets = [], []
    upper, lower = np.inf, -np.inf
    for _ in range(max_cuts):
        q, value = problem.robust.worst_case(problem.losses_at(all_rows, x))
        upper = min(upper, value)
        g = problem.gradient_sum(all_rows, x, q)
        cuts.append(np.append(g, -1.0))  # g.x - u <= g.x_k - F(x_k)
        offsets.append(g @ x - value)
        result = linprog(np.append(np.zeros(d), 1.0), A_ub=np.array(cuts), b_ub=np.array(offsets),
                         bounds=[(-box, box)] * d + [(None, None)], method="highs")
        if result.status != 0:
            raise RuntimeError(f"cutting-plane LP failed: {result.message}")
        x, lower = result.x[:d], float(result.fun)
        if upper - lower <= tolerance:
            return 0.5 * (upper + lower)
    raise RuntimeError(f"no {tolerance:g}-certificate after {max_cuts} cuts (gap {upper - lower:.2e})")


def reference_optimum(problem: LinearDROProblem) -> float:
    """The reference optimum: the LP for hinge-loss group DRO and CVaR up to ``N = 2e4``, certified
    cutting planes otherwise (they agree to 4e-7 on the benchmark problems; the LP at ``N = 1e5`` takes minutes)."""
    if problem.loss == "hinge" and isinstance(problem.robust, (CVaRSet, GroupSet)) and problem.n <= 20_000:
        return lp_optimum(problem)
    return cutting_plane_optimum(problem)


def benchmark_problem(kind: str, n: int, seed: int) -> LinearDROProblem:
    """The synthetic problems of the benchmark (and of the solver tests, at other sizes)."""
    if kind == "group":
        return make_synthetic(n, 20, imbalanced_groups(n, 5), seed=seed, flip=0.1, radius=1.0)
    robust = {"cvar": CVaRSet(0.1), "chi_square": ChiSquareSet(1.0), "kl": KLSet(0.5)}[kind]
    return make_synthetic(n, 20, robust, seed=seed, flip=0.0, radius=3.0)


def run_seed(kind: str, n: int, seed: int, budget: int, methods) -> dict:
    """``{method: (calls array, gaps array, share of calls in full passes)}`` on one problem instance."""
    problem = benchmark_problem(kind, n, seed)
    optimum = reference_optimum(problem)
    runs = {}
    for method in methods:
        options = {"epsilon": ACCELERATED_EPSILON} if method.startswith("accelerated") else {}
        result = solve(problem, method, budget, seed=seed, **options)
        gaps = np.array([problem.objective(x) - optimum for _, x in result.snapshots])
        calls = np.array([c for c, _ in result.snapshots], dtype=float)
        runs[method] = (calls, gaps, result.full_passes * n / result.calls)
    return runs


def run_solvers(sizes, seeds, budgets, methods_by_kind, cache: Path | None = None, compute: bool = True):
    """``{(kind, n, method): [(calls, gaps, full-pass share) per seed]}``.

    ``seeds[n]`` are the seeds and ``budgets[n]`` the evaluations per run at size ``n``.  With a
    ``cache`` folder, each run is stored there (one file per seed and solver) and reused, so
    an interrupted run resumes and separate runs (say, one per size) add up; ``compute=False`` only
    reads what the cache holds.
    """
    curves: dict[tuple[str, int, str], list] = {}
    for kind, methods in methods_by_kind.items():
        for n in sizes:
            for seed in seeds[n]:
                started = time.time()
                paths = {m: cache / f"{kind}-{n}-{budgets[n]}-{seed}-{m}.npz" for m in methods} if cache else {}
                cached = [m for m in methods if m in paths and paths[m].exists()]
                missing = [m for m in methods if m not in cached]
                runs = {}
                for method in cached:
                    stored = np.load(paths[method])
                    runs[method] = (stored["calls"], stored["gaps"], float(stored["share"]))
                if missing and compute:
                    runs.update(run_seed(kind, n, seed, budgets[n], missing))
                    for method in missing:
                        if method in paths:
                            paths[method].parent.mkdir(parents=True, exist_ok=True)
                            np.savez(paths[method], **dict(zip(("calls", "gaps", "share"), runs[method], strict=True)))
                    print(f"[bench_dro] {kind} N={n} seed={seed} {missing}: {time.time() - started:.0f} s",
                          file=sys.stderr, flush=True)
                for method, run in sorted(runs.items(), key=lambda item: methods.index(item[0])):
                    curves.setdefault((kind, n, method), []).append(run)
    return curves


def suboptimality_table(curves) -> str:
    lines = [
        "| problem | N | solver | seeds | " + " | ".join(f"calls to {t:g}" for t in TARGETS)
        + " | gap at budget (median [IQR]) | calls in full passes |",
        "|---|---|---|---|" + "---|" * len(TARGETS) + "---|---|",
    ]
    for (kind, n, method), runs in curves.items():
        hits = []
        for target in TARGETS:
            firsts = [
                next((c for c, g in zip(calls, gaps, strict=True) if g <= target), np.inf) for calls, gaps, _ in runs
            ]
            median = float(np.median(firsts))
            hits.append("not reached" if not np.isfinite(median) else f"{median:.3g}")
        low, final, high = np.percentile([gaps[-1] for _, gaps, _ in runs], [25, 50, 75])
        share = float(np.median([share for _, _, share in runs]))
        lines.append(
            f"| {kind} | {n:g} | {method} | {len(runs)} | "
            + " | ".join(hits)
            + f" | {final:.2e} [{low:.1e}, {high:.1e}] | {share:.0%} |"
        )
    return "\n".join(lines)


def plot(curves, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kinds = sorted({k for k, _, _ in curves})
    sizes = sorted({n for _, n, _ in curves})
    fig, axes = plt.subplots(len(kinds), len(sizes), figsize=(4 * len(sizes), 3.2 * len(kinds)), squeeze=False)
    for row, kind in enumerate(kinds):
        for col, n in enumerate(sizes):
            ax = axes[row][col]
            for (k, size, method), runs in curves.items():
                if k != kind or size != n:
                    continue
                grid = np.geomspace(max(1.0, min(c[0] for c, _, _ in runs)), max(c[-1] for c, _, _ in runs), 60)
                values = np.array([np.interp(np.log(grid), np.log(c), g, left=np.nan, right=g[-1]) for c, g, _ in runs])
                ax.loglog(grid, np.maximum(np.nanmedian(values, axis=0), 1e-6), label=method)
            ax.set_title(f"{kind} DRO, N = {n:g}")
            ax.set_xlabel("loss + gradient evaluations")
            ax.set_ylabel("suboptimality (median)")
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _process_time_per_item(function, n: int) -> float:
    """CPU microseconds per item of ``function()`` over ``n`` items (best of three)."""
    return best_seconds(function, clock=time.process_time) / n * 1e6


def online_cost_table(n: int = 20_000, n_groups: int = 2) -> str:
    """Microseconds per sample of each updater vs the post-processor's per-sample update."""
    rng = np.random.default_rng(0)
    tau = rng.dirichlet(np.ones(n_groups), n)
    eta = np.tanh(rng.standard_normal(n))
    losses = rng.exponential(size=n)
    p = np.full(n_groups, 1.0 / n_groups)

    def post_processor():
        FairRegressionPostProcessor(L=25, p=p, horizon=n, profile="paper").learn_many(eta, tau)

    base = _process_time_per_item(post_processor, n)
    rows = [
        "| updater | mode | us / sample | ratio to post-processor update |",
        "|---|---|---|---|",
        f"| DP post-processor (L = 25, K = {n_groups}), learn_many | baseline | {base:.2f} | 1 |",
    ]
    cases = [
        (
            "SoftmaxGroupWeights",
            "update_many (vectorized)",
            lambda: SoftmaxGroupWeights(n_groups, 0.1).update_many(losses, tau),
        ),
        (
            "ExponentiatedGroupWeights",
            "update_many (vectorized)",
            lambda: ExponentiatedGroupWeights(n_groups, 0.01).update_many(losses, tau),
        ),
        ("CVaRTracker", "update_many (scalar loop)", lambda: CVaRTracker(0.1).update_many(losses)),
        (
            "ChiSquareTracker (rho = 1)",
            "update_many (scalar loop)",
            lambda: ChiSquareTracker(rho=1.0).update_many(losses),
        ),
        ("KLTracker", "update_many (scalar loop)", lambda: KLTracker(1.0).update_many(losses)),
    ]
    for name, mode, function in cases:
        cost = _process_time_per_item(function, n)
        rows.append(f"| {name} | {mode} | {cost:.3f} | {cost / base:.3f} |")
    single = SoftmaxGroupWeights(n_groups, 0.1)
    sample = min(n, 2000)
    cost = _process_time_per_item(lambda: [single.update(losses[i], tau[i]) for i in range(sample)], sample)
    rows.append(f"| SoftmaxGroupWeights | update (one call per sample) | {cost:.3f} | {cost / base:.3f} |")
    return "\n".join(rows)


METHODS = {
    "group": ("subgradient", "primal_dual", "accelerated", "accelerated_continuation"),
    "cvar": ("subgradient", "dual_sgd", "accelerated", "accelerated_continuation"),
    "chi_square": ("subgradient", "accelerated", "accelerated_continuation"),
    "kl": ("subgradient", "accelerated", "accelerated_continuation"),
}


#: where ``--full`` keeps each seed's curves (resumable; not committed)
CACHE = Path(__file__).resolve().parent / ".cache" / "dro"


def main(
    full: bool = False,
    kinds: tuple[str, ...] = tuple(METHODS),
    sizes: tuple[int, ...] | None = None,
    compute: bool = True,
) -> str:
    if full:
        sizes, seeds, budgets, cache = sizes or tuple(FULL_BUDGETS), FULL_SEEDS, FULL_BUDGETS, CACHE
    else:
        sizes, seeds, budgets, cache = (1_000,), {1_000: range(3)}, {1_000: 150_000}, None
    start = time.time()
    curves = run_solvers(sizes, seeds, budgets, {kind: METHODS[kind] for kind in kinds}, cache, compute)
    parts = [
        f"Suboptimality vs oracle calls (budgets {budgets}; {'full' if full else 'reduced'} protocol, "
        f"{time.time() - start:.0f} s)",
        suboptimality_table(curves),
        "",
        "Per-sample cost of the online updaters",
        online_cost_table(),
    ]
    if full:
        for kind in {key[0] for key in curves}:
            plot(
                {key: runs for key, runs in curves.items() if key[0] == kind}, f"docs/img/dro_suboptimality_{kind}.png"
            )
    return "\n".join(parts)


def _names(text: str) -> list[str]:
    """A comma-separated list of problem names, each one of ``METHODS``."""
    names = text.split(",")
    unknown = sorted(set(names) - set(METHODS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown problem(s) {unknown}; choose from {sorted(METHODS)}")
    return names


def _sizes(text: str) -> list[int]:
    """A comma-separated list of sizes ``N``, each one of ``FULL_BUDGETS`` (``1e3`` is read as 1000)."""
    try:
        sizes = [int(float(size)) for size in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"sizes must be numbers, got {text!r}") from None
    unknown = sorted(set(sizes) - set(FULL_BUDGETS))
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown size(s) {unknown}; choose from {sorted(FULL_BUDGETS)}")
    return sizes


if __name__ == "__main__":
    command = parser(__doc__)
    command.add_argument("--full", action="store_true", help="the full protocol (sizes, seeds and budgets above)")
    command.add_argument("--kinds", type=_names, default=list(METHODS), help="problems, e.g. group,cvar")
    command.add_argument("--sizes", type=_sizes, default=list(FULL_BUDGETS), help="sizes N with --full, e.g. 1e3,1e4")
    command.add_argument("--cached", action="store_true", help="with --full: tabulate and plot the cache only")
    args = command.parse_args()
    print(main(full=args.full, kinds=tuple(args.kinds), sizes=tuple(args.sizes), compute=not args.cached))
