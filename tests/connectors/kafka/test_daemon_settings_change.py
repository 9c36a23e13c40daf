"""A restart under changed settings: the configured post-processor and models are the ones that serve.

A checkpoint's post-processor continues only under the settings that made it; otherwise the
configured one starts afresh at the checkpoint's offset, with a warning that names the changes.
A smaller ``processing.batch_size`` learns the checkpoint's pending samples that fill its batches.
Base models learned online continue only while the configured model files are the ones they
descend from.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from connectors.kafka.checkpoint import Checkpoint, changed_settings, restore_postprocessor
from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.models import BaseModels
from connectors.kafka.task import PartitionTask
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.checks import assert_same_state
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support import REPO
from tests.support.consumer_records import Record
from tests.support.kafka_daemon import (
    POSTPROCESSOR,
    EventLog,
    check_outputs,
    ensure_topics_for,
    latest_checkpoints,
    messages,
    produce_messages,
    read_topic,
    reference,
    settings,
)


def through_a_checkpoint(fair):
    """``fair`` as a checkpoint restores it (its state through the changelog's JSON)."""
    data = Checkpoint("in", 0, 1, None, fair.state_dict()).to_bytes()
    return restore_postprocessor(Checkpoint.from_bytes(data).state)


@pytest.mark.parametrize("make", [
    lambda: FairRegressionPostProcessor(L=10, n_groups=3, p=(0.2, 0.3, 0.5), memory=500),
    lambda: FairRegressionPostProcessor(L=10, n_groups=2, profile="paper", eps=0.02, horizon=300),
    lambda: GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=3, temperature=0.02),
    lambda: FairClassificationPostProcessor(n_classes=3, n_groups=2, classes=("a", "b", "c")),  # a tuple
], ids=["regression", "paper", "robust", "classification"])
def test_a_checkpoint_of_the_configured_settings_has_none_changed(make):
    fair = make()
    scores = np.full((4, 3), 1 / 3) if fair.prediction_input == "proba" else np.full(4, 0.2)
    fair.learn_many(scores, np.full((4, fair.n_groups), 1 / fair.n_groups), keys=list("abcd"))
    assert changed_settings(through_a_checkpoint(fair), make()) == {}


def test_changed_settings_name_each_difference_and_a_class_change_alone():
    restored = through_a_checkpoint(FairRegressionPostProcessor(L=10, n_groups=2, memory=160, seed=11))
    configured = FairRegressionPostProcessor(L=20, n_groups=2, memory=500, seed=11, p=(0.4, 0.6))
    changed = changed_settings(restored, configured)
    assert list(changed) == ["L", "p", "beta", "memory"]  # beta follows L (the anytime profile derives it)
    assert changed["L"] == [10, 20] and changed["p"] == [None, [0.4, 0.6]] and changed["memory"] == [160, 500]
    paper = FairRegressionPostProcessor(L=10, n_groups=2, profile="paper", eps=0.01, horizon=500, seed=11)
    switched = changed_settings(through_a_checkpoint(paper), restored)  # each profile has arguments of its own
    assert switched["profile"] == ["paper", "anytime"] and switched["optimizer"] == ["sgd3", "tracking"]
    assert switched["eps"] == [[0.01, 0.01], None] and switched["ks"] == [None, [0.05, 0.05]]
    assert switched["horizon"] == [500, None] and switched["memory"] == [None, 160]
    robust = GroupRobustFairRegressionPostProcessor(L=10, n_groups=2, memory=160, seed=11)
    assert changed_settings(restored, robust) == {
        "class": ["FairRegressionPostProcessor", "GroupRobustFairRegressionPostProcessor"]}


def checkpoint_of(overrides: list[str], n: int, batch_size: int = 1) -> bytes:
    """A checkpoint of partition 0 of a daemon with ``overrides``, after ``n`` score messages."""
    config = load_config(env={}, overrides=overrides)
    task = PartitionTask(config.topics.input, 0, config.postprocessor.build(), parser=InputParser(2, 4096),
                         batch_size=batch_size, groups=config.group_labels())
    task.process([Record(config.topics.input, 0, i, 0, None, json.dumps(body).encode(), [])
                  for i, (_, _, body) in enumerate(messages(n, seed=7))])
    return task.checkpoint().to_bytes()


def test_the_configured_postprocessor_starts_afresh_at_the_checkpoints_offset_with_a_warning():
    data = checkpoint_of(["postprocessor.ks=0.05", "postprocessor.memory=160"], n=23, batch_size=8)
    config = load_config(env={}, overrides=["postprocessor.ks=0.02", "postprocessor.memory=160",
                                            "processing.batch_size=8"])
    log = EventLog("settings")
    task = Daemon(config, logger=log.logger).partitions.new_task(0, data)
    assert_same_state(task.fair.state_dict(), config.postprocessor.build().state_dict())  # fresh, as configured
    assert (task.offset, task.n_pending) == (23, 0)  # the pending 7 belonged to the replaced post-processor
    [warning] = log.fields("settings_changed")
    assert warning["partition"] == 0 and warning["offset"] == 23
    assert warning["changed"]["ks"] == [[0.05, 0.05], [0.02, 0.02]] and list(warning["changed"]) == ["ks"]

    same = load_config(env={}, overrides=["postprocessor.ks=0.05", "postprocessor.memory=160",
                                          "processing.batch_size=8"])
    log = EventLog("same")
    task = Daemon(same, logger=log.logger).partitions.new_task(0, data)
    assert (task.fair.n_samples, task.n_pending, log.fields("settings_changed")) == (16, 7, [])
    assert_same_state(task.fair.state_dict(), Checkpoint.from_bytes(data).state)


def test_group_labels_in_another_order_start_afresh_and_renamed_or_unrecorded_labels_keep_the_state():
    data = checkpoint_of(["models.groups=f,m"], n=10)
    assert Checkpoint.from_bytes(data).groups == ["f", "m"]

    def restore(groups: str, data: bytes = data) -> tuple[PartitionTask, list[dict]]:
        log = EventLog(f"groups-{groups}")
        config = load_config(env={}, overrides=[f"models.groups={groups}"])
        return Daemon(config, logger=log.logger).partitions.new_task(0, data), log.fields("settings_changed")

    task, warnings = restore("m,f")  # the columns of the state belong to f, m: they would swap groups
    assert (task.fair.n_samples, task.offset) == (0, 10)
    assert [warning["changed"] for warning in warnings] == [{"groups": [["f", "m"], ["m", "f"]]}]
    assert task.checkpoint().groups == ["m", "f"]  # the fresh state is learned under the configured order
    for groups in ("f,m", "a,b"):  # the same labels; or new names for the same columns
        task, warnings = restore(groups)
        assert (task.fair.n_samples, warnings) == (10, [])
    unrecorded = replace(Checkpoint.from_bytes(data), groups=None).to_bytes()  # as older versions wrote
    task, warnings = restore("m,f", unrecorded)
    assert (task.fair.n_samples, warnings) == (10, [])


def test_a_class_change_starts_the_configured_class_afresh():
    data = checkpoint_of(["postprocessor.robust=true", "postprocessor.refresh=3"], n=10)
    config = load_config(env={})
    log = EventLog("class")
    task = Daemon(config, logger=log.logger).partitions.new_task(0, data)
    assert type(task.fair) is FairRegressionPostProcessor and task.fair.n_samples == 0 and task.offset == 10
    assert log.fields("settings_changed")[0]["changed"] == {
        "class": ["GroupRobustFairRegressionPostProcessor", "FairRegressionPostProcessor"]}


@pytest.mark.parametrize(("batch_size", "learned", "pending"), [(1, 7, 0), (2, 6, 1), (3, 6, 1), (8, 0, 7)])
def test_pending_samples_that_fill_smaller_batches_are_learned_at_restore(batch_size, learned, pending):
    stream = [body for _, _, body in messages(23, seed=7)]
    point = Checkpoint.from_bytes(checkpoint_of([], n=23, batch_size=8))
    task = PartitionTask.from_checkpoint(point, models=None, parser=InputParser(2, 4096), batch_size=batch_size)
    assert (task.fair.n_samples, task.n_pending) == (16 + learned, pending)
    expected = load_config(env={}).postprocessor.build()
    expected.learn_many([b["eta"] for b in stream[:16]], [b["tau"] for b in stream[:16]], batch_size=8)
    if learned:
        expected.learn_many([b["eta"] for b in stream[16:16 + learned]], [b["tau"] for b in stream[16:16 + learned]],
                            batch_size=batch_size)
    assert_same_state(task.fair.state_dict(), expected.state_dict())
    assert task.checkpoint().pending_eta == [b["eta"] for b in stream[16 + learned:]]


def test_a_restart_with_another_target_and_batch_size_serves_the_configured_postprocessor(kafka_broker):
    before = settings(kafka_broker, "settings-change", **{"processing.batch_size": 8})
    config = ensure_topics_for(kafka_broker, before)
    first = messages(610, seed=12)  # 204/203/203 per partition: a pending mini-batch in each
    produce_messages(kafka_broker, config.topics.input, first)
    assert Daemon(config).run(once=True) == 0

    after = dict(before, **{"processing.batch_size": 1, "postprocessor.ks": 0.03, "postprocessor.memory": 400})
    second = [(p, f"n{i}", body | {"id": f"n{i}"}) for i, (p, _, body) in enumerate(messages(600, seed=13))]
    produce_messages(kafka_broker, config.topics.input, second)
    log = EventLog("settings-change")
    assert Daemon(ensure_topics_for(kafka_broker, after), logger=log.logger).run(once=True) == 0
    assert sorted(event["partition"] for event in log.fields("settings_changed")) == [0, 1, 2]

    outputs = read_topic(kafka_broker, config.topics.output)
    assert read_topic(kafka_broker, config.topics.dead_letter) == []
    sizes = Counter(p for p, _, _ in first)
    expected = {ident: (prediction, version, p, offset + sizes[p], proba)  # at the offsets after the first stream
                for ident, (prediction, version, p, offset, proba)
                in reference(second, **{**POSTPROCESSOR, "ks": 0.03, "memory": 400}).items()}
    copies = check_outputs([record for record in outputs if json.loads(record.value)["id"] in expected], expected)
    assert len(copies) == 600 and max(copies.values()) == 1
    latest = latest_checkpoints(kafka_broker, config)
    assert [point.state["config"]["ks"] for point in latest.values()] == [[0.03, 0.03]] * 3


def test_models_learned_online_continue_only_while_the_configured_model_files_are_theirs(tmp_path):
    from river import linear_model

    files = {}
    for name, intercept in (("a", 0.0), ("b", 0.4)):
        files[name] = (tmp_path / f"{name}-eta.pkl", tmp_path / f"{name}-tau.pkl")
        files[name][0].write_bytes(pickle.dumps(linear_model.LinearRegression(intercept_init=intercept)))
        files[name][1].write_bytes(pickle.dumps(linear_model.LogisticRegression()))

    def restore(name: str, data: bytes | None) -> tuple[PartitionTask, EventLog]:
        eta, tau = files[name]
        config = load_config(env={}, overrides=[f"models.eta={eta}", f"models.tau={tau}", "models.learn=true",
                                                "topics.feedback=feedback"])
        log = EventLog(f"models-{name}")
        daemon = Daemon(config, logger=log.logger)
        daemon.partitions.models = BaseModels.load(eta, tau, config.group_labels())
        return daemon.partitions.new_task(0, data), log

    task, _ = restore("a", None)
    task.models.learn({"x": 1.0}, y=0.9, s=1)  # as feedback does, at a checkpoint
    data = task.checkpoint().to_bytes()
    learned, x = task.models.score({"x": 1.0}), {"x": 1.0}
    assert learned != BaseModels.load(*files["a"], ["0", "1"]).score(x)

    same, log = restore("a", data)
    assert same.models.score(x) == learned and log.fields("models_changed") == []
    other, log = restore("b", data)
    assert other.models.score(x) == BaseModels.load(*files["b"], ["0", "1"]).score(x) != learned
    assert [event["partition"] for event in log.fields("models_changed")] == [0]
    assert other.fair.n_samples == same.fair.n_samples  # the post-processor continues
    unknown = replace(Checkpoint.from_bytes(data), models_origin=None).to_bytes()  # as older versions wrote
    older, log = restore("b", unknown)
    assert older.models.score(x) == learned and log.fields("models_changed") == []


def test_a_checkpoint_written_before_the_profiles_continues_under_its_settings_and_not_under_the_defaults():
    state = pickle.loads((REPO / "tests" / "data" / "paper_checkpoint_v1.pkl").read_bytes())  # the paper profile's
    data = Checkpoint("streamfair.input", 0, 40, None, state).to_bytes()
    own = ["postprocessor.profile=paper", "postprocessor.L=50", "postprocessor.eps=0.001", "postprocessor.p=0.7,0.3",
           "postprocessor.horizon=2500", "postprocessor.optimizer=sgd3", "postprocessor.inner=acsa2"]
    log = EventLog("v1-own")
    task = Daemon(load_config(env={}, overrides=own), logger=log.logger).partitions.new_task(0, data)
    assert task.fair.n_samples == state["n_samples"] > 0 and log.fields("settings_changed") == []
    log = EventLog("v1-defaults")
    task = Daemon(load_config(env={}, overrides=["postprocessor.p=0.7,0.3"]), logger=log.logger).partitions.new_task(
        0, data)
    assert (task.fair.profile, task.fair.n_samples, task.offset) == ("anytime", 0, 40)
    assert log.fields("settings_changed")[0]["changed"]["profile"] == ["paper", "anytime"]
