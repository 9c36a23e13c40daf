"""A real Prometheus scrapes a running ``streamfair serve`` that processes a stream on the real broker.

The daemon runs in a subprocess (metrics on a free port), Prometheus (on PATH: ``make test`` sets it
up) on another free 127.0.0.1 port with a 1 s scrape/evaluation interval and the deploy alert
rules with every ``for:`` shortened to 1 s.  The stream is unfair and the daemon runs with a KS target
of 0, the paper profile and a horizon far beyond the test (the served predictor is still the unconstrained
one, as early in a run),
5% of the input is invalid JSON, and a feedback topic brings labels and groups.  The post-processor is
the group-robust one (``postprocessor.robust``), so the DRO panel has data too.  Then: every
dashboard query returns finite data, every alert expression returns data once its thresholds are
turned into ``bool`` comparisons (so every selector and join matches a real series), the fairness
and dead-letter alerts fire, the live exposition passes ``promtool check metrics``, the probes
answer, the down alert fires after the daemon stops, and the history it wrote renders as a report.
"""

from __future__ import annotations

import json
import math
import os
import pickle
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import numpy as np
import yaml
from kafka import KafkaProducer
from river import linear_model

from connectors.cli import commands as cli
from connectors.kafka.broker import free_port
from connectors.kafka.clients import ensure_topics
from connectors.kafka.config import load_config
from connectors.prometheus import HEALTH_PATH, READY_PATH
from connectors.prometheus.report import read_history
from tests.support import REPO
from tests.support.deploy_files import DEPLOY, alert_expressions, dashboard_queries, load_yaml

NAME = "metrics-it"
#: Panels with no data yet, and why (the test checks they are still empty: remove an entry when it lands).
AWAITING: dict[str, str] = {}
GRAFANA_VARIABLES = {"$__rate_interval": "5s", "$instance": ".*"}


# ---------------------------------------------------------------------------- PromQL helpers
def with_bool(expr: str) -> str:
    """``expr`` with every comparison made a ``bool`` comparison (0/1 instead of a filter).

    Label matchers and strings are left alone.  The result has a series wherever the alert's
    selectors, functions and joins find data, whatever the thresholds.
    """
    out, i, depth, quote = [], 0, 0, None
    while i < len(expr):
        c = expr[i]
        if quote:
            quote = None if c == quote and expr[i - 1] != "\\" else quote
        elif c in "\"'`":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif depth == 0 and c in "<>=!":
            op = expr[i : i + 2] if expr[i : i + 2] in ("==", "!=", ">=", "<=") else c
            if op in ("==", "!=", ">=", "<=", ">", "<"):
                out.append(op + " bool")
                i += len(op)
                continue
        out.append(c)
        i += 1
    return "".join(out)


def test_with_bool():
    assert with_bool('up{job="x",a!="b"} == 0') == 'up{job="x",a!="b"} == bool 0'
    assert (
        with_bool("a > on(x) group_left() (b + 1) and c <= 2") == "a > bool on(x) group_left() (b + 1) and c <= bool 2"
    )


def grafana(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    assert "$" not in expr, f"unknown Grafana variable in {expr}"
    return expr


class Prometheus:
    """``prometheus`` in a subprocess on 127.0.0.1 with its own storage."""

    def __init__(self, binary: str, directory: Path, target: str):
        config = load_yaml(DEPLOY / "prometheus" / "prometheus.yml")
        config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "1s"}
        config["scrape_configs"][0]["static_configs"] = [{"targets": [target]}]
        rules = load_yaml(DEPLOY / "prometheus" / "alerts.yml")
        for group in rules["groups"]:
            group["interval"] = "1s"
            for rule in group["rules"]:
                rule["for"] = "1s"  # the test-only variant: fire after one evaluation
        (directory / config["rule_files"][0]).write_text(yaml.safe_dump(rules))
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(directory / "prometheus.log", "wb")
        self.process = subprocess.Popen(
            [
                binary,
                f"--config.file={directory / 'prometheus.yml'}",
                f"--storage.tsdb.path={directory / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 20
        while not self._ready():
            assert self.process.poll() is None, (directory / "prometheus.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "prometheus did not become ready"
            time.sleep(0.1)

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(self.url + "/-/ready", timeout=1) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.loads(response.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[tuple[dict, float]]:
        return [(r["metric"], float(r["value"][1])) for r in self.api("query", query=expr)["result"]]

    def firing(self) -> set[str]:
        return {a["labels"]["alertname"] for a in self.api("alerts")["alerts"] if a["state"] == "firing"}

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


# ---------------------------------------------------------------------------- the run
def daemon_settings(broker, port: int, models: dict[str, Path], history: Path) -> str:
    return f"""
[kafka]
bootstrap_servers = ["{broker.bootstrap}"]
group_id = "{NAME}-group"
session_timeout_ms = 3000
heartbeat_interval_ms = 1000
[topics]
input = "{NAME}.in"
output = "{NAME}.out"
dead_letter = "{NAME}.dlq"
changelog = "{NAME}.changelog"
feedback = "{NAME}.fb"
partitions = 2
[processing]
checkpoint_every_messages = 200
checkpoint_every_seconds = 1.0
[postprocessor]
profile = "paper"
L = 10
horizon = 100000
ks = 0.0
seed = 3
robust = true
refresh = 50
[models]
eta = "{models["eta"]}"
tau = "{models["tau"]}"
features = ["x"]
learn = true
[metrics]
port = {port}
host = "127.0.0.1"
interval_seconds = 0.5
history = "{history}"
[log]
level = "WARNING"
"""


def wave(rng, start: int, n: int) -> tuple[list, list]:
    """``n`` unfair input records (group 1 scores higher; 1 in 20 is invalid JSON) and n/3 feedback records."""
    inputs, feedback = [], []
    for i in range(start, start + n):
        if i % 20 == 7:
            inputs.append((i % 2, b"{not json"))
            continue
        s = int(rng.integers(0, 2))
        tau = [0.85, 0.15] if s == 0 else [0.15, 0.85]
        eta = float(np.clip(0.7 * s - 0.35 + 0.15 * rng.standard_normal(), -1, 1))
        inputs.append((i % 2, json.dumps({"id": f"m{i}", "eta": eta, "tau": tau}).encode()))
        if i % 3 == 0:
            x = float(s + 0.3 * rng.standard_normal())
            feedback.append((i % 2, json.dumps({"id": f"m{i}", "features": {"x": x}, "y": eta, "s": s}).encode()))
    return inputs, feedback


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_prometheus_scrapes_the_daemon_dashboards_and_alerts_have_data(kafka_broker, prometheus_tools, tmp_path):
    models = {"eta": tmp_path / "eta.pkl", "tau": tmp_path / "tau.pkl"}
    models["eta"].write_bytes(pickle.dumps(linear_model.LinearRegression()))
    models["tau"].write_bytes(pickle.dumps(linear_model.LogisticRegression()))
    metrics_port = free_port()
    config_path = tmp_path / "streamfair.toml"
    history = tmp_path / "history.jsonl"
    config_path.write_text(daemon_settings(kafka_broker, metrics_port, models, history))
    config = load_config(config_path, env={})
    ensure_topics(config)
    queries = {f"panel {title}: {expr}": grafana(expr) for title, expr in dashboard_queries()}
    awaiting = {key for key in queries if key.split(":")[0].removeprefix("panel ") in AWAITING}
    queries.update({f"alert {name}: {expr}": with_bool(expr) for name, expr in alert_expressions()})
    expected_alerts = {"StreamfairFairnessAboveTarget", "StreamfairDeadLetterRateHigh"}
    prometheus = Prometheus(prometheus_tools["prometheus"], tmp_path, f"127.0.0.1:{metrics_port}")
    daemon = producer = None

    def unfair_everywhere() -> bool:  # the live KS is far above its target 0 (+ the 0.02 margin) everywhere
        gaps = prometheus.query("streamfair_live_fairness_ks")
        return len(gaps) == 4 and all(v > 0.02 for _, v in gaps)

    try:
        with open(tmp_path / "daemon.log", "wb") as log:
            daemon = subprocess.Popen(
                [sys.executable, "-m", "connectors.cli", "serve", "--config", str(config_path)],
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=log,
                stdin=subprocess.DEVNULL,
                env={k: v for k, v in os.environ.items() if not k.startswith("STREAMFAIR_")},
            )
        producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=5)
        rng = np.random.default_rng(17)
        pending, sent, deadline = set(queries) - awaiting, 0, time.monotonic() + 60
        while pending or not expected_alerts <= prometheus.firing() or not unfair_everywhere():
            assert daemon.poll() is None, (tmp_path / "daemon.log").read_text()[-3000:]
            assert time.monotonic() < deadline, (
                f"no data for: {sorted(pending)}; firing: {prometheus.firing()}; "
                f"KS: {prometheus.query('streamfair_live_fairness_ks')}"
            )
            if sent < 6000:  # keep the stream flowing, so rates and latencies have fresh samples
                inputs, feedback = wave(rng, sent, 300)
                for partition, value in inputs:
                    producer.send(config.topics.input, value=value, partition=partition)
                for partition, value in feedback:
                    producer.send(config.topics.feedback, value=value, partition=partition)
                producer.flush()
                sent += 300
            time.sleep(1.0)
            for key in sorted(pending):
                if any(math.isfinite(v) for _, v in prometheus.query(queries[key])):
                    pending.discard(key)
        for key in awaiting:
            values = [v for _, v in prometheus.query(queries[key])]
            assert not any(map(math.isfinite, values)), f"{key} has data now: take it out of AWAITING"
        # probes, and the live exposition passes promtool's lint
        base = f"http://127.0.0.1:{metrics_port}"
        assert get(base + HEALTH_PATH) == (200, "ok\n") and get(base + READY_PATH) == (200, "ready\n")
        status, exposition = get(base + "/metrics")
        lint = subprocess.run(
            [prometheus_tools["promtool"], "check", "metrics"], input=exposition.encode(), capture_output=True
        )
        assert status == 200 and lint.returncode == 0 and not lint.stdout.strip(), lint
        # the daemon goes away: `up` drops to 0 and the down alert fires
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(20) == 0
        deadline = time.monotonic() + 20
        while "StreamfairDown" not in prometheus.firing():
            assert time.monotonic() < deadline, f"StreamfairDown did not fire: {prometheus.firing()}"
            time.sleep(0.5)
        # the history the daemon wrote makes the report's picture
        records = read_history(history).records
        assert {r.partition for r in records} == {"0", "1"} and any(r.risk is not None for r in records)
        assert cli.main(["report", str(history), "-o", str(tmp_path / "report.png")]) == 0
        assert (tmp_path / "report.png").stat().st_size > 10000
    finally:
        if producer is not None:
            producer.close()
        if daemon is not None and daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        prometheus.stop()
