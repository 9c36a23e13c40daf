"""The daemon's hook for metrics: counters it keeps, and an observer interface it calls.

A metrics exporter subclasses :class:`DaemonObserver` and overrides the events it needs; the
daemon calls every observer on its own (the consumer's) thread, so an observer may read
``daemon.stats``, ``daemon.tasks`` (each task's ``fair.diagnostics()``) and ``daemon.lag()``
safely from inside a callback.  ``on_loop`` runs after every poll and is the place to sample
gauges.  With ``metrics.port`` set, the daemon asks ``connectors.prometheus.make_observer(config)``
for an observer (that module belongs to the metrics work).

Examples
--------
>>> class Count(DaemonObserver):
...     def __init__(self):
...         self.dead = 0
...     def on_dead_letter(self, daemon, reason, topic, partition):
...         self.dead += 1
>>> observer = Count()
>>> observer.on_dead_letter(None, "invalid_json", "in", 0)
>>> observer.dead
1
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class DaemonStats:
    """Counters since start (monotonic clock for times).

    >>> stats = DaemonStats()
    >>> stats.consumed += 3
    >>> stats.dead_letters["invalid_json"] += 1
    >>> stats.consumed, dict(stats.dead_letters), stats.last_checkpoint
    (3, {'invalid_json': 1}, None)
    """

    consumed: int = 0  # input records handled (valid or dead-lettered)
    produced: int = 0  # predictions sent
    dead_letters: Counter = field(default_factory=Counter)  # by reason
    feedback: int = 0  # valid feedback records
    labels: Counter = field(default_factory=Counter)  # robust labels by outcome (applied, unmatched), when durable
    checkpoints: int = 0  # successful checkpoints (one per task written)
    checkpoint_seconds: float = 0.0  # total time spent checkpointing
    last_checkpoint: float | None = None  # time of the last successful checkpoint
    restores: int = 0  # tasks restored from a checkpoint
    rewinds: int = 0  # returns to the last checkpoint after a failed send/commit
    errors: Counter = field(default_factory=Counter)  # by kind
    started: float = field(default_factory=time.monotonic)
    first_record: float | None = None  # time the first input record was processed
    last_loop: float = field(default_factory=time.monotonic)  # liveness: time of the last poll
    last_contact: float | None = None  # time of the last round trip with the broker that completed

    def contact_age(self, now: float | None = None) -> float:
        """Seconds since the last completed round trip with the broker (since :attr:`started` before one).

        Parameters
        ----------
        now
            The time (``time.monotonic()`` when not given).

        Returns
        -------
        float
            ``now`` minus :attr:`last_contact`, or minus :attr:`started` while there has been none.

        Examples
        --------
        >>> stats = DaemonStats(started=100.0)
        >>> stats.contact_age(now=112.5)
        12.5
        >>> stats.last_contact = 110.0
        >>> stats.contact_age(now=112.5)
        2.5
        """
        since = self.started if self.last_contact is None else self.last_contact
        return (time.monotonic() if now is None else now) - since

    def broker_silence(self, limit: float, now: float | None = None) -> float | None:
        """The seconds without a round trip with the broker when they exceed ``limit``: readiness's broker rule.

        Parameters
        ----------
        limit
            The longest silence still ready (``kafka.contact_timeout_seconds``).
        now
            The time (``time.monotonic()`` when not given).

        Returns
        -------
        float or None
            :meth:`contact_age` when it exceeds ``limit``, ``None`` (the broker answers) otherwise.

        Examples
        --------
        >>> stats = DaemonStats(started=100.0, last_contact=110.0)
        >>> stats.broker_silence(30.0, now=140.0) is None  # 30 s: still within the limit
        True
        >>> stats.broker_silence(30.0, now=141.5)
        31.5
        """
        age = self.contact_age(now)
        return age if age > limit else None


class DaemonObserver:
    """Callbacks of the daemon's events; every method is a no-op here.

    Every callback gets the daemon first; an observer overrides only what it needs (see the
    module's example), and the others stay no-ops:

    >>> observer = DaemonObserver()
    >>> observer.on_checkpoint(None, [0, 1], 0.01, True) is None
    True
    """

    def on_start(self, daemon: Any) -> None:
        """Clients created, before the first poll."""

    def on_assigned(self, daemon: Any, partitions: Sequence[int]) -> None:
        """Input partitions assigned to this instance (after their tasks were restored)."""

    def on_revoked(self, daemon: Any, partitions: Sequence[int]) -> None:
        """Input partitions taken away (after their final checkpoint)."""

    def on_restored(self, daemon: Any, partition: int, n_samples: int, offset: int | None, seconds: float) -> None:
        """A task restored from its checkpoint (``n_samples = 0`` and ``offset = None`` if none)."""

    def on_records(self, daemon: Any, partition: int, n_records: int, n_dead: int, seconds: float) -> None:
        """A poll's records of one partition processed (``seconds`` for all of them)."""

    def on_dead_letter(self, daemon: Any, reason: str, topic: str, partition: int) -> None:
        """One record sent to the dead-letter topic."""

    def on_feedback(self, daemon: Any, task: Any, accepted: Sequence[Any]) -> None:
        """Valid feedback records for ``task``: :class:`~connectors.kafka.records.Feedback` records."""

    def on_checkpoint(self, daemon: Any, partitions: Sequence[int], seconds: float, ok: bool) -> None:
        """A checkpoint of ``partitions`` finished (``ok=False``: it failed and will be retried)."""

    def on_rewind(self, daemon: Any, reason: str) -> None:
        """Processing went back to the last checkpoint (a send or a transaction failed)."""

    def on_loop(self, daemon: Any) -> None:
        """After every poll: sample gauges here."""

    def on_stop(self, daemon: Any) -> None:
        """Shutting down, after the final checkpoint."""
