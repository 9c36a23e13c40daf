"""The ``confluent`` transport: librdkafka clients (``confluent-kafka``) behind :mod:`connectors.kafka.transport`.

``kafka.client = "confluent"`` (``pip install 'streamfair[confluent]'``).  The settings are those of
:mod:`connectors.kafka.clients` in librdkafka's names (``enable.auto.commit=false``,
``acks=all`` with idempotence, the ``kafka.*`` timeouts, security and assignor), plus:

* ``partitioner=murmur2_random``: keyed records go to the partition kafka-python (and Java) choose;
* a poll returns at most ``kafka.max_poll_records`` records (``consume``), grouped by partition;
* librdkafka's own log lines go to the ``streamfair.librdkafka`` logger at DEBUG level (it retries
  what they report; the daemon reports the failures that matter as its own events);
* the rebalance callbacks run inside :meth:`ConfluentConsumer.poll`, on the daemon's thread.

librdkafka reads every codec itself; it has no pass-through of kafka-python's ``consumer``/``producer``
settings (the configuration refuses them with this client).
"""

from __future__ import annotations

import functools
import logging
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_INVALID, Consumer, KafkaError, KafkaException, Producer, TopicCollection
from confluent_kafka import TopicPartition as ConfluentTopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from connectors.kafka.config import Config
from connectors.kafka.transport import (
    ClientConfigurationError,
    RebalanceListener,
    RecordRefused,
    RecordTooLarge,
    TopicLayout,
    TopicPartition,
    TransportError,
    UnreadableRecord,
    plan_topics,
)

#: Seconds a cached topic id is trusted before :meth:`ConfluentConsumer.topic_id` asks the broker again.
TOPIC_ID_MAX_AGE_S = 30.0
RECONNECT_BACKOFF_MAX_MS = 1000
#: What librdkafka answers a seek of a partition just assigned by ``assign`` (its fetcher not started, or the
#: assignment not applied yet): the seek is done by assigning the partition again, starting at the offset.
_SEEK_BEFORE_FETCH = frozenset({KafkaError._STATE, KafkaError._OUTDATED})
#: librdkafka's ``RD_KAFKA_PARTITION_UA``: the partitioner picks the partition.
_ANY_PARTITION = -1
_LOG = logging.getLogger("streamfair.librdkafka")


class _DebugLog:
    """librdkafka's log lines at DEBUG level (``logger`` setting of confluent-kafka)."""

    def log(self, level: int, message: str, *args: Any) -> None:
        _LOG.debug(message, *args)


#: librdkafka's error codes of a record refused as it is (by the producer or the broker).
_REFUSALS: dict[int, type[TransportError]] = {
    KafkaError.MSG_SIZE_TOO_LARGE: RecordTooLarge, KafkaError.RECORD_LIST_TOO_LARGE: RecordTooLarge,
    KafkaError.INVALID_TIMESTAMP: RecordRefused, KafkaError.INVALID_RECORD: RecordRefused,
}


def _translated(error: KafkaException | KafkaError) -> TransportError:
    """librdkafka's ``error`` as the interface's error (its code name kept in the message)."""
    code = error.args[0] if isinstance(error, KafkaException) and error.args else error
    if isinstance(code, KafkaError):
        kind = _REFUSALS.get(code.code(), TransportError)
        return kind(f"{code.name()}: {code.str()}")
    return TransportError(str(error))


def _common(config: Config) -> dict[str, Any]:
    """Settings of every client: connection and security, in librdkafka's names."""
    kafka = config.kafka
    settings: dict[str, Any] = {
        "bootstrap.servers": ",".join(kafka.bootstrap_servers),
        "client.id": kafka.client_id,
        "socket.timeout.ms": kafka.request_timeout_ms,
        "topic.metadata.refresh.interval.ms": kafka.metadata_max_age_ms,
        "reconnect.backoff.max.ms": RECONNECT_BACKOFF_MAX_MS,
        "security.protocol": kafka.security_protocol.lower(),
        "logger": _DebugLog(),
    }
    if kafka.sasl_mechanism:
        settings.update({"sasl.mechanism": kafka.sasl_mechanism, "sasl.username": kafka.sasl_username,
                         "sasl.password": kafka.sasl_password})
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        settings["ssl.endpoint.identification.algorithm"] = "https" if kafka.ssl_check_hostname else "none"
        for name, key in (("ssl_cafile", "ssl.ca.location"), ("ssl_certfile", "ssl.certificate.location"),
                          ("ssl_keyfile", "ssl.key.location"), ("ssl_password", "ssl.key.password")):
            if getattr(kafka, name):
                settings[key] = getattr(kafka, name)
    return settings


def _client(kind: type, settings: dict[str, Any]) -> Any:
    try:
        return kind(settings)
    except (KafkaException, ValueError) as error:
        raise ClientConfigurationError(f"{kind.__name__}: {error}") from None


#: ``message.headers()``, called so that its failure is raised at once: on a header key that is not UTF-8,
#: confluent-kafka returns with a UnicodeDecodeError set, which a direct call (once Python has specialized
#: it) only reports later, as a SystemError, after more code ran with it pending.  Never called twice on
#: such a message: the headers it cached are then broken.
_headers = operator.methodcaller("headers")


class ConfluentRecord:
    """A consumed record with the attributes of :class:`~connectors.kafka.transport.Record`.

    ``timestamp`` is the millisecond value of librdkafka's ``(type, value)`` pair, and no headers
    are an empty list:

    >>> class Message:  # the accessors of a confluent_kafka.Message, as poll() returns it
    ...     def topic(self): return "in"
    ...     def partition(self): return 0
    ...     def offset(self): return 7
    ...     def timestamp(self): return (1, 1700000000000)  # (TIMESTAMP_CREATE_TIME, milliseconds)
    ...     def key(self): return b"a"
    ...     def value(self): return b"{}"
    ...     def headers(self): return None
    >>> record = ConfluentRecord(Message())
    >>> record.topic, record.partition, record.offset, record.timestamp, record.key, record.headers
    ('in', 0, 7, 1700000000000, b'a', [])
    """

    __slots__ = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")

    def __init__(self, message: Any):
        self.topic, self.partition, self.offset = message.topic(), message.partition(), message.offset()
        self.timestamp = message.timestamp()[1]
        self.key, self.value = message.key(), message.value()
        self.headers = _headers(message) or []


def _unreadable(message: Any, error: Exception) -> UnreadableRecord:
    """The record of a ``message`` whose headers librdkafka could not hand out (``error``): all of them dropped."""
    cause = error.__cause__ or error.__context__ or error
    return UnreadableRecord(message.topic(), message.partition(), message.offset(), message.timestamp()[1],
                            message.key(), message.value(), [],
                            f"headers dropped: confluent-kafka cannot read them ({type(cause).__name__}: {cause})")


class ConfluentConsumer:
    """A librdkafka ``Consumer`` behind :class:`connectors.kafka.transport.Consumer`.

    librdkafka knows a partition's position only once it has handed out a record (or after a
    seek), so positions are tracked here: after a seek, a record, or the end of the partition.

    librdkafka also keeps a partition's high-watermark from one assignment to the next: a
    partition found empty once would read as caught up again before the records written since
    are fetched, and a position restored beyond an old high-watermark would look out of range.
    As kafka-python does, a high-watermark is only known once a fetch of the current assignment
    has reported it: the partition handed out a record or reached its end (librdkafka's
    end-of-partition events, which :meth:`poll` consumes), or its high-watermark changed since it
    was assigned (a fetch from beyond the end reports the end, and nothing else).
    """

    def __init__(self, config: Config, *, group: bool):
        kafka = config.kafka
        self.settings: dict[str, Any] = {
            **_common(config),
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": kafka.auto_offset_reset,
            "isolation.level": ("read_committed" if config.processing.guarantee == "exactly_once"
                                else "read_uncommitted"),
            "allow.auto.create.topics": False,
            "check.crcs": True,
            "enable.partition.eof": True,
        }
        if group:
            self.settings.update({
                "group.id": kafka.group_id,
                "session.timeout.ms": kafka.session_timeout_ms,
                "heartbeat.interval.ms": kafka.heartbeat_interval_ms,
                "max.poll.interval.ms": kafka.max_poll_interval_ms,
                "fetch.wait.max.ms": kafka.fetch_max_wait_ms,
                "partition.assignment.strategy": kafka.partition_assignment_strategy,
            })
            if kafka.group_instance_id:
                self.settings["group.instance.id"] = kafka.group_instance_id
            self.max_records = kafka.max_poll_records
        else:  # librdkafka wants a group id even for a consumer that never joins a group
            self.settings.update({"group.id": f"{kafka.group_id}-changelog-reader", "fetch.wait.max.ms": 20})
            self.max_records = 1000
        self.cooperative = group and kafka.partition_assignment_strategy == "cooperative-sticky"
        self.timeout_s = kafka.request_timeout_ms / 1000
        self.client = _client(Consumer, self.settings)
        self._admin = _client(AdminClient, _common(config))
        self._positions: dict[TopicPartition, int] = {}
        self._fetched: set[TopicPartition] = set()  # partitions a fetch of the current assignment reported on
        self._assigned_highwater: dict[TopicPartition, int | None] = {}  # what librdkafka had at the assignment
        self._assigned: dict[TopicPartition, int] = {}  # assign(): the start of each partition (OFFSET_INVALID: stored)
        self._topic_ids: dict[str, tuple[str | None, float]] = {}

    # ------------------------------------------------------------------ group membership
    def subscribe(self, topics: Sequence[str], listener: RebalanceListener) -> None:
        def assigned(consumer: Consumer, partitions: list[ConfluentTopicPartition]) -> None:
            self._forget_highwaters([TopicPartition(tp.topic, tp.partition) for tp in partitions])
            if self.cooperative:
                consumer.incremental_assign(partitions)
            else:
                consumer.assign(partitions)
            listener.assigned([TopicPartition(tp.topic, tp.partition) for tp in partitions])

        def revoked(lost: bool) -> Callable[[Consumer, list[ConfluentTopicPartition]], None]:
            def callback(consumer: Consumer, partitions: list[ConfluentTopicPartition]) -> None:
                tps = [TopicPartition(tp.topic, tp.partition) for tp in partitions]
                listener.revoked(tps, lost=lost)
                for tp in tps:
                    self._positions.pop(tp, None)
                if self.cooperative:
                    consumer.incremental_unassign(partitions)
                else:
                    consumer.unassign()
            return callback

        self.client.subscribe(list(topics), on_assign=assigned, on_revoke=revoked(False), on_lost=revoked(True))

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[ConfluentRecord | UnreadableRecord]]:
        """The records available now (at most ``max_poll_records``), waiting up to ``timeout_ms`` for the first.

        As kafka-python's ``poll``: librdkafka's ``consume(n, timeout)`` waits for ``n`` messages or
        the timeout, which would hold a slow stream's records for the whole timeout.  A message whose
        headers cannot be read (a key that is not UTF-8) comes as an
        :class:`~connectors.kafka.transport.UnreadableRecord`; anything else that fails (a rebalance
        callback too: they run in here) raises :class:`~connectors.kafka.transport.TransportError`.
        """
        try:
            messages = self.client.consume(self.max_records, 0)
            if not messages:
                messages = self.client.consume(1, timeout_ms / 1000)
                if messages and self.max_records > 1:
                    messages += self.client.consume(self.max_records - 1, 0)
        except KafkaException as error:
            raise _translated(error) from None
        except Exception as error:
            raise TransportError(f"{type(error).__name__}: {error}") from error
        batch: dict[TopicPartition, list[ConfluentRecord | UnreadableRecord]] = {}
        for message in messages:
            message_error = message.error()
            if message_error is not None:
                if message_error.code() != KafkaError._PARTITION_EOF:
                    raise _translated(message_error)
                tp = TopicPartition(message.topic(), message.partition())
                self._fetched.add(tp)
                self._positions[tp] = message.offset()  # the partition's end
                continue
            try:
                record: ConfluentRecord | UnreadableRecord = ConfluentRecord(message)
            except Exception as error:  # noqa: BLE001 -- only its headers can fail: the record is dead-lettered
                record = _unreadable(message, error)
            where = record.topic, record.partition  # finds its TopicPartition key: a tuple equal to it
            records = batch.get(where)  # type: ignore[call-overload]
            if records is None:
                batch[TopicPartition(*where)] = [record]
            else:
                records.append(record)
        for tp, records in batch.items():
            self._positions[tp] = records[-1].offset + 1
            self._fetched.add(tp)
        return batch

    # ------------------------------------------------------------------ positions
    def assign(self, partitions: Sequence[TopicPartition]) -> None:
        self._assigned = {TopicPartition(*tp): OFFSET_INVALID for tp in partitions}
        self._positions.clear()
        self._forget_highwaters(list(self._assigned))
        self._reassign()

    def _reassign(self) -> None:
        """Assign the partitions again, each from its position if known (sought, read to), else its start."""
        self.client.assign([ConfluentTopicPartition(tp.topic, tp.partition, self._positions.get(tp, start))
                            for tp, start in self._assigned.items()])

    def assignment(self) -> set[TopicPartition]:
        return {TopicPartition(tp.topic, tp.partition) for tp in self.client.assignment()}

    def pause(self, partitions: Sequence[TopicPartition]) -> None:
        if partitions:
            self._call(self.client.pause, [ConfluentTopicPartition(*tp) for tp in partitions])

    def resume(self, partitions: Sequence[TopicPartition]) -> None:
        if partitions:
            self._call(self.client.resume, [ConfluentTopicPartition(*tp) for tp in partitions])

    def seek(self, partition: TopicPartition, offset: int) -> None:
        tp = TopicPartition(*partition)
        try:
            self.client.seek(ConfluentTopicPartition(tp.topic, tp.partition, offset))
        except KafkaException as error:
            code = error.args[0].code() if error.args and isinstance(error.args[0], KafkaError) else None
            if code not in _SEEK_BEFORE_FETCH or tp not in self._assigned:
                raise _translated(error) from None
            # assigned, but its fetcher not started yet (or the assignment's start not applied): assign again,
            # starting there (and the other partitions where they are, not at their stored offsets)
            self._assigned[tp] = self._positions[tp] = offset
            self._reassign()
        self._positions[tp] = offset

    def seek_to_committed(self, partitions: Sequence[TopicPartition]) -> None:
        """Only the partitions read or sought since their assignment move: librdkafka starts the others there."""
        moved = [tp for tp in (TopicPartition(*tp) for tp in partitions) if tp in self._positions]
        if not moved:
            return
        try:
            wanted = [ConfluentTopicPartition(*tp) for tp in moved]
            for found in self.client.committed(wanted, timeout=self.timeout_s):
                if found.error is not None:
                    raise _translated(found.error)
                offset = found.offset
                if offset < 0:  # none committed
                    low, high = self.client.get_watermark_offsets(found, timeout=self.timeout_s)
                    offset = high if self.settings["auto.offset.reset"] == "latest" else low
                self.seek(TopicPartition(found.topic, found.partition), offset)
        except KafkaException as error:
            raise _translated(error) from None

    def highwater(self, partition: TopicPartition) -> int | None:
        tp = TopicPartition(*partition)
        high = self._cached_highwater(tp)
        if tp not in self._fetched and high == self._assigned_highwater.get(tp):
            return None  # possibly from an earlier assignment
        return high

    def _cached_highwater(self, tp: TopicPartition) -> int | None:
        """librdkafka's last known high-watermark of ``tp`` (from whichever assignment)."""
        try:
            _, high = self.client.get_watermark_offsets(ConfluentTopicPartition(*tp), cached=True)
        except KafkaException as error:
            raise _translated(error) from None
        return None if high is None or high < 0 else high

    def _forget_highwaters(self, partitions: list[TopicPartition]) -> None:
        """Newly assigned ``partitions``: the high-watermarks librdkafka has for them may be stale."""
        self._fetched.difference_update(partitions)
        for tp in partitions:
            try:
                self._assigned_highwater[tp] = self._cached_highwater(tp)
            except TransportError:
                self._assigned_highwater[tp] = None

    def position(self, partition: TopicPartition) -> int | None:
        return self._positions.get(TopicPartition(*partition))

    def beginning_offsets(self, partitions: Sequence[TopicPartition],
                          timeout_ms: int | None = None) -> dict[TopicPartition, int]:
        timeout_s = self.timeout_s if timeout_ms is None else timeout_ms / 1000
        starts = {}
        for tp in partitions:
            try:
                low, _ = self.client.get_watermark_offsets(ConfluentTopicPartition(*tp), timeout=timeout_s)
            except KafkaException as error:
                raise _translated(error) from None
            starts[TopicPartition(*tp)] = low
        return starts

    # ------------------------------------------------------------------ metadata
    def refresh_metadata(self) -> None:
        for topic in list(self._topic_ids):
            self._describe(topic)

    def topic_id(self, topic: str) -> str | None:
        cached = self._topic_ids.get(topic)
        if cached is None or time.monotonic() - cached[1] > TOPIC_ID_MAX_AGE_S:
            try:
                self._describe(topic)
            except TransportError:
                return cached[0] if cached else None
        return self._topic_ids[topic][0]

    def _describe(self, topic: str) -> None:
        future = self._admin.describe_topics(TopicCollection([topic]), request_timeout=self.timeout_s)[topic]
        try:
            found = future.result()
        except KafkaException as error:
            raise _translated(error) from None
        self._topic_ids[topic] = (str(found.topic_id) if found.topic_id is not None else None, time.monotonic())

    # ------------------------------------------------------------------ offsets
    def commit(self, offsets: Mapping[TopicPartition, int], asynchronous: bool = False) -> None:
        self._call(self.client.commit, offsets=[ConfluentTopicPartition(tp.topic, tp.partition, offset)
                                                for tp, offset in offsets.items()], asynchronous=asynchronous)

    def group_metadata(self) -> Any:
        return self._call(self.client.consumer_group_metadata)

    def close(self) -> None:
        self._call(self.client.close)

    @staticmethod
    def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except KafkaException as error:
            raise _translated(error) from None


class ConfluentProducer:
    """A librdkafka ``Producer`` behind :class:`connectors.kafka.transport.Producer`.

    A full queue is waited on (serving delivery reports) for up to ``kafka.max_block_ms``.
    """

    def __init__(self, config: Config, transactional_id: str | None = None):
        kafka = config.kafka
        self.settings: dict[str, Any] = {
            **_common(config),
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": kafka.linger_ms,
            "message.timeout.ms": kafka.delivery_timeout_ms,
            "request.timeout.ms": kafka.request_timeout_ms,
            "compression.type": kafka.compression_type,
            "partitioner": "murmur2_random",
            # only failed records call back into Python: the daemon acts on errors alone
            "delivery.report.only.error": True,
        }
        if transactional_id:
            self.settings["transactional.id"] = transactional_id
        self.block_s = kafka.max_block_ms / 1000
        self.client = _client(Producer, self.settings)
        # one callback per on_error, not a closure per record (as KafkaPythonProducer's errbacks)
        self._delivery_reports = functools.lru_cache(maxsize=1)(_delivery_report)

    def send(self, topic: str, *, key: bytes | None, value: bytes | None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: list[tuple[str, bytes]] | None = None,
             on_error: Callable[[TransportError], None] | None = None) -> None:
        report = None if on_error is None else self._delivery_reports(on_error)
        where = _ANY_PARTITION if partition is None else partition
        deadline = None
        while True:
            try:  # positional: topic, value, key, partition, on_delivery, its alias, timestamp (0: now), headers
                self.client.produce(topic, value, key, where, report, None, timestamp_ms or 0, headers or None)
                return
            except BufferError:  # the queue is full: serve delivery reports until there is room
                deadline = deadline or time.monotonic() + self.block_s
                if time.monotonic() > deadline:
                    raise TransportError(f"the producer's queue stayed full for {self.block_s} s") from None
                self.client.poll(0.05)
            except KafkaException as error:
                raise _translated(error) from None

    def flush(self, timeout: float) -> None:
        remaining = self.client.flush(timeout)
        if remaining:
            raise TransportError(f"{remaining} records not delivered within {timeout} s")

    def init_transactions(self) -> None:
        self._call(self.client.init_transactions, self.block_s)

    def begin_transaction(self) -> None:
        self._call(self.client.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[TopicPartition, int], group_metadata: Any) -> None:
        self._call(self.client.send_offsets_to_transaction,
                   [ConfluentTopicPartition(tp.topic, tp.partition, offset) for tp, offset in offsets.items()],
                   group_metadata, self.block_s)

    def commit_transaction(self) -> None:
        self._call(self.client.commit_transaction, self.block_s)

    def abort_transaction(self) -> None:
        self._call(self.client.abort_transaction, self.block_s)

    def close(self, timeout: float) -> None:
        """librdkafka producers have no close: wait up to ``timeout`` s for queued records, then let it go."""
        self.client.flush(timeout)

    @staticmethod
    def _call(method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except KafkaException as error:
            raise _translated(error) from None


def _delivery_report(on_error: Callable[[TransportError], None]) -> Callable[[KafkaError | None, Any], None]:
    """A produce call's ``on_delivery`` callback that reports a failed delivery, translated, to ``on_error``."""

    def report(error: KafkaError | None, message: Any) -> None:
        if error is not None:
            on_error(_translated(error))

    return report


class ConfluentTransport:
    """librdkafka behind :class:`connectors.kafka.transport.Transport` (``kafka.client = "confluent"``).

    Chosen by ``kafka.client``; its clients are made when asked for (which needs a broker):

    >>> from connectors.kafka.config import load_config
    >>> from connectors.kafka.transport import transport
    >>> type(transport(load_config(env={}, overrides=["kafka.client=confluent"]))).__name__
    'ConfluentTransport'
    """

    def consumer(self, config: Config, *, group: bool = True) -> ConfluentConsumer:
        return ConfluentConsumer(config, group=group)

    def producer(self, config: Config, transactional_id: str | None = None) -> ConfluentProducer:
        return ConfluentProducer(config, transactional_id)

    def ensure_topics(self, config: Config) -> TopicLayout:
        """See :func:`connectors.kafka.transport.plan_topics`.

        A missing broker raises after ``kafka.bootstrap_timeout_ms``.
        """
        admin = _client(AdminClient, _common(config))
        timeout = config.kafka.bootstrap_timeout_ms / 1000
        try:
            metadata = admin.list_topics(timeout=timeout)
        except KafkaException as error:
            raise _translated(error) from None
        counts = {name: len(topic.partitions) for name, topic in metadata.topics.items()
                  if topic.error is None and topic.partitions}

        def create(partitions: dict[str, int]) -> None:
            topics = [NewTopic(name, num_partitions=count, replication_factor=config.topics.replication_factor,
                               config={"cleanup.policy": "compact"} if name == config.topics.changelog else {})
                      for name, count in partitions.items()]
            for name, future in admin.create_topics(topics, request_timeout=config.kafka.request_timeout_ms / 1000
                                                    ).items():
                try:
                    future.result()
                except KafkaException as error:
                    if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                        raise ValueError(f"cannot create topic {name!r}: {error.args[0].str()}") from None
            deadline = time.monotonic() + config.kafka.request_timeout_ms / 1000
            while not all(admin.list_topics(topic=name, timeout=timeout).topics[name].error is None
                          for name in partitions):
                if time.monotonic() > deadline:
                    raise TransportError(f"topics {sorted(partitions)} did not appear in the metadata")
                time.sleep(0.1)

        return plan_topics(config, counts, create)
