"""``streamfair demo``: the whole pipeline on this machine, with a before/after fairness report.

It starts the bundled broker (Tansu, memory storage, 127.0.0.1), trains two small River base
models on a warm-up sample (a regressor for ``eta`` and a classifier of the group from the
features, for ``tau``), starts ``streamfair serve`` as a subprocess, and produces a synthetic
stream of raw-feature messages (plus a few malformed ones) to a 3-partition input topic.  While the
daemon works it prints progress; at the end it stops the daemon and reports, from the labels ``y``
and the groups ``S`` that only the producer knows, the risk and the demographic-parity
unfairness of the base model and of the fair predictions.

The stream (seeded): ``S ~ Bernoulli(0.4)`` is never sent; features ``x1 ~ N(1.2 S, 1)``,
``x2, x3 ~ N(0, 1)``; target ``y = clip(0.25 x1 + 0.15 x2 + 0.1 x3 - 0.1 + 0.1 noise, -1, 1)``,
so a model of ``y`` from the features is unfair through ``x1``.
"""

from __future__ import annotations

import argparse
import json
import pickle
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from streamfair import evaluate, evaluate_deterministic
from streamfair.evaluation import to_grid

from .broker import Broker, die_with_parent
from .config import load_config
from .kafka_io import ensure_topics

GROUP_SHARE = 0.4
WARMUP = 4000
TIME_BUDGET_S = 105.0
#: Malformed messages mixed into the stream, to show the dead-letter topic at work.
MALFORMED = (
    b'{"id": "bad-json", "features": {"x1": 0.1,',
    b'{"id": "bad-nan", "features": {"x1": NaN, "x2": 0.0, "x3": 0.0}}',
    b'{"id": "bad-feature", "features": {"x1": 0.1, "zip": 12345}}',
    b'{"features": {"x1": 0.1, "x2": 0.0, "x3": 0.0}}',
    b'{"id": "bad-tau", "eta": 0.1, "tau": [0.9, 0.9]}',
    b"\xff\xfe not utf-8",
)
POSTPROCESSOR = {"seed": 7}  # the defaults: KS target 0.05 on [-1, 1], corrected from the first samples


def synthetic(n: int, rng: np.random.Generator) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """``(features, y, s)`` for ``n`` samples of the demo stream."""
    s = (rng.random(n) < GROUP_SHARE).astype(int)
    x1, x2, x3 = rng.normal(1.2 * s, 1.0), rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
    y = np.clip(0.25 * x1 + 0.15 * x2 + 0.1 * x3 - 0.1 + 0.1 * rng.normal(size=n), -1.0, 1.0)
    features = [{"x1": float(a), "x2": float(b), "x3": float(c)} for a, b, c in zip(x1, x2, x3)]
    return features, y, s


def train_models(rng: np.random.Generator, directory: Path) -> tuple[Path, Path]:
    """Pickled River pipelines for ``eta`` (linear regression) and ``tau`` (logistic regression)."""
    from river import linear_model, preprocessing

    regressor = preprocessing.StandardScaler() | linear_model.LinearRegression()
    classifier = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    for x, y, s in zip(*synthetic(WARMUP, rng)):
        regressor.learn_one(x, float(y))
        classifier.learn_one(x, bool(s))
    paths = directory / "eta.pkl", directory / "tau.pkl"
    for path, model in zip(paths, (regressor, classifier)):
        path.write_bytes(pickle.dumps(model))
    return paths


def _toml(values: dict) -> str:
    sections: dict[str, dict] = {}
    for key, value in values.items():
        section, name = key.split(".")
        sections.setdefault(section, {})[name] = value
    lines = []
    for section, table in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{name} = {str(v).lower() if isinstance(v, bool) else json.dumps(v)}" for name, v in table.items()]
    return "\n".join(lines) + "\n"


@dataclass
class Truth:
    """What only the producer knows."""

    y: dict
    s: dict


def _produce(broker: Broker, topic: str, n: int, partitions: int, seed: int, truth: Truth, counts: Counter) -> None:
    rng = np.random.default_rng(seed)
    features, y, s = synthetic(n, rng)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
    bad = iter(MALFORMED * (n // 500 + 1))
    for i, x in enumerate(features):
        ident = f"u{i}"
        truth.y[ident], truth.s[ident] = float(y[i]), int(s[i])
        body = {"id": ident, "features": x}
        if i % 10 == 0:
            body["distribution"] = True
        producer.send(topic, key=ident.encode(), value=json.dumps(body).encode(), partition=i % partitions)
        counts["produced"] += 1
        if i % 500 == 250:
            producer.send(topic, value=next(bad), partition=i % partitions)
            counts["malformed"] += 1
    producer.flush()
    producer.close()
    counts["done"] = 1


def report(outputs: dict, truth: Truth, dead: Counter, atoms: np.ndarray) -> str:
    """The before/after table over the second half of the stream (after the post-processors' warm-up)."""
    ids = sorted(outputs, key=lambda ident: int(ident[1:]))
    tail = ids[len(ids) // 2 :]
    y = np.array([truth.y[i] for i in tail])
    s = np.array([truth.s[i] for i in tail])
    eta = np.array([outputs[i]["eta"] for i in tail])
    fair = np.array([outputs[i]["prediction"] for i in tail])
    exact = [i for i in tail if "distribution" in outputs[i]]
    proba = np.array([outputs[i]["distribution"]["proba"] for i in exact])
    s_exact = np.array([truth.s[i] for i in exact])
    grid = to_grid(eta, atoms)
    rows = [  # name, report, per-sample mean prediction, whether the predictions live on the grid
        ("base model (eta)", evaluate_deterministic(eta, y, s), eta, s, False),
        ("base model on the grid", evaluate(grid, atoms, y, s), grid @ atoms, s, True),
        ("fair, served draws", evaluate_deterministic(fair, y, s), fair, s, True),
        (f"fair, exact pi (n={len(exact)})", evaluate(proba, atoms, np.array([truth.y[i] for i in exact]), s_exact),
         proba @ atoms, s_exact, True),
    ]
    lines = [
        f"Fairness report: {len(tail)} messages (second half of the stream; S and y known only to the producer)",
        f"{'predictions':<28}{'risk (MSE)':>11}{'KS S=0':>9}{'KS S=1':>9}{'atom gap':>10}{'mean S=1 - S=0':>16}",
    ]
    for name, result, means, groups, on_grid in rows:
        gap = means[groups == 1].mean() - means[groups == 0].mean()
        atom = f"{result.atom_unfairness.max():10.4f}" if on_grid else f"{'-':>10}"
        lines.append(f"{name:<28}{result.risk:11.4f}{result.ks_unfairness[0]:9.3f}{result.ks_unfairness[1]:9.3f}"
                     f"{atom}{gap:16.3f}")
    lines.append("KS S=s: Kolmogorov-Smirnov distance between the law of the predictions in group s and overall; "
                 "atom gap: max over grid values of |P(pred = v | S = s) - P(pred = v)| (the paper's constraint).")
    lines.append("dead letters: " + (", ".join(f"{k} {v}" for k, v in sorted(dead.items())) or "none"))
    return "\n".join(lines)


def _read(consumer: KafkaConsumer, outputs: dict, dead: Counter, output_topic: str) -> None:
    for tp, records in consumer.poll(timeout_ms=200).items():
        for record in records:
            if tp.topic == output_topic:
                out = json.loads(record.value)
                outputs[out["id"]] = out
            else:
                dead[dict(record.headers)["streamfair.reason"].decode()] += 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=int, default=90000, help="stream length (default 90000)")
    parser.add_argument("--partitions", type=int, default=3, help="input partitions (default 3)")
    parser.add_argument("--batch-size", type=int, default=1, help="processing.batch_size of the daemon (default 1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the stream and the models")


def run(args: argparse.Namespace) -> int:
    if args.messages < 1000 or args.partitions < 1 or args.batch_size < 1:
        print("streamfair demo: --messages must be >= 1000, --partitions and --batch-size >= 1", file=sys.stderr)
        return 2
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    with tempfile.TemporaryDirectory(prefix="streamfair-demo-") as directory, Broker() as broker:
        directory = Path(directory)
        print(f"[broker] Tansu on {broker.bootstrap} (memory storage, pid {broker.pid})", flush=True)
        eta_path, tau_path = train_models(rng, directory)
        values = {
            "kafka.bootstrap_servers": [broker.bootstrap], "kafka.group_id": "demo",
            "kafka.session_timeout_ms": 6000, "kafka.heartbeat_interval_ms": 2000,
            "topics.input": "demo.features", "topics.output": "demo.predictions",
            "topics.dead_letter": "demo.dead-letters", "topics.changelog": "demo.changelog",
            "topics.partitions": args.partitions, "processing.batch_size": args.batch_size,
            "models.eta": str(eta_path), "models.tau": str(tau_path), "models.features": ["x1", "x2", "x3"],
            "models.groups": ["0", "1"], **{f"postprocessor.{k}": v for k, v in POSTPROCESSOR.items()},
        }
        config_path = directory / "streamfair.toml"
        config_path.write_text(_toml(values))
        config = load_config(config_path, env={})
        layout = ensure_topics(config)
        atoms = config.postprocessor.build().atoms
        print(f"[models] River linear/logistic regression trained on {WARMUP} warm-up samples; "
              f"topics created ({layout.input_partitions} partitions)", flush=True)
        log_path = directory / "daemon.log"
        with open(log_path, "w") as log:
            daemon = subprocess.Popen([sys.executable, "-m", "connectors.cli", "serve", "--config", str(config_path)],
                                      stdout=log, stderr=log, preexec_fn=die_with_parent)
        print(f"[daemon] streamfair serve started (pid {daemon.pid}), config {config_path.name}", flush=True)
        truth, counts = Truth({}, {}), Counter()
        producer = threading.Thread(target=_produce, args=(broker, config.topics.input, args.messages,
                                                           layout.input_partitions, args.seed + 1, truth, counts),
                                    daemon=True)
        producer.start()
        consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=100)
        consumer.assign([TopicPartition(topic, p) for topic in (config.topics.output, config.topics.dead_letter)
                         for p in range(layout.input_partitions)])
        outputs: dict = {}
        dead: Counter = Counter()
        last = 0.0
        try:
            while time.monotonic() - started < TIME_BUDGET_S:
                _read(consumer, outputs, dead, config.topics.output)
                now = time.monotonic() - started
                if now - last >= 2.0:
                    last = now
                    print(f"[{now:5.1f}s] produced {counts['produced']:6d}  predicted {len(outputs):6d}  "
                          f"dead letters {sum(dead.values()):3d}", flush=True)
                if counts["done"] and len(outputs) >= counts["produced"] and sum(dead.values()) >= counts["malformed"]:
                    break
                if daemon.poll() is not None:
                    break
        finally:
            consumer.close()
            if daemon.poll() is None:
                daemon.send_signal(signal.SIGTERM)
            code = daemon.wait(15)
        elapsed = time.monotonic() - started
        print(f"[daemon] stopped with exit code {code}; {len(outputs)} predictions in {elapsed:.1f} s", flush=True)
        if code != 0 or len(outputs) < 1000:
            print("streamfair demo: the daemon failed; its log ends with:", file=sys.stderr)
            print("\n".join(log_path.read_text().splitlines()[-15:]), file=sys.stderr)
            return 1
        if len(outputs) < counts["produced"] or not counts["done"]:
            print(f"(time budget of {TIME_BUDGET_S:.0f} s reached: reporting on the {len(outputs)} predictions made; "
                  f"try a smaller --messages on a busy machine)")
        print()
        print(report(outputs, truth, dead, atoms))
    return 0
