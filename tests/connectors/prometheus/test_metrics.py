"""Metrics without a broker: naming, exposition (promtool), the observer on a fake daemon, HTTP probes,
and the live plug-in fairness estimate against the audited one on a stream where tau is exact."""

from __future__ import annotations

import logging
import subprocess
import time
import urllib.error
import urllib.request
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest
from scipy.stats import norm

from connectors.kafka.broker import free_port
from connectors.kafka.codec import REASONS
from connectors.kafka.config import ConfigError
from connectors.prometheus import (
    HEALTH_PATH,
    LATENCY_BUCKETS,
    READY_PATH,
    AuditWindow,
    DaemonMetrics,
    StreamfairMetrics,
    WeightedHistogram,
    make_observer,
    serve,
)
from connectors.prometheus.report import read_history
from streamfair import Diagnostics, FairRegressionPostProcessor, evaluate
from tests.support.metrics_fakes import GROUPS, FakeDaemon, TableModel, drive, make_config, make_task, value

ALLOWED_LABELS = {"partition", "group", "topic", "reason", "kind", "outcome", "multiplier", "le", "version",
                  "guarantee", "group_id", "input_topic"}


# ---------------------------------------------------------------------------- naming and exposition
def test_names_units_and_labels_follow_the_conventions():
    config = make_config()
    observer = DaemonMetrics(config)
    drive(observer, FakeDaemon())
    observer.fairness.set_dro_weights(0, [0.3, 0.7], robust_value=0.2)
    families = [f for f in observer.registry.collect() if not f.name.startswith(("process_", "python_"))]
    assert len(families) >= 30
    for family in families:
        assert family.name.startswith("streamfair_"), family.name
        for sample in family.samples:
            assert set(sample.labels) <= ALLOWED_LABELS, (family.name, sample.labels)
            if family.type == "counter" and not sample.name.endswith("_created"):
                assert sample.name.endswith("_total"), sample.name
        if family.type == "histogram":
            assert family.name.endswith("_seconds"), family.name
            bounds = sorted({float(s.labels["le"]) for s in family.samples if s.name.endswith("_bucket")})
            assert bounds[0] <= 1e-6 and bounds[1] <= 2.5e-6 and bounds[-1] == float("inf"), family.name
        values = Counter()
        for sample in family.samples:
            for name in ("partition", "group", "reason", "topic"):
                if name in sample.labels:
                    values[name, sample.labels[name]] += 1
        assert {v for (n, v) in values if n == "partition"} <= {"0", "2"}
        assert {v for (n, v) in values if n == "group"} <= set(GROUPS)
        assert {v for (n, v) in values if n == "reason"} <= set(REASONS)
        assert {v for (n, v) in values if n == "topic"} <= {"input", "feedback"}


def test_exposition_passes_promtool_check_metrics(prometheus_tools):
    observer = DaemonMetrics(make_config())
    drive(observer, FakeDaemon())
    observer.fairness.set_dro_weights(0, [0.3, 0.7], robust_value=0.2)
    text = generate_latest(observer.registry)
    result = subprocess.run([prometheus_tools["promtool"], "check", "metrics"], input=text, capture_output=True)
    assert result.returncode == 0 and not result.stdout.strip() and not result.stderr.strip(), result
    # and promtool does notice a badly named counter: the check can fail
    bad = CollectorRegistry()
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    class Bad:
        def collect(self):
            yield GaugeMetricFamily("streamfair_requests_total", "a gauge named like a counter", value=1)
            yield CounterMetricFamily("streamfairRequestsMs", "", value=1)

    bad.register(Bad())
    result = subprocess.run([prometheus_tools["promtool"], "check", "metrics"], input=generate_latest(bad),
                            capture_output=True)
    assert result.returncode != 0 or result.stdout.strip() or result.stderr.strip()


def test_weighted_histogram_equals_repeated_observations():
    weighted_registry, plain_registry = CollectorRegistry(), CollectorRegistry()
    weighted = WeightedHistogram("streamfair_x_seconds", "x", weighted_registry)
    plain = Histogram("streamfair_x_seconds", "x", buckets=LATENCY_BUCKETS, registry=plain_registry)
    rng = np.random.default_rng(3)
    for _ in range(50):
        v, n = float(10 ** rng.uniform(-7, 1.5)), int(rng.integers(0, 6))
        weighted.observe(v, n)
        for _ in range(n):
            plain.observe(v)
    weighted.observe(LATENCY_BUCKETS[3], 2)  # a value on a bound falls in that bucket (le is inclusive)
    plain.observe(LATENCY_BUCKETS[3])
    plain.observe(LATENCY_BUCKETS[3])

    def samples(registry):
        return {(s.name, tuple(sorted(s.labels.items()))): s.value for f in registry.collect() for s in f.samples
                if not s.name.endswith("_created")}

    a, b = samples(weighted_registry), samples(plain_registry)
    assert a.keys() == b.keys()
    for key in a:
        assert a[key] == pytest.approx(b[key], rel=1e-12), key


# ---------------------------------------------------------------------------- the observer
def test_observer_follows_the_daemon():
    config = make_config()
    observer = DaemonMetrics(config)
    daemon = FakeDaemon()
    drive(observer, daemon)
    reg = observer.registry
    assert value(reg, "streamfair_messages_consumed_total", topic="input") == 10
    assert value(reg, "streamfair_messages_consumed_total", topic="feedback") == 13  # 12 valid + 1 dead
    assert value(reg, "streamfair_messages_produced_total") == 9
    assert value(reg, "streamfair_dead_letters_total", topic="input", reason="invalid_json") == 1
    assert value(reg, "streamfair_dead_letters_total", topic="feedback", reason="bad_group") == 1
    assert value(reg, "streamfair_errors_total", kind="checkpoint_failed") == 1
    assert value(reg, "streamfair_errors_total", kind="batch_failed") == 1
    assert value(reg, "streamfair_labels_total", outcome="applied") == 7
    assert value(reg, "streamfair_labels_total", outcome="unmatched") == 2
    assert value(reg, "streamfair_rewinds_total") == 1
    # latency: the input poll counted once per record, the feedback poll not at all
    assert value(reg, "streamfair_message_processing_seconds_count") == 10
    assert value(reg, "streamfair_message_processing_seconds_sum") == pytest.approx(0.002)
    assert value(reg, "streamfair_message_processing_seconds_bucket", le="0.00025") == 10
    assert value(reg, "streamfair_message_processing_seconds_bucket", le="0.0001") == 0
    assert value(reg, "streamfair_update_seconds_count") == 9
    assert value(reg, "streamfair_update_seconds_sum") == pytest.approx(0.009)
    assert value(reg, "streamfair_checkpoints_total") == 2
    assert value(reg, "streamfair_checkpoint_failures_total") == 1
    assert value(reg, "streamfair_checkpoint_duration_seconds_count") == 1
    assert 0 <= value(reg, "streamfair_checkpoint_age_seconds") < 5
    assert value(reg, "streamfair_consumer_lag_records", partition="0") == 5
    assert value(reg, "streamfair_assigned_partitions") == 2
    assert value(reg, "streamfair_ready") == 1
    # live fairness equals the post-processor's own diagnostics
    for partition, task in daemon.tasks.items():
        d = task.fair.diagnostics()
        for g, group in enumerate(GROUPS):
            labels = {"partition": str(partition), "group": group}
            assert value(reg, "streamfair_live_fairness_gap", **labels) == d.group_unfairness[g]
            assert value(reg, "streamfair_live_fairness_ks", **labels) == d.group_ks[g]
            assert value(reg, "streamfair_live_prediction_mean", **labels) == d.group_mean[g]
        assert value(reg, "streamfair_postprocessor_samples", partition=str(partition)) == 300
        assert value(reg, "streamfair_postprocessor_dual_norm", partition=str(partition), multiplier="v") \
            == d.dual_norms[1]
    # audited: the feedback scored with the task's models, served by its post-processor, evaluated
    task = daemon.tasks[0]
    x = [i % 6 for i in range(12)]
    etas = [TableModel().predict_one({"x": v}) for v in x]
    taus = [[1 - TableModel.q[v], TableModel.q[v]] for v in x]
    expected = evaluate(task.fair.proba_many(etas, taus), task.fair.atoms, [0.1 * i for i in range(12)],
                        [i % 2 for i in range(12)])
    assert value(reg, "streamfair_audited_squared_error", partition="0") == pytest.approx(expected.risk)
    for g, group in enumerate(GROUPS):
        assert value(reg, "streamfair_audited_fairness_gap", partition="0", group=group) == \
            pytest.approx(expected.atom_unfairness[g])
        assert value(reg, "streamfair_audited_window_samples", partition="0", group=group) == 6
    assert value(reg, "streamfair_audited_squared_error", partition="2") is None  # no feedback there


def test_revoked_partitions_disappear_and_new_tasks_restart_the_update_counters():
    observer = DaemonMetrics(make_config())
    daemon = FakeDaemon()
    drive(observer, daemon)
    reg = observer.registry
    del daemon.tasks[0]
    daemon.lags = {2: 0}
    observer.on_revoked(daemon, [0])
    for name in ("streamfair_live_fairness_gap", "streamfair_audited_fairness_gap"):
        assert value(reg, name, partition="0", group="1") is None
    assert value(reg, "streamfair_consumer_lag_records", partition="0") is None
    assert value(reg, "streamfair_postprocessor_samples", partition="2") == 300
    assert value(reg, "streamfair_assigned_partitions") == 1
    # a rewound task starts its learn counters from zero: its 4 samples count, not a negative delta
    before = value(reg, "streamfair_update_seconds_count")
    daemon.tasks[2].learn_seconds, daemon.tasks[2].learned = 0.5, 100
    daemon.stats.consumed += 1
    observer.on_records(daemon, 2, 1, 0, 0.001)
    daemon.tasks[2] = make_task(2, n=10)
    daemon.tasks[2].learn_seconds, daemon.tasks[2].learned = 0.004, 4
    daemon.stats.consumed += 1
    observer.on_records(daemon, 2, 1, 0, 0.001)
    assert value(reg, "streamfair_update_seconds_count") == before + 104
    assert value(reg, "streamfair_update_seconds_sum") == pytest.approx(0.009 + 0.5 + 0.004)


def test_a_silent_broker_makes_the_daemon_unready_naming_it_and_its_lag_unknown():
    observer = DaemonMetrics(make_config(**{"kafka.bootstrap_servers": "k1:9092,k2:9092",
                                            "kafka.contact_timeout_seconds": 30}))
    daemon = FakeDaemon()
    drive(observer, daemon)
    reg = observer.registry
    assert observer.ready() == (True, "ready") and value(reg, "streamfair_consumer_lag_records", partition="0") == 5
    assert 0 <= value(reg, "streamfair_broker_last_contact_seconds") < 5  # since the start: no round trip yet
    daemon.stats.last_contact = time.monotonic() - 31  # the last round trip with the broker, 31 s ago
    ok, reason = observer.ready()  # measured when asked: the daemon's loop may be waiting on the broker
    assert not ok and reason.startswith("not ready: no round trip with the broker (k1:9092, k2:9092) for 31.")
    assert reason.endswith(" s (kafka.contact_timeout_seconds = 30)")
    assert value(reg, "streamfair_ready") == 0 and value(reg, "streamfair_broker_last_contact_seconds") >= 31
    daemon.lags = {}  # what the daemon's lag() says while the broker is silent
    observer.on_loop(daemon)
    assert {p: value(reg, "streamfair_consumer_lag_records", partition=p) for p in "02"} == {"0": None, "2": None}
    daemon.stats.last_contact, daemon.lags = time.monotonic(), {0: 7, 2: 1}  # the broker answers again
    observer.on_loop(daemon)
    assert observer.ready() == (True, "ready") and value(reg, "streamfair_ready") == 1
    assert {p: value(reg, "streamfair_consumer_lag_records", partition=p) for p in "02"} == {"0": 7, "2": 1}
    observer.on_stop(daemon)
    assert observer.ready() == (False, "stopping") and value(reg, "streamfair_ready") == 0


def test_history_file_is_written_at_each_sample(tmp_path):
    observer = DaemonMetrics(make_config(**{"metrics.history": tmp_path / "h.jsonl", "metrics.port": 9100}))
    daemon = FakeDaemon()
    drive(observer, daemon)
    observer.on_stop(daemon)  # samples once more and closes the file
    history = read_history(tmp_path / "h.jsonl")
    assert [r.partition for r in history.records] == ["0", "2", "0", "2"]
    first = history.records[0]
    d = daemon.tasks[0].fair.diagnostics()
    assert first.live_gap == d.group_unfairness.tolist() and first.n_samples == 300
    assert first.audited_samples == 12 and first.risk is not None
    assert history.records[1].risk is None


def test_a_history_of_another_target_is_set_aside_and_a_new_one_started(tmp_path, caplog):
    path = tmp_path / "h.jsonl"
    observer = DaemonMetrics(make_config(**{"metrics.history": path, "metrics.port": 9100}))
    drive(observer, FakeDaemon())
    observer.on_stop(FakeDaemon())
    before = path.read_bytes()
    retuned = make_config(**{"metrics.history": path, "metrics.port": 9100, "postprocessor.eps": 0.01})
    observer = DaemonMetrics(retuned)  # the daemon starts (its history used to refuse it: exit 2)
    daemon = FakeDaemon()
    daemon.config, daemon.log = retuned, logging.getLogger("streamfair.test")
    with caplog.at_level(logging.WARNING, logger="streamfair.test"):
        observer.on_start(daemon)
    assert (tmp_path / "h.1.jsonl").read_bytes() == before
    assert read_history(path).target == [0.01, 0.01] and not read_history(path).records
    [record] = caplog.records
    assert record.getMessage() == "history_set_aside" and "h.1.jsonl" in str(vars(record))
    # the same target again appends to the new history
    assert DaemonMetrics(retuned) and not (tmp_path / "h.2.jsonl").exists()


@pytest.mark.slow
def test_liveness_and_readiness_over_http():
    config = make_config(**{"kafka.max_poll_interval_ms": 1000, "kafka.session_timeout_ms": 900,
                            "kafka.heartbeat_interval_ms": 300})
    observer = DaemonMetrics(config)
    server = observer.start_server(0, "127.0.0.1")
    base = f"http://127.0.0.1:{server.port}"

    def get(path):
        try:
            with urllib.request.urlopen(base + path, timeout=5) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode()

    try:
        assert get(HEALTH_PATH)[0] == 200  # starting: alive before the first poll
        assert get(READY_PATH)[0] == 503
        daemon = FakeDaemon(tasks={0: make_task(0, n=10)}, ready=True)
        observer.on_loop(daemon)
        assert get(HEALTH_PATH) == (200, "ok\n") and get(READY_PATH) == (200, "ready\n")
        status, body = get("/metrics")
        assert status == 200 and 'streamfair_postprocessor_samples{partition="0"} 10.0' in body
        assert get("/nope")[0] == 404
        time.sleep(1.1)  # no poll for longer than max_poll_interval_ms
        status, body = get(HEALTH_PATH)
        assert status == 503 and body.startswith("stalled")
        observer.on_loop(daemon)
        assert get(HEALTH_PATH)[0] == 200
        observer.on_stop(daemon)  # readiness goes, and the server is closed
        with pytest.raises(urllib.error.URLError):
            get(READY_PATH)
    finally:
        observer.close()


@pytest.mark.slow
def test_make_observer_serves_and_reports_a_busy_port_as_a_config_error():
    port = free_port()
    observer = make_observer(make_config(**{"metrics.port": port, "metrics.host": "127.0.0.1"}))
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            assert b"streamfair_build_info{" in response.read()
        with pytest.raises(ConfigError, match="metrics.port: cannot listen"):
            make_observer(make_config(**{"metrics.port": port, "metrics.host": "127.0.0.1"}))
    finally:
        observer.close()


# ---------------------------------------------------------------------------- library use and validation
@pytest.mark.slow
def test_library_registry_is_private_and_served():
    fair = FairRegressionPostProcessor(profile="paper", L=5, n_groups=2, horizon=50, eps=0.05)
    a, b = StreamfairMetrics(GROUPS, fair.eps), StreamfairMetrics(GROUPS, fair.eps)  # no duplicate-name clash
    assert a.registry is not b.registry
    for i in range(60):
        with a.time_update():
            fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
    diagnostics, report = a.observe(fair, partition=3)
    assert report is None and a.registry.get_sample_value("streamfair_update_seconds_count") == 60
    server = serve(a.registry, port=0, host="127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            text = response.read().decode()
        gap = float(diagnostics.group_unfairness[1])
        assert f'streamfair_live_fairness_gap{{group="1",partition="3"}} {gap!r}' in text
    finally:
        server.close()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"groups": ["a"], "eps": 0.1}, "groups"),
        ({"groups": ["a", "a"], "eps": 0.1}, "groups"),
        ({"groups": ["a", "b"], "eps": -0.1}, "eps"),
        ({"groups": ["a", "b"], "eps": [0.1, 0.2, 0.3]}, "eps"),
        ({"groups": ["a", "b"], "eps": 0.1, "audit_window": 0}, "audit_window"),
    ],
)
def test_streamfair_metrics_validates(kwargs, match):
    with pytest.raises(ValueError, match=match):
        StreamfairMetrics(**kwargs)


def test_audit_window_keeps_the_last_rows_and_validates():
    rng = np.random.default_rng(5)
    atoms = np.linspace(-1, 1, 5)
    window = AuditWindow(atoms, 3, size=40)
    proba = rng.dirichlet(np.ones(5), 100)
    y, groups = rng.uniform(-1, 1, 100), rng.integers(0, 3, 100)
    for start in range(0, 100, 7):  # uneven chunks wrap around the ring
        window.add(proba[start : start + 7], y[start : start + 7], groups[start : start + 7])
    expected = evaluate(proba[-40:], atoms, y[-40:], groups[-40:], n_groups=3)
    got = window.report()
    assert window.count == 40 and got.risk == pytest.approx(expected.risk)
    np.testing.assert_allclose(got.atom_unfairness, expected.atom_unfairness)
    np.testing.assert_allclose(got.ks_unfairness, expected.ks_unfairness)
    assert AuditWindow(atoms, 2, 5).report() is None
    one_group = AuditWindow(atoms, 2, 5)
    one_group.add(proba[:3], y[:3], [0, 0, 0])
    assert one_group.report() is None  # group 1 unseen: no audited gap yet
    with pytest.raises(ValueError, match="groups"):
        window.add(proba[:2], y[:2], [0, 3])
    with pytest.raises(ValueError, match="proba"):
        window.add(proba[:2, :4], y[:2], [0, 1])
    with pytest.raises(ValueError, match="size"):
        AuditWindow(atoms, 2, 0)


def test_an_add_of_more_rows_than_the_window_keeps_the_last_ones():
    window = AuditWindow([0.0, 1.0], n_groups=2, size=3)
    window.add([[1.0, 0.0]] * 5, y=[5.0, 4.0, 0.0, 1.0, 2.0], groups=[0, 1, 0, 1, 0])
    # the last three rows, always served 0: labels 0 and 2 in group 0, 1 in group 1
    report = window.report()
    assert window.count == 3 and window.group_counts().tolist() == [2, 1]
    assert report.risk == pytest.approx(5 / 3) and report.group_risk.tolist() == [2.0, 1.0]


def test_a_window_over_one_atom_audits_the_constant_predictor():
    window = AuditWindow([0.5], n_groups=2, size=4)
    window.add([[1.0]] * 3, y=[0.5, 1.5, -0.5], groups=[0, 1, 1])
    report = window.report()
    assert report.risk == pytest.approx(2 / 3) and report.group_risk.tolist() == [0.0, 1.0]
    assert report.atom_unfairness.tolist() == [0.0, 0.0] and report.ks_unfairness.tolist() == [0.0, 0.0]


def diagnostics_of(n_samples: int) -> Diagnostics:
    """Diagnostics whose every exported field has a value of its own, so that a gauge showing another field fails."""
    return Diagnostics(n_samples=n_samples, n_clipped=3, epoch=4, epoch_horizon=50, epoch_progress=0.25,
                       atom_gaps=np.zeros((3, 2)), group_unfairness=np.array([0.11, 0.12]),
                       group_ks=np.array([0.21, 0.22]), group_proba=np.full((3, 2), 1 / 3),
                       group_mean=np.array([-0.31, 0.32]), target=np.array([0.05, 0.05]), violation=0.41,
                       gradient_mapping_norm=0.51, mapping_step=0.01, dual_norms=(0.61, 0.62),
                       group_present=np.array([True, False]))


class Served:
    """A post-processor as the metrics see it: its ``diagnostics()``."""

    def __init__(self, diagnostics: Diagnostics):
        self._diagnostics = diagnostics

    def diagnostics(self) -> Diagnostics:
        return self._diagnostics


def test_observe_exports_each_diagnostic_under_its_own_name():
    metrics = StreamfairMetrics(GROUPS, ks=0.05)
    metrics.observe(Served(diagnostics_of(n_samples=7)), partition=1)
    reg = metrics.registry
    expected = {"streamfair_postprocessor_samples": 7, "streamfair_postprocessor_clipped_samples": 3,
                "streamfair_postprocessor_epoch": 4, "streamfair_postprocessor_epoch_horizon_samples": 50,
                "streamfair_postprocessor_epoch_progress_ratio": 0.25,
                "streamfair_postprocessor_gradient_mapping_norm": 0.51, "streamfair_live_violation": 0.41}
    assert {name: value(reg, name, partition="1") for name in expected} == expected
    assert [value(reg, "streamfair_postprocessor_dual_norm", partition="1", multiplier=name)
            for name in ("lambda", "v")] == [0.61, 0.62]
    per_group = {"streamfair_live_fairness_gap": [0.11, 0.12], "streamfair_live_fairness_ks": [0.21, 0.22],
                 "streamfair_live_prediction_mean": [-0.31, 0.32]}
    assert {name: [value(reg, name, partition="1", group=g) for g in GROUPS] for name in per_group} == per_group
    # group 0 is in the stream, group 1 absent: its KS says nothing about it
    assert [value(reg, "streamfair_group_present", partition="1", group=g) for g in GROUPS] == [1.0, 0.0]


def test_group_presence_follows_the_stream_and_appears_with_the_first_sample_learned():
    """A declared group the stream never shows reads absent (0); the others present (1)."""
    fair = FairRegressionPostProcessor(L=5, n_groups=3, ks=0.05, seed=0)
    metrics = StreamfairMetrics(["a", "b", "c"], ks=fair.ks)
    reg = metrics.registry
    metrics.observe(fair)
    assert all(value(reg, "streamfair_group_present", partition="0", group=g) is None for g in "abc")
    for i in range(300):
        fair.learn_one(0.5 if i % 2 else -0.5, [0.2, 0.8, 0.0] if i % 2 else [0.8, 0.2, 0.0])
    diagnostics, _ = metrics.observe(fair)
    assert diagnostics.group_present.tolist() == [True, True, False]
    assert [value(reg, "streamfair_group_present", partition="0", group=g) for g in "abc"] == [1.0, 1.0, 0.0]
    assert value(reg, "streamfair_live_fairness_ks", partition="0", group="c") == 0.0


def test_live_fairness_appears_with_the_first_sample_learned():
    fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05, seed=0)
    metrics = StreamfairMetrics(GROUPS, ks=fair.ks)
    reg = metrics.registry
    live = ("streamfair_live_fairness_gap", "streamfair_live_fairness_ks", "streamfair_live_prediction_mean")
    metrics.observe(fair)
    assert value(reg, "streamfair_postprocessor_samples", partition="0") == 0
    assert value(reg, "streamfair_live_violation", partition="0") is None
    assert all(value(reg, name, partition="0", group=g) is None for name in live for g in GROUPS)
    fair.learn_one(0.5, [0.2, 0.8])
    diagnostics, _ = metrics.observe(fair)
    assert [value(reg, "streamfair_live_fairness_ks", partition="0", group=g) for g in GROUPS] == \
        diagnostics.group_ks.tolist()


def test_time_update_counts_each_sample_of_the_block_at_its_share_of_the_duration(monkeypatch):
    """A block of 4 samples that took 0.8 s is 4 updates of 0.2 s; a block of no sample counts nothing."""
    clock = iter([10.0, 10.8, 20.0, 20.3])
    monkeypatch.setattr("connectors.prometheus.fairness.time", SimpleNamespace(perf_counter=lambda: next(clock)))
    metrics = StreamfairMetrics(GROUPS, ks=0.05)
    with metrics.time_update(4):
        pass
    with metrics.time_update(0):
        pass
    reg = metrics.registry
    assert value(reg, "streamfair_update_seconds_count") == 4
    assert value(reg, "streamfair_update_seconds_sum") == pytest.approx(0.8)
    assert value(reg, "streamfair_update_seconds_bucket", le="0.1") == 0
    assert value(reg, "streamfair_update_seconds_bucket", le="0.25") == 4


def test_each_group_gets_its_own_target():
    ks = StreamfairMetrics(["a", "b", "c"], ks=[0.05, 0.1, 0.2]).registry
    assert [value(ks, "streamfair_fairness_ks_target", group=g) for g in "abc"] == [0.05, 0.1, 0.2]
    eps = StreamfairMetrics(["a", "b"], eps=[0.01, 0.02]).registry
    assert [value(eps, "streamfair_fairness_eps", group=g) for g in "ab"] == [0.01, 0.02]
    assert value(eps, "streamfair_fairness_ks_target", group="a") is None


def test_audited_gauges_of_a_window_computed_by_hand():
    """Atoms 0, 1, 2. Group a: served (1/2, 1/2, 0) and 2 for labels 0 (squared errors 1/2 and 4); group b:
    served 1 for a label 1 (error 0).  The laws: a (1/4, 1/4, 1/2), b (0, 1, 0), all (1/6, 1/2, 1/3)."""
    metrics = StreamfairMetrics(GROUPS, ks=0.05)
    metrics.add_feedback(0, [0.0, 1.0, 2.0], [[0.5, 0.5, 0.0], [0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], y=[0.0, 0.0, 1.0],
                         groups=[0, 0, 1])
    metrics.observe_audit(0)
    reg = metrics.registry

    def per_group(name):
        return [value(reg, name, partition="0", group=g) for g in GROUPS]

    assert value(reg, "streamfair_audited_squared_error", partition="0") == pytest.approx(1.5)
    assert per_group("streamfair_audited_group_squared_error") == pytest.approx([2.25, 0.0])
    assert per_group("streamfair_audited_window_samples") == [2, 1]
    assert per_group("streamfair_audited_fairness_gap") == pytest.approx([0.25, 0.5])  # atom 1: 1/4 and 1 vs 1/2
    assert per_group("streamfair_audited_fairness_ks") == pytest.approx([1 / 6, 1 / 3])  # CDF at 1: 1/2, 1 vs 2/3


def test_feedback_over_other_atoms_starts_a_new_audit_window():
    metrics = StreamfairMetrics(GROUPS, ks=0.05, audit_window=10)
    metrics.add_feedback(0, [0.0, 1.0], [[1.0, 0.0]] * 3, y=[0.0, 1.0, 0.0], groups=[0, 1, 0])
    metrics.add_feedback(0, [0.0, 2.0], [[0.0, 1.0], [1.0, 0.0]], y=[1.0, 1.0], groups=[0, 1])
    assert metrics.audited_samples(0) == 2
    report = metrics.observe_audit(0)
    # the two rows served over (0, 2): group 0 always 2, group 1 always 0, both labelled 1
    assert report.risk == 1.0 and report.group_risk.tolist() == [1.0, 1.0]
    assert report.ks_unfairness.tolist() == [0.5, 0.5]


def test_a_dro_weight_of_zero_is_exported():
    metrics = StreamfairMetrics(GROUPS, ks=0.05)
    metrics.set_dro_weights(0, [0.0, 1.0], robust_value=0.3)
    reg = metrics.registry
    assert [value(reg, "streamfair_dro_weight", partition="0", group=g) for g in GROUPS] == [0.0, 1.0]


def test_forgetting_a_partition_drops_every_series_of_it_and_none_of_another():
    metrics = StreamfairMetrics(GROUPS, ks=0.05)
    for partition in (1, 3):
        metrics.add_feedback(partition, [0.0, 1.0], [[1.0, 0.0], [0.0, 1.0]], [0.0, 1.0], [0, 1])
        metrics.observe(Served(diagnostics_of(n_samples=7)), partition)
        metrics.set_dro_weights(partition, [0.4, 0.6], robust_value=0.3)

    def series(partition):
        return sorted((sample.name, tuple(sorted(sample.labels.items()))) for family in metrics.registry.collect()
                      for sample in family.samples if sample.labels.get("partition") == partition)

    kept = series("1")
    # per group: 3 live and the presence, 4 audited, 1 DRO weight; per partition: the live violation,
    # 6 convergence gauges, 2 dual norms, the audited risk and the robust value
    assert len(kept) == len(series("3")) == 2 * (4 + 4 + 1) + 1 + 6 + 2 + 1 + 1
    metrics.forget_partition(3)
    assert series("3") == [] and series("1") == kept


# ---------------------------------------------------------------------------- live vs audited
Q = np.array([0.1, 0.25, 0.4, 0.6, 0.75, 0.9])  # P(S = 1 | x) for x in 0..5, uniform x: p = (1/2, 1/2)
CENTERS = np.array([-0.7, -0.4, -0.1, 0.1, 0.4, 0.7])


def exact_tau_stream(n, seed):
    """x uniform on 6 cells, S drawn from tau(x) exactly, eta depending on x (so on S)."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, n)
    tau = np.stack([1 - Q[x], Q[x]], axis=1)
    s = (rng.random(n) < Q[x]).astype(int)
    eta = np.clip(CENTERS[x] + 0.1 * rng.standard_normal(n), -1, 1)
    return eta, tau, s, eta + 0.2 * rng.standard_normal(n)


def live_and_audited(seed, shrink=1.0, window=4000, n=5000):
    """Feed ``shrink * tau + (1 - shrink) / 2`` as tau (1: exact); returns live, audited and tolerances.

    Both estimates describe the same served predictor on the same ``window`` samples, so they
    differ only because the live one weighs sample i into group s by tau_s(x_i) / sum tau_s where
    the audited one uses 1{s_i = s} / sum 1{s = s}.  To first order (linearizing both ratios) the
    per-atom difference is a mean of i.i.d. zero-mean terms
    psi_i(l) = (pi_i(l) - P_s(l)) (tau_is - 1{s_i=s}) / p_s, P_s the group's law; the same holds
    for the cumulative sums behind KS.
    |max_l |a_l| - max_l |b_l|| <= max_l |a_l - b_l|, so with z from a Bonferroni bound over the
    2 * K * m per-atom and cumulative differences at a total false-failure probability of 1e-3,
    the tolerances z * max_l SE_l are exceeded with probability < 1e-3 when tau is exact.
    """
    eta, tau, s, y = exact_tau_stream(n, seed)
    fed = shrink * tau + (1 - shrink) / 2
    fair = FairRegressionPostProcessor(
        profile="paper", L=10, p=[0.5, 0.5], eps=0.05, horizon=1000, window=window, seed=seed
    )
    fair.learn_many(eta, fed)
    metrics = StreamfairMetrics(GROUPS, fair.eps, audit_window=window)
    recent = slice(n - window, n)  # the diagnostics' window: the last `window` samples learned
    proba = fair.proba_many(eta[recent], fed[recent])  # what the served predictor gives them
    metrics.add_feedback(0, fair.atoms, proba, y[recent], s[recent])
    metrics.observe(fair, 0)
    reg = metrics.registry
    live = np.array(
        [[value(reg, f"streamfair_live_fairness_{k}", partition="0", group=g) for g in GROUPS] for k in ("gap", "ks")]
    )
    audited = np.array(
        [
            [value(reg, f"streamfair_audited_fairness_{k}", partition="0", group=g) for g in GROUPS]
            for k in ("gap", "ks")
        ]
    )
    member = np.eye(2)[s[recent]]
    m, z = fair.atoms.size, norm.isf(1e-3 / (2 * 2 * 2 * fair.atoms.size))
    tolerance = np.zeros((2, 2))
    for g in range(2):
        law = proba.T @ member[:, g] / member[:, g].sum()
        psi = (proba - law) * (tau[recent][:, [g]] - member[:, [g]]) / 0.5
        tolerance[0, g] = z * (psi.std(axis=0, ddof=1) / np.sqrt(window)).max()
        tolerance[1, g] = z * (np.cumsum(psi, axis=1).std(axis=0, ddof=1) / np.sqrt(window)).max()
    assert m == 21
    return live, audited, tolerance


@pytest.mark.parametrize("seed", [0, 1])
def test_live_fairness_agrees_with_audited_when_tau_is_exact(seed):
    live, audited, tolerance = live_and_audited(seed)
    assert np.all(audited > 0.03)  # an unfair-enough served predictor: the gaps are not trivially 0
    assert np.all(np.abs(live - audited) <= tolerance), (live, audited, tolerance)
    assert np.all(tolerance < 0.06)  # and the tolerance is far below the KS distances measured (~0.23)


def test_live_fairness_disagrees_when_tau_is_miscalibrated():
    # tau shrunk toward uniform (an under-confident group classifier): the plug-in estimate is biased
    live, audited, tolerance = live_and_audited(0, shrink=0.3)
    assert np.all(np.abs(live - audited) > tolerance), (live, audited, tolerance)
