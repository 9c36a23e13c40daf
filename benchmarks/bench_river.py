"""Throughput of the River estimator ``FairRegressor``: one ``predict_one`` + one ``learn_one`` per sample.

Stream: River's Friedman generator with a group (``connectors.river.friedman_with_group``, 10
features plus S; its target in ``[0, 30]``, given as ``B``).  Baseline, measured in the same run:
the bare base model, River's ``linear_model.LinearRegression``, on the same features.  The other
rows add, one at a time, what the wrapper runs: the group classifier (``LogisticRegression``; the
wrapper asks each base model once per x, ``learn_one`` reusing what ``predict_one`` computed), then
the post-processor (the whole ``FairRegressor``, with ``mode="sample"``, the default, and
``mode="mean"``); the last column compares with the two base models alone (the goal is at most 3x);
the next two rows are the core post-processor alone on precomputed ``(eta, tau)``: two calls per
sample, and the fused ``predict_learn_one`` (bit for bit the same predictions and state, one call).
The classifier rows run ``FairClassifier`` (``LogisticRegression`` for the classes and for S) on
``connectors.river.logistic_with_group`` (5 features plus S), against its own baseline measured in
the same run: the bare ``LogisticRegression`` on the same features.

Run: ``python benchmarks/bench_river.py`` or ``streamfair bench river``.
"""

from __future__ import annotations

import time

from command_line import parser  # benchmarks/command_line.py
from river import linear_model

from connectors.river import FairClassifier, FairRegressor, friedman_with_group, logistic_with_group
from streamfair import FairRegressionPostProcessor


def _rate(run, n: int, repeats: int = 3) -> float:
    """Samples per second of ``run()`` over ``n`` samples, best of ``repeats`` (fresh models each time)."""
    best = float("inf")
    for _ in range(repeats):
        step = run()
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return n / best


def main(n: int = 3000) -> str:
    data = list(friedman_with_group(n, seed=1))
    bare = [({k: v for k, v in x.items() if k != "group"}, x["group"], y) for x, y in data]

    def base_only():
        model = linear_model.LinearRegression()

        def step():
            for x, _, y in bare:
                model.predict_one(x)
                model.learn_one(x, y)

        return step

    def both_base_models():
        model, classifier = linear_model.LinearRegression(), linear_model.LogisticRegression()

        def step():
            for x, s, y in bare:
                model.predict_one(x)
                classifier.predict_proba_one(x)
                model.learn_one(x, y)
                classifier.learn_one(x, s)

        return step

    def wrapper(mode: str):
        def make():
            model = FairRegressor(linear_model.LinearRegression(), linear_model.LogisticRegression(), B=(0, 30),
                                  mode=mode, seed=0)

            def step():
                for x, y in data:
                    model.predict_one(x)
                    model.learn_one(x, y)

            return step

        return make

    core_inputs = [(y, [1.0 - 0.6 * s - 0.2, 0.6 * s + 0.2]) for _, s, y in bare]

    def core_only():
        fair = FairRegressionPostProcessor(B=(0, 30), n_groups=2, seed=0)

        def step():
            for i, (eta, tau) in enumerate(core_inputs):
                fair.predict_one(eta, tau, key=i)
                fair.learn_one(eta, tau)

        return step

    def core_fused():
        fair = FairRegressionPostProcessor(B=(0, 30), n_groups=2, seed=0)

        def step():
            for i, (eta, tau) in enumerate(core_inputs):
                fair.predict_learn_one(eta, tau, key=i)  # the same outputs and state as the two calls

        return step

    classification = list(logistic_with_group(n, seed=1))
    bare_classification = [({k: v for k, v in x.items() if k != "group"}, y) for x, y in classification]

    def classifier_only():
        model = linear_model.LogisticRegression()

        def step():
            for x, y in bare_classification:
                model.predict_one(x)
                model.learn_one(x, y)

        return step

    def fair_classifier():
        model = FairClassifier(
            linear_model.LogisticRegression(), linear_model.LogisticRegression(), classes=(0, 1), seed=0
        )

        def step():
            for x, y in classification:
                model.predict_one(x)
                model.learn_one(x, y)

        return step

    baseline, classifier_baseline = _rate(base_only, n), _rate(classifier_only, n)
    two_models = _rate(both_base_models, n)
    rows = [
        ("LinearRegression (baseline)", baseline, baseline),
        ("LinearRegression + LogisticRegression (the two base models)", two_models, baseline),
        ('FairRegressor, mode="sample"', _rate(wrapper("sample"), n), baseline),
        ('FairRegressor, mode="mean"', _rate(wrapper("mean"), n), baseline),
        ("core post-processor alone (predict_one + learn_one)", _rate(core_only, n), baseline),
        ("core post-processor alone, fused (predict_learn_one)", _rate(core_fused, n), baseline),
        ("LogisticRegression on logistic_with_group (classifier baseline)", classifier_baseline, classifier_baseline),
        ('FairClassifier, mode="sample", 2 classes (vs the classifier baseline)', _rate(fair_classifier, n),
         classifier_baseline),
    ]
    lines = [
        f"| model ({n} samples: predict_one + learn_one each) | samples/s | µs/sample | cost / baseline "
        "| cost / two base models |",
        "|---|---|---|---|---|",
    ]
    for name, rate, reference in rows:
        versus = f"{two_models / rate:.1f}x" if reference is baseline else ""
        lines.append(f"| {name} | {rate:,.0f} | {1e6 / rate:.1f} | {reference / rate:.1f}x | {versus} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
