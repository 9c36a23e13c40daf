"""The daemon serving fair classification (``postprocessor.kind = "classification"``) on the real broker.

Outputs are compared with :class:`streamfair.FairClassificationPostProcessor` run in process on each
partition's valid message sequence (predict, then learn), the messages with raw features scored by
the same pickled River classifiers the daemon loads.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter

import numpy as np
from river import linear_model, preprocessing

from connectors.kafka.loop import Daemon
from connectors.kafka.models import BaseModels
from streamfair import FairClassificationPostProcessor
from tests.support.kafka_daemon import POSTPROCESSOR, ensure_topics_for, produce, read_topic, settings

CLASSES = ["a", "b", "c"]
MALFORMED = {  # partition 1, in this order, between valid messages
    b'{"id": "x1", "proba": [0.5, 0.5], "tau": [0.5, 0.5]}': "proba_length",
    b'{"id": "x2", "proba": [0.5, 0.6, 0.1], "tau": [0.5, 0.5]}': "proba_not_distribution",
    b'{"id": "x3", "proba": [NaN, 0.5, 0.5], "tau": [0.5, 0.5]}': "non_finite",
    b'{"id": "x4", "proba": "a", "tau": [0.5, 0.5]}': "bad_proba",
    b'{"id": "x5", "eta": 0.3, "tau": [0.5, 0.5]}': "missing_prediction",
    b'{"id": "x6", "proba": [-0.5, 1.0, 0.5], "tau": [0.5, 0.5]}': "proba_not_distribution",
}


def trained_models(rng) -> tuple:
    """A 3-class softmax regression of Y and a logistic regression of S, trained a little on x = (x1, x2)."""
    y_model = preprocessing.StandardScaler() | linear_model.SoftmaxRegression()
    s_model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    for _ in range(300):
        s = int(rng.integers(0, 2))
        x = {"x1": float(rng.normal(s, 1.0)), "x2": float(rng.normal(0, 1.0))}
        y_model.learn_one(x, CLASSES[int(np.clip(round(x["x1"] + 0.5 * x["x2"]), 0, 2))])
        s_model.learn_one(x, s)
    return y_model, s_model


def stream(rng, n: int) -> list[tuple[int, object, dict]]:
    """``(partition, id, body)``: unfair class probabilities (group 1 leans to class "c"); 1 in 3 raw features."""
    out = []
    for i in range(n):
        s = int(rng.integers(0, 2))
        if i % 3 == 2:
            body = {"id": f"f{i}", "features": {"x1": float(rng.normal(s, 1.0)), "x2": float(rng.normal(0, 1.0))}}
        else:
            logits = rng.normal(0, 1, 3) + np.array([0.8, 0.0, -0.8]) * (1 - 2 * s)
            proba = np.exp(logits) / np.exp(logits).sum()
            body = {"id": i, "proba": proba.tolist(), "tau": [0.8, 0.2] if s == 0 else [0.2, 0.8]}
        if i % 40 == 0:
            body["distribution"] = True
        out.append((i % 3, body["id"], body))
    return out


def test_classification_end_to_end_equals_the_library_and_bad_proba_is_dead_lettered(kafka_broker, tmp_path):
    rng = np.random.default_rng(21)
    y_model, s_model = trained_models(rng)
    paths = {"eta": tmp_path / "y.pkl", "tau": tmp_path / "s.pkl"}
    paths["eta"].write_bytes(pickle.dumps(y_model))
    paths["tau"].write_bytes(pickle.dumps(s_model))
    values = settings(kafka_broker, "classify", **{
        "postprocessor.kind": "classification", "postprocessor.classes": CLASSES, "postprocessor.eps": 0.02,
        "models.eta": str(paths["eta"]), "models.tau": str(paths["tau"]), "models.features": ["x1", "x2"],
        "processing.checkpoint_every_messages": 100})
    del values["postprocessor.L"]  # a regression parameter: an error with classification
    config = ensure_topics_for(kafka_broker, values)
    items = stream(rng, 900)
    records = [(p, str(i).encode(), json.dumps(body).encode(), None) for p, i, body in items]
    for k, value in enumerate(MALFORMED):
        records.insert(100 * k + 50, (1, b"x", value, None))
    produce(kafka_broker, config.topics.input, records[:500])
    assert Daemon(config).run(once=True) == 0
    produce(kafka_broker, config.topics.input, records[500:])  # the rest after a restart
    assert Daemon(config).run(once=True) == 0

    # the reference: the library on each partition's valid messages, in offset order
    models = BaseModels(y_model, s_model, ["0", "1"], classes=CLASSES)
    kwargs = {k: v for k, v in POSTPROCESSOR.items() if k != "L"}
    fair = {p: FairClassificationPostProcessor(classes=CLASSES, n_groups=2, **{**kwargs, "eps": 0.02})
            for p in range(3)}
    offsets, expected = Counter(), {}
    for partition, _, value, _ in records:
        offset = offsets[partition]
        offsets[partition] += 1
        if value in MALFORMED:
            continue
        body = json.loads(value)
        proba, tau = models.score(body["features"]) if "features" in body else (body["proba"], body["tau"])
        f = fair[partition]
        distribution = f.proba_one(proba, tau).tolist() if body.get("distribution") else None
        expected[body["id"]] = (str(f.predict_one(proba, tau, key=body["id"])), f.n_samples, partition, offset,
                                distribution)
        f.learn_one(proba, tau)

    outputs = read_topic(kafka_broker, config.topics.output)
    seen = Counter()
    for record in outputs:
        out = json.loads(record.value)
        seen[out["id"]] += 1
        prediction, version, partition, offset, distribution = expected[out["id"]]
        assert (out["prediction"], out["state_version"], out["partition"], out["offset"]) == (
            prediction, version, partition, offset), out
        assert "eta" not in out and record.partition == partition
        if distribution is None:
            assert "distribution" not in out
        else:
            assert out["distribution"] == {"classes": CLASSES, "proba": distribution}
    assert seen.keys() == expected.keys() and set(seen.values()) == {1}
    predicted = Counter(json.loads(r.value)["prediction"] for r in outputs)
    assert len(predicted) == 3  # every class is served

    dead = [(dict(r.headers)["streamfair.reason"].decode(), r.value) for r in read_topic(kafka_broker,
                                                                                        config.topics.dead_letter)]
    assert dead == [(reason, value) for value, reason in MALFORMED.items()]


def test_classification_parsers_and_models_without_a_broker():
    import pytest

    from connectors.kafka.codec import FeedbackParser, InputParser, Invalid

    parser = InputParser(2, 1024, n_classes=3)
    for value, reason in MALFORMED.items():
        with pytest.raises(Invalid) as error:
            parser.parse(value)
        assert error.value.reason == reason, value
    with pytest.raises(Invalid, match="missing_prediction"):  # regression does not read proba
        InputParser(2, 1024).parse(b'{"id": 1, "proba": [1, 0, 0], "tau": [1, 0]}')
    feedback = FeedbackParser(["0", "1"], 1024, classes=[0, 1, 2])
    assert feedback.parse(b'{"id": 1, "features": {"x1": 1}, "y": "2", "s": 1}').y == 2  # matched as a string
    for y in (b'3', b'0.5', b'null', b'1.0'):  # 1.0 reads "1.0", not the class "1"
        with pytest.raises(Invalid, match="bad_label"):
            feedback.parse(b'{"id": 1, "features": {"x1": 1}, "y": ' + y + b', "s": 1}')
    decimal = FeedbackParser(["0", "1"], 1024, labels_only=True, classes=[1.5, 2.5])  # a number was refused
    assert decimal.parse(b'{"id": 1, "y": 2.5}').y == 2.5
    # a River classifier of Y (trained on class labels) is read in the configured class order
    y_model, s_model = trained_models(np.random.default_rng(0))
    models = BaseModels(y_model, s_model, ["0", "1"], classes=list(reversed(CLASSES)))
    proba, _ = models.score({"x1": 3.0, "x2": 0.0})
    answer = y_model.predict_proba_one({"x1": 3.0, "x2": 0.0})
    assert proba == pytest.approx([answer[c] for c in reversed(CLASSES)], rel=1e-12, abs=0)  # renormalized
    assert proba[0] == max(proba)  # "c" (now column 0) for a large x1
    with pytest.raises(ValueError, match="regressor must have a predict_proba_one"):
        BaseModels(linear_model.LinearRegression(), s_model, ["0", "1"], classes=CLASSES)


def test_classification_base_models_learn_class_labels_from_feedback(kafka_broker, tmp_path):
    import base64

    paths = {"eta": tmp_path / "y.pkl", "tau": tmp_path / "s.pkl"}
    paths["eta"].write_bytes(pickle.dumps(preprocessing.StandardScaler() | linear_model.SoftmaxRegression()))
    paths["tau"].write_bytes(pickle.dumps(preprocessing.StandardScaler() | linear_model.LogisticRegression()))
    values = settings(kafka_broker, "classify-learn", **{
        "postprocessor.kind": "classification", "postprocessor.classes": CLASSES,
        "topics.feedback": "daemon-classify-learn.feedback", "models.eta": str(paths["eta"]),
        "models.tau": str(paths["tau"]), "models.features": ["x1"], "models.learn": True,
        "processing.checkpoint_every_messages": 50})
    del values["postprocessor.L"]
    config = ensure_topics_for(kafka_broker, values)
    rng = np.random.default_rng(4)
    feedback, inputs = [], []
    for i in range(600):
        x1 = float(rng.uniform(-3, 3))
        y = CLASSES[0 if x1 < -1 else 1 if x1 < 1 else 2]
        body = {"id": f"f{i}", "features": {"x1": x1}, "y": y, "s": int(x1 > 0)}
        feedback.append((i % 3, b"f", json.dumps(body).encode(), None))
        inputs.append((i % 3, b"i", json.dumps({"id": f"i{i}", "features": {"x1": x1}}).encode(), None))
    feedback.append((2, b"bad", b'{"id": "b", "features": {"x1": 1}, "y": "d", "s": 0}', None))
    produce(kafka_broker, config.topics.feedback, feedback)
    produce(kafka_broker, config.topics.input, inputs)
    assert Daemon(config).run(once=True) == 0

    outputs = [json.loads(r.value) for r in read_topic(kafka_broker, config.topics.output)]
    assert sorted(o["id"] for o in outputs) == sorted(f"i{i}" for i in range(600))
    assert {o["prediction"] for o in outputs} <= set(CLASSES)
    dead = [dict(r.headers)["streamfair.reason"] for r in read_topic(kafka_broker, config.topics.dead_letter)]
    assert dead == [b"bad_label"]
    latest = {}
    for record in read_topic(kafka_broker, config.topics.changelog):
        latest[json.loads(record.value)["partition"]] = json.loads(record.value)
    assert len(latest) == 3
    for point in latest.values():  # every partition's Y-classifier (untrained at the start) learned from the feedback
        y_model, _ = pickle.loads(base64.b64decode(point["models"]))
        assert [y_model.predict_one({"x1": x}) for x in (-2.5, 2.5)] == ["a", "c"]
