"""Positions outside their log and ``processing.out_of_range`` (pure logic: the logs are described by their
start, end and topic id; the broker-backed cases are in ``test_daemon_failures.py``)."""

from __future__ import annotations

import pytest

from connectors.kafka.codec import InputParser
from connectors.kafka.config import load_config
from connectors.kafka.loop import Daemon
from connectors.kafka.positions import EXIT_OUT_OF_RANGE
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import TransportError
from streamfair import FairRegressionPostProcessor
from tests.support.kafka_daemon import EventLog

INPUT, FEEDBACK = "streamfair.input", "feedback"


class Logs:
    """The daemon's group consumer and restorer over logs given as ``{(topic, partition): (start, end)}``.

    ``end`` ``None``: not fetched yet.  ``topic_id`` is the input topic's id in the metadata.
    """

    def __init__(self, logs: dict, topic_id: str = "A", starts_known: bool = True, positions: dict | None = None):
        self.logs, self.id, self.starts_known = logs, topic_id, starts_known
        self.positions = positions or {}  # the consumer's, ``{(topic, partition): offset}``
        self.seeks: list[tuple[str, int, int]] = []

    def topic_id(self, topic):
        return self.id

    def highwater(self, tp):
        return self.logs[tp.topic, tp.partition][1]

    def beginning_offsets(self, tps):
        if not self.starts_known:
            raise TransportError("broker away")
        return {tp: self.logs[tp.topic, tp.partition][0] for tp in tps}

    def seek(self, tp, offset):
        self.seeks.append((tp.topic, tp.partition, offset))

    def position(self, tp):
        return self.positions.get((tp.topic, tp.partition))


def daemon_over(logs: Logs, tasks: dict, policy: str = "earliest", feedback: bool = False,
                log: EventLog | None = None) -> Daemon:
    """A running daemon's state: tasks ``{partition: (offset, feedback offset, topic id)}`` restored from ``logs``."""
    overrides = [f"processing.out_of_range={policy}"] + ([f"topics.feedback={FEEDBACK}"] if feedback else [])
    daemon = Daemon(load_config(env={}, overrides=overrides), logger=log.logger if log else None)
    daemon._consumer = daemon._restorer = logs
    for partition, (offset, feedback_offset, topic_id) in tasks.items():
        daemon.partitions.tasks[partition] = PartitionTask(
            INPUT, partition, FairRegressionPostProcessor(n_groups=2, L=5), parser=InputParser(2, 1000),
            offset=offset, feedback_offset=feedback_offset, topic_id=topic_id)
        daemon.positions.log_start[partition] = logs.logs[INPUT, partition][0]
    return daemon


def test_a_position_at_either_end_of_its_log_stays_and_one_past_them_moves_to_the_start():
    # every input log holds offsets 20..49: a task may be at 20 (the first record) to 50 (the next one)
    logs = Logs({(INPUT, p): (20, 50) for p in range(4)})
    daemon = daemon_over(logs, {0: (50, None, "A"), 1: (20, None, "A"), 2: (51, None, "A"), 3: (19, None, "A")})
    assert daemon.positions.check() == {(INPUT, 2), (INPUT, 3)}
    assert logs.seeks == [(INPUT, 2, 20), (INPUT, 3, 20)]
    assert [task.offset for task in daemon.tasks.values()] == [50, 20, 20, 20]
    assert daemon.checkpoints.dirty == {2, 3} and daemon.stats.errors["out_of_range"] == 2
    assert daemon.positions.check() == set()  # moved inside: nothing more to do


def test_a_task_that_has_read_nothing_is_checked_where_its_consumer_reads():
    """A task without a checkpoint starts at the group's committed offset: one beyond a log created
    again shorter would stall it (Tansu answers such a fetch with nothing).  Unknown: not checked."""
    logs = Logs({(INPUT, p): (0, 80) for p in range(3)}, positions={(INPUT, 0): 2000, (INPUT, 1): 80})
    log = EventLog("positions-fresh")
    daemon = daemon_over(logs, {p: (None, None, "A") for p in range(3)}, log=log)
    assert daemon.positions.check() == {(INPUT, 0)}
    assert logs.seeks == [(INPUT, 0, 0)] and [task.offset for task in daemon.tasks.values()] == [0, None, None]
    (fields,) = log.fields("position_out_of_range")
    assert (fields["position"], fields["high_watermark"], fields["cause"]) == (2000, 80, "beyond the high-watermark")


def test_latest_moves_to_the_log_s_end_once_it_is_known():
    logs = Logs({(INPUT, 0): (20, None)})
    daemon = daemon_over(logs, {0: (5, None, "A")}, policy="latest")
    assert daemon.positions.check() == set() and logs.seeks == []  # before the log start, its end unknown
    logs.logs[INPUT, 0] = (20, 70)
    assert daemon.positions.check() == {(INPUT, 0)}
    assert logs.seeks == [(INPUT, 0, 70)] and daemon.tasks[0].offset == 70


def test_fail_stops_the_daemon_naming_the_position_and_why():
    log = EventLog("positions-fail")
    daemon = daemon_over(Logs({(INPUT, 0): (0, 30)}), {0: (40, None, "A")}, policy="fail", log=log)
    assert daemon.positions.check() == {(INPUT, 0)}
    assert daemon._fatal == (EXIT_OUT_OF_RANGE, f"{INPUT} partition 0: position 40 beyond the high-watermark")
    assert daemon.tasks[0].offset == 40  # not moved
    (fields,) = log.fields("position_out_of_range")
    assert (fields["position"], fields["log_start"], fields["high_watermark"]) == (40, 0, 30)


def test_an_input_topic_created_again_while_the_daemon_runs_is_read_from_its_start():
    """The new topic's log is already longer than the old position: only its id tells it is another log."""
    logs = Logs({(INPUT, 0): (0, 100)}, topic_id="A")
    daemon = daemon_over(logs, {0: (60, None, "A")})
    assert daemon.positions.check() == set()
    logs.id = "B"
    assert daemon.positions.check() == {(INPUT, 0)}
    task = daemon.tasks[0]
    assert (task.offset, task.topic_id, logs.seeks) == (0, "B", [(INPUT, 0, 0)])
    assert daemon.positions.check() == set()  # the task now reads the new topic


def test_without_the_log_s_start_an_input_position_goes_back_to_the_start_read_at_restore():
    logs = Logs({(INPUT, 0): (20, 50)}, starts_known=False)
    daemon = daemon_over(logs, {0: (60, None, "A")})
    assert daemon.positions.check() == {(INPUT, 0)} and logs.seeks == [(INPUT, 0, 20)]


def test_a_feedback_position_is_checked_against_the_feedback_log_only():
    # the feedback logs start at 0, before the input's start (30): a feedback position of 5 is inside its log
    logs = Logs({(INPUT, 0): (30, 90), (FEEDBACK, 0): (0, 40), (INPUT, 1): (30, 90), (FEEDBACK, 1): (10, 40)})
    log = EventLog("positions-feedback")
    daemon = daemon_over(logs, {0: (60, 5, "A"), 1: (60, 45, "A")}, feedback=True, log=log)
    assert daemon.positions.check() == {(FEEDBACK, 1)}
    assert logs.seeks == [(FEEDBACK, 1, 10)]
    assert daemon.tasks[1].next_feedback_offset == 10 and daemon.tasks[1].offset == 60
    assert daemon.positions.log_start == {0: 30, 1: 30}  # the input's, not the feedback log's
    (fields,) = log.fields("position_out_of_range")
    assert (fields["topic"], fields["position"], fields["high_watermark"]) == (FEEDBACK, 45, 40)


def test_a_partition_waiting_for_its_restore_is_not_checked():
    logs = Logs({(INPUT, 0): (20, 50)})
    daemon = daemon_over(logs, {0: (60, None, "A")})
    daemon.partitions.to_restore.add(0)
    assert daemon.positions.check() == set() and logs.seeks == []


@pytest.mark.parametrize("policy", ["earliest", "latest", "fail"])
def test_each_policy_counts_the_position_as_an_error(policy):
    daemon = daemon_over(Logs({(INPUT, 0): (0, 30)}), {0: (40, None, "A")}, policy=policy)
    daemon.positions.check()
    assert daemon.stats.errors["out_of_range"] == 1
