"""docs/own-model.md ("Bring your own model") end to end on the real broker.

The page's Python blocks run in order (scikit-learn models score a stream sent in the scores
schema; River models are pickled), its configuration is written with the test broker's address,
``streamfair serve`` runs as the page says (with ``--once``, so that it stops when the topic is
drained), then the page's reading block reads the fair predictions back and audits them with the
groups only the test data knows; ``streamfair report`` draws the history the daemon wrote.  A
second run serves raw features with the page's pickled River models.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition

from connectors.kafka.broker import free_port
from connectors.prometheus.report import read_history
from streamfair import evaluate_deterministic
from tests.support import REPO
from tests.support.docs_blocks import Block, python_blocks, run_blocks

PAGE = REPO / "docs" / "own-model.md"
TOML = re.compile(r"^```toml\n(.*?)^```", re.S | re.M)
BASH = re.compile(r"^```bash\n(.*?)^```", re.S | re.M)


def page_text() -> str:
    return PAGE.read_text(encoding="utf-8")


def config_text(bootstrap: str) -> str:
    """The page's configuration with the test broker's address."""
    main = next(block for block in TOML.findall(page_text()) if "[kafka]" in block)
    assert 'bootstrap_servers = ["localhost:9092"]' in main
    return main.replace('bootstrap_servers = ["localhost:9092"]', f"bootstrap_servers = [{json.dumps(bootstrap)}]")


def serve_command(*extra: str) -> list[str]:
    """The page's ``streamfair serve`` line, run with this interpreter and the repository's code."""
    line = next(line for block in BASH.findall(page_text()) for line in block.splitlines()
                if line.startswith("streamfair serve"))
    return [sys.executable, "-m", "connectors.cli", *shlex.split(line)[1:], "--once", *extra]


def run_daemon(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("STREAMFAIR_")}, "PYTHONPATH": str(REPO)}
    result = subprocess.run(serve_command("--metrics-port", str(free_port()), *extra), cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def blocks_around(heading: str) -> tuple[list[Block], list[Block]]:
    text = page_text()
    line = text.count("\n", 0, text.index(heading)) + 1
    blocks = python_blocks(PAGE)
    return [b for b in blocks if b.line < line], [b for b in blocks if b.line > line]


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics({name: {"num_partitions": partitions, "replication_factor": 1}})
    admin.close()


@pytest.fixture(scope="module")
def recipe(kafka_broker, tmp_path_factory):
    """The page run up to the fair predictions: ``(namespace, working directory)``."""
    workdir = tmp_path_factory.mktemp("own-model")
    cwd = os.getcwd()
    os.chdir(workdir)
    try:
        create_topic(kafka_broker.bootstrap, "scores", 1)  # your existing topic
        before, after = blocks_around("## 4. Run the daemon")
        namespace = {"__name__": "__main__", "BOOTSTRAP": kafka_broker.bootstrap}
        run_blocks(before, namespace)
        (workdir / "streamfair.toml").write_text(config_text(kafka_broker.bootstrap))
        run_daemon(workdir)
        run_blocks(after, namespace)
    finally:
        os.chdir(cwd)
    return namespace, workdir


def test_the_recipe_gives_fair_predictions_from_a_scikit_learn_model(recipe):
    ns, _ = recipe
    assert len(ns["fair"]) == len(ns["ids"]) == 20_000
    before, after, constant = ns["before"], ns["after"], ns["constant"]
    assert before.max_ks > 0.2  # the scikit-learn model is unfair on this stream
    assert after.max_ks < 0.5 * before.max_ks  # the fair predictions are much fairer
    assert before.risk < after.risk < constant.risk  # at a price, below ignoring the features
    prediction = ns["prediction"]  # draws from the grid of 101 values over the page's target range [0, 1]
    grid = np.linspace(0.0, 1.0, 101)
    assert np.abs(prediction[:, None] - grid).min(axis=1).max() < 1e-12
    assert prediction.min() < 0.25 and prediction.max() > 0.75  # the whole range, not half of it


def test_the_daemon_wrote_a_history_that_streamfair_report_draws(recipe):
    _, workdir = recipe
    history = read_history(workdir / "streamfair-history.jsonl")
    assert history.groups == ["0", "1"] and history.records
    assert history.records[-1].n_samples == 20_000
    result = subprocess.run([sys.executable, "-m", "connectors.cli", "report", "streamfair-history.jsonl", "-o",
                             "fairness.png"], cwd=workdir, env={**os.environ, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert (workdir / "fairness.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_pickled_river_models_score_raw_features(recipe, kafka_broker):
    """The page's River models and ``[models]`` lines: the daemon scores ``{"id", "features"}`` messages itself."""
    ns, workdir = recipe
    models_lines = next(block for block in TOML.findall(page_text()) if block.startswith("eta = "))
    config = config_text(kafka_broker.bootstrap).replace("[models]\n", "[models]\n" + models_lines)
    (workdir / "features.toml").write_text(config)
    create_topic(kafka_broker.bootstrap, "features", 1)
    producer = KafkaProducer(bootstrap_servers=kafka_broker.bootstrap)
    rows = ns["X_live"][:300]
    for i, row in enumerate(rows):
        body = {"id": i, "features": {"x1": row[0], "x2": row[1], "x3": row[2]}}
        producer.send("features", value=json.dumps(body).encode())
    producer.send("features", value=b'{"id": "bad", "features": {"zip": 1}}')
    producer.flush()
    producer.close()
    overrides = ["--input-topic", "features", "--output-topic", "features.fair", "--group-id", "features",
                 "--set", "topics.dead_letter=features.dead", "--set", "topics.changelog=features.changelog",
                 "--set", "metrics.history="]
    serve = serve_command()
    config_at = serve.index("--config") + 1
    assert serve[config_at] == "streamfair.toml"
    run_daemon(workdir, "--config", "features.toml", *overrides)
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, enable_auto_commit=False,
                             consumer_timeout_ms=5000)
    consumer.assign([TopicPartition("features.fair", 0), TopicPartition("features.dead", 0)])
    consumer.seek_to_beginning()
    outputs, dead = {}, []
    for record in consumer:
        if record.topic == "features.fair":
            output = json.loads(record.value)
            outputs[output["id"]] = output
        else:
            dead.append(dict(record.headers)["streamfair.reason"].decode())
    consumer.close()
    assert sorted(outputs) == list(range(300)) and dead == ["unknown_feature"]
    eta_model = ns["eta_model"]
    for i, row in enumerate(rows[:20]):  # eta is the pickled River regressor's
        expected = eta_model.predict_one({"x1": row[0], "x2": row[1], "x3": row[2]})
        assert outputs[i]["eta"] == pytest.approx(expected, abs=1e-12)
    assert evaluate_deterministic(np.array([outputs[i]["eta"] for i in range(300)]), ns["y_live"][:300],
                                  ns["s_live"][:300]).max_ks > 0.2
