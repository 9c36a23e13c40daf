"""The daemon serving the group-robust (DRO) post-processor, against the real broker.

Outputs are compared with :class:`streamfair.dro.GroupRobustFairRegressionPostProcessor` run in
process on each partition's message sequence (predict, then ``learn_one(eta, tau, key=id)``), with
the feedback labels applied where the daemon applies them: at the checkpoint that follows them.
"""

from __future__ import annotations

import json
import signal
import threading
from collections import Counter

import numpy as np
import pytest

from connectors.kafka.checkpoint import Checkpoint, restore_postprocessor
from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver
from streamfair.checks import assert_same_state
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support.daemon_process import DaemonProcess, wait_for
from tests.support.kafka_daemon import (
    POSTPROCESSOR,
    EventLog,
    check_outputs,
    ensure_topics_for,
    latest_checkpoints,
    messages,
    produce,
    produce_messages,
    read_changelog,
    read_topic,
    settings,
    write_toml,
)

ROBUST = {"robust": True, "refresh": 20, "temperature": 0.02}


def robust_reference(fair: dict, stream, offsets: Counter, expected: dict) -> None:
    """Predict then learn ``stream`` with the in-process post-processors ``fair[partition]``."""
    for partition, ident, body in stream:
        offset = offsets[partition]
        offsets[partition] += 1
        f = fair[partition]
        proba = f.proba_one(body["eta"], body["tau"]).tolist() if body.get("distribution") else None
        expected[ident] = (float(f.predict_one(body["eta"], body["tau"], key=ident)), f.n_samples, partition, offset,
                           proba)
        f.learn_one(body["eta"], body["tau"], key=ident)


class Snapshot(DaemonObserver):
    """Keeps the daemon's tasks as they are at the end of a run (after the final checkpoint)."""

    tasks: dict = {}

    def on_stop(self, daemon):
        self.tasks = dict(daemon.tasks)


def test_robust_daemon_matches_the_library_and_restores_its_dro_state(kafka_broker):
    values = settings(kafka_broker, "robust", **{f"postprocessor.{k}": v for k, v in ROBUST.items()},
                      **{"topics.feedback": "daemon-robust.feedback", "processing.checkpoint_every_messages": 100})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(900, seed=3)
    first, second = stream[:450], stream[450:]

    # run 1: the first half of the inputs
    produce_messages(kafka_broker, config.topics.input, first)
    assert Daemon(config).run(once=True) == 0
    # run 2: labels for some of them (and one for an id never seen), on the input's partition; no inputs
    rng = np.random.default_rng(5)
    noise = {0: 0.05, 1: 0.8}  # the base model serves group 1 (tau = [0.2, 0.8]) badly
    labelled = [(p, ident, float(np.clip(body["eta"] + noise[int(body["tau"][1] > 0.5)] * rng.standard_normal(),
                                         -1, 1)))
                for p, ident, body in first if rng.random() < 0.4]
    feedback = [(p, b"f", json.dumps({"id": ident, "y": y}).encode(), None) for p, ident, y in labelled]
    feedback.append((1, b"f", b'{"id": "never-seen", "y": 0.1}', None))
    feedback.append((2, b"bad", b'{"id": "m7", "y": "high"}', None))
    produce(kafka_broker, config.topics.feedback, feedback)
    snapshot = Snapshot()
    restarted = Daemon(config, observers=[snapshot])
    assert restarted.run(once=True) == 0
    assert restarted.stats.dead_letters == Counter({"bad_label": 1})
    assert sum(t.labels_applied for t in snapshot.tasks.values()) == len(labelled)
    assert [t.labels_unmatched for _, t in sorted(snapshot.tasks.items())] == [0, 1, 0]
    assert restarted.stats.labels == Counter(applied=len(labelled), unmatched=1)  # the progress line, the metrics
    # run 3: the second half, served from the restored state
    produce_messages(kafka_broker, config.topics.input, second)
    assert Daemon(config).run(once=True) == 0

    kwargs = {**POSTPROCESSOR, **ROBUST}
    kwargs.pop("robust")
    fair = {p: GroupRobustFairRegressionPostProcessor(n_groups=2, **kwargs) for p in range(3)}
    unlabelled = {p: GroupRobustFairRegressionPostProcessor(n_groups=2, **kwargs) for p in range(3)}
    offsets, expected = Counter(), {}
    robust_reference(fair, first, offsets, expected)
    robust_reference(unlabelled, first, Counter(), {})
    for p, ident, y in labelled:
        assert fair[p].learn_label(ident, y)
    robust_reference(fair, second, offsets, expected)

    outputs = read_topic(kafka_broker, config.topics.output)
    copies = check_outputs(outputs, expected)
    assert len(copies) == 900 and set(copies.values()) == {1}
    latest = latest_checkpoints(kafka_broker, config)
    for p in range(3):
        restored = restore_postprocessor(latest[p].state)
        assert type(restored) is GroupRobustFairRegressionPostProcessor
        assert_same_state(restored.state_dict()["dro"], fair[p].state_dict()["dro"])  # risks, weights, ids, counters
        got, want = restored.dro_diagnostics(), fair[p].dro_diagnostics()
        assert np.array_equal(got.weights, want.weights) and got.robust_value == want.robust_value
        assert got.n_labels == sum(1 for q, _, _ in labelled if q == p) > 0  # the counter continued over restarts
        assert restored.n_samples == 300
        # the DRO state is live: the labels made the badly served group 1 the worst-off one
        assert got.weights[1] > 0.6 > unlabelled[p].dro_diagnostics().weights[1]
        assert not np.array_equal(got.group_risks, unlabelled[p].dro_diagnostics().group_risks)


def test_a_replay_after_a_crash_repeats_its_outputs_byte_for_byte_though_feedback_came_in_between(kafka_broker,
                                                                                                   tmp_path):
    """Feedback waits until a replay has passed what an earlier run answered (:mod:`connectors.kafka.feedback_hold`).

    The first run answers every input and is killed before its first checkpoint.  The labels are in
    the feedback topic all along.  The second run, with small polls and a checkpoint every 60 inputs
    (where another run's timing could have put them), replays the inputs: had it read the labels,
    its first checkpoint would have applied them, and the outputs after it would differ from those
    sent.  It learns them once, at the end.
    """
    values = settings(kafka_broker, "feedback-replay", **{f"postprocessor.{k}": v for k, v in ROBUST.items()},
                      **{"topics.feedback": "daemon-feedback-replay.feedback", "kafka.max_poll_records": 10,
                         "processing.checkpoint_every_messages": 10**6, "processing.checkpoint_every_seconds": 3600})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(450, seed=6, prefix="r")
    produce_messages(kafka_broker, config.topics.input, stream)
    rng = np.random.default_rng(6)
    labelled = [(p, ident, float(np.clip(body["eta"] + rng.standard_normal(), -1, 1)))
                for p, ident, body in stream if rng.random() < 0.5]
    produce(kafka_broker, config.topics.feedback,
            [(p, b"f", json.dumps({"id": ident, "y": y}).encode(), None) for p, ident, y in labelled])

    first = DaemonProcess(write_toml(tmp_path / "first.toml", values))
    wait_for(lambda: len(read_topic(kafka_broker, config.topics.output)) >= len(stream), 60, "every input answered")
    assert first.stop(signal.SIGKILL) == -signal.SIGKILL
    assert not first.named("checkpoint") and not read_topic(kafka_broker, config.topics.changelog)
    second = DaemonProcess(write_toml(tmp_path / "second.toml", {**values, "processing.checkpoint_every_messages": 60}),
                           "--once")
    assert second.process.wait(60) == 0
    assert len(second.named("checkpoint")) > 1  # checkpoints during the replay, before the last

    kwargs = {**POSTPROCESSOR, **ROBUST}
    kwargs.pop("robust")
    fair = {p: GroupRobustFairRegressionPostProcessor(n_groups=2, **kwargs) for p in range(3)}
    expected: dict = {}
    robust_reference(fair, stream, Counter(), expected)  # no label before the last input
    copies = check_outputs(read_topic(kafka_broker, config.topics.output), expected)
    assert set(copies) == set(expected) and set(copies.values()) == {2}  # each answered twice, the same bytes
    for p, ident, y in labelled:
        assert fair[p].learn_label(ident, y)
    latest = latest_checkpoints(kafka_broker, config)
    for p in range(3):  # and the labels were learned, each once, at the end
        assert_same_state(restore_postprocessor(latest[p].state).state_dict()["dro"], fair[p].state_dict()["dro"])
    assert {e["partition"] for e in second.named("feedback_resumed")} == {0, 1, 2}


def test_robust_micro_batches_keep_their_ids_across_a_restart(kafka_broker):
    values = settings(kafka_broker, "robust-batch", **{f"postprocessor.{k}": v for k, v in ROBUST.items()},
                      **{"processing.batch_size": 8})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(300, seed=4, prefix="b")
    produce_messages(kafka_broker, config.topics.input, stream[:151])  # 50 or 51 per partition: batches left open
    assert Daemon(config).run(once=True) == 0
    latest = latest_checkpoints(kafka_broker, config)
    assert all(0 < len(point.pending_keys) == len(point.pending_eta) < 8 for point in latest.values())
    produce_messages(kafka_broker, config.topics.input, stream[151:])
    assert Daemon(config).run(once=True) == 0

    kwargs = {**POSTPROCESSOR, **ROBUST}
    kwargs.pop("robust")
    final = latest_checkpoints(kafka_broker, config)
    for p in range(3):
        reference = GroupRobustFairRegressionPostProcessor(n_groups=2, **kwargs)
        rows = [(ident, body) for q, ident, body in stream if q == p]
        for start in range(0, 96, 8):  # one mini-batch step per 8 valid messages, as the daemon does
            batch = rows[start : start + 8]
            reference.learn_many([b["eta"] for _, b in batch], [b["tau"] for _, b in batch], batch_size=8,
                                 keys=[i for i, _ in batch])
        restored = restore_postprocessor(final[p].state)
        assert_same_state(restored.state_dict()["dro"], reference.state_dict()["dro"])
        assert final[p].pending_keys == [i for i, _ in rows[96:]]


def test_a_checkpoint_restores_its_own_class_with_its_whole_dro_state():
    from connectors.kafka.config import load_config

    robust = load_config(env={}, overrides=["postprocessor.robust=true", "postprocessor.refresh=3"])
    fair = robust.postprocessor.build()
    for i in range(7):
        fair.learn_one(0.1 * i - 0.3, [0.3, 0.7], key=f"k{i}")
    data = Checkpoint(robust.topics.input, 0, 7, None, fair.state_dict()).to_bytes()
    task = Daemon(robust).partitions.new_task(0, data)
    assert type(task.fair) is GroupRobustFairRegressionPostProcessor
    assert_same_state(task.fair.state_dict()["dro"], fair.state_dict()["dro"])
    assert task.fair.learn_label("k6", 0.2)


@pytest.mark.parametrize("checkpoint_in_between", [False, True])
def test_a_label_of_a_sample_in_the_open_mini_batch_waits_for_its_batch_whenever_checkpoints_come(
        checkpoint_in_between):
    """It was dropped as unmatched when a checkpoint came before its batch was learned, applied when none did."""
    from connectors.kafka.codec import FeedbackParser, InputParser
    from connectors.kafka.partitions import SyntheticRecord
    from connectors.kafka.task import PartitionTask

    def task_of(point=None, fair=None):
        options = {"parser": InputParser(2, 4096), "batch_size": 4,
                   "feedback_parser": FeedbackParser(["0", "1"], 4096, labels_only=True)}
        if point is not None:
            return PartitionTask.from_checkpoint(point, models=None, **options)
        return PartitionTask("in", 0, fair, **options)

    task = task_of(fair=GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=1))
    inputs = [SyntheticRecord("in", 0, i, 0, None, json.dumps({"id": f"m{i}", "eta": 0.3, "tau": [0.5, 0.5]}).encode(),
                              []) for i in range(4)]
    task.process(inputs[:2])
    task.add_feedback([SyntheticRecord("fb", 0, 0, 0, None, b'{"id": "m0", "y": 0.9}', [])])
    if checkpoint_in_between:  # the label waits in the checkpoint, and a restart keeps it waiting
        point = Checkpoint.from_bytes(task.checkpoint().to_bytes())
        assert point.pending_labels == [("m0", 0.9)] and task.labels_unmatched == 0
        task = task_of(point)
    task.process(inputs[2:])  # the batch is learned
    point = task.checkpoint()
    assert (task.labels_applied, task.labels_unmatched, point.pending_labels) == (1, 0, [])


def robust_task(batch_size: int, point: Checkpoint | None = None):
    """A pure partition task of the group-robust post-processor (refresh 1: each learned sample waits for its label)."""
    from connectors.kafka.codec import FeedbackParser, InputParser
    from connectors.kafka.task import PartitionTask

    options = {"parser": InputParser(2, 4096), "batch_size": batch_size,
               "feedback_parser": FeedbackParser(["0", "1"], 4096, labels_only=True)}
    if point is not None:
        return PartitionTask.from_checkpoint(point, models=None, **options)
    return PartitionTask("in", 0, GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=1), **options)


def inputs_with_ids(ids, start: int = 0) -> list:
    from connectors.kafka.partitions import SyntheticRecord

    return [SyntheticRecord("in", 0, start + i, 0, None,
                            json.dumps({"id": ident, "eta": 0.3, "tau": [0.5, 0.5]}).encode(), [])
            for i, ident in enumerate(ids)]


def labels_with_ids(ids) -> list:
    from connectors.kafka.partitions import SyntheticRecord

    return [SyntheticRecord("fb", 0, i, 0, None, json.dumps({"id": ident, "y": 0.9}).encode(), [])
            for i, ident in enumerate(ids)]


@pytest.mark.parametrize("batch_size", [1, 4])
@pytest.mark.parametrize("input_id, label_id, matched", [(12, "12", True), ("12", 12, True), (-3, "-3", True),
                                                         (12, 12, True), (12, "012", False), (12, "12.0", False)])
def test_a_label_matches_the_input_whose_id_gives_its_output_key(batch_size, input_id, label_id, matched):
    """``12`` and ``"12"`` key the same output record, so a label for one is a label for the other."""
    from connectors.kafka.codec import message_key

    task = robust_task(batch_size)
    outputs = task.process(inputs_with_ids([input_id, "x1", "x2", "x3"])).outputs  # one full batch: learned
    assert (outputs[0].key == message_key(label_id)) == matched
    task.add_feedback(labels_with_ids([label_id]))
    task.checkpoint()
    assert (task.labels_applied, task.labels_unmatched, task.fair.n_labels) == ((1, 0, 1) if matched else (0, 1, 0))
    assert task.fair.learn_label(input_id, 0.1) is not matched  # the sample's label is taken, or still free


def test_a_label_goes_to_the_sample_of_its_own_id_first_then_to_the_other_of_its_key():
    task = robust_task(1)
    task.process(inputs_with_ids([12, "12"]))
    task.add_feedback(labels_with_ids(["12"]))
    task.checkpoint()
    assert task.fair.learn_label(12, 0.1) and not task.fair.learn_label("12", 0.1)
    task = robust_task(1)
    task.process(inputs_with_ids([12, "12"]))
    task.add_feedback(labels_with_ids(["12", "12", "12"]))  # the key's two samples, then none left
    task.checkpoint()
    assert (task.labels_applied, task.labels_unmatched) == (2, 1)


def test_a_label_for_the_other_id_of_a_sample_in_the_open_mini_batch_waits_under_the_samples_id():
    """The checkpoint holds it as a label of the pending id, which a restart (of this version or the one before,
    which took only the pending ids themselves) reads back, and applies once the batch is learned."""
    task = robust_task(4)
    task.process(inputs_with_ids([12, "x1"]))
    task.add_feedback(labels_with_ids(["12"]))
    point = Checkpoint.from_bytes(task.checkpoint().to_bytes())
    assert (point.pending_keys, point.pending_labels, task.labels_unmatched) == ([12, "x1"], [(12, 0.9)], 0)
    task = robust_task(4, point)
    task.process(inputs_with_ids(["x2", "x3"], start=2))  # the batch is learned
    point = task.checkpoint()
    assert (task.labels_applied, task.labels_unmatched, point.pending_labels, task.fair.n_labels) == (1, 0, [], 1)


def large_robust_settings(kafka_broker, name: str, **extra) -> dict:
    """A robust daemon that keeps every id waiting (``max_pending`` of the class) and checkpoints every 10,000."""
    return settings(kafka_broker, name, **{f"postprocessor.{k}": v for k, v in ROBUST.items()},
                    **{"postprocessor.max_pending": 100_000, "processing.checkpoint_every_messages": 10_000,
                       "processing.checkpoint_every_seconds": 60.0}, **extra)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_checkpoint_larger_than_a_record_is_written_in_parts_and_the_next_daemon_continues_from_it(kafka_broker,
                                                                                                     guarantee):
    """Ids waiting for labels make the robust state grow (about 70 bytes each here, up to ``max_pending``).

    With 15,000 of them per partition a checkpoint takes about 1.07 MB, more than a record may hold
    (1 MB for both clients by default).  It is written in parts, and a restarted daemon continues
    from it exactly.  Each checkpoint of a partition deletes the parts superseded before it (for the
    second daemon's first one, those it found at its restore), so at most one checkpoint's parts
    stay superseded.
    """
    values = large_robust_settings(kafka_broker, f"robust-large-{guarantee}", **{"processing.guarantee": guarantee})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(57_000, seed=6, prefix="L")
    produce_messages(kafka_broker, config.topics.input, stream[:45_000])
    assert Daemon(config).run(once=True) == 0
    changelog = read_changelog(kafka_broker, config)
    assert all(len(changelog[p].checkpoint()) > 1_048_576 and len(changelog[p].current_parts()) == 2
               for p in range(3))

    produce_messages(kafka_broker, config.topics.input, stream[45_000:])
    log = EventLog("robust-large")
    assert Daemon(config, logger=log.logger).run(once=True) == 0
    assert [fields["checkpoint"] for fields in log.fields("restored")] == [True] * 3

    kwargs = {**POSTPROCESSOR, **ROBUST, "max_pending": 100_000}
    kwargs.pop("robust")
    fair = {p: GroupRobustFairRegressionPostProcessor(n_groups=2, **kwargs) for p in range(3)}
    expected: dict = {}
    robust_reference(fair, stream, Counter(), expected)
    copies = check_outputs(read_topic(kafka_broker, config.topics.output), expected)
    assert len(copies) == 57_000 and set(copies.values()) == {1}
    changelog = read_changelog(kafka_broker, config)
    for p in range(3):
        assert_same_state(restore_postprocessor(Checkpoint.from_bytes(changelog[p].checkpoint()).state).state_dict(),
                          fair[p].state_dict())
        assert len(changelog[p].stale_parts()) == 2  # one superseded checkpoint's, whatever the first daemon left


def test_a_changelog_record_too_large_for_the_producer_stops_the_daemon_instead_of_replaying_forever(kafka_broker):
    """A ``checkpoint_record_bytes`` above the producer's limit (1 MB for both clients by default) makes
    records it refuses, and every retry would replay the same messages and fail again.  The daemon
    stops with its own exit code and the error event instead, and has sent each output once.
    """
    values = large_robust_settings(kafka_broker, "robust-too-large",
                                   **{"processing.checkpoint_record_bytes": 2_000_000})
    config = ensure_topics_for(kafka_broker, values)
    produce_messages(kafka_broker, config.topics.input, messages(45_000, seed=6, prefix="L"))
    log = EventLog("robust-too-large")
    daemon = Daemon(config, logger=log.logger)
    stop = threading.Timer(120, daemon.stop)  # a daemon replaying forever would be stopped: exit code 0
    stop.start()
    try:
        assert daemon.run(once=True) == EXIT_CHECKPOINT_TOO_LARGE
    finally:
        stop.cancel()
    assert daemon.stats.rewinds == 0
    too_large = log.fields("checkpoint_too_large")
    assert len(too_large) == 1 and too_large[0]["bytes"] > 1_000_000
    assert "processing.checkpoint_record_bytes = 2000000" in too_large[0]["fix"]
    keys = Counter(record.key for record in read_topic(kafka_broker, config.topics.output))
    assert len(keys) == daemon.stats.produced > 0 and set(keys.values()) == {1}
