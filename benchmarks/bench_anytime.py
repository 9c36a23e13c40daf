"""Time to fair and drift recovery of the served predictor: ``anytime`` defaults vs ``paper`` vs the LP.

**Time to fair.**  On the paper's four datasets (the experiment's splits, base models and
scaling, :mod:`connectors.experiments.regression`), the unlabeled pool is resampled into a stream; after
``n`` samples the served predictor is evaluated on the test split (worst-group KS and risk in
the dataset's units, expectations over the randomization).  Rows: the base model; the default
post-processor (``FairRegressionPostProcessor(B=1, p=p)``: the ``anytime`` profile, KS target
``DEFAULT_KS``); the ``paper`` profile with the same ``B`` and ``p``; and the offline optimum on
the same ``n`` samples, the LP with the same grid, posteriors and KS constraints
(:mod:`connectors.experiments.fair_lp`), evaluated on test through its constraint prices.

**What the Law School test split can measure** (:func:`law_measurement`): the ``anytime``
predictor's worst-group KS on the test split, the floor of that split (its groups shuffled), and
the KS on the Law School people outside the experiment's sub-sample, on the same streams; and by KS
target (``--law-targets``, :func:`law_targets`), the KS on the pool the stream resamples, by posteriors
(what the post-processor holds at its target) and by true S, next to those readings.

**Frontier.**  On the synthetic set, the LP at several KS targets on the whole pool traces the
risk-unfairness frontier on test; the ``anytime`` predictor's risk is compared with the
frontier's risk at the same KS (a ratio, interpolated on the frontier).

**Drift recovery.**  On the streams of :mod:`connectors.experiments.drift` (exact posteriors), the plug-in KS
of the served predictor on a fresh sample of the current distribution, every 250 samples;
"recovery" is the number of samples after the change until it is back at ``1.2 x`` the target
(two evaluations in a row).

**Steady state** (``--steady-state``, :func:`steady_state`): how close to its target the served
predictor stays on a stationary stream.  Each population (the four datasets' unlabeled pools and
4,000 samples of the drift streams' distribution) is resampled into a stream of 40,000 samples;
every 250 samples after the first 10,000, the worst-group KS of the served predictor *on that
population*, each group weighted by its posteriors (the stream's own law, no sampling noise).
Four more populations have two groups, the second with 50%, 20%, 5% or 2% of the samples, and
exact posteriors (:mod:`connectors.experiments.two_groups`): how the served KS depends on the size
of the smallest group.
Columns: its mean, 90th percentile and maximum, and the KS of the time-averaged served predictor
(the mixture of those predictors: what the dual meets on average).

**Target range** (``--target-range``, :func:`target_range`): the three real datasets with their
targets in their own units, the post-processor given their range ``B = (low, high)`` or the
narrowest ``[-B, B]`` that contains it: worst-group KS, risk against the base model's, and the
served mass outside the range.

Run: ``streamfair bench anytime`` (tables), or ``python benchmarks/bench_anytime.py --plots DIR``
for the PNGs as well.
"""

from __future__ import annotations

import functools
import pathlib
import sys
import time
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
from command_line import parser  # benchmarks/command_line.py

from connectors.experiments import datasets, drift, fair_lp
from connectors.experiments.regression import Prepared, prepare
from connectors.experiments.two_groups import two_groups
from streamfair import FairnessReport, FairRegressionPostProcessor, evaluate, evaluate_deterministic
from streamfair.constraints import CdfConstraints
from streamfair.dual import group_features, regression_grid, squared_costs
from streamfair.regression import DEFAULT_KS

#: repetitions of each measurement by default: the three the docs report
REPETITIONS = 3
SIZES = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000)
DATASETS = ("synthetic", "crime", "law", "adult")
METHODS = ("anytime", "paper", "LP")
FRONTIER_TARGETS = (0.02, 0.05, 0.1, 0.15, 0.2, 0.3)
DRIFT_LENGTH, DRIFT_CHANGE, DRIFT_EVERY = 20_000, 6_000, 250
MEASUREMENT_SIZES, MEASUREMENT_REPETITIONS, PERMUTATIONS = (1000, 2000, 8000), 10, 50
LAW_TARGETS, LAW_TARGETS_SIZE = (DEFAULT_KS, 0.02, 0.01), 8000
STEADY_LENGTH, STEADY_FROM, STEADY_TARGETS = 40_000, 10_000, (DEFAULT_KS, 0.8 * DEFAULT_KS)
#: the two-group populations of the steady state, by name: the share of the second group
SMALL_GROUPS = {f"{share:.0%} group": share for share in (0.5, 0.2, 0.05, 0.02)}
RANGE_SIZES = (2000, 8000)


def _lp_predictor(eta, tau, p, weights, atoms, ks):
    lp = fair_lp.solve(group_features(tau, p), squared_costs(eta, atoms), weights, np.full(p.size, ks),
                       CdfConstraints(atoms.size))
    return lambda eta_new, tau_new: atoms[lp.predict_index(group_features(tau_new, p), squared_costs(eta_new, atoms))]


def time_to_fair(name: str, repetitions: int, sizes=SIZES) -> dict:
    """``{method: array (repetitions, len(sizes), 2)}`` of (worst-group KS, risk), plus ``"base"``."""
    data = datasets.load(name)
    out = {method: np.zeros((repetitions, len(sizes), 2)) for method in METHODS}
    out["base"] = np.zeros((repetitions, 2))
    for rep in range(repetitions):
        prep = prepare(data, np.random.default_rng([0, rep]))
        units = prep.to_target_units
        base = evaluate_deterministic(units(prep.eta_test), prep.y_test, prep.s_test, prep.p.size)
        out["base"][rep] = base.max_ks, base.risk
        index = np.random.default_rng([1, rep]).integers(0, prep.eta_pool.size, max(sizes))
        models = {"anytime": FairRegressionPostProcessor(B=1.0, p=prep.p, seed=rep),
                  "paper": FairRegressionPostProcessor(B=1.0, p=prep.p, seed=rep, profile="paper")}
        done = 0
        for j, n in enumerate(sizes):
            for method, model in models.items():
                model.learn_many(prep.eta_pool[index[done:n]], prep.tau_pool[index[done:n]])
                report = evaluate(model.proba_many(prep.eta_test, prep.tau_test), units(model.atoms), prep.y_test,
                                  prep.s_test, n_groups=prep.p.size)
                out[method][rep, j] = report.max_ks, report.risk
            done = n
            counts = np.bincount(index[:n], minlength=prep.eta_pool.size)
            seen = np.flatnonzero(counts)
            predict = _lp_predictor(prep.eta_pool[seen], prep.tau_pool[seen], prep.p, counts[seen] / n,
                                    models["anytime"].atoms, DEFAULT_KS)
            lp = evaluate_deterministic(units(predict(prep.eta_test, prep.tau_test)), prep.y_test, prep.s_test,
                                        prep.p.size)
            out["LP"][rep, j] = lp.max_ks, lp.risk
    return out


class LawSplit(NamedTuple):
    """One split of the Law School measurements: its preparation, the stream's rows of the pool, the held-out
    people and their base-model scores, and the shuffles of the test split's floor."""

    prep: Prepared
    rows: np.ndarray
    population: datasets.Dataset
    scores: tuple[np.ndarray, np.ndarray]
    shuffle: np.random.Generator


def _law_splits(repetitions: int, n: int) -> Iterator[LawSplit]:
    data, population = datasets.load("law"), datasets.load_law_held_out()
    for rep in range(repetitions):
        prep = prepare(data, np.random.default_rng([0, rep]))
        index = np.random.default_rng([1, rep]).integers(0, prep.eta_pool.size, n)
        yield LawSplit(prep, index, population, prep.score(population.X), np.random.default_rng([2, rep]))


def _law_readings(model: FairRegressionPostProcessor, split: LawSplit) -> tuple[FairnessReport, float, float]:
    """The test split's report, its floor, and the worst-group KS on the held-out people."""
    prep, population = split.prep, split.population
    atoms = prep.to_target_units(model.atoms)
    on_test = functools.partial(evaluate, model.proba_many(prep.eta_test, prep.tau_test), atoms, prep.y_test,
                                n_groups=prep.p.size)
    floor = float(np.mean([on_test(split.shuffle.permutation(prep.s_test)).max_ks for _ in range(PERMUTATIONS)]))
    held_out = evaluate(model.proba_many(*split.scores), atoms, population.y, population.s,
                        n_groups=prep.p.size).max_ks
    return on_test(prep.s_test), floor, held_out


def law_measurement(repetitions: int, sizes=MEASUREMENT_SIZES) -> np.ndarray:
    """Law School, ``anytime``: worst-group KS on the test split, its floor, and on a large population.

    Returns ``(repetitions, len(sizes), 3)``, the same streams as :func:`time_to_fair`:

    * the test split's worst-group KS (400 people, 59 in the smaller group);
    * its *floor*: the mean worst-group KS of the same served predictor with the test split's
      groups shuffled (``PERMUTATIONS`` times), where S is independent of the prediction, so that
      the population KS is 0: what a perfectly fair predictor reads on this split;
    * the worst-group KS on the 19,791 people outside the sub-sample
      (:func:`connectors.experiments.datasets.load_law_held_out`), scored by the same base models.
    """
    out = np.zeros((repetitions, len(sizes), 3))
    for rep, split in enumerate(_law_splits(repetitions, max(sizes))):
        prep, index = split.prep, split.rows
        model, done = FairRegressionPostProcessor(B=1.0, p=prep.p, seed=rep), 0
        for j, n in enumerate(sizes):
            model.learn_many(prep.eta_pool[index[done:n]], prep.tau_pool[index[done:n]])
            done = n
            test, floor, held_out = _law_readings(model, split)
            out[rep, j] = test.max_ks, floor, held_out
    return out


def law_targets(repetitions: int, targets=LAW_TARGETS, n: int = LAW_TARGETS_SIZE) -> np.ndarray:
    """Law School after ``n`` samples, by KS target: what the post-processor controls, and what the splits read.

    Returns ``(repetitions, len(targets), 6)``, the streams of :func:`law_measurement`, for the
    predictor with ``ks`` set to each target (only ``B``, ``p`` and ``ks`` given):

    * the worst-group KS on the unlabeled pool (the 800 people the stream resamples), each group
      weighted by its posteriors ``tau``: the plug-in quantity the post-processor holds at ``ks``;
    * the same people's worst-group KS with their true S: the plug-in's error is the posteriors';
    * the test split's worst-group KS (true S) and its *floor* (:func:`law_measurement`);
    * the worst-group KS on the 19,791 people outside the sub-sample;
    * the risk on the test split, divided by the base model's.
    """
    out = np.zeros((repetitions, len(targets), 6))
    for rep, split in enumerate(_law_splits(repetitions, n)):
        prep = split.prep
        base = evaluate_deterministic(prep.to_target_units(prep.eta_test), prep.y_test, prep.s_test, prep.p.size)
        for j, ks in enumerate(targets):
            model = FairRegressionPostProcessor(B=1.0, p=prep.p, ks=ks, seed=rep)
            model.learn_many(prep.eta_pool[split.rows], prep.tau_pool[split.rows])
            pool, atoms = model.proba_many(prep.eta_pool, prep.tau_pool), prep.to_target_units(model.atoms)
            test, floor, held_out = _law_readings(model, split)
            out[rep, j] = (
                evaluate(pool, atoms, prep.eta_pool, prep.tau_pool).max_ks,
                evaluate(pool, atoms, prep.y_pool, prep.s_pool, n_groups=prep.p.size).max_ks,
                test.max_ks, floor, held_out, test.risk / base.risk,
            )
    return out


def law_targets_table(repetitions: int = MEASUREMENT_REPETITIONS) -> str:
    """:func:`law_targets` as a markdown table (mean ± standard error over splits)."""
    measured = law_targets(repetitions)
    mean, error = measured.mean(axis=0), measured.std(axis=0, ddof=1) / np.sqrt(repetitions)
    lines = [
        f"Law School, anytime, {repetitions} splits, after {LAW_TARGETS_SIZE:,} samples, by KS target: worst-group "
        "KS on the pool the stream resamples (by posteriors, as the post-processor sees it; by true S), on the "
        "test split and its floor, on the people outside the sub-sample; risk on test / the base model's",
        "",
        "| ks | pool, by posteriors | pool, by true S | test split | its floor | held-out population | risk / base |",
        "|---|---|---|---|---|---|---|",
    ]
    for j, ks in enumerate(LAW_TARGETS):
        cells = [f"{mean[j, c]:.3f} ± {error[j, c]:.3f}" for c in range(5)]
        lines.append(f"| {ks:g} | " + " | ".join(cells) + f" | {mean[j, 5]:.3f} |")
    return "\n".join(lines)


def frontier(repetitions: int) -> tuple[np.ndarray, np.ndarray]:
    """Synthetic set: the LP frontier on test ``(targets, (KS, risk))`` and ``anytime``'s (KS, risk) at 32,000."""
    data = datasets.load("synthetic")
    points, ours = np.zeros((repetitions, len(FRONTIER_TARGETS), 2)), np.zeros((repetitions, 2))
    atoms = regression_grid(1.0, 50)
    for rep in range(repetitions):
        prep = prepare(data, np.random.default_rng([0, rep]))
        weights = np.full(prep.eta_pool.size, 1.0 / prep.eta_pool.size)
        for j, ks in enumerate(FRONTIER_TARGETS):
            predict = _lp_predictor(prep.eta_pool, prep.tau_pool, prep.p, weights, atoms, ks)
            report = evaluate_deterministic(prep.to_target_units(predict(prep.eta_test, prep.tau_test)), prep.y_test,
                                            prep.s_test, prep.p.size)
            points[rep, j] = report.max_ks, report.risk
        model = FairRegressionPostProcessor(B=1.0, p=prep.p, seed=rep)
        index = np.random.default_rng([1, rep]).integers(0, prep.eta_pool.size, SIZES[-1])
        model.learn_many(prep.eta_pool[index], prep.tau_pool[index])
        report = evaluate(model.proba_many(prep.eta_test, prep.tau_test), prep.to_target_units(model.atoms),
                          prep.y_test, prep.s_test, n_groups=prep.p.size)
        ours[rep] = report.max_ks, report.risk
    return points.mean(axis=0), ours.mean(axis=0)


def frontier_risk(points: np.ndarray, ks: float) -> float:
    """The frontier's risk at ``ks``: linear interpolation of risk in KS on the lower convex hull's points.

    >>> frontier_risk(np.array([[0.1, 5.0], [0.3, 1.0]]), 0.2)
    3.0
    """
    order = np.argsort(points[:, 0])
    return float(np.interp(ks, points[order, 0], points[order, 1]))


def plug_in_ks(model: FairRegressionPostProcessor, eta: np.ndarray, tau: np.ndarray) -> float:
    """Worst-group KS of the served predictor computed with exact posteriors (no S sampling noise)."""
    t = group_features(tau, drift.P)
    return float(np.abs(np.cumsum(model.proba_many(eta, tau).T @ t / eta.size, axis=0)).max())


def drift_trace(kind: str, profile: str, seed: int) -> np.ndarray:
    """``(samples, plug-in KS)`` every ``DRIFT_EVERY`` samples.

    The KS is on the distribution of the last sample learned.
    """
    eta, tau, _ = drift.drift_stream(kind, DRIFT_LENGTH, DRIFT_CHANGE, seed)
    model = FairRegressionPostProcessor(B=1.0, p=drift.P, seed=seed, profile=profile)
    trace = []
    for start in range(0, DRIFT_LENGTH, DRIFT_EVERY):
        stop = start + DRIFT_EVERY
        model.learn_many(eta[start:stop], tau[start:stop])
        probe_eta, probe_tau, _ = drift.drift_stream(kind, 4000, DRIFT_CHANGE, seed + 1000, at=stop - 1)
        trace.append((stop, plug_in_ks(model, probe_eta, probe_tau)))
    return np.array(trace)


def recovery(trace: np.ndarray, target: float) -> float:
    """Samples after the change until the KS is at most ``1.2 target`` twice in a row (inf: never)."""
    after = trace[trace[:, 0] > DRIFT_CHANGE]
    ok = after[:, 1] <= 1.2 * target
    for i in range(len(ok) - 1):
        if ok[i] and ok[i + 1]:
            return float(after[i, 0] - DRIFT_CHANGE)
    return float("inf")


def steady_state(name: str, ks: float, repetitions: int) -> np.ndarray:
    """``(repetitions, 4)``: mean, 90th percentile and maximum of the served KS, and the time-averaged KS.

    ``name`` is a dataset (its unlabeled pool), ``"drift"`` (4,000 samples of the drift streams'
    distribution) or a two-group population of 4,000 samples (:func:`two_groups`, named by the
    second group's share: ``"5% group"``); see the module docstring.
    """
    out = np.zeros((repetitions, 4))
    for rep in range(repetitions):
        if name == "drift":
            (eta, tau, _), p = drift.drift_stream("flip", 4000, STEADY_LENGTH, seed=500 + rep), drift.P
        elif name in SMALL_GROUPS:
            eta, tau, p = two_groups(SMALL_GROUPS[name], 4000, seed=700 + rep)
        else:
            prep = prepare(datasets.load(name), np.random.default_rng([0, rep]))
            eta, tau, p = prep.eta_pool, prep.tau_pool, prep.p
        index = np.random.default_rng([1, rep]).integers(0, eta.size, STEADY_LENGTH)
        model = FairRegressionPostProcessor(B=1.0, p=p, ks=ks, seed=rep)
        served, total = [], np.zeros((eta.size, model.atoms.size))
        for start in range(0, STEADY_LENGTH, DRIFT_EVERY):
            model.learn_many(eta[index[start : start + DRIFT_EVERY]], tau[index[start : start + DRIFT_EVERY]])
            if start >= STEADY_FROM:  # the groups are weighted by their posteriors: a membership matrix
                proba = model.proba_many(eta, tau)
                served.append(evaluate(proba, model.atoms, eta, tau).max_ks)
                total += proba
        averaged = evaluate(total / len(served), model.atoms, eta, tau).max_ks
        out[rep] = np.mean(served), np.quantile(served, 0.9), np.max(served), averaged
    return out


def steady_state_table(repetitions: int) -> str:
    """:func:`steady_state` of every population at each of ``STEADY_TARGETS``, as a Markdown table."""
    lines = [
        f"Steady state: worst-group KS of the served predictor on its stream's population (posterior-weighted), "
        f"every {DRIFT_EVERY} samples from {STEADY_FROM} to {STEADY_LENGTH}; mean of {repetitions} repetitions "
        "(the maximum: over them)",
        "",
        "| population | ks | mean | 90th percentile | max | time-averaged predictor |",
        "|---|---|---|---|---|---|",
    ]
    for name in ("drift",) + DATASETS + tuple(SMALL_GROUPS):
        for ks in STEADY_TARGETS:
            res = steady_state(name, ks, repetitions)
            mean, top = res.mean(axis=0), res[:, 2].max()
            lines.append(f"| {name} | {ks:g} | {mean[0]:.3f} | {mean[1]:.3f} | {top:.3f} | {mean[3]:.3f} |")
    return "\n".join(lines)


def target_range(name: str, repetitions: int, sizes=RANGE_SIZES) -> dict:
    """``{"served": (repetitions, 2, len(sizes), 3), "base": (repetitions,), "range": (repetitions, 2)}``.

    ``served``: worst-group KS, risk and served mass outside the target's range, as a user gives
    the target range in the dataset's units: ``B = (low, high)`` (row 0), or the narrowest
    half-width that contains it, ``B = max(|low|, |high|)`` (row 1, what ``[-B, B]`` alone
    allows); the same stream, evaluated on the test split.  ``base``: the base model's risk there;
    ``range``: each repetition's ``(low, high)`` (its train split's).
    """
    data = datasets.load(name)
    out = {"served": np.zeros((repetitions, 2, len(sizes), 3)), "base": np.zeros(repetitions),
           "range": np.zeros((repetitions, 2))}
    for rep in range(repetitions):
        prep = prepare(data, np.random.default_rng([0, rep]))
        low, high, units = prep.low, prep.high, prep.to_target_units
        out["base"][rep] = evaluate_deterministic(units(prep.eta_test), prep.y_test, prep.s_test, prep.p.size).risk
        out["range"][rep] = low, high
        index = np.random.default_rng([1, rep]).integers(0, prep.eta_pool.size, max(sizes))
        ranges: tuple[tuple[float, float] | float, ...] = ((low, high), max(abs(low), abs(high)))
        for row, B in enumerate(ranges):
            model, done = FairRegressionPostProcessor(B=B, p=prep.p, seed=rep), 0
            for j, n in enumerate(sizes):
                model.learn_many(units(prep.eta_pool[index[done:n]]), prep.tau_pool[index[done:n]])
                done = n
                proba = model.proba_many(units(prep.eta_test), prep.tau_test)
                report = evaluate(proba, model.atoms, prep.y_test, prep.s_test, n_groups=prep.p.size)
                outside = proba[:, (model.atoms < low) | (model.atoms > high)].sum(axis=1).mean()
                out["served"][rep, row, j] = report.max_ks, report.risk, outside
    return out


def target_range_table(repetitions: int) -> str:
    """:func:`target_range` of the three real datasets, with the base model's risk, as a Markdown table."""
    lines = [
        f"Target range in the dataset's units: (low, high) against the narrowest [-B, B] containing it; "
        f"test split, mean of {repetitions} repetitions, KS target {DEFAULT_KS}; each repetition gives its own "
        "train split's range (the first one's shown)",
        "",
        "| dataset | range | B | n | worst-group KS | risk / base model's | served mass outside the range |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in DATASETS[1:]:
        res = target_range(name, repetitions)
        served, base, (low, high) = res["served"].mean(axis=0), res["base"].mean(), res["range"][0]
        for row, given in enumerate((f"({low:.3g}, {high:.3g})", f"{max(abs(low), abs(high)):.3g}")):
            for j, n in enumerate(RANGE_SIZES):
                ks, risk, outside = served[row, j]
                lines.append(f"| {name} | [{low:.3g}, {high:.3g}] | {given} | {n:,} | {ks:.3f} | "
                             f"{risk / base:.2f} | {outside:.3f} |")
    return "\n".join(lines)


def _cell(values: np.ndarray) -> str:
    return f"{values[0]:.3f} / {values[1]:.4g}"


def main(repetitions: int = REPETITIONS, plots: str | None = None) -> str:
    start = time.perf_counter()
    lines = [
        f"Time to fair: worst-group KS / risk on test (mean of {repetitions} repetitions); KS target "
        f"{DEFAULT_KS} (anytime and LP)",
        "",
    ]
    results = {}
    for name in DATASETS:
        results[name] = res = time_to_fair(name, repetitions)
        lines += [
            f"**{name}** (base model: {_cell(res['base'].mean(axis=0))})",
            "",
            "| n | " + " | ".join(METHODS) + " |",
            "|---|" + "---|" * len(METHODS),
        ]
        for j, n in enumerate(SIZES):
            lines.append(f"| {n} | " + " | ".join(_cell(res[m][:, j].mean(axis=0)) for m in METHODS) + " |")
        lines.append("")
    measured = law_measurement(MEASUREMENT_REPETITIONS)
    mean, error = measured.mean(axis=0), measured.std(axis=0, ddof=1) / np.sqrt(MEASUREMENT_REPETITIONS)
    lines += [
        f"Law School, anytime, {MEASUREMENT_REPETITIONS} splits: worst-group KS on the test split, the floor of that "
        "split (groups shuffled: what a perfectly fair predictor reads there), and on the 19,791 people outside "
        "the sub-sample (mean ± standard error over splits)",
        "",
        "| n | test split | its floor | held-out population |",
        "|---|---|---|---|",
    ]
    for j, n in enumerate(MEASUREMENT_SIZES):
        lines.append(f"| {n} | " + " | ".join(f"{mean[j, c]:.3f} ± {error[j, c]:.3f}" for c in range(3)) + " |")
    lines += ["", law_targets_table(), ""]
    points, ours = frontier(repetitions)
    ratio = ours[1] / frontier_risk(points, ours[0])
    lines += [
        "Synthetic frontier (LP on the pool, test KS / risk at targets "
        + ", ".join(map(str, FRONTIER_TARGETS))
        + "): "
        + ", ".join(_cell(p) for p in points),
        f"anytime at 32,000 samples: {_cell(ours)}; risk / frontier risk at the same KS: {ratio:.2f}",
        "",
    ]
    lines += [
        f"Drift recovery (plug-in KS with exact posteriors; change after {DRIFT_CHANGE} samples; target "
        f"{DEFAULT_KS}): samples until back at 1.2 x target; KS before the change / worst after / at the end",
        "",
        "| stream | anytime | paper |",
        "|---|---|---|",
    ]
    traces = {}
    for kind in drift.KINDS:
        cells = []
        for profile in ("anytime", "paper"):
            traces[kind, profile] = trace = drift_trace(kind, profile, seed=3)
            before = trace[trace[:, 0] <= DRIFT_CHANGE, 1][-1]
            after = trace[trace[:, 0] > DRIFT_CHANGE, 1]
            rec = recovery(trace, DEFAULT_KS) if kind != "rotation" else float("nan")
            text = "never" if rec == float("inf") else ("-" if np.isnan(rec) else f"{rec:.0f}")
            cells.append(f"{text}; {before:.3f} / {after.max():.3f} / {after[-1]:.3f}")
        lines.append(f"| {kind} | " + " | ".join(cells) + " |")
    lines += ["", f"({time.perf_counter() - start:.0f} s)"]
    if plots:
        _plot(results, traces, plots)
    return "\n".join(lines)


def _plot(results: dict, traces: dict, folder: str) -> None:
    import matplotlib

    pathlib.Path(folder).mkdir(parents=True, exist_ok=True)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(DATASETS), figsize=(16, 3.6))
    for ax, name in zip(axes, DATASETS, strict=True):
        res = results[name]
        for method in METHODS:
            ax.plot(SIZES, res[method][:, :, 0].mean(axis=0), marker="o", label=method)
        ax.axhline(res["base"][:, 0].mean(), color="grey", linestyle=":", label="base model")
        ax.axhline(DEFAULT_KS, color="black", linestyle="--", linewidth=0.8, label="KS target")
        ax.set(xscale="log", title=name, xlabel="samples", ylabel="worst-group KS (test)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{folder}/anytime_time_to_fair.png", dpi=110)
    fig, axes = plt.subplots(1, len(drift.KINDS), figsize=(14, 3.6))
    for ax, kind in zip(axes, drift.KINDS, strict=True):
        for profile in ("anytime", "paper"):
            trace = traces[kind, profile]
            ax.plot(trace[:, 0], trace[:, 1], label=profile)
        ax.axvline(DRIFT_CHANGE, color="grey", linestyle=":")
        ax.axhline(DEFAULT_KS, color="black", linestyle="--", linewidth=0.8)
        ax.set(title=kind, xlabel="samples", ylabel="plug-in worst-group KS")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(f"{folder}/anytime_drift.png", dpi=110)


if __name__ == "__main__":
    command = parser(__doc__)
    command.add_argument("--repetitions", type=int, default=REPETITIONS,
                         help=f"repetitions per dataset (default: {REPETITIONS})")
    command.add_argument("--plots", help="folder for the PNGs")
    only = command.add_mutually_exclusive_group()
    only.add_argument("--steady-state", action="store_true", help="print only the steady-state table")
    only.add_argument("--target-range", action="store_true", help="print only the target-range table")
    only.add_argument("--law-targets", action="store_true", help="print only the Law School table by KS target")
    args = command.parse_args()
    if args.steady_state:
        print(steady_state_table(args.repetitions))
    elif args.law_targets:
        print(law_targets_table())
    elif args.target_range:
        print(target_range_table(args.repetitions))
    else:
        print(main(args.repetitions, args.plots))
    sys.exit(0)
