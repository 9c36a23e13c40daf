"""Feedback waits while a partition replays input it may have answered before.

Feedback changes a task's state (the base models with ``models.learn``, the labels of the
group-robust post-processor) at checkpoints, and checkpoints fall where time and the consumer's
interleaving of the input and feedback topics put them.  Every output sent after a task's last
durable checkpoint was computed without the feedback read since: a checkpoint that applies
feedback is durable before the next output is computed.  A replay of that input (after a restart,
a rebalance or a rewind) therefore gives byte-identical outputs as long as no feedback takes effect
before the replay has passed it.  So the feedback partition of a restored or rewound task stays
paused until its input position reaches the *replay end*:

* after a restore, the input partition's high-watermark at its first fetch: no earlier run can have
  answered a record beyond it;
* after a rewind, the input position the consumer had reached: nothing beyond it was read.

Then the feedback is read and learned as before, each record once, at the checkpoint after it.
Feedback that only feeds the audited metrics changes no output, and never waits.
A position moved by ``processing.out_of_range`` releases its feedback: the log its outputs were
answered from is gone or cut.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from connectors.kafka.logs import log_event
from connectors.kafka.transport import TopicPartition

if TYPE_CHECKING:
    from connectors.kafka.loop import Daemon


class FeedbackHold:
    """The owned partitions whose feedback waits for their input to pass its replay end.

    Attributes
    ----------
    until : dict[int, int | None]
        The replay end of each held partition: the input offset its position must reach
        (``None``: the input's high-watermark, once a fetch has told it).

    Examples
    --------
    Feedback that changes no state (no ``models.learn``, no ``postprocessor.robust``) is never held:

    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.loop import Daemon
    >>> hold = Daemon(load_config(env={}, overrides=["topics.feedback=labels"])).feedback_hold
    >>> [tp.partition for tp in hold.restored([0, 1])], hold.until  # resumed with the input
    ([0, 1], {})

    Labels for the group-robust post-processor are: a restored partition waits for the
    high-watermark of its first fetch, and a rewound one for the furthest position known (the
    consumer's calls need the running daemon):

    >>> robust = load_config(env={}, overrides=["topics.feedback=labels", "postprocessor.robust=true"])
    >>> hold = Daemon(robust).feedback_hold
    >>> hold.until = {0: None, 1: 500}
    >>> hold.forget([1]); hold.until
    {0: None}
    """

    def __init__(self, daemon: Daemon):
        self.daemon = daemon
        config = daemon.config
        changes_state = config.models.learn or config.postprocessor.robust
        self._feedback = (config.topics.feedback or "") if changes_state else ""  # the topic held ("": none)
        self.until: dict[int, int | None] = {}
        self._since: dict[int, float] = {}  # when each partition's feedback started to wait

    def restored(self, partitions: Iterable[int]) -> list[TopicPartition]:
        """``partitions`` were restored, their feedback paused since their assignment: feedback that
        changes state waits for the input's high-watermark of the first fetch.

        Returns
        -------
        list of TopicPartition
            The feedback partitions to resume with the input: all of them when the feedback
            changes no state, none when it waits (or there is no feedback topic).
        """
        partitions = list(partitions)
        if self._feedback:
            self._hold(partitions, lambda p: None)
            return []
        topic = self.daemon.config.topics.feedback
        return [TopicPartition(topic, p) for p in partitions] if topic else []

    def rewound(self, partitions: Iterable[int]) -> None:
        """``partitions`` go back to their checkpoints: their feedback waits for the input positions read so far."""
        input_topic, positions = self.daemon.config.topics.input, self.daemon.positions
        self._hold(partitions, lambda p: positions.consumer_position(TopicPartition(input_topic, p)))

    def _hold(self, partitions: Iterable[int], end: Callable[[int], int | None]) -> None:
        """Pause the feedback of ``partitions`` until the input reaches ``end(p)``, or the end held already if further.

        ``None``: the input's high-watermark, once a fetch has told it.
        """
        daemon, feedback = self.daemon, self._feedback
        if not feedback:
            return
        partitions = list(partitions)
        for p in partitions:
            reached, before = end(p), self.until.get(p, 0)
            self.until[p] = None if reached is None or before is None else max(reached, before)
            self._since.setdefault(p, time.monotonic())
        daemon.consumer.pause([TopicPartition(feedback, p) for p in partitions])

    def release(self) -> None:
        """Resume the feedback of each held partition whose input position has reached its replay end."""
        input_topic, positions = self.daemon.config.topics.input, self.daemon.positions
        for p, end in list(self.until.items()):
            tp = TopicPartition(input_topic, p)
            end = self.until[p] = positions.consumer_highwater(tp) if end is None else end
            position = positions.consumer_position(tp)
            if end is not None and position is not None and position >= end:
                self._resume(p, end)

    def moved(self, partition: int) -> None:
        """``processing.out_of_range`` moved ``partition``'s input: the log it was answered from is gone or cut.

        Its feedback waits no more.
        """
        if partition in self.until:
            self._resume(partition, None)

    def _resume(self, partition: int, end: int | None) -> None:
        del self.until[partition]
        log_event(self.daemon.log, logging.INFO, "feedback_resumed", partition=partition, replay_end=end,
                  waited_s=round(time.monotonic() - self._since.pop(partition), 3))
        self.daemon.consumer.resume([TopicPartition(self._feedback, partition)])

    def forget(self, partitions: Iterable[int]) -> None:
        """``partitions`` are not owned any more."""
        for p in partitions:
            self.until.pop(p, None)
            self._since.pop(p, None)
