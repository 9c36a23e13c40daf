"""Daemon configuration: defaults < TOML file < ``STREAMFAIR_*`` environment < command-line flags.

Every setting has a dotted key ``section.name``, declared once (type, default, allowed values, one
line of documentation) as a field of its section below (see :mod:`connectors.kafka.schema`);
:data:`SCHEMA` lists them all.  The TOML file uses tables (``[kafka]`` then ``group_id = "..."``);
the environment variable is ``STREAMFAIR_<SECTION>_<NAME>`` in upper case
(``STREAMFAIR_KAFKA_GROUP_ID``); the command line has ``--set section.name=value`` and a few
shortcut flags.  Lists in the environment and in ``--set`` are comma-separated; an empty string
means "not set" for optional settings.  Anything invalid raises :class:`ConfigError` naming the key.

Examples
--------
>>> config = load_config(env={"STREAMFAIR_KAFKA_GROUP_ID": "scoring"},
...                      overrides=["postprocessor.eps=0.01", "topics.input=orders"])
>>> config.kafka.group_id, config.topics.input, config.postprocessor.eps
('scoring', 'orders', 0.01)
>>> load_config(overrides=["kafka.session_timeout_ms=abc"])
Traceback (most recent call last):
...
connectors.kafka.schema.ConfigError: kafka.session_timeout_ms: expected an integer, got 'abc'
>>> SCHEMA["kafka.group_id"].env, SCHEMA["kafka.group_id"].flag
('STREAMFAIR_KAFKA_GROUP_ID', '--group-id')
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import logging
import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from connectors.kafka.codec import group_label
from connectors.kafka.postprocessor_config import (
    PARAMETERS,
    SWITCHES,
    VARIANT_PARAMETERS,
    VARIANTS,
    PostProcessorConfig,
)
from connectors.kafka.schema import (
    BOOLEAN,
    CONSTRUCTOR_DEFAULT,
    ENV_PREFIX,
    INTEGER,
    JSON,
    NUMBER,
    STRING,
    STRINGS,
    ConfigError,
    NotEmpty,
    OneOf,
    Pattern,
    Range,
    Setting,
    ValueType,
    env_name,
    section_settings,
    setting,
)
from streamfair import FairRegressionPostProcessor

GUARANTEES = ("at_least_once", "exactly_once")
OFFSET_RESETS = ("earliest", "latest")
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ASSIGNORS = ("range", "cooperative-sticky")
#: ``kafka.client`` values: the Kafka client library behind the daemon (:mod:`connectors.kafka.transport`).
KAFKA_CLIENTS = ("kafka-python", "confluent")
OUTPUT_KEYS = ("id", "input")
#: Trace-context headers copied from an input to its output by default: W3C Trace Context and Zipkin B3.
TRACE_HEADERS = ("traceparent", "tracestate", "b3", "x-b3-traceid", "x-b3-spanid", "x-b3-parentspanid",
                 "x-b3-sampled", "x-b3-flags")
#: kafka-python settings the daemon chooses itself (its guarantees depend on them, or a ``kafka.*`` key sets
#: them): the ``consumer`` / ``producer`` pass-through sections refuse them.
DAEMON_CLIENT_SETTINGS = frozenset({
    "bootstrap_servers", "client_id", "group_id", "group_instance_id", "key_deserializer", "value_deserializer",
    "enable_auto_commit", "auto_offset_reset", "isolation_level", "allow_auto_create_topics", "check_crcs",
    "session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms", "max_poll_records", "fetch_max_wait_ms",
    "request_timeout_ms", "metadata_max_age_ms", "reconnect_backoff_max_ms", "bootstrap_timeout_ms",
    "consumer_timeout_ms", "key_serializer", "value_serializer",
    "enable_idempotence", "acks", "transactional_id", "linger_ms", "max_block_ms", "delivery_timeout_ms",
    "compression_type", "retries", "security_protocol", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname",
})
#: The package kafka-python needs for each optional codec (the ``connectors`` extra installs them).
CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
OUT_OF_RANGE_POLICIES = ("earliest", "latest", "fail")
MODES = FairRegressionPostProcessor.prediction_modes
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_TOPIC = Pattern(r"^[A-Za-z0-9._-]{1,249}$", "topic name", "must be 1-249 characters of [A-Za-z0-9._-]")
_AT_LEAST_1 = Range(1)
_POSITIVE_SECONDS = Range(0, strict=True, finite=True)


# ---------------------------------------------------------------------------- the sections
@dataclass(frozen=True)
class KafkaConfig:
    """Connection and client settings (see docs/daemon.md for why each value).

    Lists are comma-separated in the environment and in ``--set``:

    >>> kafka = load_config(env={"STREAMFAIR_KAFKA_BOOTSTRAP_SERVERS": "k1:9092,k2:9092"}).kafka
    >>> kafka.bootstrap_servers, kafka.client, kafka.session_timeout_ms
    (['k1:9092', 'k2:9092'], 'kafka-python', 10000)
    """

    bootstrap_servers: list[str] = setting(
        STRINGS, ["127.0.0.1:9092"], "the brokers to connect to first",
        Pattern(r"^[^\s:]+:(?:[1-9]\d{0,3}|[1-5]\d{4}|6[0-4]\d{3}|65[0-4]\d\d|655[0-2]\d|6553[0-5])$", "host:port",
                "entries must be host:port, the port in 1..65535"), flag="--bootstrap-servers")
    client: str = setting(STRING, "kafka-python", "the client library: `kafka-python` (pure Python) or `confluent` "
                          "(librdkafka, faster; `pip install 'streamfair[confluent]'`; see the table of what each "
                          "supports)", OneOf(KAFKA_CLIENTS))
    group_id: str = setting(STRING, "streamfair", "consumer group", NotEmpty(), flag="--group-id")
    client_id: str = setting(STRING, "streamfair", "client name (in the brokers' logs and quotas)", NotEmpty())
    session_timeout_ms: int = setting(INTEGER, 10000, "failure detection: a member silent this long leaves the group",
                                      _AT_LEAST_1)
    heartbeat_interval_ms: int = setting(INTEGER, 3000, "heartbeats to the group coordinator (below the session "
                                         "timeout)", _AT_LEAST_1)
    max_poll_interval_ms: int = setting(INTEGER, 60000, "longest time between polls; also the rebalance timeout "
                                        "and the liveness limit of `/healthz`", _AT_LEAST_1)
    max_poll_records: int = setting(INTEGER, 500, "records per poll", _AT_LEAST_1)
    poll_timeout_ms: int = setting(INTEGER, 100, "poll wait (bounds the reaction to a stop signal)", _AT_LEAST_1)
    fetch_max_wait_ms: int = setting(INTEGER, 50, "broker-side fetch wait (the latency floor on Tansu)", _AT_LEAST_1)
    request_timeout_ms: int = setting(INTEGER, 30000, "client request timeout", _AT_LEAST_1)
    metadata_max_age_ms: int = setting(INTEGER, 300000, "how often the clients refresh the topics' metadata: "
                                       "partitions added to the input reach the group within about this long",
                                       _AT_LEAST_1)
    bootstrap_timeout_ms: int = setting(INTEGER, 5000, "how long a client waits for its first broker before the "
                                        "daemon logs `broker_unavailable` and retries", _AT_LEAST_1)
    contact_timeout_seconds: float = setting(
        NUMBER, 30.0, "`/readyz` turns not-ready, and the lag unknown, when no round trip with the brokers has "
        "completed for this long: records fetched, a checkpoint written, or, while none are, the offsets request the "
        "daemon makes every third of it", _POSITIVE_SECONDS)
    linger_ms: int = setting(INTEGER, 5, "producer batching delay", Range(0))
    max_block_ms: int = setting(INTEGER, 5000, "how long `send` may block without a broker", _AT_LEAST_1)
    delivery_timeout_ms: int = setting(INTEGER, 60000, "producer delivery timeout; must exceed linger + request "
                                       "timeout", _AT_LEAST_1)
    compression_type: str = setting(STRING, "none", "compression of produced batches (snappy, lz4 and zstd need "
                                    "their packages, installed with the `connectors` extra)", OneOf(COMPRESSION_TYPES))
    auto_offset_reset: str = setting(STRING, "earliest", "where a partition with neither a checkpoint nor a committed "
                                     "offset starts (Tansu answers `latest` wrongly, see its quirks)",
                                     OneOf(OFFSET_RESETS))
    group_instance_id: str = setting(STRING, "", "static membership: a stable id per instance, e.g. the pod name of a "
                                     "StatefulSet (empty: dynamic membership)")
    partition_assignment_strategy: str = setting(
        STRING, "range", "`cooperative-sticky`: incremental rebalances that move only the partitions that change "
        "owner; only `range` co-partitions the input and feedback topics, so `topics.feedback` needs it",
        OneOf(ASSIGNORS))
    security_protocol: str = setting(STRING, "PLAINTEXT", "how to reach the brokers: TLS, SASL or both",
                                     OneOf(SECURITY_PROTOCOLS))
    sasl_mechanism: str = setting(STRING, "", "SASL mechanism (needed with SASL, refused without)",
                                  OneOf(SASL_MECHANISMS, empty=True))
    sasl_username: str = setting(STRING, "", "SASL user (needed with SASL)")
    sasl_password: str = setting(STRING, "", "SASL password (needed with SASL; keep it in the environment)")
    ssl_cafile: str = setting(STRING, "", "CA bundle that signed the brokers' certificates (empty: the system's)")
    ssl_certfile: str = setting(STRING, "", "client certificate for mutual TLS (with `kafka.ssl_keyfile`)")
    ssl_keyfile: str = setting(STRING, "", "client key for mutual TLS (with `kafka.ssl_certfile`)")
    ssl_password: str = setting(STRING, "", "password of the key file")
    ssl_check_hostname: bool = setting(BOOLEAN, True, "check that a broker's certificate names the host connected to")


@dataclass(frozen=True)
class TopicsConfig:
    """Topic names; ``feedback`` empty means no feedback topic.

    >>> topics = load_config(env={}, overrides=["topics.input=orders"]).topics
    >>> topics.input, topics.output, topics.feedback, topics.partitions
    ('orders', 'streamfair.output', '', 3)
    >>> load_config(env={}, overrides=["topics.output=streamfair.input"])
    Traceback (most recent call last):
    ...
    connectors.kafka.schema.ConfigError: topics.output: must differ from topics.input, got 'streamfair.input'
    """

    input: str = setting(STRING, "streamfair.input", "input records (scores or features)", _TOPIC,
                         flag="--input-topic")
    output: str = setting(STRING, "streamfair.output", "fair predictions", _TOPIC, flag="--output-topic")
    dead_letter: str = setting(STRING, "streamfair.dead-letter", "records that could not be used, with the reason",
                               _TOPIC)
    changelog: str = setting(STRING, "streamfair.changelog", "checkpoints of the post-processors (compacted)", _TOPIC)
    feedback: str = setting(STRING, "", "labelled feedback records (empty: none)", dataclasses.replace(_TOPIC,
                                                                                                      empty=True))
    create: bool = setting(BOOLEAN, True, "create missing topics: the input with `topics.partitions`, the others "
                           "with the input's partition count")
    partitions: int = setting(INTEGER, 3, "partitions of a created input topic", _AT_LEAST_1)
    replication_factor: int = setting(INTEGER, 1, "replication factor of created topics", _AT_LEAST_1)


@dataclass(frozen=True)
class ProcessingConfig:
    """How messages become predictions, and how often state is checkpointed.

    >>> processing = load_config(env={}, overrides=["processing.guarantee=exactly_once"]).processing
    >>> processing.guarantee, processing.batch_size, processing.checkpoint_every_messages, processing.mode
    ('exactly_once', 1, 10000, 'sample')
    >>> processing.propagate_headers[:2]
    ['traceparent', 'tracestate']
    """

    guarantee: str = setting(STRING, "at_least_once", "delivery guarantee of the outputs", OneOf(GUARANTEES),
                             flag="--guarantee")
    batch_size: int = setting(INTEGER, 1, "valid messages per learning step (64: about twice the throughput)",
                              _AT_LEAST_1)
    mode: str = setting(STRING, "sample", "the output `prediction`: a draw from the fair distribution (the "
                        "randomized predictor the guarantee covers), its mean or its mode", OneOf(MODES))
    distribution: bool = setting(BOOLEAN, False, "always include the distribution in the output")
    max_message_bytes: int = setting(INTEGER, 65536, "larger inputs are dead letters", Range(16))
    checkpoint_every_messages: int = setting(INTEGER, 10000, "checkpoint after this many input records",
                                             _AT_LEAST_1)
    checkpoint_every_seconds: float = setting(NUMBER, 5.0, "or after this many seconds", _POSITIVE_SECONDS)
    checkpoint_record_bytes: int = setting(
        INTEGER, 900_000, "a larger checkpoint is written as several changelog records of at most this many bytes "
        "(keep it below the producer's and the changelog topic's record limits, 1 MB by default)", Range(1024))
    transactional_id: str = setting(STRING, "", "exactly_once only; default `<client_id>-<host>-<pid>-<random>`")
    out_of_range: str = setting(STRING, "earliest", "a restored position outside the input log (see Failures)",
                                OneOf(OUT_OF_RANGE_POLICIES))
    output_key: str = setting(STRING, "id", "the output record's key: the message `id`, or the input record's key "
                              "(the id when it has none)", OneOf(OUTPUT_KEYS))
    propagate_headers: list[str] = setting(
        STRINGS, list(TRACE_HEADERS), "input headers copied to the output (names compared in lower case; empty: "
        "none), so a trace (W3C Trace Context, Zipkin B3) continues through the daemon")


@dataclass(frozen=True)
class ModelsConfig:
    """Base models for messages that carry raw features (pickled River models).

    No models unless ``eta`` names a file (and ``tau`` too):

    >>> models = load_config(env={}).models
    >>> models.enabled, models.features, models.learn
    (False, [], False)
    >>> load_config(env={}, overrides=["models.learn=true"])
    Traceback (most recent call last):
    ...
    connectors.kafka.schema.ConfigError: models.learn: needs models.eta and models.tau, got True
    """

    eta: str = setting(STRING, "", "pickled River regressor (classification: classifier) giving eta "
                       "(with `models.tau`)")
    tau: str = setting(STRING, "", "pickled River classifier giving tau, the group probabilities (with `models.eta`)")
    features: list[str] = setting(STRINGS, [], "allowed feature names (empty: any)")
    groups: list[str] = setting(STRINGS, [], "group labels in tau's column order (empty: `0` .. `K-1`)")
    learn: bool = setting(BOOLEAN, False, "the base models learn from `topics.feedback`")

    @property
    def enabled(self) -> bool:
        return bool(self.eta)


@dataclass(frozen=True)
class MetricsConfig:
    """The metrics endpoint (:mod:`connectors.prometheus`); ``port = 0`` disables it.

    >>> metrics = load_config(env={"STREAMFAIR_METRICS_PORT": "9464"}).metrics
    >>> metrics.port, metrics.host, metrics.interval_seconds
    (9464, '0.0.0.0', 5.0)
    """

    port: int = setting(INTEGER, 0, "metrics endpoint (`/metrics`, `/healthz`, `/readyz`)",
                        Range(0, 65535, note="0: off"), flag="--metrics-port")
    host: str = setting(STRING, "0.0.0.0", "address the endpoint listens on", NotEmpty())
    interval_seconds: float = setting(NUMBER, 5.0, "how often the post-processors are sampled", _POSITIVE_SECONDS)
    audit_window: int = setting(INTEGER, 1000, "labelled feedback samples behind the audited fairness", _AT_LEAST_1)
    history: str = setting(STRING, "", "file the samples are appended to, for `streamfair report` (empty: none; "
                                       "needs `metrics.port`)")


@dataclass(frozen=True)
class LogConfig:
    """Logging.

    The level is accepted in any case (see :func:`log_level`):

    >>> load_config(env={}, overrides=["log.level=debug", "log.progress_seconds=0"]).log
    LogConfig(level='debug', progress_seconds=0.0)
    """

    level: str = setting(STRING, "INFO", "DEBUG adds one line per checkpoint and per dead letter",
                         OneOf(LOG_LEVELS, ignore_case=True), flag="--log-level")
    progress_seconds: float = setting(NUMBER, 30.0, "a `progress` line at INFO this often",
                                      Range(0, finite=True, note="0: off"))


# ---------------------------------------------------------------------------- kafka-python pass-through
class ClientConfig:
    """Any other kafka-python setting of the consumers (section ``consumer``) or the producer (``producer``).

    The keys are the client's own (its ``DEFAULT_CONFIG`` names with a number, string or boolean
    value), except those the daemon sets itself (:data:`DAEMON_CLIENT_SETTINGS`).

    >>> ClientConfig("producer", max_request_size=2_000_000).values
    {'max_request_size': 2000000}
    """

    def __init__(self, section: str = "consumer", **values: Any):
        self.section = section
        settings = client_settings(section)
        for name in values:
            if f"{section}.{name}" not in settings:
                raise ConfigError(f"{section}.{name}: " + (
                    "set by the daemon (see its kafka.* and processing.* settings)" if name in DAEMON_CLIENT_SETTINGS
                    else f"not a kafka-python {section} setting with a number, string or boolean value"))
        self.values = dict(values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientConfig) and (self.section, self.values) == (other.section, other.values)

    def __repr__(self) -> str:
        return f"ClientConfig({self.section!r}, {', '.join(f'{k}={v!r}' for k, v in self.values.items())})"


_CLIENT_TYPES: dict[type, ValueType] = {bool: BOOLEAN, int: INTEGER, float: NUMBER, str: STRING, type(None): JSON}


def client_settings(section: str) -> dict[str, Setting]:
    """``{key: Setting}`` of the kafka-python ``section`` (consumer/producer) settings passed through.

    Their types are those of the client's defaults; they are passed as given.  The settings the
    daemon chooses itself (:data:`DAEMON_CLIENT_SETTINGS`) are not among them.

    >>> consumer = client_settings("consumer")
    >>> rack = consumer["consumer.client_rack"]
    >>> rack.env, rack.type.name, rack.default
    ('STREAMFAIR_CONSUMER_CLIENT_RACK', 'string', '')
    >>> "consumer.group_id" in consumer, client_settings("producer")["producer.max_request_size"].default
    (False, 1048576)
    """
    from kafka import KafkaConsumer, KafkaProducer

    defaults = (KafkaConsumer if section == "consumer" else KafkaProducer).DEFAULT_CONFIG
    return {f"{section}.{name}": Setting(_CLIENT_TYPES[type(default)], default, f"kafka-python {section} setting"
                                         ).named(f"{section}.{name}")
            for name, default in defaults.items()
            if type(default) in _CLIENT_TYPES and name not in DAEMON_CLIENT_SETTINGS}


# ---------------------------------------------------------------------------- the whole configuration
@dataclass(frozen=True)
class Config:
    """The whole daemon configuration.

    Usually made by :func:`load_config`; the sections are frozen dataclasses, read by attribute.
    The group labels and the classes come from the post-processor's section:

    >>> config = load_config(env={}, overrides=["postprocessor.kind=classification",
    ...                                         "postprocessor.classes=no,yes", "models.groups=f,m"])
    >>> config.n_groups, config.group_labels(), config.classes()
    (2, ['f', 'm'], ['no', 'yes'])
    >>> Config().classes() is None, Config().group_labels()  # regression, groups "0" .. "K-1"
    (True, ['0', '1'])
    """

    kafka: KafkaConfig = field(default_factory=KafkaConfig)
    topics: TopicsConfig = field(default_factory=TopicsConfig)
    processing: ProcessingConfig = field(default_factory=ProcessingConfig)
    postprocessor: PostProcessorConfig = field(default_factory=PostProcessorConfig)
    models: ModelsConfig = field(default_factory=ModelsConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    log: LogConfig = field(default_factory=LogConfig)
    consumer: ClientConfig = field(default_factory=lambda: ClientConfig("consumer"))
    producer: ClientConfig = field(default_factory=lambda: ClientConfig("producer"))
    ignored_variables: tuple[str, ...] = ()  # STREAMFAIR_* environment variables that are not settings

    @property
    def n_groups(self) -> int:
        """Number of groups (columns of tau)."""
        return self.postprocessor.build().n_groups

    def classes(self) -> list | None:
        """Classification: the class labels in the order of ``proba``'s columns; regression: ``None``."""
        if self.postprocessor.kind != "classification":
            return None
        return self.postprocessor.build().labels.tolist()  # the classes

    def group_labels(self) -> list[str]:
        """Group labels in tau's column order, as strings (default ``"0" .. "K-1"``).

        The tau model's class labels and a feedback message's ``s`` are matched by ``str()``.
        """
        return list(self.models.groups) if self.models.groups else [str(i) for i in range(self.n_groups)]


#: The sections declared as dataclasses of settings, by name.
DECLARED_SECTIONS: dict[str, type] = {
    "kafka": KafkaConfig,
    "topics": TopicsConfig,
    "processing": ProcessingConfig,
    "models": ModelsConfig,
    "metrics": MetricsConfig,
    "log": LogConfig,
}
SECTIONS = ("kafka", "topics", "processing", "postprocessor", "models", "metrics", "log", "consumer", "producer")
#: Every declared setting by key, in the order of the documentation table (the ``consumer`` and
#: ``producer`` pass-through settings are kafka-python's: :func:`client_settings`).
SCHEMA: dict[str, Setting] = {
    key: value for section in SECTIONS[:-2]
    for key, value in (section_settings(section, DECLARED_SECTIONS[section]) if section in DECLARED_SECTIONS
                       else {v.key: v for v in (*SWITCHES.values(), *PARAMETERS.values())}).items()
}


def _setting(key: str) -> Setting:
    """The declared setting of ``key``, or :class:`ConfigError` saying why there is none."""
    section, _, name = key.partition(".")
    if section in ("consumer", "producer"):
        if name in DAEMON_CLIENT_SETTINGS:
            ClientConfig(section, **{name: None})  # raises, saying why
        found = client_settings(section).get(key)
    else:
        found = SCHEMA.get(key)
    if found is None:
        raise ConfigError(f"{key}: unknown configuration key")
    return found


# ---------------------------------------------------------------------------- sources
def _from_toml(path: str | os.PathLike) -> dict[str, Any]:
    try:
        with open(path, "rb") as handle:
            data = tomllib.load(handle)
    except OSError as error:
        raise ConfigError(f"config file {str(path)!r}: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ConfigError(f"config file {str(path)!r}: invalid TOML: {error}") from None
    values = {}
    for section, table in data.items():
        if not isinstance(table, dict):
            raise ConfigError(f"{section}: expected a [{section}] table, got {table!r}")
        for name, value in table.items():
            values[_setting(f"{section}.{name}").key] = value
    return values


#: How close (difflib ratio) an unknown ``STREAMFAIR_*`` name must be to a setting's to count as its typo.
TYPO_SIMILARITY = 0.9


def _from_env(env: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
    """The settings in ``env``, and the other ``STREAMFAIR_*`` variables (ignored).

    Variables that are not settings are common (Kubernetes adds ``<SERVICE>_SERVICE_HOST``/``_PORT``
    for every Service, e.g. ``STREAMFAIR_METRICS_SERVICE_PORT`` for a Service named
    streamfair-metrics), so they are only reported; a near-miss of a setting's name is a typo and an
    error.
    """
    keys = [*SCHEMA, *client_settings("consumer"), *client_settings("producer")]
    names = {env_name(key): key for key in keys}
    values, ignored = {}, []
    for variable, value in env.items():
        if not variable.startswith(ENV_PREFIX) or variable == f"{ENV_PREFIX}CONFIG":
            continue
        if variable not in names:
            typo = difflib.get_close_matches(variable, names, n=1, cutoff=TYPO_SIMILARITY)
            if typo:
                raise ConfigError(f"{variable}: unknown configuration variable, did you mean {typo[0]}? "
                                  "(keys are STREAMFAIR_<SECTION>_<NAME>)")
            ignored.append(variable)
            continue
        values[names[variable]] = value
    return values, sorted(ignored)


def _from_overrides(overrides: Sequence[str]) -> dict[str, Any]:
    values = {}
    for item in overrides:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{item}: expected section.name=value")
        values[_setting(key.strip()).key] = value
    return values


def load_config(
    path: str | os.PathLike | None = None,
    env: Mapping[str, str] | None = None,
    overrides: Sequence[str] = (),
) -> Config:
    """Merge the sources (later wins), convert, validate.

    Parameters
    ----------
    path
        TOML file; ``None``: ``$STREAMFAIR_CONFIG`` if set, else none.
    env
        Environment (``None``: ``os.environ``); only ``STREAMFAIR_*`` variables are read.
    overrides
        ``"section.name=value"`` strings, e.g. from ``--set``.

    Examples
    --------
    A TOML file, overridden by the environment, overridden by ``overrides``:

    >>> import pathlib, tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = pathlib.Path(folder) / "streamfair.toml"
    ...     _ = path.write_text('''
    ... [kafka]
    ... group_id = "from-file"
    ... linger_ms = 20
    ... [topics]
    ... input = "orders"
    ... ''')
    ...     config = load_config(path, env={"STREAMFAIR_KAFKA_GROUP_ID": "from-env"},
    ...                          overrides=["kafka.linger_ms=0"])
    >>> config.kafka.group_id, config.kafka.linger_ms, config.topics.input
    ('from-env', 0, 'orders')

    ``STREAMFAIR_*`` variables that are not settings are kept aside, but a near miss is an error:

    >>> load_config(env={"STREAMFAIR_METRICS_SERVICE_PORT": "tcp://10.0.0.1:9464"}).ignored_variables
    ('STREAMFAIR_METRICS_SERVICE_PORT',)
    >>> try:
    ...     load_config(env={"STREAMFAIR_KAFKA_GROUPID": "scoring"})
    ... except ConfigError as error:
    ...     print(error)  # doctest: +ELLIPSIS
    STREAMFAIR_KAFKA_GROUPID: unknown configuration variable, did you mean STREAMFAIR_KAFKA_GROUP_ID? ...
    """
    env = os.environ if env is None else env
    path = path if path is not None else env.get(f"{ENV_PREFIX}CONFIG") or None
    merged: dict[str, Any] = {}
    if path is not None:
        merged.update(_from_toml(path))
    from_env, ignored = _from_env(env)
    merged.update(from_env)
    merged.update(_from_overrides(overrides))
    sections: dict[str, dict[str, Any]] = {name: {} for name in SECTIONS}
    for key, value in merged.items():
        declared = _setting(key)
        sections[declared.section][declared.name] = declared.parse(value)
    config = Config(**{name: cls(**sections[name]) for name, cls in DECLARED_SECTIONS.items()},
                    postprocessor=PostProcessorConfig(**sections["postprocessor"]),
                    consumer=ClientConfig("consumer", **sections["consumer"]),
                    producer=ClientConfig("producer", **sections["producer"]), ignored_variables=tuple(ignored))
    validate(config)
    return config


# ---------------------------------------------------------------------------- validation
def available_codecs() -> tuple[str, ...]:
    """The ``kafka.compression_type`` values kafka-python can use here (its codec packages are optional).

    >>> "gzip" in available_codecs()
    True
    """
    from kafka import codec

    found = {"snappy": codec.has_snappy(), "lz4": codec.has_lz4(), "zstd": codec.has_zstd()}
    return tuple(name for name in COMPRESSION_TYPES if found.get(name, True))


def _require(condition: bool, key: str, message: str, value: Any) -> None:
    if not condition:
        raise ConfigError(f"{key}: {message}, got {value!r}")


def validate(config: Config) -> None:
    """Check every setting against its declaration, then the settings that depend on each other and on
    the machine (files, codecs); raise :class:`ConfigError` naming the first bad key.

    :func:`load_config` calls it; a configuration changed afterwards is checked again here:

    >>> import dataclasses
    >>> config = load_config(env={})
    >>> validate(config)
    >>> slow = dataclasses.replace(config.kafka, heartbeat_interval_ms=20000)
    >>> try:
    ...     validate(dataclasses.replace(config, kafka=slow))
    ... except ConfigError as error:
    ...     print(error)
    kafka.heartbeat_interval_ms: must be below kafka.session_timeout_ms (10000), got 20000
    """
    for declared in SCHEMA.values():
        if declared.section in DECLARED_SECTIONS:
            declared.check(getattr(getattr(config, declared.section), declared.name))
    kafka = config.kafka
    _require(kafka.heartbeat_interval_ms < kafka.session_timeout_ms, "kafka.heartbeat_interval_ms",
             f"must be below kafka.session_timeout_ms ({kafka.session_timeout_ms})", kafka.heartbeat_interval_ms)
    _require(kafka.delivery_timeout_ms > kafka.linger_ms + kafka.request_timeout_ms, "kafka.delivery_timeout_ms",
             f"must exceed kafka.linger_ms + kafka.request_timeout_ms ({kafka.linger_ms + kafka.request_timeout_ms})",
             kafka.delivery_timeout_ms)
    if kafka.client == "confluent":
        _validate_confluent(config)
    else:  # librdkafka has every codec built in
        _require(kafka.compression_type in available_codecs(), "kafka.compression_type",
                 f"{kafka.compression_type} needs its package ({CODEC_PACKAGES.get(kafka.compression_type)}, "
                 "installed with streamfair[connectors])", kafka.compression_type)

    topics = config.topics
    names = {"input": topics.input, "output": topics.output, "dead_letter": topics.dead_letter,
             "changelog": topics.changelog}
    if topics.feedback:
        names["feedback"] = topics.feedback
    seen: dict[str, str] = {}
    for name, value in names.items():
        _require(value not in seen, f"topics.{name}", f"must differ from topics.{seen.get(value)}", value)
        seen[value] = name
    _require(kafka.partition_assignment_strategy == "range" or not config.topics.feedback,
             "kafka.partition_assignment_strategy", "must be range with topics.feedback (only range co-partitions "
             "the input and feedback topics)", kafka.partition_assignment_strategy)
    _validate_security(kafka)

    fair = config.postprocessor.build()
    if config.postprocessor.kind == "classification":
        classes = fair.labels.tolist()
        _require(len({group_label(label) for label in classes}) == len(classes), "postprocessor.classes",
                 "must be distinct as text: the daemon reads labels by their text, so 1 and \"1\" are one label",
                 classes)
    modes = type(fair).prediction_modes
    _require(config.processing.mode in modes, "processing.mode", f"must be one of {modes} for {type(fair).__name__}",
             config.processing.mode)

    models = config.models
    _require(bool(models.eta) == bool(models.tau), "models.tau" if models.eta else "models.eta",
             "models.eta and models.tau must be given together", models.tau if models.eta else models.eta)
    for name in ("eta", "tau"):
        path = getattr(models, name)
        _require(not path or Path(path).is_file(), f"models.{name}", "no such file", path)
    _require(not models.groups or len(models.groups) == fair.n_groups, "models.groups",
             f"must list the {fair.n_groups} group labels of tau's columns", models.groups)
    _require(len(set(models.groups)) == len(models.groups), "models.groups", "must be distinct labels", models.groups)
    history = config.metrics.history
    _require(not history or Path(history).parent.is_dir(), "metrics.history", "its directory does not exist",
             history)
    _require(not history or config.metrics.port > 0, "metrics.history",
             "needs metrics.port: the metrics endpoint's sampling writes it", history)
    _require(not models.learn or models.enabled, "models.learn", "needs models.eta and models.tau", models.learn)
    _require(not models.learn or bool(topics.feedback), "models.learn", "needs topics.feedback", models.learn)


def _validate_confluent(config: Config) -> None:
    """What ``kafka.client = "confluent"`` needs: its package, and no kafka-python pass-through settings."""
    try:
        import confluent_kafka  # noqa: F401 -- only its presence is checked here
    except ImportError:
        raise ConfigError("kafka.client: confluent needs the confluent-kafka package "
                          "(pip install 'streamfair[confluent]'), got 'confluent'") from None
    for section in (config.consumer, config.producer):
        for name, value in section.values.items():
            _require(False, f"{section.section}.{name}", "is a kafka-python setting; with kafka.client = confluent "
                     f"the {section.section} section must be empty (or set kafka.client = kafka-python)", value)


def _validate_security(kafka: KafkaConfig) -> None:
    protocol = kafka.security_protocol
    if protocol.startswith("SASL_"):
        _require(kafka.sasl_mechanism in SASL_MECHANISMS, "kafka.sasl_mechanism",
                 f"must be one of {SASL_MECHANISMS} with kafka.security_protocol {protocol}", kafka.sasl_mechanism)
        for name in ("sasl_username", "sasl_password"):
            _require(bool(getattr(kafka, name)), f"kafka.{name}", f"is needed with kafka.sasl_mechanism "
                     f"{kafka.sasl_mechanism}", "")
    else:
        for name in ("sasl_mechanism", "sasl_username", "sasl_password"):
            _require(not getattr(kafka, name), f"kafka.{name}", f"needs kafka.security_protocol SASL_PLAINTEXT or "
                     f"SASL_SSL (it is {protocol})", "<set>" if name == "sasl_password" else getattr(kafka, name))
    tls = protocol in ("SSL", "SASL_SSL")
    for name in ("ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password"):
        value = getattr(kafka, name)
        shown = "<set>" if name == "ssl_password" else value
        _require(not value or tls, f"kafka.{name}", f"needs kafka.security_protocol SSL or SASL_SSL (it is {protocol})",
                 shown)
        _require(not value or name == "ssl_password" or Path(value).is_file(), f"kafka.{name}", "no such file", value)
    _require(bool(kafka.ssl_certfile) == bool(kafka.ssl_keyfile), "kafka.ssl_keyfile" if kafka.ssl_certfile
             else "kafka.ssl_certfile", "kafka.ssl_certfile and kafka.ssl_keyfile must be given together",
             kafka.ssl_keyfile or kafka.ssl_certfile)


# ---------------------------------------------------------------------------- command line
def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """``--config``, ``--set`` and the shortcut flag of every setting that declares one.

    >>> import argparse
    >>> parser = argparse.ArgumentParser(prog="streamfair serve")
    >>> add_config_arguments(parser)
    >>> args = parser.parse_args(["--group-id", "scoring", "--set", "topics.input=orders"])
    >>> args.group_id, args.overrides, args.guarantee
    ('scoring', ['topics.input=orders'], None)
    """
    parser.add_argument("--config", help="TOML configuration file (default: $STREAMFAIR_CONFIG)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one setting (repeatable)")
    for declared in SCHEMA.values():
        if declared.flag:
            rule = declared.rule
            choices = rule.choices if isinstance(rule, OneOf) and not rule.ignore_case else None
            parser.add_argument(declared.flag, choices=choices,
                                help=f"{declared.key}: {declared.doc}".replace("%", "%%"))


def config_from_args(args: argparse.Namespace) -> Config:
    """The configuration from file, environment, ``--set`` and the shortcut flags (in that order).

    A shortcut flag wins over ``--set`` of the same key (and both over the environment):

    >>> import argparse
    >>> parser = argparse.ArgumentParser()
    >>> add_config_arguments(parser)
    >>> args = parser.parse_args(["--set", "kafka.group_id=from-set", "--group-id", "from-flag",
    ...                           "--set", "topics.input=orders", "--guarantee", "exactly_once"])
    >>> config = config_from_args(args)
    >>> config.kafka.group_id, config.topics.input, config.processing.guarantee
    ('from-flag', 'orders', 'exactly_once')
    """
    overrides = list(args.overrides)
    for declared in SCHEMA.values():
        value = getattr(args, declared.flag[2:].replace("-", "_"), None) if declared.flag else None
        if value is not None:
            overrides.append(f"{declared.key}={value}")
    return load_config(args.config, overrides=overrides)


# ---------------------------------------------------------------------------- documentation
def _shown(value: Any) -> str:
    if value == CONSTRUCTOR_DEFAULT:
        return value
    return f"`{json.dumps(value)}`"


def config_table() -> str:
    """The table of every key for docs/daemon.md (a test checks that the page has this one).

    >>> print(config_table().splitlines()[2])
    | `kafka.bootstrap_servers` | `["127.0.0.1:9092"]` | list of strings (host:port) | the brokers to connect to first |
    """
    rows = ["| key | default | allowed | meaning |", "|---|---|---|---|"]
    for key, declared in SCHEMA.items():
        doc = declared.doc
        name = declared.name
        if declared.section == "postprocessor" and name in PARAMETERS:
            variants = [variant for variant, names in VARIANT_PARAMETERS.items() if name in names]
            if len(variants) < len(VARIANTS):
                doc += f" ({', '.join(variants)})"
        rows.append(f"| `{key}` | {_shown(declared.default)} | {declared.allowed()} | {doc} |")
    rows.append("| `consumer.<name>`, `producer.<name>` | kafka-python's | its type | any other kafka-python "
                "`KafkaConsumer` / `KafkaProducer` setting with a number, string or boolean value (e.g. "
                "`consumer.client_rack`, `producer.max_request_size`), passed as given; those the daemon sets itself "
                "are refused |")
    return "\n".join(rows) + "\n"


def log_level(config: Config) -> int:
    """The configured level as a :mod:`logging` constant.

    >>> import logging
    >>> log_level(load_config(env={}, overrides=["log.level=debug"])) == logging.DEBUG
    True
    """
    return getattr(logging, config.log.level.upper())
