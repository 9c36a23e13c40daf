"""kafka-python 3 clients with deliberately chosen settings, topic set-up, and the ``kafka-python`` transport.

:class:`KafkaPythonTransport` puts them behind :mod:`connectors.kafka.transport` (``kafka.client =
"kafka-python"``, the default).

Settings (see docs/daemon.md for the reasoning):

* every client: the security settings (``kafka.security_protocol``, SASL, TLS) and a short
  ``bootstrap_timeout_ms``, so a missing broker is reported and retried by the daemon;
* consumer: ``enable_auto_commit=False`` (offsets are committed only after the checkpoint that
  covers them), ``auto_offset_reset`` from ``kafka.auto_offset_reset``, default ``"earliest"`` (a new
  group reads from the start; ``"latest"`` is also wrong on Tansu, whose ListOffsets LATEST answer is
  off), raw bytes (no deserializer, so a malformed value becomes a dead letter instead of a
  consumer exception; a header key that is not UTF-8 too, as an ``UnreadableRecord``, where
  kafka-python would stop reading the partition), the range assignor by default (it co-partitions the input and feedback
  topics), a short ``fetch_max_wait_ms`` (Tansu answers a fetch only when that wait is over, even
  when records arrived earlier, so it bounds the latency), no topic auto-creation,
  ``read_committed`` in ``exactly_once`` mode, and short reconnect back-off so the daemon resumes
  quickly after an outage; the ``consumer`` section's other kafka-python settings under these;
* producer: ``acks="all"`` with idempotence (no duplicates or reordering from internal retries),
  ``linger_ms`` batching in batches of 64 KiB (``producer.batch_size`` sets another), a short
  ``max_block_ms`` so a missing broker fails a send quickly instead of blocking shutdown, and a
  transactional id in ``exactly_once`` mode; the ``producer`` section's other kafka-python settings
  under these.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.consumer.fetcher import Fetcher
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor
from kafka.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    KafkaConfigurationError,
    KafkaError,
    MessageSizeTooLargeError,
    RecordListTooLargeError,
    UnsupportedCodecError,
)
from kafka.record.default_records import DefaultRecord, DefaultRecordBatch
from kafka.record.util import decode_varint
from kafka.structs import OffsetAndMetadata

from connectors.kafka import transport
from connectors.kafka.config import Config
from connectors.kafka.transport import (
    ClientConfigurationError,
    RecordRefused,
    RecordTooLarge,
    TopicLayout,
    TransportError,
    UnreadableRecord,
    UnsupportedCodec,
    plan_topics,
)

#: Error code of CreateTopics for a topic that already exists (another instance created it).
TOPIC_ALREADY_EXISTS = 36
RECONNECT_BACKOFF_MAX_MS = 1000


def _common(config: Config) -> dict[str, Any]:
    """Settings of every client (consumers, producer, admin): connection and security."""
    kafka = config.kafka
    settings = {
        "bootstrap_servers": list(kafka.bootstrap_servers),
        "client_id": kafka.client_id,
        "request_timeout_ms": kafka.request_timeout_ms,
        "metadata_max_age_ms": kafka.metadata_max_age_ms,
        "reconnect_backoff_max_ms": RECONNECT_BACKOFF_MAX_MS,
        "bootstrap_timeout_ms": kafka.bootstrap_timeout_ms,
        "security_protocol": kafka.security_protocol,
    }
    if kafka.sasl_mechanism:
        settings.update(sasl_mechanism=kafka.sasl_mechanism, sasl_plain_username=kafka.sasl_username,
                        sasl_plain_password=kafka.sasl_password)
    if kafka.security_protocol in ("SSL", "SASL_SSL"):
        settings["ssl_check_hostname"] = kafka.ssl_check_hostname
        for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
            if getattr(kafka, name):
                settings[name] = getattr(kafka, name)
    return settings


#: ``kafka.partition_assignment_strategy`` values and kafka-python's assignors.
ASSIGNORS = {"range": RangePartitionAssignor, "cooperative-sticky": CooperativeStickyAssignor}


def make_consumer(config: Config, *, group: bool = True, **overrides: Any) -> KafkaConsumer:
    """The group consumer (``group=True``) or an unassigned one for reading the changelog."""
    kafka = config.kafka
    settings = {
        **config.consumer.values,
        **_common(config),
        "enable_auto_commit": False,
        "auto_offset_reset": kafka.auto_offset_reset,
        "isolation_level": "read_committed" if config.processing.guarantee == "exactly_once" else "read_uncommitted",
        "allow_auto_create_topics": False,
        "check_crcs": True,
    }
    if group:
        settings.update(
            group_id=kafka.group_id,
            session_timeout_ms=kafka.session_timeout_ms,
            heartbeat_interval_ms=kafka.heartbeat_interval_ms,
            max_poll_interval_ms=kafka.max_poll_interval_ms,
            max_poll_records=kafka.max_poll_records,
            fetch_max_wait_ms=kafka.fetch_max_wait_ms,
            partition_assignment_strategy=[ASSIGNORS[kafka.partition_assignment_strategy]],
        )
        if kafka.group_instance_id:
            settings["group_instance_id"] = kafka.group_instance_id
    else:
        settings.update(group_id=None, fetch_max_wait_ms=20, max_poll_records=1000)
    settings.update(overrides)
    consumer = KafkaConsumer(**settings)
    consumer._fetcher.PartitionRecords = _PartitionRecords  # what kafka-python 3.0 reads fetches with (no public hook)
    return consumer


# ---------------------------------------------------------------------------- records kafka-python cannot decode
class _PartitionRecords(Fetcher.PartitionRecords):
    """kafka-python's records of one fetch response, read on past a record whose header key is not UTF-8.

    kafka-python decodes header keys as UTF-8 and stops reading a fetch at such a record.  Here its v2
    batches are read through :class:`_Batch`, and :meth:`take` hands out an
    :class:`~connectors.kafka.transport.UnreadableRecord` in the record's place.
    """

    def __init__(self, *args: Any, **kwargs: Any):
        self.unreadable: dict[int, str] = {}  # offset: what was dropped, for the records not taken yet
        super().__init__(*args, **kwargs)

    def _unpack_records(self, tp, records, key_deserializer, value_deserializer):
        return super()._unpack_records(tp, _Batches(records, self.unreadable), key_deserializer, value_deserializer)

    def take(self, n=None):
        """The next ``n`` records; what fails reading them is raised, and the rest of the fetch dropped.

        kafka-python keeps a fetch whose reading failed next in line, with nothing left to read: its next
        poll looped on it for ever (100% CPU, every partition stalled, the daemon deaf to ``stop()``).
        Dropped, it is fetched again from the position at the next poll.
        """
        try:
            records = super().take(n)
        except Exception:
            self.drain()
            raise
        if self.unreadable:  # only after a record read by _partly_read
            for i, r in enumerate(records):
                if r.offset in self.unreadable:
                    records[i] = UnreadableRecord(r.topic, r.partition, r.offset, r.timestamp, r.key, r.value,
                                                  r.headers, self.unreadable.pop(r.offset))
        return records


class _Batches:
    """The record batches of a fetch response (kafka-python's ``MemoryRecords``), each v2 batch as a :class:`_Batch`."""

    __slots__ = ("records", "unreadable")

    def __init__(self, records: Any, unreadable: dict[int, str]):
        self.records, self.unreadable = records, unreadable

    def next_batch(self) -> Any:
        batch = self.records.next_batch()
        return _Batch(batch, self.unreadable) if isinstance(batch, DefaultRecordBatch) else batch


class _Batch:
    """A v2 record batch whose iteration reads on past a record with header keys that are not UTF-8.

    Everything else is the batch's own.  Such a record is read by :func:`_partly_read` and its offset
    noted in ``unreadable`` with what was dropped.
    """

    __slots__ = ("batch", "unreadable")

    def __init__(self, batch: DefaultRecordBatch, unreadable: dict[int, str]):
        self.batch, self.unreadable = batch, unreadable

    def __getattr__(self, name: str) -> Any:
        return getattr(self.batch, name)

    def __next__(self) -> Any:  # kafka-python reads a control batch's record with next()
        return next(self.batch)

    def __iter__(self) -> Iterator[Any]:
        batch = self.batch
        while True:
            try:
                yield from batch  # the batch is its own iterator: after a failed record, it goes on from there
                return
            except CorruptRecordError as error:
                record, dropped = _partly_read(batch, error)
                self.unreadable[record.offset] = (
                    f"{len(dropped)} header(s) dropped: their keys are not UTF-8 ({', '.join(map(repr, dropped))})")
                yield record


def _partly_read(batch: DefaultRecordBatch, error: CorruptRecordError) -> tuple[DefaultRecord, list[bytes]]:
    """The record at ``batch``'s read position without the headers whose keys are not UTF-8, and those keys.

    The batch moves past it.  Only a key that does not decode is read past: for any other
    ``error`` (kafka-python's, on that record) it is raised again.
    """
    if not isinstance(error.__context__, UnicodeDecodeError):
        raise error
    buffer, pos = batch._buffer, batch._pos  # kafka-python 3.0's read position (no public accessor)
    try:
        length, pos = decode_varint(buffer, pos)
        end = pos + length
        _, pos = decode_varint(buffer, pos)  # attributes
        timestamp_delta, pos = decode_varint(buffer, pos)
        offset_delta, pos = decode_varint(buffer, pos)
        key, pos = _nullable_bytes(buffer, pos)
        value, pos = _nullable_bytes(buffer, pos)
        count, pos = decode_varint(buffer, pos)
        headers, dropped = [], []
        for _ in range(count):
            name, pos = _nullable_bytes(buffer, pos)
            header_value, pos = _nullable_bytes(buffer, pos)
            if name is None:  # a header key is never null
                raise error
            try:
                headers.append((name.decode("utf-8"), header_value))
            except UnicodeDecodeError:
                dropped.append(name)
    except (ValueError, IndexError):
        raise error from None
    if pos != end or not dropped:
        raise error
    batch._pos = end
    batch._next_record_index += 1
    timestamp = (batch.max_timestamp if batch.timestamp_type == batch.LOG_APPEND_TIME
                 else batch.first_timestamp + timestamp_delta)
    return DefaultRecord(length, batch.base_offset + offset_delta, timestamp, batch.timestamp_type, key, value,
                         headers), dropped


def _nullable_bytes(buffer: bytearray, pos: int) -> tuple[bytes | None, int]:
    """The length-prefixed bytes at ``pos`` of a v2 record (``None`` for a negative length) and the position after."""
    length, pos = decode_varint(buffer, pos)
    if length < 0:
        return None, pos
    if pos + length > len(buffer):
        raise IndexError("truncated record")
    return bytes(buffer[pos:pos + length]), pos + length


#: The producer's batch size per partition unless ``producer.batch_size`` sets it: four times kafka-python's
#: 16 KiB.  The daemon's outputs are about twice the size of its inputs; at ``batch_size=1`` it made 35,300
#: messages/s with 64 KiB batches against 31,400 with 16 KiB, faster in each of four rounds of
#: benchmarks/bench_daemon.py's protocol (whose bare loop, on the same settings, gained as well).
PRODUCER_BATCH_BYTES = 65_536


def make_producer(config: Config, transactional_id: str | None = None) -> KafkaProducer:
    """The producer for outputs, dead letters and checkpoints."""
    kafka = config.kafka
    settings = {
        "batch_size": PRODUCER_BATCH_BYTES,
        **config.producer.values,
        **_common(config),
        "acks": "all",
        "enable_idempotence": True,
        "linger_ms": kafka.linger_ms,
        "max_block_ms": kafka.max_block_ms,
        "delivery_timeout_ms": kafka.delivery_timeout_ms,
        "compression_type": None if kafka.compression_type == "none" else kafka.compression_type,
        "allow_auto_create_topics": False,
    }
    if transactional_id:
        settings["transactional_id"] = transactional_id
    return KafkaProducer(**settings)


def _partition_counts(admin: KafkaAdminClient, names: Iterable[str]) -> dict[str, int]:
    counts = {}
    for topic in admin.describe_topics(list(names)):
        if topic.get("error_code", 0) == 0 and topic.get("partitions"):
            counts[topic["name"]] = len(topic["partitions"])
    return counts


def ensure_topics(config: Config) -> TopicLayout:
    """Create missing topics (if ``topics.create``) and check partition counts.

    See :func:`~connectors.kafka.transport.plan_topics`.
    """
    topics = config.topics
    admin = KafkaAdminClient(**_common(config))
    try:
        names = [topics.input, topics.output, topics.dead_letter, topics.changelog] + (
            [topics.feedback] if topics.feedback else [])
        return plan_topics(config, _partition_counts(admin, names), lambda missing: _create(admin, missing, config))
    finally:
        admin.close()


def _create(admin: KafkaAdminClient, partitions: dict[str, int], config: Config) -> None:
    request = {}
    for name, count in partitions.items():
        spec: dict[str, Any] = {"num_partitions": count, "replication_factor": config.topics.replication_factor}
        if name == config.topics.changelog:
            spec["configs"] = {"cleanup.policy": "compact"}
        request[name] = spec
    result = admin.create_topics(request, raise_errors=False)
    for topic in result["topics"]:
        if topic["error_code"] not in (0, TOPIC_ALREADY_EXISTS):
            raise ValueError(f"cannot create topic {topic['name']!r}: error {topic['error_code']} "
                             f"{topic.get('error_message') or ''}".rstrip())
    admin.wait_for_topics(list(partitions))


def topic_id(client: Any, topic: str) -> str | None:
    """The id kafka-python's metadata holds for ``topic`` (``None`` before metadata, or without ids).

    A topic deleted and created again (a broker that lost its data) gets a new id.

    ``None`` until metadata has named the topic (here, kafka-python's empty cluster metadata), and
    for a client without it:

    >>> from types import SimpleNamespace
    >>> from kafka.cluster import ClusterMetadata
    >>> topic_id(SimpleNamespace(_cluster=ClusterMetadata()), "orders"), topic_id(object(), "orders")
    (None, None)
    """
    cluster = getattr(client, "_cluster", None)  # kafka-python 3.0 keeps it there; no public accessor
    found = cluster.topic_id(topic) if cluster is not None else None
    return None if found is None else str(found)


def caught_up(consumer: KafkaConsumer, partitions: Iterable[TopicPartition]) -> bool:
    """Whether the kafka-python ``consumer`` has read ``partitions`` up to their fetch high-watermarks.

    See :func:`connectors.kafka.transport.caught_up`; only the consumer's ``highwater`` and
    ``position`` are read.

    >>> class Fetched:  # what a KafkaConsumer knows after a fetch: the log ends at offset 5
    ...     config = {}  # its settings, which the wrapper keeps
    ...     def highwater(self, tp):
    ...         return 5
    ...     def position(self, tp, timeout_ms=None):
    ...         return 5 if tp.partition == 0 else 3
    >>> caught_up(Fetched(), [TopicPartition("in", 0)]), caught_up(Fetched(), [TopicPartition("in", 1)])
    (True, False)
    """
    return transport.caught_up(KafkaPythonConsumer(consumer), partitions)


# ---------------------------------------------------------------------------- the transport interface
def _translated(error: KafkaError) -> TransportError:
    """kafka-python's ``error`` as the interface's error (its class name kept in the message).

    >>> from kafka.errors import KafkaTimeoutError
    >>> errors = (RecordListTooLargeError(), InvalidRecordError(), KafkaTimeoutError("flush"))
    >>> [type(_translated(error)).__name__ for error in errors]
    ['RecordTooLarge', 'RecordRefused', 'TransportError']
    >>> _translated(InvalidTimestampError("out of range"))
    RecordRefused('InvalidTimestampError: [Error 32] InvalidTimestampError: out of range')
    """
    kind = (RecordTooLarge if isinstance(error, (MessageSizeTooLargeError, RecordListTooLargeError))
            else RecordRefused if isinstance(error, (InvalidTimestampError, InvalidRecordError))
            else UnsupportedCodec if isinstance(error, UnsupportedCodecError)
            else ClientConfigurationError if isinstance(error, KafkaConfigurationError) else TransportError)
    translated = kind(f"{type(error).__name__}: {error}")
    translated.__cause__ = error
    return translated


def _offsets(offsets: Mapping[transport.TopicPartition, int]) -> dict[TopicPartition, OffsetAndMetadata]:
    return {TopicPartition(*tp): OffsetAndMetadata(offset, "", -1) for tp, offset in offsets.items()}


class _Listener(ConsumerRebalanceListener):
    """kafka-python's rebalance callbacks passed on to a :class:`~connectors.kafka.transport.RebalanceListener`.

    They run on kafka-python's I/O thread.
    """

    def __init__(self, listener: transport.RebalanceListener):
        self.listener = listener

    def on_partitions_revoked(self, revoked):
        self.listener.revoked(list(revoked), lost=False)

    def on_partitions_lost(self, lost):
        self.listener.revoked(list(lost), lost=True)

    def on_partitions_assigned(self, assigned):
        self.listener.assigned(list(assigned))


class KafkaPythonConsumer:
    """A kafka-python ``KafkaConsumer`` behind :class:`connectors.kafka.transport.Consumer`.

    Its poll results pass through unchanged: kafka-python's ``TopicPartition`` keys equal the
    interface's, and its records have the attributes of :class:`~connectors.kafka.transport.Record`.
    """

    def __init__(self, consumer: KafkaConsumer):
        self.client = consumer
        self.settings = consumer.config

    def subscribe(self, topics: Sequence[str], listener: transport.RebalanceListener) -> None:
        self.client.subscribe(list(topics), listener=_Listener(listener))

    def poll(self, timeout_ms: int) -> Mapping[TopicPartition, Sequence[Any]]:
        """kafka-python's poll; whatever it raises is a :class:`~connectors.kafka.transport.TransportError`."""
        try:
            return self.client.poll(timeout_ms=timeout_ms)
        except KafkaError as error:
            raise _translated(error) from None
        except Exception as error:  # e.g. kafka-python's RuntimeError for a batch it cannot unpack: retried
            raise TransportError(f"{type(error).__name__}: {error}") from error

    def assign(self, partitions: Sequence[transport.TopicPartition]) -> None:
        self.client.assign([TopicPartition(*tp) for tp in partitions])

    def assignment(self) -> set[transport.TopicPartition]:
        return {transport.TopicPartition(*tp) for tp in self.client.assignment()}

    def pause(self, partitions: Sequence[transport.TopicPartition]) -> None:
        self.client.pause(*(TopicPartition(*tp) for tp in partitions))

    def resume(self, partitions: Sequence[transport.TopicPartition]) -> None:
        self.client.resume(*(TopicPartition(*tp) for tp in partitions))

    def seek(self, partition: transport.TopicPartition, offset: int) -> None:
        self.client.seek(TopicPartition(*partition), offset)

    def seek_to_committed(self, partitions: Sequence[transport.TopicPartition]) -> None:
        try:
            for tp in (TopicPartition(*tp) for tp in partitions):
                offset = self.client.committed(tp, timeout_ms=self.settings["request_timeout_ms"])
                if offset is not None:
                    self.client.seek(tp, offset)
                elif self.settings["auto_offset_reset"] == "latest":
                    self.client.seek_to_end(tp)
                else:
                    self.client.seek_to_beginning(tp)
        except KafkaError as error:
            raise _translated(error) from None

    def highwater(self, partition: transport.TopicPartition) -> int | None:
        try:
            return self.client.highwater(TopicPartition(*partition))
        except KafkaError as error:
            raise _translated(error) from None

    def position(self, partition: transport.TopicPartition) -> int | None:
        try:
            return self.client.position(TopicPartition(*partition), timeout_ms=0)
        except KafkaError as error:
            raise _translated(error) from None

    def beginning_offsets(self, partitions: Sequence[transport.TopicPartition],
                          timeout_ms: int | None = None) -> dict[transport.TopicPartition, int]:
        try:
            found = self.client.beginning_offsets([TopicPartition(*tp) for tp in partitions], timeout_ms=timeout_ms)
        except KafkaError as error:
            raise _translated(error) from None
        return {transport.TopicPartition(*tp): offset for tp, offset in found.items()}

    def refresh_metadata(self) -> None:
        try:
            self.client.topics()
        except KafkaError as error:
            raise _translated(error) from None

    def topic_id(self, topic: str) -> str | None:
        return topic_id(self.client, topic)

    def commit(self, offsets: Mapping[transport.TopicPartition, int], asynchronous: bool = False) -> None:
        try:
            if asynchronous:
                self.client.commit_async(_offsets(offsets))
            else:
                self.client.commit(_offsets(offsets))
        except KafkaError as error:
            raise _translated(error) from None

    def group_metadata(self) -> Any:
        return self.client.group_metadata()

    def close(self) -> None:
        self.client.close(autocommit=False, timeout_ms=1000)


class KafkaPythonProducer:
    """A kafka-python ``KafkaProducer`` behind :class:`connectors.kafka.transport.Producer`.

    A record for a given partition, with a value and no headers (the daemon's common output) is
    appended to the producer's record accumulator directly, as ``KafkaProducer.send`` appends it
    after its checks: those that concern such a record are made here, and the rest of ``send``
    (serializers, partitioner, header checks, a debug log line that formats the producer) is 2.3 µs
    of the main thread per record, a third of ``send``.  Any other record, or one whose topic or
    partition the producer's metadata does not show, goes through ``send``.  The accumulator is
    kafka-python's internal interface, which is why ``kafka-python`` is pinned to one release.
    """

    def __init__(self, producer: KafkaProducer):
        self.client = producer
        self.settings = producer.config
        # one callback per on_error (the same for every record of a producer), not a closure per record:
        # each would be one more object for the garbage collector to walk until its record is acknowledged
        self._errbacks = functools.lru_cache(maxsize=1)(_errback)
        manager = producer._transaction_manager  # a transaction adds each new partition: send does that
        transactional = manager is not None and manager.is_transactional()
        # key and value bytes that fit any request: a record batch adds at most 61 + 21 bytes, their lengths 10
        self._direct_bytes = -1 if transactional else producer.config["max_request_size"] - 128

    def send(self, topic: str, *, key: bytes | None, value: bytes | None, partition: int | None = None,
             timestamp_ms: int | None = None, headers: list[tuple[str, bytes]] | None = None,
             on_error: Callable[[TransportError], None] | None = None) -> None:
        try:
            future = None
            if (partition is not None and not headers and value is not None
                    and len(value) + (len(key) if key is not None else 0) <= self._direct_bytes):
                future = self._append(topic, partition, key, value, timestamp_ms)
            if future is None:
                future = self.client.send(topic, value=value, key=key, partition=partition,
                                          timestamp_ms=timestamp_ms, headers=headers)
        except KafkaError as error:
            raise _translated(error) from None
        if on_error is not None:
            future.add_errback(self._errbacks(on_error))

    def _append(self, topic: str, partition: int, key: bytes | None, value: bytes, timestamp_ms: int | None) -> Any:
        """``KafkaProducer.send`` of a record that fits any request, to a partition, with a value and no headers;
        ``None`` where ``send`` itself must answer (a producer closed, a partition its metadata does not show)."""
        client = self.client
        partitions = client._metadata.partitions_for_topic(topic)
        if client._closed or partitions is None or partition not in partitions:
            return None
        future, batch_is_full, new_batch, _ = client._accumulator.append(
            TopicPartition(topic, partition), timestamp_ms, key, value, [])
        if batch_is_full or new_batch:
            client._sender.wakeup()
        return future

    def flush(self, timeout: float) -> None:
        try:
            self.client.flush(timeout=timeout)
        except KafkaError as error:
            raise _translated(error) from None

    def init_transactions(self) -> None:
        self._call(self.client.init_transactions)

    def begin_transaction(self) -> None:
        self._call(self.client.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[transport.TopicPartition, int], group_metadata: Any) -> None:
        self._call(self.client.send_offsets_to_transaction, _offsets(offsets), group_metadata)

    def commit_transaction(self) -> None:
        self._call(self.client.commit_transaction)

    def abort_transaction(self) -> None:
        self._call(self.client.abort_transaction)

    def close(self, timeout: float) -> None:
        self._call(self.client.close, timeout=timeout)

    @staticmethod
    def _call(method: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return method(*args, **kwargs)
        except KafkaError as error:
            raise _translated(error) from None


def _errback(on_error: Callable[[TransportError], None]) -> Callable[[KafkaError], None]:
    """A send future's errback that reports its error, translated, to ``on_error``."""
    return lambda error: on_error(_translated(error))


class KafkaPythonTransport:
    """kafka-python 3 behind :class:`connectors.kafka.transport.Transport` (``kafka.client = "kafka-python"``).

    Stateless: its clients are made when asked for (which needs a broker), so the default
    configuration's transport is just chosen:

    >>> from connectors.kafka.config import load_config
    >>> isinstance(transport.transport(load_config(env={})), KafkaPythonTransport)
    True
    """

    def consumer(self, config: Config, *, group: bool = True) -> KafkaPythonConsumer:
        try:
            return KafkaPythonConsumer(make_consumer(config, group=group))
        except KafkaError as error:
            raise _translated(error) from None

    def producer(self, config: Config, transactional_id: str | None = None) -> KafkaPythonProducer:
        try:
            return KafkaPythonProducer(make_producer(config, transactional_id))
        except KafkaError as error:
            raise _translated(error) from None

    def ensure_topics(self, config: Config) -> TopicLayout:
        try:
            return ensure_topics(config)
        except KafkaError as error:
            raise _translated(error) from None
