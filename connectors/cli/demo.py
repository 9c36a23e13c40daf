"""``streamfair demo``: the whole pipeline on this machine, with a before/after fairness report.

It starts the bundled broker (Tansu, memory storage, 127.0.0.1), trains two small River base
models on a warm-up sample (a regressor for ``eta`` and a classifier of the group from the
features, for ``tau``), starts ``streamfair serve`` as a subprocess, and produces a synthetic
stream of raw-feature messages (plus a few malformed ones) to a 3-partition input topic.  While the
daemon works it prints progress; at the end it stops the daemon and reports, from the labels ``y``
and the groups ``S`` that only the producer knows, the risk and the demographic-parity
unfairness of the base model and of the fair predictions: over the stream, window by window
(also drawn as a PNG), and on its second half, next to the fairness target of the configuration
and a constant predictor.  The configuration and the two models are kept (``--out``) so that the
same daemon can be run again on one's own broker.

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
from typing import Any

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from connectors.cli.arguments import directory, integer_at_least
from connectors.kafka.broker import Broker, die_with_parent
from connectors.kafka.clients import ensure_topics
from connectors.kafka.config import load_config
from streamfair import FairnessReport, evaluate, evaluate_deterministic
from streamfair.evaluation import to_grid

GROUP_SHARE = 0.4
WARMUP = 4000
TIME_BUDGET_S = 105.0
#: Windows of the stream in the report's "over time" table and picture.
WINDOWS = 10
#: Names of the files the demo keeps in ``--out``.
CONFIG_NAME, ETA_NAME, TAU_NAME, PICTURE_NAME = ("streamfair-demo.toml", "streamfair-demo-eta.pkl",
                                                 "streamfair-demo-tau.pkl", "streamfair-demo.png")
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
    """``(features, y, s)`` for ``n`` samples of the demo stream.

    >>> features, y, s = synthetic(3, np.random.default_rng(0))
    >>> sorted(features[0]), y.shape, s.tolist()
    (['x1', 'x2', 'x3'], (3,), [0, 1, 1])

    ``x1`` carries the group, which makes a model of ``y`` unfair:

    >>> features, y, s = synthetic(2000, np.random.default_rng(0))
    >>> x1 = np.array([x["x1"] for x in features])
    >>> round(float(s.mean()), 1), round(float(x1[s == 1].mean() - x1[s == 0].mean()), 1)
    (0.4, 1.2)
    """
    s = (rng.random(n) < GROUP_SHARE).astype(int)
    x1, x2, x3 = rng.normal(1.2 * s, 1.0), rng.normal(0.0, 1.0, n), rng.normal(0.0, 1.0, n)
    y = np.clip(0.25 * x1 + 0.15 * x2 + 0.1 * x3 - 0.1 + 0.1 * rng.normal(size=n), -1.0, 1.0)
    features = [{"x1": float(a), "x2": float(b), "x3": float(c)} for a, b, c in zip(x1, x2, x3, strict=True)]
    return features, y, s


def train_models(rng: np.random.Generator, directory: Path) -> tuple[Path, Path, float]:
    """Pickled River pipelines for ``eta`` (linear regression) and ``tau`` (logistic regression),
    and the mean of ``y`` on the warm-up sample (the constant predictor of the report)."""
    from river import linear_model, preprocessing

    regressor = preprocessing.StandardScaler() | linear_model.LinearRegression()
    classifier = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    features, targets, groups = synthetic(WARMUP, rng)
    for x, y, s in zip(features, targets, groups, strict=True):
        regressor.learn_one(x, float(y))
        classifier.learn_one(x, bool(s))
    paths = directory / ETA_NAME, directory / TAU_NAME
    for path, model in zip(paths, (regressor, classifier), strict=True):
        path.write_bytes(pickle.dumps(model))
    return paths[0], paths[1], float(targets.mean())


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
    """What only the producer knows: ``y`` and the group ``s`` of each message id.

    >>> truth = Truth(y={"u0": 0.25, "u1": -0.5}, s={"u0": 1, "u1": 0})
    >>> truth.s["u0"]
    1
    """

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
        body: dict[str, Any] = {"id": ident, "features": x}
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


@dataclass(frozen=True)
class Target:
    """The fairness target of the configuration: a KS target, or the per-value gap ``eps``.

    >>> from connectors.kafka.config import load_config
    >>> Target.of(load_config(env={}))                               # the default target
    Target(ks=0.05, eps=None)
    >>> Target.of(load_config(env={}, overrides=["postprocessor.eps=0.01"])).text()
    'gap 0.01'
    """

    ks: float | None
    eps: np.ndarray | None

    @classmethod
    def of(cls, config) -> Target:
        fair = config.postprocessor.build()
        return cls(None if fair.ks is None else float(np.max(fair.ks)), fair.eps)

    def describe(self) -> str:
        if self.eps is None:
            return (f"Target (postprocessor.ks): the KS distance between each group's predictions and everyone's, "
                    f"steered to {self.ks:g} (the served predictor fluctuates around it: to keep a bound, set ks "
                    f"about 0.8 times it)")
        eps = ", ".join(f"{e:g}" for e in np.unique(self.eps))
        return (f"Target (postprocessor.eps): for every grid value v, |P(prediction = v | S = s) - P(prediction = v)| "
                f"at most {eps} (the 'value gap' columns; a gap measured on n messages also carries sampling noise "
                f"of order sqrt(P(v) / n))")

    def text(self) -> str:
        return f"KS {self.ks:g}" if self.eps is None else f"gap {np.max(self.eps):g}"


@dataclass(frozen=True)
class Row:
    """One kind of prediction on a set of messages: its report and the groups' mean predictions.

    ``gap_in_means`` is the mean prediction in group 1 minus that in group 0; ``on_grid`` says
    whether the predictions lie on the post-processor's grid (then the report's value gap applies).

    >>> from streamfair import evaluate_deterministic
    >>> y, s, predictions = np.array([0.0, 0.5, 0.5, 1.0]), np.array([0, 0, 1, 1]), np.array([0.0, 0.5, 0.5, 0.5])
    >>> row = Row("model", evaluate_deterministic(predictions, y, s), gap_in_means=0.25, on_grid=False)
    >>> row.result.risk
    0.0625
    """

    name: str
    result: FairnessReport
    gap_in_means: float
    on_grid: bool


def _row(name: str, result: FairnessReport, means: np.ndarray, s: np.ndarray, on_grid: bool) -> Row:
    return Row(name, result, float(means[s == 1].mean() - means[s == 0].mean()), on_grid)


def _columns(outputs: dict, truth: Truth, ids: list[str]) -> tuple[np.ndarray, ...]:
    y = np.array([truth.y[i] for i in ids])
    s = np.array([truth.s[i] for i in ids])
    eta = np.array([outputs[i]["eta"] for i in ids])
    fair = np.array([outputs[i]["prediction"] for i in ids])
    return y, s, eta, fair


def over_time(outputs: dict, truth: Truth, atoms: np.ndarray, constant: float) -> list[dict]:
    """Per window of the stream (production order): KS of the base model and of the fair draws, the
    fair draws' worst value gap, and the mean squared error of the base model, the fair draws and the constant.

    ``outputs`` are the daemon's output messages by id (``"u0"``, ``"u1"``, ... in production order),
    each with the base model's ``"eta"`` and the served ``"prediction"``.  Here the base model is
    the stream's regression function, and the "fair" prediction a constant (fair, but poor):

    >>> features, y, s = synthetic(1000, np.random.default_rng(0))
    >>> ids = [f"u{i}" for i in range(1000)]
    >>> truth = Truth(y=dict(zip(ids, y.tolist())), s=dict(zip(ids, s.tolist())))
    >>> eta = [0.25 * x["x1"] + 0.15 * x["x2"] + 0.1 * x["x3"] - 0.1 for x in features]
    >>> outputs = {i: {"eta": e, "prediction": 0.0} for i, e in zip(ids, eta)}
    >>> windows = over_time(outputs, truth, np.linspace(-1.0, 1.0, 21), constant=0.0)
    >>> len(windows), windows[0]["first"], windows[0]["last"], round(windows[0]["base_ks"], 3), windows[0]["fair_ks"]
    (10, 0, 99, 0.346, 0.0)
    """
    ids = sorted(outputs, key=lambda ident: int(ident[1:]))
    windows = []
    for chunk in np.array_split(np.array(ids), min(WINDOWS, len(ids))):
        y, s, eta, fair = _columns(outputs, truth, list(chunk))
        base, fairness = evaluate_deterministic(eta, y, s), evaluate(to_grid(fair, atoms), atoms, y, s)
        windows.append({"first": int(chunk[0][1:]), "last": int(chunk[-1][1:]), "base_ks": base.max_ks,
                        "fair_ks": fairness.max_ks, "fair_gap": float(fairness.atom_unfairness.max()),
                        "base_risk": base.risk, "fair_risk": fairness.risk,
                        "constant_risk": float(np.mean((y - constant) ** 2))})
    return windows


def report(outputs: dict, truth: Truth, dead: Counter, atoms: np.ndarray, target: Target, constant: float) -> str:
    """The report: fairness and risk window by window over the stream, then on its second half
    (once the post-processors have learned), next to the target and a constant predictor.

    ``outputs`` as in :func:`over_time`; the messages that asked for it also carry the law their
    prediction was drawn from (``"distribution": {"proba": [...]}``, over ``atoms``); ``dead``
    counts the dead letters by reason.  With the constant "fair" prediction of :func:`over_time`'s
    example, the second half of the stream reads:

    >>> features, y, s = synthetic(1000, np.random.default_rng(0))
    >>> ids = [f"u{i}" for i in range(1000)]
    >>> truth = Truth(y=dict(zip(ids, y.tolist())), s=dict(zip(ids, s.tolist())))
    >>> atoms = np.linspace(-1.0, 1.0, 21)
    >>> at_zero = {"proba": (atoms == 0.0).astype(float).tolist()}
    >>> outputs = {i: {"eta": 0.25 * x["x1"] + 0.15 * x["x2"] + 0.1 * x["x3"] - 0.1, "prediction": 0.0,
    ...                "distribution": at_zero} for i, x in zip(ids, features)}
    >>> text = report(outputs, truth, Counter({"invalid_json": 2}), atoms, Target(ks=0.05, eps=None), constant=0.0)
    >>> print("\\n".join(text.splitlines()[17:23]))
    predictions                            MSE  x model  x constant  KS S=0  KS S=1  value gap  mean S=1 - S=0
    your model (eta)                    0.0093     1.00        0.08   0.121   0.190          -           0.255
    your model, rounded to the grid     0.0102     1.10        0.08   0.120   0.188     0.0486           0.253
    fair predictions (served draws)     0.1211    13.07        1.00   0.000   0.000     0.0000           0.000
    fair predictions (their law)        0.1211    13.07        1.00   0.000   0.000     0.0000           0.000
    constant (mean of y)                0.1211    13.07        1.00   0.000   0.000          -           0.000
    """
    lines = [f"Fairness report on {len(outputs)} messages (S and y are known only to the producer, never sent)",
             target.describe(), "",
             f"Over the stream, in windows of about {len(outputs) // min(WINDOWS, len(outputs))} messages "
             "(each partition's post-processor learns as messages arrive):",
             f"{'messages':<16}{'your model KS':>14}{'fair KS':>9}{'fair value gap':>16}{'target':>14}"
             f"{'MSE: model':>12}{'fair':>8}{'constant':>10}"]
    for w in over_time(outputs, truth, atoms, constant):
        lines.append(f"{w['first']:>6} - {w['last']:<7}{w['base_ks']:14.3f}{w['fair_ks']:9.3f}{w['fair_gap']:16.4f}"
                     f"{target.text():>14}{w['base_risk']:12.4f}{w['fair_risk']:8.4f}{w['constant_risk']:10.4f}")
    ids = sorted(outputs, key=lambda ident: int(ident[1:]))
    tail = ids[len(ids) // 2 :]
    y, s, eta, fair = _columns(outputs, truth, tail)
    asked = [i for i in tail if "distribution" in outputs[i]]
    proba = np.array([outputs[i]["distribution"]["proba"] for i in asked])
    y_asked, s_asked = np.array([truth.y[i] for i in asked]), np.array([truth.s[i] for i in asked])
    grid = to_grid(eta, atoms)
    constant_predictions = np.full(len(tail), constant)
    rows = [
        _row("your model (eta)", evaluate_deterministic(eta, y, s), eta, s, False),
        _row("your model, rounded to the grid", evaluate(grid, atoms, y, s), grid @ atoms, s, True),
        _row("fair predictions (served draws)", evaluate_deterministic(fair, y, s), fair, s, True),
        _row("fair predictions (their law)", evaluate(proba, atoms, y_asked, s_asked), proba @ atoms, s_asked, True),
        _row("constant (mean of y)", evaluate_deterministic(constant_predictions, y, s), constant_predictions, s,
             False),
    ]
    base_risk, constant_risk = rows[0].result.risk, rows[-1].result.risk
    lines += ["", f"Second half of the stream ({len(tail)} messages, after the post-processors have learned):",
              f"{'predictions':<34}{'MSE':>8}{'x model':>9}{'x constant':>12}{'KS S=0':>8}{'KS S=1':>8}"
              f"{'value gap':>11}{'mean S=1 - S=0':>16}"]
    for row in rows:
        r = row.result
        gap = f"{r.atom_unfairness.max():11.4f}" if row.on_grid else f"{'-':>11}"
        lines.append(f"{row.name:<34}{r.risk:8.4f}{r.risk / base_risk:9.2f}{r.risk / constant_risk:12.2f}"
                     f"{r.ks_unfairness[0]:8.3f}{r.ks_unfairness[1]:8.3f}{gap}{row.gap_in_means:16.3f}")
    lines += [
        f"'their law': the distribution each prediction is drawn from, sent back for the {len(asked)} messages "
        "that asked for it (\"distribution\": true).",
        "KS S=s: Kolmogorov-Smirnov distance between the predictions in group s and everyone's (0: the same "
        "distribution); value gap: the largest |P(prediction = v | S = s) - P(prediction = v)| over grid values v; "
        "x model, x constant: MSE relative to your model's and to the constant prediction's (which is fair, "
        "but ignores the features).",
        "dead letters (malformed messages mixed in on purpose): "
        + (", ".join(f"{k} {v}" for k, v in sorted(dead.items())) or "none"),
    ]
    return "\n".join(lines)


def draw(windows: list[dict], target: Target, path: Path) -> Path | None:
    """The "over the stream" table as a PNG (``None`` without matplotlib)."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    x = [(w["first"] + w["last"]) / 2 for w in windows]
    fig = Figure(figsize=(9, 6))
    ks_ax, risk_ax = fig.subplots(2, 1, sharex=True)
    ks_ax.plot(x, [w["base_ks"] for w in windows], "o-", color="tab:red", label="your model")
    ks_ax.plot(x, [w["fair_ks"] for w in windows], "o-", color="tab:blue", label="fair predictions")
    if target.ks is not None:
        ks_ax.axhline(target.ks, color="black", ls=":", label=f"target KS {target.ks:g}")
    ks_ax.set_ylabel("worst group's KS distance")
    ks_ax.set_ylim(bottom=0)
    ks_ax.legend(fontsize=8)
    ks_ax.grid(alpha=0.3)
    for key, color, label in (("base_risk", "tab:red", "your model"), ("fair_risk", "tab:blue", "fair predictions"),
                              ("constant_risk", "gray", "constant prediction")):
        risk_ax.plot(x, [w[key] for w in windows], "o-", color=color, label=label)
    risk_ax.set_ylabel("mean squared error")
    risk_ax.set_xlabel("message number (production order)")
    risk_ax.set_ylim(bottom=0)
    risk_ax.legend(fontsize=8)
    risk_ax.grid(alpha=0.3)
    fig.suptitle("streamfair demo: fairness and error over the stream")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return path


def reusable_config(values: dict, out: Path) -> str:
    """The demo's configuration for a broker on 127.0.0.1:9092, with the models kept in ``out``.

    ``values`` are the demo's settings by dotted key; the broker address and the models' paths
    are replaced:

    >>> text = reusable_config({"kafka.bootstrap_servers": ["127.0.0.1:40123"], "kafka.group_id": "demo",
    ...                         "topics.input": "demo.features"}, Path("demo"))
    >>> print("\\n".join(line for line in text.splitlines() if not line.startswith("#")))
    [kafka]
    bootstrap_servers = ["127.0.0.1:9092"]
    group_id = "demo"
    [topics]
    input = "demo.features"
    [models]
    eta = "demo/streamfair-demo-eta.pkl"
    tau = "demo/streamfair-demo-tau.pkl"
    """
    kept = {**values, "kafka.bootstrap_servers": ["127.0.0.1:9092"],
            "models.eta": str(out / ETA_NAME), "models.tau": str(out / TAU_NAME)}
    return ("# The configuration of `streamfair demo`. To run this daemon again:\n"
            "#   streamfair broker --port 9092          (or point bootstrap_servers at your own Kafka)\n"
            f"#   streamfair serve --config {CONFIG_NAME}\n"
            "# and send {\"id\": ..., \"features\": {\"x1\": ..., \"x2\": ..., \"x3\": ...}} to topics.input.\n"
            + _toml(kept))


def _read(consumer: KafkaConsumer, outputs: dict, dead: Counter, output_topic: str) -> None:
    for tp, records in consumer.poll(timeout_ms=200).items():
        for record in records:
            if tp.topic == output_topic:
                out = json.loads(record.value)
                outputs[out["id"]] = out
            else:
                dead[dict(record.headers)["streamfair.reason"].decode()] += 1


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--messages", type=integer_at_least(1000), default=90000,
                        help="stream length (default 90000, at least 1000)")
    parser.add_argument("--partitions", type=integer_at_least(1), default=3, help="input partitions (default 3)")
    parser.add_argument("--batch-size", type=integer_at_least(1), default=1,
                        help="processing.batch_size of the daemon (default 1)")
    parser.add_argument("--seed", type=integer_at_least(0), default=0,
                        help="seed of the stream and the models (default 0)")
    parser.add_argument("--out", type=directory, default=Path("."),
                        help=f"directory for what the demo keeps: its configuration ({CONFIG_NAME}), its two models "
                             f"and the picture of fairness over time ({PICTURE_NAME}); default: the current directory")


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    rng = np.random.default_rng(args.seed)
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="streamfair-demo-") as temporary, Broker() as broker:
        directory = Path(temporary)
        print(f"[broker] Tansu on {broker.bootstrap} (memory storage, pid {broker.pid})", flush=True)
        eta_path, tau_path, constant = train_models(rng, out)
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
        (out / CONFIG_NAME).write_text(reusable_config(values, out))
        print(f"[models] River linear/logistic regression trained on {WARMUP} warm-up samples; "
              f"topics created ({layout.input_partitions} partitions)", flush=True)
        print(f"[config] kept in {out / CONFIG_NAME} (with the two models), to run this daemon again", flush=True)
        log_path = directory / "daemon.log"
        with open(log_path, "w") as log:
            daemon = subprocess.Popen([sys.executable, "-m", "connectors.cli", "serve", "--config", str(config_path)],
                                      stdout=log, stderr=log, preexec_fn=die_with_parent)
        print(f"[daemon] streamfair serve started (pid {daemon.pid})", flush=True)
        truth, counts = Truth({}, {}), Counter[str]()
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
                    waiting = "" if outputs else ("  (the daemon is joining the consumer group and getting its "
                                                  "partitions: a few seconds on the bundled broker)")
                    print(f"[{now:5.1f}s] produced {counts['produced']:6d}  predicted {len(outputs):6d}  "
                          f"dead letters {sum(dead.values()):3d}{waiting}", flush=True)
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
        target = Target.of(config)
        print()
        print(report(outputs, truth, dead, atoms, target, constant))
        picture = draw(over_time(outputs, truth, atoms, constant), target, out / PICTURE_NAME)
        print(f"\nfairness over time: {picture}" if picture else "\n(no picture: matplotlib is not installed)")
        print(f"configuration kept: {out / CONFIG_NAME}")
    return 0
