"""A checkpoint too large for one changelog record stops the daemon (a pure-logic unit test).

The producer is a stand-in: the client's own size check is tested against the bundled broker with
both clients (``test_daemon_robust.py``); here the broker refuses the record after the send, as a
broker whose ``max.message.bytes`` is below the producer's limit does.
"""

from __future__ import annotations

from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import RecordTooLarge, TransportError
from streamfair import FairRegressionPostProcessor
from tests.support.kafka_daemon import EventLog, OneProducer


class RefusingBroker:
    """A producer whose changelog records come back with ``refusal`` (through ``on_error``) at the flush."""

    def __init__(self, refusal: TransportError):
        self.refusal, self.callbacks = refusal, []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if topic == "streamfair.changelog":
            self.callbacks.append(on_error)

    def flush(self, timeout):
        for on_error in self.callbacks:
            on_error(self.refusal)
        self.callbacks.clear()


def daemon_refused_with(refusal: TransportError, log: EventLog) -> Daemon:
    daemon = Daemon(load_config(env={}), logger=log.logger)
    daemon.sender.transport = OneProducer(RefusingBroker(refusal))
    daemon.sender.renew()
    for partition in (0, 1):
        fair = FairRegressionPostProcessor(n_groups=2, L=5 + 20 * partition)
        daemon.partitions.tasks[partition] = PartitionTask("streamfair.input", partition, fair,
                                                           parser=InputParser(2, 1000), offset=10)
        daemon.checkpoints.processed(partition, 10)
    return daemon


def test_a_checkpoint_the_broker_refuses_as_too_large_stops_the_daemon_naming_the_largest():
    log = EventLog("checkpoint-too-large")
    daemon = daemon_refused_with(RecordTooLarge("MESSAGE_TOO_LARGE"), log)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is not None and daemon._fatal[0] == EXIT_CHECKPOINT_TOO_LARGE
    assert daemon.stopping.is_set()
    (fields,) = log.fields("checkpoint_too_large")
    sizes = {p: len(task.checkpoint().to_bytes()) for p, task in daemon.partitions.tasks.items()}
    assert fields["partition"] == 1 and fields["bytes"] == sizes[1] > sizes[0]  # the larger grid's state


def test_any_other_refusal_is_a_failure_to_retry():
    log = EventLog("checkpoint-refused")
    refusal = TransportError("broker away")
    daemon = daemon_refused_with(refusal, log)
    assert daemon.checkpoints.checkpoint() is False
    assert daemon._fatal is None and not daemon.stopping.is_set() and daemon.sender.failure is refusal
    assert [event for event, _ in log.events] == ["checkpoint_failed"]
