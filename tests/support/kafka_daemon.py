"""What the daemon's Kafka tests share: settings named after the test, an unfair message stream,
producing and reading topics (the changelog's checkpoints too), the in-process library run every
output is checked against, the daemon's log events, and a transport that hands out a given producer."""

from __future__ import annotations

import json
import logging
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from connectors.kafka.broker import Broker
from connectors.kafka.changelog import ChangelogPartition
from connectors.kafka.checkpoint import Checkpoint, checkpoint_key
from connectors.kafka.clients import ensure_topics
from connectors.kafka.config import load_config
from streamfair import FairRegressionPostProcessor

POSTPROCESSOR = {"L": 10, "memory": 160, "seed": 11}  # the default profile, a short memory: outputs move often


def settings(broker: Broker, name: str, session_ms: int = 3000, **extra) -> dict:
    """Daemon settings (``{"section.key": value}``) with topics and group named after the test."""
    name = f"daemon-{name}"  # the broker is shared by the whole session
    values = {
        "kafka.client": getattr(broker, "kafka_client", "kafka-python"),  # tests run with each (tests/conftest.py)
        "kafka.bootstrap_servers": [broker.bootstrap],
        "kafka.group_id": f"{name}-group",
        "kafka.session_timeout_ms": session_ms,
        "kafka.heartbeat_interval_ms": session_ms // 3,
        "topics.input": f"{name}.in",
        "topics.output": f"{name}.out",
        "topics.dead_letter": f"{name}.dlq",
        "topics.changelog": f"{name}.changelog",
        "processing.checkpoint_every_messages": 300,
        "processing.checkpoint_every_seconds": 1.0,
        "log.level": "DEBUG",
        **{f"postprocessor.{k}": v for k, v in POSTPROCESSOR.items()},
    }
    values.update(extra)
    return values


def to_config(values: dict):
    overrides = [f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in values.items()]
    return load_config(env={}, overrides=overrides)


def write_toml(path: Path, values: dict) -> Path:
    sections = defaultdict(dict)
    for key, value in values.items():
        section, name = key.split(".")
        sections[section][name] = value
    lines = []
    for section, table in sections.items():
        lines.append(f"[{section}]")
        for name, value in table.items():
            text = json.dumps(value) if not isinstance(value, bool) else str(value).lower()
            lines.append(f"{name} = {text}")
    path.write_text("\n".join(lines) + "\n")
    return path


def messages(n: int, seed: int, prefix: str = "m") -> list[tuple[int, object, dict]]:
    """``(partition, id, body)``: an unfair stream over 3 partitions (group 1 scores higher)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        s = int(rng.integers(0, 2))
        tau = [0.8, 0.2] if s == 0 else [0.2, 0.8]
        eta = float(np.clip(0.6 * s - 0.3 + 0.2 * rng.standard_normal(), -1, 1))
        ident = i if i % 5 == 0 else f"{prefix}{i}"  # integer and string ids
        body = {"id": ident, "eta": eta, "tau": tau}
        if i % 50 == 0:
            body["distribution"] = True
        out.append((i % 3, ident, body))
    return out


#: What a daemon's producer is asked to send in the producer tests: ``(key, value, partition, timestamp, headers)``.
SENT = [
    (b"a", b'{"id": "a"}', 0, 1_700_000_000_000, None),
    (None, b'{"id": 2}', 1, 1_700_000_000_001, None),
    (b"c", b'{"id": "c"}', 2, None, None),  # the producer's clock
    (b"d", b'{"id": "d"}', 0, 1_700_000_000_003, [("traceparent", b"00-4bf9-00f0-01"), ("empty", b"")]),
    (b"e", b'{"id": "e"}', None, 1_700_000_000_004, None),  # the partitioner's choice
    (b"f", None, 1, 1_700_000_000_005, None),  # a tombstone
    (b"g", b'{"id": "g"}', 2, 1_700_000_000_006, []),
]


def send_and_read_back(broker: Broker, producer, topic: str) -> list:
    """Send :data:`SENT` with the daemon's ``producer`` and check that every record reads back as given:
    key, value, headers, its partition (if given), its timestamp (or one of the producer's clock while it
    sent).  Returns what the producer's delivery reports passed to ``on_error``."""
    failures: list = []
    started = int(time.time() * 1000)
    for key, value, partition, timestamp, headers in SENT:
        producer.send(topic, key=key, value=value, partition=partition, timestamp_ms=timestamp, headers=headers,
                      on_error=failures.append)
    producer.flush(10)
    ended = int(time.time() * 1000)
    read = {record.key: record for record in read_topic(broker, topic)}
    assert len(read) == len(SENT)
    for key, value, partition, timestamp, headers in SENT:
        record = read[key]
        assert (record.value, list(record.headers)) == (value, headers or [])
        assert partition is None or record.partition == partition
        assert record.timestamp == timestamp if timestamp is not None else started <= record.timestamp <= ended
    return failures


def produce(broker: Broker, topic: str, items, **client) -> None:
    """``items``: ``(partition, key, value_bytes, headers)``, sent in order (``client``: more producer settings)."""
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=2, **client)
    for partition, key, value, headers in items:
        producer.send(topic, key=key, value=value, partition=partition, headers=headers or [])
    producer.flush()
    producer.close()


def produce_messages(broker: Broker, topic: str, stream, **client) -> None:
    produce(broker, topic, [(p, str(i).encode(), json.dumps(body).encode(), None) for p, i, body in stream], **client)


def read_topic(broker: Broker, topic: str, timeout: float = 20.0, **client) -> list:
    """Every record of ``topic`` up to the fetch high-watermarks, partition by partition in order."""
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=20,
                             **client)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or [])]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        records = defaultdict(list)
        deadline = time.monotonic() + timeout
        while True:
            for tp, batch in consumer.poll(timeout_ms=50).items():
                records[tp.partition].extend(batch)
            if all(consumer.highwater(tp) is not None and consumer.position(tp) >= consumer.highwater(tp)
                   for tp in partitions):
                break
            assert time.monotonic() < deadline, f"reading {topic} timed out"
        return [r for p in sorted(records) for r in records[p]]
    finally:
        consumer.close()


def reference(stream, **postprocessor) -> dict:
    """``id -> (prediction, state_version, partition, offset, proba or None)`` from the library."""
    fair = {p: FairRegressionPostProcessor(n_groups=2, **(postprocessor or POSTPROCESSOR)) for p in range(3)}
    offsets = Counter()
    expected = {}
    for partition, ident, body in stream:
        offset = offsets[partition]
        offsets[partition] += 1
        if body is None:
            continue
        f = fair[partition]
        proba = f.proba_one(body["eta"], body["tau"]).tolist() if body.get("distribution") else None
        prediction = float(f.predict_one(body["eta"], body["tau"], key=ident))
        expected[ident] = (prediction, f.n_samples, partition, offset, proba)
        f.learn_one(body["eta"], body["tau"])
    return expected


def check_outputs(records, expected) -> Counter:
    """Every output equals the reference; returns the number of copies of each id."""
    copies = Counter()
    first = {}
    for record in records:
        out = json.loads(record.value)
        ident = out["id"]
        copies[ident] += 1
        if ident in first:
            assert record.value == first[ident], f"duplicate of {ident!r} differs"
            continue
        first[ident] = record.value
        prediction, version, partition, offset, proba = expected[ident]
        assert (out["prediction"], out["state_version"], out["partition"], out["offset"]) == (
            prediction, version, partition, offset), ident
        assert record.partition == partition and record.key == str(ident).encode()
        if proba is not None:
            assert out["distribution"]["proba"] == proba
        else:
            assert "distribution" not in out
    return copies


def checkpoints(broker: Broker, topic: str) -> dict[int, list[tuple[int, int]]]:
    """``partition -> [(offset, n_samples), ...]`` in changelog order (checkpoints in parts put together)."""
    history = defaultdict(list)
    readers: dict[bytes, ChangelogPartition] = {}
    for record in read_topic(broker, topic):
        key = record.key.split(b"#")[0]
        reader = readers.setdefault(key, ChangelogPartition(key))
        reader.add(record.key, record.value)
        if record.key == key and record.value is not None:  # a checkpoint became current
            point = json.loads(reader.checkpoint())
            history[point["partition"]].append((point["offset"], point["state"]["n_samples"]))
    return history


def read_changelog(broker, config) -> dict[int, ChangelogPartition]:
    """What the changelog holds for each input partition's task."""
    changelog = {p: ChangelogPartition(checkpoint_key(config.topics.input, p)) for p in range(3)}
    for record in read_topic(broker, config.topics.changelog):
        changelog[record.partition].add(record.key, record.value)
    return changelog


def latest_checkpoints(broker, config) -> dict[int, Checkpoint]:
    """The current checkpoint of each input partition's task."""
    return {p: Checkpoint.from_bytes(changelog.checkpoint()) for p, changelog in read_changelog(broker, config).items()}


def ensure_topics_for(broker: Broker, values: dict):
    """The daemon configuration of settings ``values``, its topics created on ``broker``."""
    config = to_config(values)
    ensure_topics(config)
    return config


class EventLog(logging.Handler):
    """A logger for ``Daemon(logger=...)`` whose structured events are kept in ``events``: ``(event, fields)``."""

    def __init__(self, name: str):
        super().__init__()
        self.events: list[tuple[str, dict]] = []
        self.logger = logging.getLogger(f"test.events.{name}.{id(self)}")  # its own: no handler shared
        self.logger.addHandler(self)
        self.logger.setLevel(logging.DEBUG)

    def emit(self, record: logging.LogRecord) -> None:
        self.events.append((record.getMessage(), getattr(record, "streamfair_fields", {})))

    def fields(self, event: str) -> list[dict]:
        """The fields of every ``event``, in order."""
        return [fields for name, fields in self.events if name == event]


class OneProducer:
    """A transport whose every producer is ``made`` (a stand-in producer, for pure-logic tests)."""

    def __init__(self, producer):
        self.made = producer

    def producer(self, config, transactional_id=None):
        return self.made
