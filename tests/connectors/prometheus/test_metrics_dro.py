"""The metrics observer exports a group-robust post-processor's DRO weights and robust value (no broker)."""

from __future__ import annotations

import numpy as np

from connectors.kafka.task import PartitionTask
from connectors.prometheus import DaemonMetrics
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support.metrics_fakes import GROUPS, FakeDaemon, make_config, make_task, task_of, value


def robust_task(partition: int, seed: int) -> PartitionTask:
    """A robust post-processor on a stream whose minority group 1 is poorly served, some samples labelled."""
    fair = GroupRobustFairRegressionPostProcessor(
        profile="paper", L=5, n_groups=2, horizon=100, eps=0.02, refresh=10, seed=seed
    )
    rng = np.random.default_rng(seed)
    for i in range(300):
        s = int(rng.random() < 0.2)
        eta = float(np.clip(0.6 * s - 0.3 + 0.1 * rng.standard_normal(), -1, 1))
        fair.learn_one(eta, [0.9, 0.1] if s == 0 else [0.1, 0.9], key=i)
        if i % 3 == 0:
            fair.learn_label(i, eta + (0.9 if s else 0.05) * rng.standard_normal())
    return task_of(partition, fair)


def test_sampling_exports_the_dro_weights_of_robust_tasks_only():
    observer = DaemonMetrics(make_config())
    daemon = FakeDaemon(tasks={0: robust_task(0, seed=1), 1: make_task(1), 2: robust_task(2, seed=2)})
    observer._sample(daemon)
    reg = observer.registry
    for partition in (0, 2):
        robust = daemon.tasks[partition].fair.dro_diagnostics()
        assert robust.weights[1] > robust.weights[0]  # the poorly served group is the worst-off one
        for g, group in enumerate(GROUPS):
            assert value(reg, "streamfair_dro_weight", partition=str(partition), group=group) == robust.weights[g]
        assert value(reg, "streamfair_dro_robust_value", partition=str(partition)) == robust.robust_value
    assert value(reg, "streamfair_dro_weight", partition="1", group="0") is None  # the plain post-processor
    assert value(reg, "streamfair_dro_robust_value", partition="1") is None
    # the gauges follow the state at the next sample, and go away with the partition
    fair = daemon.tasks[0].fair
    before = value(reg, "streamfair_dro_weight", partition="0", group="1")
    for i in range(300, 340):
        fair.learn_one(0.3, [0.1, 0.9], key=i)
        fair.learn_label(i, -0.9)
    observer._sample(daemon)
    assert value(reg, "streamfair_dro_weight", partition="0", group="1") == fair.dro_diagnostics().weights[1] > before
    del daemon.tasks[0]
    observer.on_revoked(daemon, [0])
    assert value(reg, "streamfair_dro_robust_value", partition="0") is None
