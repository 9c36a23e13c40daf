"""A checkpoint too large for one changelog record stops the daemon; the defaults keep it in one (pure logic).

The producer is a stand-in: the client's own size check is tested against the bundled broker with
both clients (``test_daemon_robust.py``); here the broker refuses the record after the send, as a
broker whose ``max.message.bytes`` is below the producer's limit does.
"""

from __future__ import annotations

import numpy as np
import pytest

from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.postprocessor_config import (
    CHECKPOINT_BUDGET,
    DAEMON_MAX_PENDING,
    PostProcessorConfig,
    daemon_max_pending,
)
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import RecordTooLarge, TransportError
from streamfair import FairRegressionPostProcessor
from tests.support.kafka_daemon import EventLog, OneProducer


class RefusingBroker:
    """A producer whose changelog records come back with ``refusal`` (through ``on_error``) at the flush.

    In a transaction, the commit flushes, then fails as a whole, as a transaction with a refused
    record does.
    """

    def __init__(self, refusal: TransportError):
        self.refusal, self.callbacks, self.calls = refusal, [], []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if topic == "streamfair.changelog":
            self.callbacks.append(on_error)

    def flush(self, timeout):
        for on_error in self.callbacks:
            on_error(self.refusal)
        self.callbacks.clear()

    def init_transactions(self):
        self.calls.append("init")

    def begin_transaction(self):
        self.calls.append("begin")

    def send_offsets_to_transaction(self, offsets, group_metadata):
        self.calls.append("offsets")

    def commit_transaction(self):
        self.calls.append("commit")
        self.flush(timeout=None)
        raise TransportError("transaction aborted: a record failed")

    def abort_transaction(self):
        self.calls.append("abort")


class NoGroup:
    """The consumer of a daemon that never joined a group (``exactly_once`` asks for its metadata)."""

    def group_metadata(self):
        return None


def daemon_refused_with(refusal: TransportError, log: EventLog, guarantee: str = "at_least_once") -> Daemon:
    daemon = Daemon(load_config(env={}, overrides=[f"processing.guarantee={guarantee}"]), logger=log.logger)
    daemon._consumer = NoGroup()  # exactly_once sends the offsets with the group's metadata
    daemon.sender.transactional_id = "refused" if guarantee == "exactly_once" else None
    daemon.sender.transport = OneProducer(RefusingBroker(refusal))
    daemon.sender.renew()
    for partition in (0, 1):
        fair = FairRegressionPostProcessor(n_groups=2, L=5 + 20 * partition)
        daemon.partitions.tasks[partition] = PartitionTask("streamfair.input", partition, fair,
                                                           parser=InputParser(2, 1000), offset=10)
        daemon.checkpoints.processed(partition, 10)
    return daemon


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_a_checkpoint_the_broker_refuses_as_too_large_stops_the_daemon_naming_the_largest(guarantee):
    log = EventLog(f"checkpoint-too-large-{guarantee}")
    daemon = daemon_refused_with(RecordTooLarge("MESSAGE_TOO_LARGE"), log, guarantee)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is not None and daemon._fatal[0] == EXIT_CHECKPOINT_TOO_LARGE
    assert daemon.stopping.is_set()
    assert [event for event, _ in log.events] == ["checkpoint_too_large"]  # no retry is announced
    assert daemon.stats.errors["checkpoint_failed"] == 1
    (fields,) = log.fields("checkpoint_too_large")
    sizes = {p: len(task.checkpoint().to_bytes()) for p, task in daemon.partitions.tasks.items()}
    assert fields["partition"] == 1 and fields["bytes"] == sizes[1] > sizes[0]  # the larger grid's state
    if guarantee == "exactly_once":
        assert daemon.sender.producer.calls == ["init", "begin", "offsets", "commit", "abort"]


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_any_other_refusal_is_a_failure_to_retry(guarantee):
    log = EventLog(f"checkpoint-refused-{guarantee}")
    refusal = TransportError("broker away")
    daemon = daemon_refused_with(refusal, log, guarantee)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is None and not daemon.stopping.is_set()
    assert daemon.sender.failure is refusal if guarantee == "at_least_once" else "aborted" in str(daemon.sender.failure)
    assert [event for event, _ in log.events] == ["checkpoint_failed"]
    assert log.fields("checkpoint_failed")[0]["retry_in_s"] > 0


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
@pytest.mark.parametrize("n_groups", [2, 3, 4, 6, 8])
def test_the_group_robust_default_keeps_a_full_checkpoint_within_one_record(n_groups, updater):
    """With its default ``max_pending`` full of 64-character ids, a robust task's checkpoint fits in 1 MB.

    librdkafka's default ``message.max.bytes`` (1,000,000) is the smaller of the clients' limits.
    The default is not needlessly small either: where it is below its cap of 4,000 ids, the
    checkpoint takes more than 80% of its budget.  The ``exponentiated`` updater's receipts also
    keep per-group step scales, so it gets fewer ids.
    """
    fair = PostProcessorConfig(robust=True, n_groups=n_groups, updater=updater).build()
    rng = np.random.default_rng(n_groups)
    n = fair.max_pending + 2 * fair.memory + fair.refresh - 1  # every id kept, every snapshot taken, the block open
    keys = [f"{i:064d}" for i in range(n)]
    fair.learn_many(rng.uniform(-1, 1, n), rng.dirichlet(np.ones(n_groups), n), keys=keys)
    default = daemon_max_pending(n_groups, updater=updater, refresh=fair.refresh)
    assert fair.dro_diagnostics().n_pending == fair.max_pending == default
    size = len(PartitionTask("streamfair.input", 0, fair, parser=InputParser(n_groups, 1000), offset=n)
               .checkpoint().to_bytes())
    assert size <= CHECKPOINT_BUDGET
    if fair.max_pending < DAEMON_MAX_PENDING:
        assert size > 0.8 * CHECKPOINT_BUDGET
