"""``streamfair experiment``: the paper's pipeline (§6, App. G) with tables and PNG plots.

For each dataset and repetition ``r`` (seeded):

1. split the rows into train / unlabeled / test = 0.4 / 0.4 / 0.2, stratified by the sensitive
   attribute (as the paper's code does);
2. min-max scale the target to ``[-1, 1]`` with the *train* minimum and maximum (``B = 1``) and
   standardize the features with the train mean and deviation;
3. on train, fit least squares (``eta``) and multinomial logistic regression (``tau``, the group
   posterior; ridge 1 as scikit-learn's default ``C = 1``), see :mod:`streamfair.linear_models`;
   the group marginals ``p`` are the train frequencies of S;
4. post-process: a :class:`~streamfair.FairRegressionPostProcessor` learns from ``eta, tau`` of
   the unlabeled split only (no labels, no S), in ``passes`` passes (the first in the split's
   random order, later ones reshuffled; every method and ``eps`` sees the same order);
   ``L = floor(sqrt(N))`` and ``beta = sqrt(N) log2(sqrt(N))`` for a pool of ``N`` unlabeled
   points (the authors' code: ``L = 28, beta = 136.4`` for ``N = 800``; App. G writes
   ``L = sqrt(N)`` and ``beta = sqrt(N) log sqrt(N)``, see :func:`streamfair.profiles.default_beta`),
   the horizon is ``T = N * passes`` and ``mu`` is the theory's ``2 sigma^2 / beta`` (the core
   default);
5. evaluate on test in the dataset's own target units (atoms and ``eta`` mapped back through the
   inverse scaling): the randomized predictor from :meth:`proba_many` with
   :func:`~streamfair.evaluate` (expectations over the randomization, as the paper does), the
   base model with :func:`~streamfair.evaluate_deterministic` on its continuous output (exact KS),
   and the base model rounded to the nearest grid atom (so that its per-atom unfairness is
   comparable).

This is repeated over ``eps = 2^-i`` for the exponents ``i`` (default ``0 2 4 5 6 7 8 10 12 16``:
with ``2L + 1 = 57`` atoms the per-atom constraint is inactive above about ``2^-4`` and
saturates below about ``2^-10``), for the paper's main optimizer (SGD3 + AC-SA^2) and the other
four of its Figure 3 (SGD, AC-SA, AC-SA^2, SGD3 + AC-SA).  The convergence curves follow the main
optimizer at ``eps = 2^-8`` (the paper's Figure 1), evaluated on test ``eval_points`` times; they
show the running output (``serve="live"``), whereas the sweep evaluates the output of epoch 0
(``serve="epoch"``).  SGD3 gives each of its ``J`` stages ``floor(T / J)`` samples, so that
output has learned from the first ``J floor(T / J)`` samples: 798 of 800 with ``J = 14`` (784 of
794 for crime's pool in one pass); the last ``T mod J`` start the next epoch, which is not served.

Outputs in ``--output`` (default ``runs/experiment/``): ``results.md`` (the tables),
``results.json`` (every number), ``tradeoff.png``, ``convergence.png``, ``optimizers.png``.

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_arguments(parser)
>>> config = config_from_args(parser.parse_args(["--quick", "--repetitions", "3"]))
>>> config.datasets, config.repetitions, config.passes
(('synthetic',), 3, 3)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from connectors.cli.arguments import integer_at_least
from connectors.experiments import datasets
from streamfair import FairRegressionPostProcessor, evaluate, evaluate_deterministic
from streamfair.dual import regression_grid
from streamfair.evaluation import FairnessReport, to_grid
from streamfair.linear_models import fit_least_squares, fit_logistic
from streamfair.profiles import default_beta, default_grid_size

#: Optimizer variants of the paper's Figure 3: name -> (optimizer, inner solver of sgd3, or None).
METHODS = {
    "sgd": ("sgd", None),
    "acsa": ("acsa", None),
    "acsa2": ("acsa2", None),
    "sgd3+acsa": ("sgd3", "acsa"),
    "sgd3+acsa2": ("sgd3", "acsa2"),
}
#: The paper's DP-postproc (§6: SGD3 with the restarted AC-SA^2 of Foster et al.).
MAIN_METHOD = "sgd3+acsa2"
SPLIT = (0.4, 0.4, 0.2)


@dataclass(frozen=True)
class Config:
    """What :func:`run_experiment` runs (the CLI's options).

    The defaults are the paper's sweep; :data:`QUICK` is a small one:

    >>> Config().datasets, Config().exponents
    (('synthetic', 'crime', 'law', 'adult'), (0, 2, 4, 5, 6, 7, 8, 10, 12, 16))
    >>> QUICK.datasets, QUICK.repetitions, QUICK.methods
    (('synthetic',), 2, ('sgd', 'sgd3+acsa2'))
    """

    datasets: tuple[str, ...] = ("synthetic", "crime", "law", "adult")
    repetitions: int = 10
    exponents: tuple[int, ...] = (0, 2, 4, 5, 6, 7, 8, 10, 12, 16)
    passes: int = 1
    methods: tuple[str, ...] = tuple(METHODS)
    convergence_exponent: int = 8
    eval_points: int = 40
    seed: int = 0


#: ``--quick``: the synthetic dataset only, small enough for a test (a few seconds).
QUICK = Config(
    datasets=("synthetic",), repetitions=2, exponents=(0, 6, 10), passes=3, methods=("sgd", MAIN_METHOD), eval_points=8
)


@dataclass
class Prepared:
    """One repetition's split, base models and their outputs (``eta`` in scaled units).

    Made by :func:`prepare`; ``low`` and ``high`` are the train target's range, which the scaled
    units ``[-1, 1]`` map back to:

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> prep.to_target_units([-1.0, 1.0]).tolist() == [prep.low, prep.high]
    True
    >>> eta, tau = prep.score(np.zeros((2, 3)))          # the base models on new raw features
    >>> eta.shape, tau.shape
    ((2,), (2, 4))
    """

    eta_pool: np.ndarray
    tau_pool: np.ndarray
    eta_test: np.ndarray
    tau_test: np.ndarray
    y_test: np.ndarray
    s_test: np.ndarray
    y_pool: np.ndarray  # the pool's labels and groups: never given to a post-processor, for measurements only
    s_pool: np.ndarray
    p: np.ndarray
    low: float
    high: float
    base_seconds: float
    score: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]  # (eta, tau) of raw features, as the pool's

    def to_target_units(self, scaled: np.ndarray) -> np.ndarray:
        """Invert the ``[-1, 1]`` min-max scaling."""
        return self.low + (np.asarray(scaled) + 1.0) * (self.high - self.low) / 2.0


def stratified_split(s: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Train / unlabeled / test indices in proportions :data:`SPLIT`, stratified by ``s``.

    >>> parts = stratified_split(np.array([0] * 10 + [1] * 5), np.random.default_rng(0))
    >>> [len(part) for part in parts], sorted(np.concatenate(parts).tolist()) == list(range(15))
    ([6, 6, 3], True)
    """
    parts: tuple[list, list, list] = ([], [], [])
    bounds = np.cumsum(SPLIT)[:2]
    for group in np.unique(s):
        members = rng.permutation(np.flatnonzero(s == group))
        cut = np.rint(bounds * members.size).astype(int)
        for part, chunk in zip(parts, np.split(members, cut), strict=True):
            part.extend(chunk.tolist())
    train, unlabeled, test = (rng.permutation(np.array(part, dtype=np.int64)) for part in parts)
    return train, unlabeled, test


def prepare(data: datasets.Dataset, rng: np.random.Generator) -> Prepared:
    """Steps 1-3 of the pipeline (see the module docstring).

    The unlabeled pool and the test split get the base models' ``eta`` (scaled) and ``tau``:

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> prep.eta_pool.shape, prep.tau_pool.shape, prep.eta_test.shape, prep.y_test.shape, prep.s_pool.shape
    ((199,), (199, 4), (101,), (101,), (199,))
    >>> prep.p.round(3).tolist()                          # the train frequencies of S
    [0.265, 0.295, 0.25, 0.19]
    """
    start = time.perf_counter()
    train, pool, test = stratified_split(data.s, rng)
    mean, scale = data.X[train].mean(axis=0), data.X[train].std(axis=0)
    scale[scale == 0] = 1.0
    X = (data.X - mean) / scale
    low, high = float(data.y[train].min()), float(data.y[train].max())
    y_scaled = 2.0 * (data.y - low) / (high - low) - 1.0
    regressor = fit_least_squares(X[train], y_scaled[train])
    classifier = fit_logistic(X[train], data.s[train], n_classes=data.n_groups)
    eta, tau = regressor.predict(X), classifier.predict_proba(X)
    p = np.bincount(data.s[train], minlength=data.n_groups) / train.size

    def score(features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        standardized = (features - mean) / scale
        return regressor.predict(standardized), classifier.predict_proba(standardized)

    return Prepared(
        eta[pool], tau[pool], eta[test], tau[test], data.y[test], data.s[test], data.y[pool], data.s[pool], p,
        low, high, time.perf_counter() - start, score,
    )


def _report_dict(report: FairnessReport) -> dict:
    return {"risk": report.risk, "ks": report.ks_unfairness.tolist(), "atom": report.atom_unfairness.tolist()}


def make_postprocessor(
    prep: Prepared, horizon: int, method: str, exponent: int, seed: int, serve: str = "epoch"
) -> FairRegressionPostProcessor:
    """The post-processor of step 4: ``L, beta`` from the pool size, ``eps = 2^-exponent``.

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> model = make_postprocessor(prep, horizon=199, method=MAIN_METHOD, exponent=6, seed=0)
    >>> model.L, model.atoms.size, model.eps.tolist()         # L = floor(sqrt(199))
    (14, 29, [0.015625, 0.015625, 0.015625, 0.015625])
    """
    optimizer, inner = METHODS[method]
    pool_size = prep.eta_pool.size
    return FairRegressionPostProcessor(
        B=1.0,
        profile="paper",
        L=default_grid_size(pool_size),
        eps=2.0**-exponent,
        beta=default_beta(pool_size),
        p=prep.p.tolist(),
        horizon=horizon,
        optimizer=optimizer,
        inner=inner,
        seed=seed,
        serve=serve,
    )


def post_process(
    prep: Prepared, order: np.ndarray, method: str, exponent: int, seed: int, checkpoints: np.ndarray | None = None
) -> tuple[FairRegressionPostProcessor, float, list[dict]]:
    """Step 4: learn from the pool in ``order``; optionally evaluate on test at ``checkpoints``.

    Returns the post-processor, the learning time in seconds (evaluations excluded) and, with
    checkpoints, one test report per checkpoint (number of samples learned so far).  With
    checkpoints the model serves its running output (``serve="live"``, as the paper's convergence
    plots do); otherwise the output of the completed epoch 0 (with SGD3, of its first
    ``J floor(T / J)`` samples).

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> order = np.arange(prep.eta_pool.size)
    >>> model, seconds, trace = post_process(prep, order, MAIN_METHOD, exponent=6, seed=0)
    >>> model.diagnostics().n_samples, trace
    (199, [])
    >>> _, _, trace = post_process(prep, order, MAIN_METHOD, 6, seed=0, checkpoints=np.array([100, 199]))
    >>> [point["samples"] for point in trace], sorted(trace[0])
    ([100, 199], ['atom', 'ks', 'risk', 'samples'])
    """
    model = make_postprocessor(prep, order.size, method, exponent, seed, "epoch" if checkpoints is None else "live")
    eta, tau = prep.eta_pool[order], prep.tau_pool[order]
    if checkpoints is None:
        start = time.perf_counter()
        model.learn_many(eta, tau)
        return model, time.perf_counter() - start, []
    trace, seconds, done = [], 0.0, 0
    for stop in checkpoints:
        start = time.perf_counter()
        model.learn_many(eta[done:stop], tau[done:stop])
        seconds += time.perf_counter() - start
        done = int(stop)
        trace.append({"samples": done, **_report_dict(evaluate_on_test(model, prep))})
    return model, seconds, trace


def evaluate_on_test(model: FairRegressionPostProcessor, prep: Prepared) -> FairnessReport:
    """Step 5 for the randomized predictor, in target units.

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> model, _, _ = post_process(prep, np.arange(prep.eta_pool.size), MAIN_METHOD, exponent=6, seed=0)
    >>> report = evaluate_on_test(model, prep)
    >>> report.ks_unfairness.shape                        # one KS distance per group
    (4,)
    >>> bool(report.max_ks < base_reports(prep)[0].max_ks)
    True
    """
    proba = model.proba_many(prep.eta_test, prep.tau_test)
    return evaluate(proba, prep.to_target_units(model.atoms), prep.y_test, prep.s_test, n_groups=prep.p.size)


def base_reports(prep: Prepared) -> tuple[FairnessReport, FairnessReport]:
    """Step 5 for the base model: its continuous output, and its output rounded to the grid.

    >>> prep = prepare(datasets.load_synthetic(n_samples=500), np.random.default_rng(0))
    >>> base, grid = base_reports(prep)
    >>> round(base.risk, 3), round(grid.risk, 3)           # rounding to the grid costs a little
    (1.26, 1.284)
    """
    base = evaluate_deterministic(prep.to_target_units(prep.eta_test), prep.y_test, prep.s_test, prep.p.size)
    atoms = regression_grid(1.0, default_grid_size(prep.eta_pool.size))
    rounded = to_grid(np.clip(prep.eta_test, -1.0, 1.0), atoms)
    grid = evaluate(rounded, prep.to_target_units(atoms), prep.y_test, prep.s_test, n_groups=prep.p.size)
    return base, grid


def _settings(data: datasets.Dataset, prep: Prepared, model: FairRegressionPostProcessor) -> dict:
    """Sizes and hyper-parameters of one dataset's runs (repetition 0)."""
    schedule = model.schedule
    return {
        "n": int(data.X.shape[0]), "d": int(data.X.shape[1]), "K": data.n_groups, "p": prep.p.round(3).tolist(),
        "pool": int(prep.eta_pool.size), "horizon": schedule.horizon, "L": model.L, "beta": model.beta,
        "M": schedule.smoothness, "mu": schedule.mu, "J": schedule.stages,
    }


def run_experiment(config: Config, log=print) -> dict:
    """Run the whole sweep; return ``{"config", "settings", "records", "traces", "seconds"}``.

    The result is JSON-ready.  ``settings[dataset]`` has the sizes and hyper-parameters (of
    SGD3 + AC-SA^2 for ``M, mu, J``).

    A record is one ``(dataset, method, exponent, rep)`` with its test ``risk``, per-group
    ``ks`` and ``atom`` unfairness and ``seconds`` (learning time).  The base model has method
    ``"base"`` (continuous output) and ``"base-grid"`` (rounded to the nearest atom), exponent
    ``None``.  ``traces[dataset]`` lists, per repetition, the convergence reports.

    >>> config = Config(datasets=("synthetic",), repetitions=1, exponents=(0, 8), methods=(MAIN_METHOD,),
    ...                 eval_points=2)
    >>> results = run_experiment(config, log=lambda message: None)
    >>> sorted(results)
    ['config', 'records', 'seconds', 'settings', 'traces']
    >>> [(record["method"], record["exponent"]) for record in results["records"]]
    [('base', None), ('base-grid', None), ('sgd3+acsa2', 0), ('sgd3+acsa2', 8)]
    >>> results["settings"]["synthetic"]["L"], results["settings"]["synthetic"]["pool"]
    (28, 800)
    """
    start = time.perf_counter()
    methods = [MAIN_METHOD] + [m for m in config.methods if m != MAIN_METHOD]
    records, settings = [], {}
    traces: dict[str, list] = {}
    for name in config.datasets:
        data = datasets.load(name)
        traces[name] = []
        for rep in range(config.repetitions):
            rng = np.random.default_rng([config.seed, rep])
            prep = prepare(data, rng)
            order = np.concatenate([np.arange(prep.eta_pool.size)] + [rng.permutation(prep.eta_pool.size)
                                                                      for _ in range(config.passes - 1)])
            if rep == 0:
                settings[name] = _settings(data, prep, make_postprocessor(prep, order.size, MAIN_METHOD, 0, 0))
            row = {"dataset": name, "rep": rep, "exponent": None}
            base, grid = base_reports(prep)
            records.append({**row, "method": "base", "seconds": prep.base_seconds, **_report_dict(base)})
            records.append({**row, "method": "base-grid", "seconds": 0.0, **_report_dict(grid)})
            for method in methods:
                for exponent in config.exponents:
                    model, seconds, _ = post_process(prep, order, method, exponent, seed=rep)
                    report = _report_dict(evaluate_on_test(model, prep))
                    records.append({**row, "method": method, "exponent": exponent, "seconds": seconds, **report})
            checkpoints = np.unique(np.rint(np.linspace(0, order.size, config.eval_points + 1)).astype(int))
            _, _, trace = post_process(prep, order, MAIN_METHOD, config.convergence_exponent, rep, checkpoints)
            traces[name].append(trace)
        log(f"{name}: {config.repetitions} repetitions done ({time.perf_counter() - start:.1f} s elapsed)")
    return {
        "config": dataclasses.asdict(config),
        "settings": settings,
        "records": records,
        "traces": traces,
        "seconds": time.perf_counter() - start,
    }


# ---------------------------------------------------------------------------- summaries
def _group_key(record: dict) -> tuple:
    return record["dataset"], record["method"], record["exponent"]


def summarize(records: list[dict]) -> dict[tuple, dict[str, tuple[float, float]]]:
    """Mean and standard deviation over repetitions of each ``(dataset, method, exponent)``.

    The statistics are ``risk``, ``ks0`` (group 0's KS distance), ``ks_max`` (the worst
    group's), ``atom_max`` (the worst group's per-atom gap) and ``seconds``.

    >>> rows = [{"dataset": "d", "method": "m", "exponent": 1, "risk": r, "ks": [0.1, 0.3],
    ...          "atom": [0.0, 0.2], "seconds": 1.0} for r in (1.0, 3.0)]
    >>> summarize(rows)[("d", "m", 1)]["risk"]
    (2.0, 1.0)
    """
    groups: dict[tuple, list[dict]] = {}
    for record in records:
        groups.setdefault(_group_key(record), []).append(record)
    summary = {}
    for key, members in groups.items():
        values = {
            "risk": [r["risk"] for r in members],
            "ks0": [r["ks"][0] for r in members],
            "ks_max": [max(r["ks"]) for r in members],
            "atom_max": [max(r["atom"]) for r in members],
            "seconds": [r["seconds"] for r in members],
        }
        summary[key] = {name: (float(np.mean(v)), float(np.std(v))) for name, v in values.items()}
    return summary


def _pm(stat: tuple[float, float], digits: int = 4) -> str:
    return f"{stat[0]:.{digits}f} ± {stat[1]:.{digits}f}"


def format_tables(results: dict) -> str:
    """The main sweep table and the optimizer comparison, as markdown.

    >>> config = Config(datasets=("synthetic",), repetitions=1, exponents=(8,), methods=(MAIN_METHOD,),
    ...                 eval_points=2)
    >>> tables = format_tables(run_experiment(config, log=lambda message: None))
    >>> print(tables.splitlines()[0])
    | dataset | n | d | K | p (train) | N unlabeled | horizon T | L | beta | M | mu | J |
    >>> for line in tables.splitlines()[8:11]:               # the sweep's rows: dataset, model, eps
    ...     print(" | ".join(line.split(" | ")[:3]))
    | synthetic | base (linear regression) | —
    | synthetic | base rounded to grid | —
    | synthetic | DP-postproc | 2^-8
    """
    config, summary = results["config"], summarize(results["records"])
    lines = [
        "| dataset | n | d | K | p (train) | N unlabeled | horizon T | L | beta | M | mu | J |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in config["datasets"]:
        st = results["settings"][name]
        lines.append(
            f"| {name} | {st['n']} | {st['d']} | {st['K']} | {st['p']} | {st['pool']} | {st['horizon']} | {st['L']}"
            f" | {st['beta']:.1f} | {st['M']:.0f} | {st['mu']:.3f} | {st['J']} |"
        )
    lines += [
        "",
        f"Test-set risk (MSE, target units) and unfairness, mean ± std over {config['repetitions']} repetitions;"
        f" {config['passes']} pass(es) over the unlabeled split; method {MAIN_METHOD}.",
        "",
        "| dataset | model | eps | risk | KS group 0 | KS max | per-atom max | learn ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in config["datasets"]:
        for method, label in (("base", "base (linear regression)"), ("base-grid", "base rounded to grid")):
            stats = summary[(name, method, None)]
            atom = "—" if method == "base" else _pm(stats["atom_max"])
            lines.append(
                f"| {name} | {label} | — | {_pm(stats['risk'])} | {_pm(stats['ks0'], 3)} | {_pm(stats['ks_max'], 3)}"
                f" | {atom} | — |"
            )
        for exponent in config["exponents"]:
            stats = summary[(name, MAIN_METHOD, exponent)]
            lines.append(
                f"| {name} | DP-postproc | 2^-{exponent} | {_pm(stats['risk'])} | {_pm(stats['ks0'], 3)}"
                f" | {_pm(stats['ks_max'], 3)} | {_pm(stats['atom_max'])} | {1e3 * stats['seconds'][0]:.0f} |"
            )
    methods = [MAIN_METHOD] + [m for m in config["methods"] if m != MAIN_METHOD]
    lines += [
        "",
        "Optimizer comparison (paper's Figure 3): mean KS max / mean risk.",
        "",
        "| dataset | eps | " + " | ".join(methods) + " |",
        "|---|---|" + "---|" * len(methods),
    ]
    for name in config["datasets"]:
        for exponent in config["exponents"]:
            cells = [summary[(name, m, exponent)] for m in methods]
            lines.append(
                f"| {name} | 2^-{exponent} | "
                + " | ".join(f"{c['ks_max'][0]:.3f} / {c['risk'][0]:.4f}" for c in cells)
                + " |"
            )
    return "\n".join(lines)


# ---------------------------------------------------------------------------- plots
def _panels(n_rows: int, n_cols: int, height: float = 3.0):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(n_rows, n_cols, figsize=(3.6 * n_cols, height * n_rows), squeeze=False)
    return plt, figure, axes


def plot_tradeoff(results: dict, path: Path, methods: list[str] | None = None, dpi: int = 80) -> None:
    """Risk against worst-group KS unfairness along the ``eps`` sweep, one panel per dataset."""
    config, summary = results["config"], summarize(results["records"])
    methods = [MAIN_METHOD] if methods is None else methods
    single = len(methods) == 1
    plt, figure, axes = _panels(1, len(config["datasets"]))
    for ax, name in zip(axes[0], config["datasets"], strict=True):
        for method in methods:
            stats = [summary[(name, method, e)] for e in config["exponents"]]
            x, xerr = zip(*(s["ks_max"] for s in stats), strict=True)
            y, yerr = zip(*(s["risk"] for s in stats), strict=True)
            if single:  # mean ± std per eps, labelled with its exponent i
                ax.errorbar(x, y, xerr=xerr, yerr=yerr, marker="o", markersize=3, capsize=2, linewidth=1,
                            label="DP-postproc")
                for exponent, xi, yi in zip(config["exponents"], x, y, strict=True):
                    ax.annotate(str(exponent), (xi, yi), fontsize=6, xytext=(3, 3), textcoords="offset points")
            else:  # means only, to keep five curves readable
                ax.plot(x, y, marker="o", markersize=3, linewidth=1, label=method)
        bases = (("base", "*", "black", "base (LR)"), ("base-grid", "s", "gray", "base on grid"))
        for method, marker, color, label in bases:
            base_stats = summary[(name, method, None)]
            ax.errorbar(base_stats["ks_max"][0], base_stats["risk"][0],
                        xerr=base_stats["ks_max"][1] if single else None,
                        yerr=base_stats["risk"][1] if single else None, marker=marker, color=color,
                        markersize=7 if marker == "*" else 4, linestyle="none", capsize=2, label=label)
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("KS unfairness (worst group)", fontsize=8)
        ax.set_ylabel("risk (MSE)", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)


def plot_convergence(results: dict, path: Path, dpi: int = 80) -> None:
    """Test risk and per-group KS of the served predictor against samples learned (Figure 1)."""
    config, summary = results["config"], summarize(results["records"])
    plt, figure, axes = _panels(2, len(config["datasets"]), height=2.6)
    for column, name in enumerate(config["datasets"]):
        traces = results["traces"][name]
        samples = np.array([point["samples"] for point in traces[0]])
        risk = np.array([[point["risk"] for point in trace] for trace in traces])
        ks = np.array([[point["ks"] for point in trace] for trace in traces])  # (reps, points, K)
        base = summary[(name, "base", None)]
        ax = axes[0][column]
        ax.plot(samples, risk.mean(axis=0), linewidth=1)
        ax.fill_between(samples, risk.mean(axis=0) - risk.std(axis=0), risk.mean(axis=0) + risk.std(axis=0), alpha=0.3)
        ax.axhline(base["risk"][0], color="gray", linestyle="--", linewidth=0.8, label="base")
        ax.set_title(f"{name}: risk, eps=2^-{config['convergence_exponent']}", fontsize=8)
        ax = axes[1][column]
        for group in range(ks.shape[2]):
            mean, std = ks[:, :, group].mean(axis=0), ks[:, :, group].std(axis=0)
            ax.plot(samples, mean, linewidth=1, label=f"s={group}")
            ax.fill_between(samples, mean - std, mean + std, alpha=0.2)
        ax.axhline(base["ks_max"][0], color="gray", linestyle="--", linewidth=0.8, label="base (max)")
        ax.set_title(f"{name}: KS unfairness per group", fontsize=8)
        ax.set_xlabel("unlabeled samples learned", fontsize=8)
        for ax in axes[:, column]:
            ax.tick_params(labelsize=7)
            ax.grid(alpha=0.3)
        axes[1][column].legend(fontsize=6)
    figure.tight_layout()
    figure.savefig(path, dpi=dpi)
    plt.close(figure)


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``streamfair experiment`` (unset ones come from the default or ``--quick`` config)."""
    parser.add_argument("--datasets", nargs="+", choices=sorted(datasets.LOADERS), help="default: all four")
    parser.add_argument("--repetitions", type=integer_at_least(1), help="seeded repetitions (default 10)")
    parser.add_argument("--passes", type=integer_at_least(1), help="passes over the unlabeled split (default 1)")
    parser.add_argument("--exponents", nargs="+", type=integer_at_least(0),
                        help="sweep eps = 2^-i (default 0 2 4 5 6 7 8 10 12 16)")
    parser.add_argument("--optimizers", nargs="+", choices=list(METHODS), help="Figure 3 variants (default: all five)")
    parser.add_argument("--convergence-exponent", type=integer_at_least(0),
                        help="eps = 2^-i of the convergence curves (default 8)")
    parser.add_argument("--eval-points", type=integer_at_least(1),
                        help="test evaluations along a convergence curve (default 40)")
    parser.add_argument("--seed", type=integer_at_least(0), help="base seed of the splits and pass orders (default 0)")
    parser.add_argument("--output", type=Path, default=Path("runs/experiment"), help="output directory")
    parser.add_argument("--quick", action="store_true", help="small configuration (synthetic only, seconds)")


def config_from_args(args: argparse.Namespace) -> Config:
    """The configuration: ``--quick`` or the default, overridden by the options given."""
    base = QUICK if args.quick else Config()
    given = {
        "datasets": args.datasets,
        "repetitions": args.repetitions,
        "passes": args.passes,
        "exponents": args.exponents,
        "methods": args.optimizers,
        "convergence_exponent": args.convergence_exponent,
        "eval_points": args.eval_points,
        "seed": args.seed,
    }
    changes: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items() if v is not None}
    return dataclasses.replace(base, **changes)


def run(args: argparse.Namespace) -> int:
    """Run the experiment, print the tables, write ``results.{md,json}`` and the PNGs."""
    config = config_from_args(args)
    output = Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    results = run_experiment(config, log=lambda message: print(message, file=sys.stderr))
    tables = format_tables(results)
    print(tables)
    (output / "results.md").write_text(tables + f"\n\nWall time: {results['seconds']:.1f} s\n")
    (output / "results.json").write_text(json.dumps(results, indent=1))
    plot_tradeoff(results, output / "tradeoff.png")
    plot_tradeoff(results, output / "optimizers.png", [MAIN_METHOD] + [m for m in config.methods if m != MAIN_METHOD])
    plot_convergence(results, output / "convergence.png")
    print(f"\nwall time {results['seconds']:.1f} s (plots excluded); wrote {output}/results.md, results.json,"
          " tradeoff.png, optimizers.png, convergence.png")
    return 0
