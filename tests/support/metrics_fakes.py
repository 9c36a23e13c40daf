"""A fake daemon for the metrics tests: deterministic base models, tasks, and a short life of events."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.models import BaseModels
from connectors.kafka.observer import DaemonStats
from connectors.kafka.records import Feedback
from connectors.kafka.task import PartitionTask
from streamfair import DualPostProcessor, FairRegressionPostProcessor

GROUPS = ["0", "1"]


class TableModel:
    """Deterministic base models over one feature ``x`` in 0..5 (pure-logic stand-in for River models)."""

    q = [0.1, 0.25, 0.4, 0.6, 0.75, 0.9]

    def predict_one(self, x):
        return -0.7 + 0.28 * x["x"]

    def predict_proba_one(self, x):
        q = self.q[int(x["x"])]
        return {0: 1 - q, 1: q}


def task_of(partition: int, fair: DualPostProcessor, models: BaseModels | None = None) -> PartitionTask:
    """A real partition task around ``fair`` (and ``models``), never fed through a broker."""
    return PartitionTask("streamfair.input", partition, fair, models=models,
                         parser=InputParser(fair.n_groups, 4096, models=models is not None))


@dataclass
class FakeDaemon:
    """What DaemonMetrics reads: stats, tasks, lag() and ready."""

    stats: DaemonStats = field(default_factory=DaemonStats)
    tasks: dict = field(default_factory=dict)
    lags: dict = field(default_factory=dict)
    ready: bool = False

    def lag(self):
        return dict(self.lags)


def make_config(**extra):
    values = {"postprocessor.profile": "paper", "postprocessor.L": 5, "postprocessor.horizon": 100,
              "postprocessor.eps": 0.02, "topics.feedback": "fb", **extra}
    return load_config(env={}, overrides=[f"{k}={v}" for k, v in values.items()])


def make_task(partition, n=300, seed=0, models=True):
    fair = FairRegressionPostProcessor(profile="paper", L=5, n_groups=2, horizon=100, eps=0.02, seed=seed)
    rng = np.random.default_rng(seed)
    for _ in range(n):
        s = rng.integers(0, 2)
        fair.learn_one(0.6 * s - 0.3, [0.8, 0.2] if s == 0 else [0.2, 0.8])
    return task_of(partition, fair, BaseModels(TableModel(), TableModel(), GROUPS) if models else None)


def value(registry, name, **labels):
    return registry.get_sample_value(name, labels)


def drive(observer, daemon):
    """A short life of the daemon: records, dead letters, feedback, a checkpoint, loops."""
    daemon.tasks = {0: make_task(0), 2: make_task(2, seed=1)}
    daemon.ready = True
    observer.on_assigned(daemon, [0, 2])
    daemon.stats.consumed += 10
    daemon.stats.dead_letters["invalid_json"] += 1
    observer.on_dead_letter(daemon, "invalid_json", "streamfair.input", 0)
    daemon.tasks[0].learn_seconds, daemon.tasks[0].learned = 0.009, 9
    observer.on_records(daemon, 0, 10, 1, 0.002)
    daemon.stats.produced += 9
    accepted = [Feedback(None, i, {"x": i % 6}, 0.1 * i, i % 2) for i in range(12)]
    daemon.stats.feedback += 12
    observer.on_feedback(daemon, daemon.tasks[0], accepted)
    observer.on_records(daemon, 0, 12, 0, 0.5)  # feedback records: no latency observation
    observer.on_dead_letter(daemon, "bad_group", "fb", 0)
    daemon.stats.checkpoints += 2  # what the daemon counts before it notifies its observers
    daemon.stats.labels.update(applied=7, unmatched=2)
    daemon.stats.errors["batch_failed"] += 1
    daemon.stats.checkpoint_seconds += 0.004
    daemon.stats.last_checkpoint = time.monotonic()
    observer.on_checkpoint(daemon, [0, 2], 0.004, True)
    daemon.stats.errors["checkpoint_failed"] += 1
    observer.on_checkpoint(daemon, [0], 0.1, False)
    daemon.stats.rewinds += 1
    daemon.lags = {0: 5, 2: 0}
    observer.on_loop(daemon)
