"""Prometheus export of the surrogate diagnostics: values read back, naming, promtool."""

from __future__ import annotations

import math
import shutil
import subprocess

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from river import linear_model, optim

from connectors.prometheus import StreamfairMetrics, SurrogateMetrics
from connectors.river.surrogates import RiverSSO
from streamfair.surrogates import SSO, MetricWeightTuner

LABELS = {"model", "cell"}


def group_one_error(scores, window):
    one = window.cells == 1
    return float(np.mean((scores[one] - window.y[one]) ** 2))


def run_tuner(n: int = 3000, seed: int = 0) -> MetricWeightTuner:
    rng = np.random.default_rng(seed)
    X = np.c_[rng.standard_normal((n, 2)), np.ones(n)]
    group = (X[:, 0] > 0).astype(int)
    y = X @ [1.0, -1.0, 0.5] + 0.1 * rng.standard_normal(n)
    tuner = MetricWeightTuner(3, 2, group_one_error, every=500, window=1000, seed=seed)
    tuner.observe_many(X, y, group)
    return tuner


def run_sso(m: int = 5, batches: int = 4) -> SSO:
    rng = np.random.default_rng(1)
    sso = SSO(4, m=m, eta=0.5)
    for _ in range(batches):
        X = rng.standard_normal((30, 4))
        sso.step(X, X @ [1.0, 2.0, -1.0, 0.5])
    return sso


def test_tuner_and_sso_values_read_back_from_the_registry():
    tuner, sso = run_tuner(), run_sso()
    metrics = SurrogateMetrics(models=["upstream", "base"])
    metrics.observe_tuner(tuner, "upstream")
    metrics.observe_sso(sso, "base")
    get = metrics.registry.get_sample_value
    report, up = tuner.last_report, {"model": "upstream"}
    assert tuner.outer_iterations == 6
    assert get("streamfair_tuner_outer_iterations_total", up) == tuner.outer_iterations
    assert get("streamfair_tuner_skipped_steps_total", up) == tuner.skipped_steps
    assert get("streamfair_tuner_weights_version", up) == tuner.weights.version == 6
    assert get("streamfair_blackbox_metric", up) == report.metric
    assert get("streamfair_projection_residual", up) == report.projection.residual
    assert get("streamfair_gradest_condition_number", up) == report.estimate.condition
    assert get("streamfair_gradest_zero_diff_fraction", up) == report.estimate.zero_diff_fraction
    assert get("streamfair_gradest_negative_component_fraction", up) == report.estimate.negative_fraction
    assert get("streamfair_gradest_sigma", up) == report.estimate.sigma
    for cell in range(2):
        labels = {"model": "upstream", "cell": str(cell)}
        assert get("streamfair_surrogate_value", labels) == report.surrogates[cell]
        assert get("streamfair_psi_grad_estimate", labels) == report.gradient[cell]
        assert get("streamfair_tuner_cell_weight", labels) == tuner.weights.cell_weights[cell]
    base, step = {"model": "base"}, sso.last_step
    assert get("streamfair_sso_oracle_calls_total", base) == 4
    assert get("streamfair_sso_inner_steps_total", base) == 20
    assert get("streamfair_sso_surrogate_decrease", base) == step.surrogate_decrease > 0
    assert get("streamfair_sso_target_step_norm", base) == step.target_step_norm
    assert get("streamfair_sso_projection_gap", base) == step.projection_gap
    assert get("streamfair_sso_target_step_size", base) == 0.5
    assert get("streamfair_sso_batch_loss", base) == step.loss_at_z


def test_counters_follow_the_optimiser_and_restart_with_a_new_one():
    metrics = SurrogateMetrics(models=["base"])
    get = metrics.registry.get_sample_value
    sso = run_sso(m=3, batches=2)
    metrics.observe_sso(sso, "base")
    metrics.observe_sso(sso, "base")  # observing twice counts nothing twice
    assert get("streamfair_sso_oracle_calls_total", {"model": "base"}) == 2
    sso.step(np.eye(4), np.ones(4))
    metrics.observe_sso(sso, "base")
    assert get("streamfair_sso_oracle_calls_total", {"model": "base"}) == 3
    assert get("streamfair_sso_inner_steps_total", {"model": "base"}) == 9
    replacement = run_sso(m=3, batches=1)  # e.g. restored from a checkpoint: its counts start afresh
    metrics.observe_sso(replacement, "base")
    assert get("streamfair_sso_oracle_calls_total", {"model": "base"}) == 4  # a counter never goes down
    assert get("streamfair_sso_inner_steps_total", {"model": "base"}) == 12


def test_river_sso_is_exported_too():
    river = RiverSSO(linear_model.LinearRegression(optimizer=optim.SGD(0.01)), m=4)
    river.learn_batch([{"a": 1.0}, {"a": -1.0}, {"a": 0.5}], ys=[0.5, -1.5, 0.2])
    metrics = SurrogateMetrics(models=["river"])
    metrics.observe_sso(river, "river")
    get = metrics.registry.get_sample_value
    assert get("streamfair_sso_oracle_calls_total", {"model": "river"}) == river.n_oracle_calls == 1
    assert get("streamfair_sso_inner_steps_total", {"model": "river"}) == river.n_inner_steps == 12


def test_a_tuner_before_its_first_step_exports_version_zero_only():
    tuner = MetricWeightTuner(3, 2, group_one_error, every=500, window=1000)
    metrics = SurrogateMetrics()
    metrics.observe_tuner(tuner)
    get = metrics.registry.get_sample_value
    assert get("streamfair_tuner_weights_version", {"model": "default"}) == 0
    assert get("streamfair_tuner_outer_iterations_total", {"model": "default"}) == 0
    assert get("streamfair_blackbox_metric", {"model": "default"}) is None


def test_exposition_passes_promtool_and_labels_are_bounded():
    registry = CollectorRegistry()
    fairness = StreamfairMetrics(groups=["0", "1"], eps=0.02, registry=registry)  # shares the registry: no clash
    metrics = SurrogateMetrics(models=["upstream", "base"], registry=registry)
    metrics.observe_tuner(run_tuner(), "upstream")
    metrics.observe_sso(run_sso(), "base")
    text = generate_latest(registry)
    promtool = shutil.which("promtool")
    assert promtool, "promtool must be on PATH"
    result = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), result
    names = set()
    for family in text_string_to_metric_families(text.decode()):
        names.add(family.name)
        for sample in family.samples:
            assert sample.name.startswith("streamfair_")
            if family.name.startswith(("streamfair_sso", "streamfair_gradest", "streamfair_tuner",
                                       "streamfair_blackbox", "streamfair_projection", "streamfair_surrogate",
                                       "streamfair_psi")):
                assert set(sample.labels) <= LABELS
                assert sample.labels["model"] in {"upstream", "base"}
                assert sample.labels.get("cell", "0") in {"0", "1"}
                assert math.isfinite(sample.value)
    counters = {f.name for f in text_string_to_metric_families(text.decode()) if f.type == "counter"}
    assert {"streamfair_sso_oracle_calls", "streamfair_sso_inner_steps", "streamfair_tuner_outer_iterations",
            "streamfair_tuner_skipped_steps"} <= counters  # exposed as <name>_total
    assert fairness.registry is registry


def test_invalid_arguments():
    with pytest.raises(ValueError, match="models"):
        SurrogateMetrics(models=[])
    with pytest.raises(ValueError, match="models"):
        SurrogateMetrics(models=["a", "a"])
    with pytest.raises(ValueError, match="model must be one of"):
        SurrogateMetrics(models=["a"]).observe_sso(run_sso(), "b")
