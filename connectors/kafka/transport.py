"""The Kafka client interface the daemon talks to, and the choice of its implementation (``kafka.client``).

The daemon's modules (:mod:`~connectors.kafka.loop`, :mod:`~connectors.kafka.sender`,
:mod:`~connectors.kafka.partitions`, :mod:`~connectors.kafka.positions`,
:mod:`~connectors.kafka.checkpointing`) use only what is declared here: a :class:`Transport` makes the
:class:`Consumer` (the group consumer, and an unassigned one that reads the changelog), the
:class:`Producer` and the topics.  Two implementations:

* ``"kafka-python"`` (default): :mod:`connectors.kafka.clients`, pure Python;
* ``"confluent"``: :mod:`connectors.kafka.confluent_clients`, librdkafka through ``confluent-kafka``
  (``pip install 'streamfair[confluent]'``).

Errors cross the interface as :class:`TransportError` (and its subclasses), whatever the client.
Offsets are plain integers: the offset of the next record to read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from connectors.kafka.config import Config


class TopicPartition(NamedTuple):
    """One partition of one topic (equal to kafka-python's ``TopicPartition`` with the same fields).

    >>> TopicPartition("scores", 2) == ("scores", 2)
    True
    """

    topic: str
    partition: int


class Record(Protocol):
    """A consumed record, as the daemon's tasks read it.

    Any object with these attributes, read-only or not, is one (the clients' records, a named tuple);
    its ``offset`` is its own, so the position after it is ``offset + 1``:

    >>> from collections import namedtuple
    >>> Polled = namedtuple("Polled", "topic partition offset timestamp key value headers")
    >>> record = Polled("in", 0, 7, 1700000000000, b"a", b'{"id": "a", "eta": 0.5, "tau": [1, 0]}', [])
    >>> TopicPartition(record.topic, record.partition), record.offset + 1
    (TopicPartition(topic='in', partition=0), 8)
    """

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> list[tuple[str, bytes]]: ...


class UnreadableRecord(NamedTuple):
    """A consumed record the client could not decode whole: the task dead-letters it as ``"unreadable_record"``.

    The clients hand it out in the record's place (a header key that is not UTF-8 would otherwise stop
    the partition there, or the poll): it keeps the record's position and what could be read (key,
    value, the headers that decode), and ``detail`` says what was dropped.

    >>> record = UnreadableRecord("in", 0, 7, 1700000000000, b"a", b"{}", [], "header keys not UTF-8 dropped")
    >>> record.offset + 1, record.detail
    (8, 'header keys not UTF-8 dropped')
    """

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]
    detail: str


class TransportError(Exception):
    """A Kafka error (broker away, failed request, failed transaction): the daemon retries or rewinds.

    Every client's errors arrive as this class or one of its subclasses:

    >>> kinds = (RecordRefused, RecordTooLarge, UnsupportedCodec, ClientConfigurationError)
    >>> [issubclass(kind, TransportError) for kind in kinds]
    [True, True, True, True]
    """


class RecordRefused(TransportError):
    """The producer or the broker refuses this one record (its size, its timestamp, a null key on a
    compacted topic): that record's problem, which no retry of it can solve.

    Raised by ``send``, it costs one dead letter; reported to ``on_error`` by the broker, it fails
    the interval, whose replay identifies the record and dead-letters it
    (:class:`~connectors.kafka.sender.Sender`).
    """


class RecordTooLarge(RecordRefused):
    """The producer (or the broker) refuses this one record as larger than its limits.

    Caught before :class:`TransportError`, it costs one record (a dead letter) instead of a rewind:

    >>> try:
    ...     raise RecordTooLarge("MessageSizeTooLargeError: 2000000 bytes")
    ... except RecordTooLarge as error:
    ...     print("dead letter:", error)
    ... except TransportError:
    ...     print("rewind")
    dead letter: MessageSizeTooLargeError: 2000000 bytes
    """


class UnsupportedCodec(TransportError):
    """A record batch compressed with a codec this installation cannot read: no retry can help.

    >>> error = UnsupportedCodec("UnsupportedCodecError: lz4")
    >>> isinstance(error, TransportError), str(error)
    (True, 'UnsupportedCodecError: lz4')
    """


class ClientConfigurationError(TransportError):
    """The client refuses its settings.

    No retry can help either: the daemon stops with a configuration error instead of waiting for a broker.

    >>> isinstance(ClientConfigurationError("KafkaConfigurationError: bad ssl_cafile"), TransportError)
    True
    """


class RebalanceListener(Protocol):
    """What a group consumer tells its owner about the partitions it is given or loses.

    ``lost`` is true when they were taken without a revocation (this member's session expired):
    another member may own them already, so they are dropped without a checkpoint.

    >>> class Printing:
    ...     def assigned(self, partitions):
    ...         print("assigned", [tp.partition for tp in partitions])
    ...     def revoked(self, partitions, lost):
    ...         print("lost" if lost else "revoked", [tp.partition for tp in partitions])
    >>> listener: RebalanceListener = Printing()
    >>> listener.assigned([TopicPartition("in", 0), TopicPartition("in", 2)])
    assigned [0, 2]
    >>> listener.revoked([TopicPartition("in", 2)], lost=True)
    lost [2]
    """

    def assigned(self, partitions: list[TopicPartition]) -> None: ...

    def revoked(self, partitions: list[TopicPartition], lost: bool) -> None: ...


class Consumer(Protocol):
    """The group consumer and the changelog reader (an unassigned consumer)."""

    @property
    def settings(self) -> Mapping[str, Any]:
        """What the client was made with, in its own names."""

    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None: ...

    def poll(self, timeout_ms: int) -> Mapping[TopicPartition, Sequence[Record]]:
        """The records fetched, by partition; one the client cannot decode comes as an :class:`UnreadableRecord`.

        Whatever fails raises :class:`TransportError`, and leaves the consumer able to poll again.
        """

    def assign(self, partitions: Sequence[TopicPartition]) -> None: ...

    def assignment(self) -> set[TopicPartition]: ...

    def pause(self, partitions: Sequence[TopicPartition]) -> None: ...

    def resume(self, partitions: Sequence[TopicPartition]) -> None: ...

    def seek(self, partition: TopicPartition, offset: int) -> None: ...

    def seek_to_committed(self, partitions: Sequence[TopicPartition]) -> None:
        """Read each partition next from the group's committed offset (none: where ``kafka.auto_offset_reset`` says).

        Whatever this consumer read of it before: kafka-python keeps the position of a partition
        the group assigns to it again, and a task restored without a checkpoint starts where the
        group committed.
        """

    def highwater(self, partition: TopicPartition) -> int | None:
        """The fetch high-watermark (``None`` until a fetch since the last assignment); never asks the broker."""

    def position(self, partition: TopicPartition) -> int | None:
        """The offset of the next record to read (``None`` while unknown); never asks the broker."""

    def beginning_offsets(self, partitions: Sequence[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        """The first offset of each partition, asked of the broker (within ``timeout_ms``; ``None``:
        ``kafka.request_timeout_ms``); :class:`TransportError` when it does not answer in time."""

    def refresh_metadata(self) -> None: ...

    def topic_id(self, topic: str) -> str | None:
        """The topic's id in the latest metadata (``None`` when unknown); a topic created again gets a new id."""

    def commit(self, offsets: Mapping[TopicPartition, int], asynchronous: bool = False) -> None: ...

    def group_metadata(self) -> Any: ...

    def close(self) -> None: ...


class Producer(Protocol):
    """The producer of outputs, dead letters and checkpoints (transactional in ``exactly_once`` mode)."""

    @property
    def settings(self) -> Mapping[str, Any]:
        """What the client was made with, in its own names."""

    def send(self, topic: str, *, key: bytes | None, value: bytes | None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: list[tuple[str, bytes]] | None = None,
             on_error: Callable[[TransportError], None] | None = None) -> None:
        """Queue one record; ``on_error`` is called (possibly on another thread) if it is not delivered.

        Raises :class:`RecordRefused` (usually :class:`RecordTooLarge`) for a record the producer
        refuses, :class:`TransportError` when it cannot be queued; ``on_error`` gets a
        :class:`RecordRefused` for a record the broker refuses.
        """

    def flush(self, timeout: float) -> None:
        """Wait until every queued record is acknowledged or failed; :class:`TransportError` after ``timeout`` s."""

    def init_transactions(self) -> None: ...

    def begin_transaction(self) -> None: ...

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_metadata: Any) -> None: ...

    def commit_transaction(self) -> None: ...

    def abort_transaction(self) -> None: ...

    def close(self, timeout: float) -> None: ...


@dataclass(frozen=True)
class TopicLayout:
    """Partition counts found (or created) at start.

    >>> from connectors.kafka.config import load_config
    >>> config = load_config(env={}, overrides=["topics.input=in", "topics.feedback=labels"])
    >>> created = {}
    >>> layout = plan_topics(config, {"in": 4, "streamfair.output": 2}, created.update)
    >>> layout.input_partitions, layout.output_partitions, layout.changelog_partitions, layout.feedback_partitions
    (4, 2, 4, 4)
    >>> sorted(created)  # missing topics get the input's partition count
    ['labels', 'streamfair.changelog', 'streamfair.dead-letter']
    """

    input_partitions: int
    output_partitions: int
    dead_letter_partitions: int
    changelog_partitions: int
    feedback_partitions: int | None


class Transport(Protocol):
    """One Kafka client library behind the interface."""

    def consumer(self, config: Config, *, group: bool = True) -> Consumer:
        """The group consumer (``group=True``) or an unassigned one for reading the changelog."""

    def producer(self, config: Config, transactional_id: str | None = None) -> Producer: ...

    def ensure_topics(self, config: Config) -> TopicLayout:
        """Create missing topics (if ``topics.create``) and check partition counts (see :func:`plan_topics`)."""


def transport(config: Config) -> Transport:
    """The implementation ``kafka.client`` names.

    >>> from connectors.kafka.config import load_config
    >>> type(transport(load_config(env={}))).__name__
    'KafkaPythonTransport'
    """
    if config.kafka.client == "confluent":
        from connectors.kafka.confluent_clients import ConfluentTransport

        return ConfluentTransport()
    from connectors.kafka.clients import KafkaPythonTransport

    return KafkaPythonTransport()


def plan_topics(config: Config, counts: dict[str, int],
                create: Callable[[dict[str, int]], None]) -> TopicLayout:
    """The topic layout from the partition ``counts`` found, creating what is missing with ``create``.

    The output, dead-letter, changelog and feedback topics get as many partitions as the input
    (``create`` makes the changelog a compacted topic).  Raises ``ValueError`` naming the key when
    a topic is missing and may not be created, or has an unusable number of partitions.

    >>> from connectors.kafka.config import load_config
    >>> config = load_config(env={}, overrides=["topics.input=in", "topics.create=false"])
    >>> plan_topics(config, {}, print)
    Traceback (most recent call last):
    ...
    ValueError: topics.input: topic 'in' does not exist (and topics.create is false)
    """
    topics = config.topics
    counts = dict(counts)
    names = {"input": topics.input, "output": topics.output, "dead_letter": topics.dead_letter,
             "changelog": topics.changelog}
    if topics.feedback:
        names["feedback"] = topics.feedback
    if topics.input not in counts:
        if not topics.create:
            raise ValueError(f"topics.input: topic {topics.input!r} does not exist (and topics.create is false)")
        create({topics.input: topics.partitions})
        counts[topics.input] = topics.partitions
    n = counts[topics.input]
    missing = {name: n for key, name in names.items() if name not in counts}
    if missing:
        if not topics.create:
            key = next(k for k, v in names.items() if v in missing)
            raise ValueError(f"topics.{key}: topic {names[key]!r} does not exist (and topics.create is false)")
        create(missing)
        counts.update(missing)
    if counts[topics.changelog] < n:
        raise ValueError(f"topics.changelog: {topics.changelog!r} has {counts[topics.changelog]} partitions, "
                         f"needs at least {n} (one per input partition)")
    if topics.feedback and counts[topics.feedback] != n:
        raise ValueError(f"topics.feedback: {topics.feedback!r} has {counts[topics.feedback]} partitions, "
                         f"needs {n} (co-partitioned with the input)")
    return TopicLayout(n, counts[topics.output], counts[topics.dead_letter], counts[topics.changelog],
                       counts.get(topics.feedback) if topics.feedback else None)


def caught_up(consumer: Consumer, partitions: Iterable[TopicPartition]) -> bool:
    """Whether ``consumer`` has read every partition of ``partitions`` up to its fetch high-watermark.

    The fetch high-watermark, not the broker's answer to ListOffsets(latest), which Tansu gets
    wrong.  False for no partitions, while a partition's high-watermark or position is not known
    yet (before its first fetch), and for a position beyond the high-watermark: that position is
    outside the log (a topic created again), where nothing is read.

    Only the consumer's ``highwater`` and ``position`` are read:

    >>> class Fetched:  # what a consumer knows after a fetch: each log ends at offset 5
    ...     def __init__(self, positions):
    ...         self.positions = positions
    ...     def highwater(self, tp):
    ...         return 5
    ...     def position(self, tp):
    ...         return self.positions.get(tp)
    >>> p0, p1 = TopicPartition("in", 0), TopicPartition("in", 1)
    >>> caught_up(Fetched({p0: 5, p1: 5}), [p0, p1]), caught_up(Fetched({p0: 5, p1: 3}), [p0, p1])
    (True, False)
    >>> caught_up(Fetched({p0: 5}), [p0, p1]), caught_up(Fetched({}), [])  # a position unknown; no partitions
    (False, False)
    >>> caught_up(Fetched({p0: 5, p1: 9}), [p0, p1])  # p1's position is beyond its log
    False
    """
    partitions = list(partitions)
    for tp in partitions:
        highwater = consumer.highwater(tp)
        if highwater is None:
            return False
        position = consumer.position(tp)
        if position != highwater:
            return False
    return bool(partitions)


def read_partitions(
    consumer: Consumer, topic: str, partitions: Iterable[int], on_record: Callable[[int, Record], None],
    stall_timeout_s: float = 30.0, stop: threading.Event | None = None,
) -> None:
    """Every record of each partition of ``topic``, in order, to ``on_record(partition, record)``.

    Reads each partition from its start up to its fetch high-watermark, however long that takes
    while the reading goes on.  Raises ``TimeoutError`` when no record has arrived and no position
    has moved for ``stall_timeout_s`` (a partition that does not exist, a broker away), or at once
    when ``stop`` is set.
    """
    assigned = [TopicPartition(topic, p) for p in sorted(partitions)]
    consumer.assign(assigned)
    for tp in assigned:
        consumer.seek(tp, 0)
    positions: list[int | None] = []
    progressed = time.monotonic()
    while True:
        batch = consumer.poll(timeout_ms=50)
        for tp, records in batch.items():
            for record in records:
                on_record(tp.partition, record)
        if caught_up(consumer, assigned):
            break
        current = [consumer.position(tp) for tp in assigned]  # moves past control records, compacted batches
        if batch or current != positions:
            positions, progressed = current, time.monotonic()
        elif time.monotonic() - progressed > stall_timeout_s:
            raise TimeoutError(f"reading {topic!r} partitions {[tp.partition for tp in assigned]}: no record and no "
                               f"progress for {stall_timeout_s} s")
        if stop is not None and stop.is_set():
            raise TimeoutError(f"reading {topic!r} stopped")
    consumer.assign([])
