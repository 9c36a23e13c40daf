"""kafka-python 3 clients with deliberately chosen settings, topic set-up and changelog reads.

Settings (see docs/daemon.md for the reasoning):

* every client: the security settings (``kafka.security_protocol``, SASL, TLS) and a short
  ``bootstrap_timeout_ms``, so a missing broker is reported and retried by the daemon;
* consumer: ``enable_auto_commit=False`` (offsets are committed only after the checkpoint that
  covers them), ``auto_offset_reset`` from ``kafka.auto_offset_reset``, default ``"earliest"`` (a new
  group reads from the start; ``"latest"`` is also wrong on Tansu, whose ListOffsets LATEST answer is
  off), raw bytes (no deserializer, so a malformed value becomes a dead letter instead of a
  consumer exception), the range assignor by default (it co-partitions the input and feedback
  topics), a short ``fetch_max_wait_ms`` (Tansu answers a fetch only when that wait is over, even
  when records arrived earlier, so it bounds the latency), no topic auto-creation,
  ``read_committed`` in ``exactly_once`` mode, and short reconnect back-off so the daemon resumes
  quickly after an outage; the ``consumer`` section's other kafka-python settings under these;
* producer: ``acks="all"`` with idempotence (no duplicates or reordering from internal retries),
  ``linger_ms`` batching, a short ``max_block_ms`` so a missing broker fails a send quickly
  instead of blocking shutdown, and a transactional id in ``exactly_once`` mode; the ``producer``
  section's other kafka-python settings under these.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Iterable

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
from kafka.coordinator.assignors.range import RangePartitionAssignor

from connectors.kafka.config import Config

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
    return KafkaConsumer(**settings)


def make_producer(config: Config, transactional_id: str | None = None) -> KafkaProducer:
    """The producer for outputs, dead letters and checkpoints."""
    kafka = config.kafka
    settings = {
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


@dataclass(frozen=True)
class TopicLayout:
    """Partition counts found (or created) at start."""

    input_partitions: int
    output_partitions: int
    dead_letter_partitions: int
    changelog_partitions: int
    feedback_partitions: int | None


def _partition_counts(admin: KafkaAdminClient, names: Iterable[str]) -> dict[str, int]:
    counts = {}
    for topic in admin.describe_topics(list(names)):
        if topic.get("error_code", 0) == 0 and topic.get("partitions"):
            counts[topic["name"]] = len(topic["partitions"])
    return counts


def ensure_topics(config: Config) -> TopicLayout:
    """Create missing topics (if ``topics.create``) and check partition counts.

    The output, dead-letter, changelog and feedback topics get as many partitions as the input
    (the changelog as a compacted topic).  Raises ``ValueError`` naming the key when a topic is
    missing and may not be created, or has an unusable number of partitions.
    """
    topics = config.topics
    admin = KafkaAdminClient(**_common(config))
    try:
        names = {"input": topics.input, "output": topics.output, "dead_letter": topics.dead_letter,
                 "changelog": topics.changelog}
        if topics.feedback:
            names["feedback"] = topics.feedback
        counts = _partition_counts(admin, names.values())
        if topics.input not in counts:
            if not topics.create:
                raise ValueError(f"topics.input: topic {topics.input!r} does not exist (and topics.create is false)")
            _create(admin, {topics.input: topics.partitions}, config)
            counts[topics.input] = topics.partitions
        n = counts[topics.input]
        missing = {name: n for key, name in names.items() if name not in counts}
        if missing:
            if not topics.create:
                key = next(k for k, v in names.items() if v in missing)
                raise ValueError(f"topics.{key}: topic {names[key]!r} does not exist (and topics.create is false)")
            _create(admin, missing, config)
            counts.update(missing)
        if counts[topics.changelog] < n:
            raise ValueError(f"topics.changelog: {topics.changelog!r} has {counts[topics.changelog]} partitions, "
                             f"needs at least {n} (one per input partition)")
        if topics.feedback and counts[topics.feedback] != n:
            raise ValueError(f"topics.feedback: {topics.feedback!r} has {counts[topics.feedback]} partitions, "
                             f"needs {n} (co-partitioned with the input)")
        return TopicLayout(n, counts[topics.output], counts[topics.dead_letter], counts[topics.changelog],
                           counts.get(topics.feedback) if topics.feedback else None)
    finally:
        admin.close()


def _create(admin: KafkaAdminClient, partitions: dict[str, int], config: Config) -> None:
    request = {}
    for name, count in partitions.items():
        spec = {"num_partitions": count, "replication_factor": config.topics.replication_factor}
        if name == config.topics.changelog:
            spec["configs"] = {"cleanup.policy": "compact"}
        request[name] = spec
    result = admin.create_topics(request, raise_errors=False)
    for topic in result["topics"]:
        if topic["error_code"] not in (0, TOPIC_ALREADY_EXISTS):
            raise ValueError(f"cannot create topic {topic['name']!r}: error {topic['error_code']} "
                             f"{topic.get('error_message') or ''}".rstrip())
    admin.wait_for_topics(list(partitions))


def read_latest(
    consumer: KafkaConsumer, topic: str, keys: dict[int, bytes], timeout_s: float = 30.0,
    stop: threading.Event | None = None,
) -> dict[int, bytes]:
    """The value of the last record with ``keys[p]`` in each partition ``p`` of ``topic``.

    Reads each partition from its start up to its fetch high-watermark (not ``end_offsets``, which
    Tansu gets wrong).  A ``None`` value (tombstone) deletes the key.  Raises ``TimeoutError`` after
    ``timeout_s``, or at once when ``stop`` is set.
    """
    partitions = [TopicPartition(topic, p) for p in sorted(keys)]
    consumer.assign(partitions)
    for tp in partitions:
        consumer.seek(tp, 0)
    found: dict[int, bytes] = {}
    deadline = time.monotonic() + timeout_s
    while True:
        for tp, records in consumer.poll(timeout_ms=50).items():
            key = keys[tp.partition]
            for record in records:
                if record.key == key:
                    if record.value is None:
                        found.pop(tp.partition, None)
                    else:
                        found[tp.partition] = record.value
        if caught_up(consumer, partitions):
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"reading {topic!r} partitions {sorted(keys)} took more than {timeout_s} s")
        if stop is not None and stop.is_set():
            raise TimeoutError(f"reading {topic!r} stopped")
    consumer.assign([])
    return found


def topic_id(client: Any, topic: str) -> str | None:
    """The id kafka-python's metadata holds for ``topic`` (``None`` before metadata, or without ids).

    A topic deleted and created again (a broker that lost its data) gets a new id.
    """
    cluster = getattr(client, "_cluster", None)  # kafka-python 3.0 keeps it there; no public accessor
    found = cluster.topic_id(topic) if cluster is not None else None
    return None if found is None else str(found)


def caught_up(consumer: KafkaConsumer, partitions: Iterable[TopicPartition]) -> bool:
    """Whether ``consumer`` has read every partition of ``partitions`` up to its fetch high-watermark.

    The fetch high-watermark (``consumer.highwater``), not ``end_offsets``, which Tansu gets wrong.
    False for no partitions, and while a partition's high-watermark or position is not known yet
    (before its first fetch).
    """
    partitions = list(partitions)
    for tp in partitions:
        highwater = consumer.highwater(tp)
        if highwater is None:
            return False
        position = consumer.position(tp, timeout_ms=0)
        if position is None or position < highwater:
            return False
    return bool(partitions)
