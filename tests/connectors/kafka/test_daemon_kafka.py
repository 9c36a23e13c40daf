"""The daemon against a real Kafka-protocol broker (Tansu, started by the ``kafka_broker`` fixture).

Every test uses its own topics and consumer group.  Group joins on Tansu take about half the
session timeout, so the tests use 3000-6000 ms sessions.  Predictions are checked against the
in-process library run on each partition's message sequence (predict, then learn).
"""

from __future__ import annotations

import base64
import json
import pickle
import signal
import threading
import time
from collections import Counter

import numpy as np
import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition

from connectors.kafka.broker import Broker
from connectors.kafka.changelog import read_checkpoints
from connectors.kafka.checkpoint import checkpoint_key
from connectors.kafka.clients import ensure_topics
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver
from connectors.kafka.transport import caught_up, transport
from tests.support.daemon_process import DaemonProcess, wait_for
from tests.support.kafka_daemon import (
    check_outputs,
    checkpoints,
    ensure_topics_for,
    messages,
    produce,
    produce_messages,
    read_topic,
    reference,
    settings,
    write_toml,
)


class Producer(threading.Thread):
    """Produces a stream at about ``rate`` messages/s until ``stop()``; ``sent`` lists what went out."""

    def __init__(self, broker: Broker, topic: str, rate: float, seed: int):
        super().__init__(daemon=True)
        self.broker, self.topic, self.rate = broker, topic, rate
        self.source = iter(messages(100_000, seed))
        self.sent: list = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.broker.bootstrap, linger_ms=2)
        started = time.monotonic()
        while not self._stop_event.is_set():
            due = int((time.monotonic() - started) * self.rate) - len(self.sent)
            for _ in range(max(0, due)):
                partition, ident, body = next(self.source)
                producer.send(self.topic, key=str(ident).encode(), value=json.dumps(body).encode(), partition=partition)
                self.sent.append((partition, ident, body))
            time.sleep(0.01)
        producer.flush()
        producer.close()

    def stop(self) -> list:
        self._stop_event.set()
        self.join()
        return self.sent


class Recorder(DaemonObserver):
    """Counts the daemon's events and samples ``lag()``/``ready`` on every loop."""

    def __init__(self):
        self.events = Counter()
        self.records = 0
        self.dead = Counter()
        self.lags: list[dict] = []

    def on_assigned(self, daemon, partitions):
        self.events["assigned"] += 1

    def on_restored(self, daemon, partition, n_samples, offset, seconds):
        self.events["restored"] += 1

    def on_records(self, daemon, partition, n_records, n_dead, seconds):
        self.records += n_records

    def on_dead_letter(self, daemon, reason, topic, partition):
        self.dead[reason] += 1

    def on_checkpoint(self, daemon, partitions, seconds, ok):
        self.events["checkpoint_ok" if ok else "checkpoint_failed"] += 1

    def on_loop(self, daemon):
        self.lags.append((daemon.ready, daemon.lag()))

    def on_stop(self, daemon):
        self.events["stop"] += 1


class Broken(DaemonObserver):
    def on_records(self, daemon, partition, n_records, n_dead, seconds):
        raise RuntimeError("an observer bug")


# ---------------------------------------------------------------------------- tests
def test_end_to_end_three_partitions_match_the_library(kafka_broker):
    values = settings(kafka_broker, "e2e", **{"kafka.max_poll_records": 100})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(1500, seed=1)
    produce_messages(kafka_broker, config.topics.input, stream)

    recorder = Recorder()
    daemon = Daemon(config, observers=[Broken(), recorder])
    assert daemon.run(once=True) == 0
    assert recorder.records == 1500 and recorder.events["restored"] == 3 and recorder.events["stop"] == 1
    assert recorder.events["checkpoint_ok"] >= 2 and daemon.stats.errors["observer_failed"] > 0
    assert recorder.lags[-1] == (True, {0: 0, 1: 0, 2: 0})
    assert max(sum(lag.values()) for _, lag in recorder.lags) > 0

    outputs = read_topic(kafka_broker, config.topics.output)
    copies = check_outputs(outputs, reference(stream))
    assert len(outputs) == 1500 and len(copies) == 1500  # exactly N distinct ids, no duplicates
    assert daemon.stats.produced == 1500 and daemon.stats.dead_letters == Counter()
    history = checkpoints(kafka_broker, config.topics.changelog)
    assert {p: h[-1] for p, h in history.items()} == {0: (500, 500), 1: (500, 500), 2: (500, 500)}
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=config.kafka.group_id,
                             enable_auto_commit=False)
    committed = {p: consumer.committed(TopicPartition(config.topics.input, p)) for p in range(3)}
    consumer.close()
    assert committed == {0: 500, 1: 500, 2: 500}


def test_dead_letters_keep_bytes_reason_and_source(kafka_broker):
    values = settings(kafka_broker, "dlq", **{"processing.max_message_bytes": 300})
    config = ensure_topics_for(kafka_broker, values)
    bad = {
        "empty": None,
        "oversized": json.dumps({"id": "big", "eta": 0.1, "tau": [0.5, 0.5], "pad": "x" * 400}).encode(),
        "not_utf8": b'{"id": "\xff", "eta": 0.1, "tau": [0.5, 0.5]}',
        "invalid_json": b'{"id": "x", "eta": 0.1,',
        "not_object": b"42",
        "missing_id": b'{"eta": 0.1, "tau": [0.5, 0.5]}',
        "bad_id": b'{"id": [1], "eta": 0.1, "tau": [0.5, 0.5]}',
        "bad_flag": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "distribution": 1}',
        "ambiguous_input": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "features": {"a": 1}}',
        "missing_prediction": b'{"id": "x", "tau": [0.5, 0.5]}',
        "bad_eta": b'{"id": "x", "eta": null, "tau": [0.5, 0.5]}',
        "bad_tau": b'{"id": "x", "eta": 0.1, "tau": "0.5,0.5"}',
        "non_finite": b'{"id": "x", "eta": -Infinity, "tau": [0.5, 0.5]}',
        "tau_length": b'{"id": "x", "eta": 0.1, "tau": [1.0]}',
        "tau_not_distribution": b'{"id": "x", "eta": 0.1, "tau": [0.1, 0.1]}',
        "no_models": b'{"id": "x", "features": {"a": 1}}',
    }
    stream, items, sources = [], [], {}
    offsets = Counter()
    good = iter(messages(200, seed=2, prefix="g"))
    for reason, value in bad.items():
        for _ in range(3):  # valid messages around every bad one, in every partition
            partition, ident, body = next(good)
            items.append((partition, str(ident).encode(), json.dumps(body).encode(), None))
            stream.append((partition, ident, body))
            offsets[partition] += 1
        partition = len(items) % 3
        items.append((partition, reason.encode(), value, [("trace-id", reason.encode())]))
        stream.append((partition, reason, None))
        sources[reason] = (partition, offsets[partition])
        offsets[partition] += 1
    produce(kafka_broker, config.topics.input, items)

    recorder = Recorder()
    daemon = Daemon(config, observers=[recorder])
    assert daemon.run(once=True) == 0

    dead = read_topic(kafka_broker, config.topics.dead_letter)
    assert len(dead) == len(bad) >= 10
    for record in dead:
        headers = dict(record.headers)
        reason = headers["streamfair.reason"].decode()
        partition, offset = sources[record.key.decode()]
        assert reason == record.key.decode()  # the right reason for each kind
        assert record.value == bad[reason]  # the original bytes (None for the tombstone)
        assert headers["trace-id"] == reason.encode()  # original headers kept
        assert headers["streamfair.source.topic"] == config.topics.input.encode()
        assert (int(headers["streamfair.source.partition"]), int(headers["streamfair.source.offset"])) == (
            partition, offset)
        assert record.partition == partition
    assert daemon.stats.dead_letters == recorder.dead == Counter(list(bad))
    outputs = read_topic(kafka_broker, config.topics.output)
    copies = check_outputs(outputs, reference(stream))
    assert len(copies) == len(outputs) == 3 * len(bad)


@pytest.mark.parametrize("record_bytes", [900_000, 4096], ids=["one-record", "in-parts"])
def test_sigkill_at_random_points_loses_nothing_and_replays_identically(kafka_broker, tmp_path, record_bytes):
    values = settings(kafka_broker, f"crash-{record_bytes}", **{"processing.checkpoint_every_messages": 400,
                                                                "processing.checkpoint_every_seconds": 2.0,
                                                                "processing.checkpoint_record_bytes": record_bytes})
    config = ensure_topics_for(kafka_broker, values)
    path = write_toml(tmp_path / "crash.toml", values)
    producer = Producer(kafka_broker, config.topics.input, rate=300, seed=3)
    producer.start()
    rng = np.random.default_rng(2024)
    restored = []
    for _ in range(3):
        daemon = DaemonProcess(path)
        restored.append(daemon.wait_restored({0, 1, 2}))
        # the run has started to learn (librdkafka's first fetch may take a while): then a random point
        wait_for(lambda daemon=daemon: daemon.named("checkpoint"), 60, "a first checkpoint")
        time.sleep(float(rng.uniform(0.3, 2.0)))
        assert daemon.stop(signal.SIGKILL) == -signal.SIGKILL
    stream = producer.stop()
    final = DaemonProcess(path, "--once")
    assert final.process.wait(60) == 0

    outputs = read_topic(kafka_broker, config.topics.output)
    copies = check_outputs(outputs, reference(stream))  # byte-identical duplicates, library predictions
    assert set(copies) == {ident for _, ident, _ in stream}  # no id missing
    if kafka_broker.kafka_client == "kafka-python":  # it sends each output at once: a kill leaves duplicates
        assert sum(copies.values()) > len(copies)  # the kills did cause replays
    # (librdkafka queues outputs: those still queued at a SIGKILL never reach the broker, so a replay
    # need not leave a duplicate there; that the killed runs did work shows in the checkpoints below)
    for history in checkpoints(kafka_broker, config.topics.changelog).values():
        assert history == sorted(history)  # offsets and sample counters never go backwards
    in_parts = any(b"#" in record.key for record in read_topic(kafka_broker, config.topics.changelog))
    assert in_parts == (record_bytes == 4096)
    # every restart resumed each partition from its latest checkpoint: never behind an earlier one
    starts = [{e["partition"]: (e["offset"] or 0, e["n_samples"]) for e in events}
              for events in restored + [final.named("restored")]]
    for partition in range(3):
        sequence = [start[partition] for start in starts]
        assert sequence == sorted(sequence) and sequence[-1][1] > 0, sequence
    # the killed runs checkpointed
    assert any(before != after for before, after in zip(starts[:-1], starts[1:], strict=True))


def test_sigterm_mid_stream_then_restart_no_duplicates_no_gaps(kafka_broker, tmp_path):
    values = settings(kafka_broker, "graceful", session_ms=6000)
    config = ensure_topics_for(kafka_broker, values)
    path = write_toml(tmp_path / "graceful.toml", values)
    producer = Producer(kafka_broker, config.topics.input, rate=400, seed=4)
    producer.start()
    first = DaemonProcess(path)
    first.wait_restored({0, 1, 2})
    wait_for(lambda: {p for e in first.named("checkpoint") for p in e["partitions"]} == {0, 1, 2}, 20,
             "checkpoints of every partition")
    started = time.monotonic()
    assert first.stop(signal.SIGTERM) == 0
    assert time.monotonic() - started < 10
    assert first.named("stopped")[0]["ok"] is True
    second = DaemonProcess(path)
    second.wait_restored({0, 1, 2})
    time.sleep(1.0)
    stream = producer.stop()
    wait_for(lambda: len(read_topic(kafka_broker, config.topics.output)) >= len(stream), 30, "all outputs")
    assert second.stop(signal.SIGINT) == 0

    outputs = read_topic(kafka_broker, config.topics.output)
    copies = check_outputs(outputs, reference(stream))
    assert set(copies) == {ident for _, ident, _ in stream}
    assert max(copies.values()) == 1  # no duplicates
    assert all(e["checkpoint"] for e in second.named("restored"))


def test_restore_reads_records_written_after_it_found_the_changelog_empty(kafka_broker):
    """Each read of the changelog goes to its current end, not to the end an earlier read saw.

    librdkafka keeps a partition's high-watermark across assignments: a restorer that trusted it
    took a partition found empty before as caught up at once, missed the checkpoint written since
    whenever its first fetch took longer than one poll, and restored a fresh task.
    """
    values = settings(kafka_broker, "reread")
    config = ensure_topics_for(kafka_broker, values)
    restorer = transport(config).consumer(config, group=False)
    keys = {p: checkpoint_key(config.topics.input, p) for p in range(3)}
    partition = TopicPartition(config.topics.changelog, 1)
    def latest():
        read = read_checkpoints(restorer, config.topics.changelog, keys, stall_timeout_s=20)
        return {p: changelog.checkpoint() for p, changelog in read.items() if changelog.checkpoint() is not None}

    try:
        assert latest() == {}
        for end, value in enumerate((b"first", b"second"), start=1):
            produce(kafka_broker, config.topics.changelog, [(1, keys[1], value, None)])
            restorer.assign([partition])
            restorer.seek(partition, 0)
            assert restorer.highwater(partition) in (None, end)  # not known yet, or known: never the old end
            assert not caught_up(restorer, [partition])
            assert latest() == {1: value}
    finally:
        restorer.close()


def test_rebalance_moves_partitions_with_their_state(kafka_broker, tmp_path):
    values = settings(kafka_broker, "rebalance", session_ms=6000)
    config = ensure_topics_for(kafka_broker, values)
    path = write_toml(tmp_path / "rebalance.toml", values)
    all_messages = messages(2700, seed=5)
    phases = [all_messages[:900], all_messages[900:1800], all_messages[1800:]]

    def outputs_reach(n):
        return lambda: len(read_topic(kafka_broker, config.topics.output)) >= n

    a = DaemonProcess(path)
    a.wait_restored({0, 1, 2})
    produce_messages(kafka_broker, config.topics.input, phases[0])
    wait_for(outputs_reach(900), 30, "phase 1 outputs")

    before_b = len(a.events)
    b = DaemonProcess(path)
    moved = set(wait_for(lambda: b.named("assigned") and b.named("assigned")[-1]["partitions"], 40,
                         "the second instance to get partitions"))
    assert moved and moved < {0, 1, 2}  # the two instances split the partitions
    restored = b.wait_restored(moved)
    assert all(e["checkpoint"] and e["n_samples"] == 300 for e in restored), restored  # state came along
    wait_for(lambda: a.named("assigned")[-1]["partitions"] == sorted({0, 1, 2} - moved), 20, "a's new assignment")
    a.wait_restored({0, 1, 2} - moved, timeout=20, since=before_b)
    kept = a.restored(before_b)  # eager rebalancing: a gives up all, then restores those it keeps
    assert all(e["checkpoint"] and e["n_samples"] == 300 for e in kept.values()), kept
    produce_messages(kafka_broker, config.topics.input, phases[1])
    wait_for(outputs_reach(1800), 30, "phase 2 outputs")

    seen, left = len(b.events), {0, 1, 2} - moved
    assert a.stop(signal.SIGTERM) == 0
    assert a.named("stopped")[-1]["ok"], a.events[-8:]  # its final checkpoint is durable
    b.wait_restored(left, since=seen)
    taken = b.restored(seen)
    assert all(taken[p]["checkpoint"] and taken[p]["n_samples"] == 600 for p in left), (
        taken, a.events[-8:], b.events[seen:])
    produce_messages(kafka_broker, config.topics.input, phases[2])
    wait_for(outputs_reach(2700), 30, "phase 3 outputs")
    assert b.stop(signal.SIGTERM) == 0

    copies = check_outputs(read_topic(kafka_broker, config.topics.output), reference(all_messages))
    assert len(copies) == 2700 and max(copies.values()) == 1


@pytest.mark.kafka
@pytest.mark.parametrize("seed, n_after", [(1, 60), (2, 240), (3, 1500)])
def test_broker_outage_with_data_loss_never_stalls_a_partition(tmp_path, seed, n_after):
    """Tansu keeps everything in memory: it restarts with new, empty topics.

    The broker stops while the daemon is mid-stream (its tasks ahead of their last checkpoint), at a
    seeded random moment.  Whatever the daemon held or wrote before it noticed (positions in the old
    input log), every message of the new log is then answered, from its new position (the
    ``earliest`` policy): a new log shorter than the old positions (``n_after`` 60 or 240) must not
    stall, and a longer one (1500) must not be read from the old positions.
    """
    rng = np.random.default_rng(seed)
    with Broker() as broker:
        values = settings(broker, f"outage{seed}", **{"kafka.max_poll_records": 20,
                                                      "processing.checkpoint_every_messages": 150})
        config = ensure_topics_for(broker, values)
        path = write_toml(tmp_path / "outage.toml", values)
        produce_messages(broker, config.topics.input, messages(6000, seed=6, prefix="before"))
        daemon = DaemonProcess(path)
        checkpoints_before = int(rng.integers(1, 4))
        wait_for(lambda: len(daemon.named("checkpoint")) >= checkpoints_before, 40, "checkpoints before the outage",
                 interval=0.01)
        broker.stop()  # memory storage: every topic, record and offset is gone
        time.sleep(float(rng.uniform(0.5, 2.0)))
        assert daemon.process.poll() is None
        broker.start()  # same port
        ensure_topics(config)
        time.sleep(float(rng.uniform(0.0, 3.0)))  # the daemon may or may not have rejoined by now
        after = messages(n_after, seed=7 + seed, prefix="after")
        produce_messages(broker, config.topics.input, after)
        where = {ident: (partition, offset) for ident, (_, _, partition, offset, _) in reference(after).items()}

        def resumed():
            ids = {json.loads(r.value)["id"] for r in read_topic(broker, config.topics.output)}
            return ids >= set(where)
        wait_for(resumed, 60, "outputs after the outage", interval=1.0,
                 context=lambda: [e for e in daemon.events if e.get("level") != "debug"][-25:])
        assert daemon.stop(signal.SIGTERM) == 0
        for record in read_topic(broker, config.topics.output):
            out = json.loads(record.value)
            if out["id"] in where:  # (outputs of the old log may still arrive from the producer's retries)
                assert (out["partition"], out["offset"]) == where[out["id"]]  # positions in the new log
        moved = daemon.named("position_out_of_range")
        assert all(e["level"] == "error" and e["policy"] == "earliest" for e in moved)


def test_exactly_once_mode_runs_in_transactions(kafka_broker):
    # Tansu honours init/commit (offsets move with the transaction) but shows aborted records to
    # read_committed readers, so only the committed path can be checked here.
    values = settings(kafka_broker, "eos", **{"processing.guarantee": "exactly_once"})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(600, seed=8)
    produce_messages(kafka_broker, config.topics.input, stream)
    daemon = Daemon(config)
    assert daemon.run(once=True) == 0
    copies = check_outputs(read_topic(kafka_broker, config.topics.output), reference(stream))
    assert len(copies) == 600 and max(copies.values()) == 1
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=config.kafka.group_id,
                             enable_auto_commit=False)
    committed = {p: consumer.committed(TopicPartition(config.topics.input, p)) for p in range(3)}
    consumer.close()
    assert committed == {0: 200, 1: 200, 2: 200}


def features_and_feedback(kafka_broker, tmp_path, name: str, learn: bool):
    """A daemon's config scoring features ``x1, x2`` with pickled River models, 300 inputs and 300
    feedback records (``y`` and S) over 3 partitions, each topic with one bad record."""
    from river import linear_model, preprocessing

    paths = {}
    for model_name, model in (("eta", preprocessing.StandardScaler() | linear_model.LinearRegression()),
                              ("tau", preprocessing.StandardScaler() | linear_model.LogisticRegression())):
        paths[model_name] = tmp_path / f"{model_name}.pkl"
        paths[model_name].write_bytes(pickle.dumps(model))
    values = settings(kafka_broker, name, **{
        "topics.feedback": f"daemon-{name}.feedback", "models.eta": str(paths["eta"]), "models.tau": str(paths["tau"]),
        "models.features": ["x1", "x2"], "models.learn": learn, "processing.checkpoint_every_messages": 50})
    config = ensure_topics_for(kafka_broker, values)
    rng = np.random.default_rng(9)
    feedback, inputs = [], []
    for i in range(300):
        s = int(rng.integers(0, 2))
        x = {"x1": float(rng.normal(s, 1.0)), "x2": float(rng.normal(0, 1.0))}
        y = float(np.clip(0.5 * x["x1"] - 0.2 + 0.05 * rng.normal(), -1, 1))
        feedback.append((i % 3, b"f", json.dumps({"id": f"f{i}", "features": x, "y": y, "s": s}).encode(), None))
        inputs.append((i % 3, b"i", json.dumps({"id": f"i{i}", "features": x}).encode(), None))
    feedback.append((0, b"bad", b'{"id": "b", "features": {"x1": 1}, "y": 0.1, "s": 5}', None))
    inputs.append((1, b"bad", b'{"id": "u", "features": {"x1": 1, "age": 3}}', None))
    return config, feedback, inputs


@pytest.mark.timeout(180)  # a feedback topic left paused keeps a run-once daemon waiting for it to be read
def test_feedback_for_the_audit_alone_is_read_as_it_comes(kafka_broker, tmp_path):
    # no models.learn, no robust labels: the feedback changes no state, only the audited metrics read it
    class Audit(DaemonObserver):
        def __init__(self):
            self.accepted = Counter()

        def on_feedback(self, daemon, task, accepted):
            self.accepted[task.partition] += len(accepted)

    config, feedback, inputs = features_and_feedback(kafka_broker, tmp_path, "audit", learn=False)
    produce(kafka_broker, config.topics.feedback, feedback)
    produce(kafka_broker, config.topics.input, inputs)
    audit = Audit()
    assert Daemon(config, observers=[audit]).run(once=True) == 0
    assert audit.accepted == {0: 100, 1: 100, 2: 100}
    dead = {dict(r.headers)["streamfair.reason"] for r in read_topic(kafka_broker, config.topics.dead_letter)}
    assert dead == {b"bad_group", b"unknown_feature"}


def test_raw_features_scored_by_river_models_that_learn_from_feedback(kafka_broker, tmp_path):
    config, feedback, inputs = features_and_feedback(kafka_broker, tmp_path, "features", learn=True)
    produce(kafka_broker, config.topics.feedback, feedback)
    produce(kafka_broker, config.topics.input, inputs[:150])
    daemon = Daemon(config)
    assert daemon.run(once=True) == 0
    produce(kafka_broker, config.topics.input, inputs[150:])
    again = Daemon(config)
    assert again.run(once=True) == 0

    outputs = [json.loads(r.value) for r in read_topic(kafka_broker, config.topics.output)]
    assert {o["id"] for o in outputs} == {f"i{i}" for i in range(300)}
    dead = {dict(r.headers)["streamfair.reason"]: dict(r.headers)["streamfair.source.topic"]
            for r in read_topic(kafka_broker, config.topics.dead_letter)}
    assert dead == {b"bad_group": b"daemon-features.feedback", b"unknown_feature": b"daemon-features.in"}
    latest = {}
    for record in read_topic(kafka_broker, config.topics.changelog):
        latest[json.loads(record.value)["partition"]] = json.loads(record.value)
    assert {p: c["feedback_offset"] for p, c in latest.items()} == {0: 101, 1: 100, 2: 100}
    regressor, _ = pickle.loads(base64.b64decode(latest[0]["models"]))
    learned = regressor.predict_one({"x1": 2.0, "x2": 0.0}) - regressor.predict_one({"x1": -2.0, "x2": 0.0})
    assert 1.2 < learned < 2.8  # slope 0.5 on x1 learned from the feedback (4 * 0.5 = 2)
    # the first run's early outputs came from untrained models; the second run's from trained ones
    second = [o for o in outputs if int(o["id"][1:]) >= 150]
    assert np.corrcoef([o["eta"] for o in second], [json.loads(inputs[int(o["id"][1:])][2])["features"]["x1"]
                                                      for o in second])[0, 1] > 0.9
