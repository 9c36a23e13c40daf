"""Positions outside the input (or feedback) log, and ``processing.out_of_range``.

A task's position (before its first record, its consumer's) is outside its log when the input topic
has been created again since it was read (a new topic id), when it lies beyond the fetch
high-watermark (Tansu then answers every fetch with nothing, silently) or before the log start.
The policy then fails the daemon (``"fail"``, exit code :data:`EXIT_OUT_OF_RANGE`) or moves the task
to the log's start (``"earliest"``) or end (``"latest"``); the next checkpoint records the new position.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from connectors.kafka.logs import log_event
from connectors.kafka.task import PartitionTask
from connectors.kafka.transport import TopicPartition, TransportError

if TYPE_CHECKING:
    from connectors.kafka.loop import Daemon

#: Exit code when a position outside the input log stops the daemon (``processing.out_of_range = "fail"``).
EXIT_OUT_OF_RANGE = 3


class LogPositions:
    """Watches the positions of a daemon's tasks against their logs.

    Attributes
    ----------
    input_topic_id : str | None
        The input topic's id as last seen in metadata.
    log_start : dict[int, int]
        First offset of each owned input partition (read at restore).

    Examples
    --------
    Nothing is known before the daemon has restored a partition, and :meth:`check` reads the group
    consumer's metadata and high-watermarks, so it runs only while the daemon does:

    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.loop import Daemon
    >>> positions = Daemon(load_config(env={})).positions
    >>> positions.input_topic_id, positions.log_start
    (None, {})
    >>> positions.check()
    Traceback (most recent call last):
    ...
    RuntimeError: the daemon's consumer is not open (before run() connected, or after it closed)
    """

    def __init__(self, daemon: Daemon):
        self.daemon = daemon
        self.input_topic_id: str | None = None
        self.log_start: dict[int, int] = {}
        self._seen_topic_id: str | None = None  # the input topic's id in the group consumer's metadata

    def check(self) -> set[tuple[str, int]]:
        """Owned input (and feedback) partitions whose position was outside their log, after the policy."""
        daemon = self.daemon
        topics = daemon.config.topics
        current = daemon.consumer.topic_id(topics.input)
        if current is not None and current != self._seen_topic_id:
            self._seen_topic_id = self.input_topic_id = current
        moved = set()
        partitions = daemon.partitions
        for partition, task in partitions.tasks.items():
            if partition in partitions.to_restore:
                continue
            positions = [(topics.input, task.offset)] + ([(topics.feedback, task.next_feedback_offset)]
                                                          if topics.feedback else [])
            for topic, position in positions:
                if position is None:  # nothing read yet: where the consumer reads first
                    position = self.consumer_position(TopicPartition(topic, partition))
                if position is None:
                    continue
                cause, highwater = self._outside(topic, partition, position, task)
                if cause is not None and self._reposition(topic, partition, task, position, cause, highwater):
                    moved.add((topic, partition))
        return moved

    def consumer_position(self, tp: TopicPartition) -> int | None:
        """The group consumer's position in ``tp`` (``None`` while unknown, or when the client fails to say)."""
        try:
            return self.daemon.consumer.position(tp)
        except TransportError:
            return None

    def consumer_highwater(self, tp: TopicPartition) -> int | None:
        """The group consumer's fetch high-watermark of ``tp`` (``None`` while unknown, or when the client fails)."""
        try:
            return self.daemon.consumer.highwater(tp)
        except TransportError:
            return None

    def _outside(self, topic: str, partition: int, position: int,
                 task: PartitionTask) -> tuple[str | None, int | None]:
        """Why ``position`` of ``topic``'s ``partition`` is outside its log (``None``: it is not), and the log's end."""
        try:
            highwater = self.daemon.consumer.highwater(TopicPartition(topic, partition))
        except TransportError:
            return None, None
        is_input = topic == self.daemon.config.topics.input
        if is_input and self.input_topic_id and task.topic_id and task.topic_id != self.input_topic_id:
            return "the input topic was created again", highwater
        if highwater is not None and position > highwater:
            return "beyond the high-watermark", highwater
        if is_input and position < self.log_start.get(partition, 0):
            return "before the log start", highwater
        return None, highwater

    def _reposition(self, topic: str, partition: int, task: PartitionTask, position: int, cause: str,
                    highwater: int | None) -> bool:
        """Apply ``processing.out_of_range`` to ``task``'s ``position`` in ``topic``.

        False (nothing done) when the policy is ``"latest"`` and the log's end is not known yet.
        """
        daemon = self.daemon
        policy = daemon.config.processing.out_of_range
        if policy == "latest" and highwater is None:
            return False  # the next fetch tells where the log ends
        tp = TopicPartition(topic, partition)
        is_input = topic == daemon.config.topics.input
        try:
            start = daemon.restorer.beginning_offsets([tp])[tp]
        except TransportError:
            start = self.log_start.get(partition, 0) if is_input else 0
        if is_input:
            self.log_start[partition] = start
        log_event(daemon.log, logging.ERROR, "position_out_of_range", topic=topic, partition=partition,
                  position=position, log_start=start, high_watermark=highwater, cause=cause, policy=policy,
                  **({"topic_id": task.topic_id, "current_topic_id": self.input_topic_id} if is_input else {}))
        daemon.stats.errors["out_of_range"] += 1
        if policy == "fail":
            daemon.give_up(EXIT_OUT_OF_RANGE, f"{topic} partition {partition}: position {position} {cause}")
            return True
        if policy == "earliest":
            target = start
        else:
            assert highwater is not None  # "latest" with an unknown end returned above
            target = highwater
        if is_input:
            task.offset, task.topic_id = target, self.input_topic_id
            daemon.feedback_hold.moved(partition)
        else:
            task.move_feedback(target)
        daemon.consumer.seek(tp, target)
        daemon.checkpoints.dirty.add(partition)  # the next checkpoint records the new position
        return True
