"""Daemon configuration: defaults < TOML file < ``STREAMFAIR_*`` environment < command-line flags.

Every setting has a dotted key ``section.name``.  The TOML file uses tables (``[kafka]`` then
``group_id = "..."``); the environment variable is ``STREAMFAIR_<SECTION>_<NAME>`` in upper case
(``STREAMFAIR_KAFKA_GROUP_ID``); the command line has ``--set section.name=value`` and a few
shortcuts.  Lists in the environment and in ``--set`` are comma-separated; an empty string means
"not set" for optional settings.  Anything invalid raises :class:`ConfigError` naming the key.

Examples
--------
>>> config = load_config(env={"STREAMFAIR_KAFKA_GROUP_ID": "scoring"},
...                      overrides=["postprocessor.eps=0.01", "topics.input=orders"])
>>> config.kafka.group_id, config.topics.input, config.postprocessor.eps
('scoring', 'orders', 0.01)
>>> load_config(overrides=["kafka.session_timeout_ms=abc"])
Traceback (most recent call last):
...
connectors.kafka.config.ConfigError: kafka.session_timeout_ms: expected an integer, got 'abc'
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import json
import logging
import math
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor

ENV_PREFIX = "STREAMFAIR_"
GUARANTEES = ("at_least_once", "exactly_once")
OFFSET_RESETS = ("earliest", "latest")
COMPRESSION_TYPES = ("none", "gzip", "snappy", "lz4", "zstd")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
ASSIGNORS = ("range", "cooperative-sticky")
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
    "request_timeout_ms", "reconnect_backoff_max_ms", "bootstrap_timeout_ms", "consumer_timeout_ms", "key_serializer", "value_serializer",
    "enable_idempotence", "acks", "transactional_id", "linger_ms", "max_block_ms", "delivery_timeout_ms",
    "compression_type", "retries", "security_protocol", "sasl_mechanism", "sasl_plain_username",
    "sasl_plain_password", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password", "ssl_check_hostname",
})
#: The package kafka-python needs for each optional codec (the ``connectors`` extra installs them).
CODEC_PACKAGES = {"snappy": "python-snappy", "lz4": "lz4", "zstd": "zstandard"}
OUT_OF_RANGE_POLICIES = ("earliest", "latest", "fail")
MODES = FairRegressionPostProcessor.prediction_modes
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]{1,249}$")
_SERVER = re.compile(r"^[^\s:]+:\d{1,5}$")


class ConfigError(ValueError):
    """An invalid setting; the message starts with the dotted key."""


@dataclass(frozen=True)
class KafkaConfig:
    """Connection and client settings (see docs/daemon.md for why each value)."""

    bootstrap_servers: list[str] = field(default_factory=lambda: ["127.0.0.1:9092"])
    group_id: str = "streamfair"
    client_id: str = "streamfair"
    session_timeout_ms: int = 10000
    heartbeat_interval_ms: int = 3000
    max_poll_interval_ms: int = 60000
    max_poll_records: int = 500
    poll_timeout_ms: int = 100
    fetch_max_wait_ms: int = 50
    request_timeout_ms: int = 30000
    bootstrap_timeout_ms: int = 5000  # how long a client waits for its first broker before the daemon retries
    linger_ms: int = 5
    max_block_ms: int = 5000
    delivery_timeout_ms: int = 60000
    compression_type: str = "none"
    auto_offset_reset: str = "earliest"  # where a partition without checkpoint or committed offset starts
    group_instance_id: str = ""  # static membership ("": dynamic)
    partition_assignment_strategy: str = "range"  # or "cooperative-sticky" (without a feedback topic)
    security_protocol: str = "PLAINTEXT"  # SSL, SASL_PLAINTEXT, SASL_SSL
    sasl_mechanism: str = ""  # PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl_username: str = ""
    sasl_password: str = ""
    ssl_cafile: str = ""  # CA bundle that signed the brokers' certificates ("": the system's)
    ssl_certfile: str = ""  # client certificate (mutual TLS), with ssl_keyfile
    ssl_keyfile: str = ""
    ssl_password: str = ""  # of the key file
    ssl_check_hostname: bool = True


@dataclass(frozen=True)
class TopicsConfig:
    """Topic names; ``feedback`` empty means no feedback topic."""

    input: str = "streamfair.input"
    output: str = "streamfair.output"
    dead_letter: str = "streamfair.dead-letter"
    changelog: str = "streamfair.changelog"
    feedback: str = ""
    create: bool = True
    partitions: int = 3
    replication_factor: int = 1


@dataclass(frozen=True)
class ProcessingConfig:
    """How messages become predictions, and how often state is checkpointed."""

    guarantee: str = "at_least_once"
    batch_size: int = 1
    mode: str = "sample"
    distribution: bool = False
    max_message_bytes: int = 65536
    checkpoint_every_messages: int = 1000
    checkpoint_every_seconds: float = 5.0
    transactional_id: str = ""
    out_of_range: str = "earliest"  # a restored position outside the partition's log: earliest, latest, fail
    output_key: str = "id"  # the output record's key: the message id, or "input": the input record's key
    propagate_headers: list[str] = field(default_factory=lambda: list(TRACE_HEADERS))  # copied to outputs


#: ``postprocessor.kind`` values and the post-processor each builds (``robust`` switches regression to DRO).
KINDS = ("regression", "classification")
#: Keys of the section that choose the class rather than being constructor arguments.
_SWITCHES = {"kind": ("str", "regression"), "robust": ("bool", False)}


def _signature(cls: type) -> dict[str, tuple[str, Any]]:
    """``{name: (type, default)}`` of the named parameters of ``cls`` (``n_groups`` defaults to 2 here)."""
    fields = {}
    for name, parameter in inspect.signature(cls).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            continue
        kind = str(parameter.annotation).replace("Sequence[float]", "list[float]")
        fields[name] = (kind, 2 if name == "n_groups" else parameter.default)
    return fields


def _postprocessor_class(kind: str, robust: bool) -> type:
    if kind == "classification":
        return FairClassificationPostProcessor
    return GroupRobustFairRegressionPostProcessor if robust else FairRegressionPostProcessor


def _class_fields(cls: type) -> dict[str, tuple[str, Any]]:
    """The constructor parameters of ``cls``; the robust class adds its own to the regression ones."""
    if cls is GroupRobustFairRegressionPostProcessor:
        return {**_signature(FairRegressionPostProcessor), **_signature(cls)}
    return _signature(cls)


def _postprocessor_fields() -> dict[str, tuple[str, Any]]:
    """``{name: (type, default)}``: the switches, then every parameter of the post-processors it can build.

    Read from the constructors' signatures so the section follows the library.  A parameter shared by
    several classes is listed once, with the regression default (:meth:`PostProcessorConfig.kwargs`
    uses the chosen class's own defaults).
    """
    fields = dict(_SWITCHES)
    for cls in (GroupRobustFairRegressionPostProcessor, FairClassificationPostProcessor):
        for name, value in _class_fields(cls).items():
            fields.setdefault(name, value)
    return fields


class PostProcessorConfig:
    """Which post-processor each partition gets, and its constructor arguments.

    ``kind`` (``"regression"`` or ``"classification"``) and ``robust`` (regression only) choose
    :class:`streamfair.FairRegressionPostProcessor`,
    :class:`streamfair.dro.GroupRobustFairRegressionPostProcessor` or
    :class:`streamfair.FairClassificationPostProcessor`; the other keys are that constructor's
    parameters with its defaults, except ``n_groups = 2``.  Setting a parameter the chosen class does
    not have is an error.

    >>> PostProcessorConfig(robust=True, temperature=0.05).build().temperature
    0.05
    >>> PostProcessorConfig(kind="classification", classes=["a", "b", "c"], profile="paper").build().eps.tolist()
    [0.005, 0.005]
    """

    def __init__(self, **values: Any):
        fields = _postprocessor_fields()
        unknown = values.keys() - fields.keys()
        if unknown:
            raise ConfigError(f"postprocessor.{sorted(unknown)[0]}: unknown configuration key")
        self._given = dict(values)

    @property
    def postprocessor_class(self) -> type:
        """The class :meth:`build` instantiates."""
        return _postprocessor_class(self.kind, self.robust)

    def __getattr__(self, name: str) -> Any:
        given = self.__dict__["_given"]
        if name in given:
            return given[name]
        if name in _SWITCHES:
            return _SWITCHES[name][1]
        fields = _class_fields(self.postprocessor_class)
        if name in fields:
            return fields[name][1]
        try:
            return _postprocessor_fields()[name][1]
        except KeyError:
            raise AttributeError(name) from None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PostProcessorConfig) and self._given == other._given

    def __repr__(self) -> str:
        return f"PostProcessorConfig({', '.join(f'{k}={v!r}' for k, v in self._given.items())})"

    def kwargs(self) -> dict[str, Any]:
        """Constructor arguments; ``n_groups`` is dropped when ``p`` or a per-group ``eps``/``ks`` gives it."""
        _require(self.kind in KINDS, "postprocessor.kind", f"must be one of {KINDS}", self.kind)
        _require(not (self.robust and self.kind == "classification"), "postprocessor.robust",
                 "the robust post-processor is for regression only", self.robust)
        fields = _class_fields(self.postprocessor_class)
        for name in self._given:
            _require(name in fields or name in _SWITCHES, f"postprocessor.{name}",
                     f"is not a parameter of {self.postprocessor_class.__name__}", self._given[name])
        values = {name: self._given.get(name, default) for name, (_, default) in fields.items()}
        if values.get("p") is not None or any(isinstance(values.get(name), list) for name in ("eps", "ks")):
            values["n_groups"] = None
        return values

    def build(self) -> FairRegressionPostProcessor | FairClassificationPostProcessor:
        """A fresh post-processor."""
        return self.postprocessor_class(**self.kwargs())


@dataclass(frozen=True)
class ModelsConfig:
    """Base models for messages that carry raw features (pickled River models)."""

    eta: str = ""
    tau: str = ""
    features: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    learn: bool = False

    @property
    def enabled(self) -> bool:
        return bool(self.eta)


@dataclass(frozen=True)
class MetricsConfig:
    """The metrics endpoint (``connectors.prometheus.metrics``); ``port = 0`` disables it."""

    port: int = 0
    host: str = "0.0.0.0"
    interval_seconds: float = 5.0  # how often the post-processors are sampled
    audit_window: int = 1000  # labelled feedback samples behind the audited fairness
    history: str = ""  # file the samples are appended to, for `streamfair report` ("": none)


class ClientConfig:
    """Any other kafka-python setting of the consumers (section ``consumer``) or the producer (``producer``).

    The keys are the client's own (its ``DEFAULT_CONFIG`` names with a number, string or boolean
    value), except those the daemon sets itself (:data:`DAEMON_CLIENT_SETTINGS`).

    >>> ClientConfig("producer", max_request_size=2_000_000).values
    {'max_request_size': 2000000}
    """

    def __init__(self, section: str = "consumer", **values: Any):
        self.section = section
        fields = _client_fields(section)
        for name, value in values.items():
            if name not in fields:
                raise ConfigError(f"{section}.{name}: " + (
                    "set by the daemon (see its kafka.* and processing.* settings)" if name in DAEMON_CLIENT_SETTINGS
                    else f"not a kafka-python {section} setting with a number, string or boolean value"))
        self.values = dict(values)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClientConfig) and (self.section, self.values) == (other.section, other.values)

    def __repr__(self) -> str:
        return f"ClientConfig({self.section!r}, {', '.join(f'{k}={v!r}' for k, v in self.values.items())})"


def _client_fields(section: str) -> dict[str, str]:
    """``{name: type}`` of the kafka-python ``section`` (consumer/producer) settings passed through."""
    from kafka import KafkaConsumer, KafkaProducer

    defaults = (KafkaConsumer if section == "consumer" else KafkaProducer).DEFAULT_CONFIG
    kinds = {bool: "bool", int: "int", float: "float", str: "str", type(None): "any"}
    return {name: kinds[type(default)] for name, default in defaults.items()
            if type(default) in kinds and name not in DAEMON_CLIENT_SETTINGS}


@dataclass(frozen=True)
class LogConfig:
    level: str = "INFO"
    progress_seconds: float = 30.0  # a "progress" line at INFO this often (0: never)


@dataclass(frozen=True)
class Config:
    """The whole daemon configuration."""

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
        return self.postprocessor.build().classes.tolist()

    def group_labels(self) -> list[str]:
        """Group labels in tau's column order, as strings (default ``"0" .. "K-1"``).

        The tau model's class labels and a feedback message's ``s`` are matched by ``str()``.
        """
        return list(self.models.groups) if self.models.groups else [str(i) for i in range(self.n_groups)]


SECTIONS: dict[str, type] = {
    "kafka": KafkaConfig,
    "topics": TopicsConfig,
    "processing": ProcessingConfig,
    "postprocessor": PostProcessorConfig,
    "models": ModelsConfig,
    "metrics": MetricsConfig,
    "log": LogConfig,
    "consumer": ClientConfig,
    "producer": ClientConfig,
}


# ---------------------------------------------------------------------------- typed parsing
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _convert(key: str, kind: str, value: Any) -> Any:
    """Coerce ``value`` (a TOML value, or a string from env/CLI) to the annotated ``kind``."""
    optional = kind.endswith(" | None")
    base = kind[: -len(" | None")] if optional else kind
    if isinstance(value, str) and optional and value.strip().lower() in ("", "none"):
        return None
    if value is None and optional:
        return None
    if base == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    if base == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in ("1", "true", "yes", "on", "0", "false", "no", "off"):
            return value.strip().lower() in ("1", "true", "yes", "on")
        raise ConfigError(f"{key}: expected true or false, got {value!r}")
    if base == "int":
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if base == "float":
        return _float(key, value)
    if base == "list[str]":
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
            return [str(v) for v in value]
        raise ConfigError(f"{key}: expected a list of strings, got {value!r}")
    if base == "list[float]":
        return _floats(key, value)
    if base == "float | list[float]":
        if isinstance(value, list) or (isinstance(value, str) and "," in value):
            return _floats(key, value)
        return _float(key, value)
    if base == "Sequence[Any]":  # class labels: a list, or comma-separated text (JSON accepted)
        if isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                parsed = None
            value = parsed if isinstance(parsed, list) else [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return value
    if isinstance(value, str):  # a type this module does not know (a new core parameter): JSON, else text
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _float(key: str, value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if not _is_number(value):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    return float(value)


def _floats(key: str, value: Any) -> list[float]:
    if isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list of numbers, got {value!r}")
    return [_float(key, v) for v in value]


def _fields(section: str) -> dict[str, str]:
    if section == "postprocessor":
        return {name: kind for name, (kind, _) in _postprocessor_fields().items()}
    if section in ("consumer", "producer"):
        return _client_fields(section)
    return {f.name: str(f.type) for f in dataclasses.fields(SECTIONS[section])}


def _split_key(key: str) -> tuple[str, str]:
    section, _, name = key.partition(".")
    if section in ("consumer", "producer") and name in DAEMON_CLIENT_SETTINGS:
        ClientConfig(section, **{name: None})  # raises, saying why
    if section not in SECTIONS or name not in _fields(section):
        raise ConfigError(f"{key}: unknown configuration key")
    return section, name


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
            values[".".join(_split_key(f"{section}.{name}"))] = value
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
    names = {f"{ENV_PREFIX}{s}_{n}".upper(): f"{s}.{n}" for s in SECTIONS for n in _fields(s)}
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
        _split_key(key.strip())
        values[key.strip()] = value
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
        section, name = _split_key(key)
        sections[section][name] = _convert(key, _fields(section)[name], value)
    built = {name: SECTIONS[name](**values) for name, values in sections.items() if SECTIONS[name] is not ClientConfig}
    config = Config(**built, consumer=ClientConfig("consumer", **sections["consumer"]),
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
    """Check every setting; raise :class:`ConfigError` naming the first bad key."""
    kafka = config.kafka
    _require(len(kafka.bootstrap_servers) > 0, "kafka.bootstrap_servers", "needs at least one host:port",
             kafka.bootstrap_servers)
    for server in kafka.bootstrap_servers:
        _require(bool(_SERVER.match(server)), "kafka.bootstrap_servers", "entries must be host:port", server)
    for name in ("group_id", "client_id"):
        _require(bool(getattr(kafka, name).strip()), f"kafka.{name}", "must not be empty", getattr(kafka, name))
    for name in ("session_timeout_ms", "heartbeat_interval_ms", "max_poll_interval_ms", "max_poll_records",
                 "poll_timeout_ms", "fetch_max_wait_ms", "request_timeout_ms", "max_block_ms", "delivery_timeout_ms",
                 "bootstrap_timeout_ms"):
        _require(getattr(kafka, name) >= 1, f"kafka.{name}", "must be >= 1", getattr(kafka, name))
    _require(kafka.linger_ms >= 0, "kafka.linger_ms", "must be >= 0", kafka.linger_ms)
    _require(kafka.heartbeat_interval_ms < kafka.session_timeout_ms, "kafka.heartbeat_interval_ms",
             f"must be below kafka.session_timeout_ms ({kafka.session_timeout_ms})", kafka.heartbeat_interval_ms)
    _require(kafka.delivery_timeout_ms > kafka.linger_ms + kafka.request_timeout_ms, "kafka.delivery_timeout_ms",
             f"must exceed kafka.linger_ms + kafka.request_timeout_ms ({kafka.linger_ms + kafka.request_timeout_ms})",
             kafka.delivery_timeout_ms)
    _require(kafka.compression_type in COMPRESSION_TYPES, "kafka.compression_type",
             f"must be one of {', '.join(COMPRESSION_TYPES)}", kafka.compression_type)
    _require(kafka.compression_type in available_codecs(), "kafka.compression_type",
             f"{kafka.compression_type} needs its package ({CODEC_PACKAGES.get(kafka.compression_type)}, "
             "installed with streamfair[connectors])", kafka.compression_type)

    topics = config.topics
    names = {"input": topics.input, "output": topics.output, "dead_letter": topics.dead_letter,
             "changelog": topics.changelog}
    if topics.feedback:
        names["feedback"] = topics.feedback
    for name, value in names.items():
        _require(bool(_TOPIC.match(value)), f"topics.{name}", "must be 1-249 characters of [A-Za-z0-9._-]", value)
    seen: dict[str, str] = {}
    for name, value in names.items():
        _require(value not in seen, f"topics.{name}", f"must differ from topics.{seen.get(value)}", value)
        seen[value] = name
    _require(topics.partitions >= 1, "topics.partitions", "must be >= 1", topics.partitions)
    _require(topics.replication_factor >= 1, "topics.replication_factor", "must be >= 1", topics.replication_factor)

    _require(kafka.auto_offset_reset in OFFSET_RESETS, "kafka.auto_offset_reset", f"must be one of {OFFSET_RESETS}",
             kafka.auto_offset_reset)
    _require(kafka.partition_assignment_strategy in ASSIGNORS, "kafka.partition_assignment_strategy",
             f"must be one of {ASSIGNORS}", kafka.partition_assignment_strategy)
    _require(kafka.partition_assignment_strategy == "range" or not config.topics.feedback,
             "kafka.partition_assignment_strategy", "must be range with topics.feedback (only range co-partitions "
             "the input and feedback topics)", kafka.partition_assignment_strategy)
    _validate_security(kafka)

    processing = config.processing
    _require(processing.output_key in OUTPUT_KEYS, "processing.output_key", f"must be one of {OUTPUT_KEYS}",
             processing.output_key)
    _require(processing.out_of_range in OUT_OF_RANGE_POLICIES, "processing.out_of_range",
             f"must be one of {OUT_OF_RANGE_POLICIES}", processing.out_of_range)
    _require(processing.guarantee in GUARANTEES, "processing.guarantee", f"must be one of {GUARANTEES}",
             processing.guarantee)
    _require(processing.mode in MODES, "processing.mode", f"must be one of {MODES}", processing.mode)
    _require(processing.batch_size >= 1, "processing.batch_size", "must be >= 1", processing.batch_size)
    _require(processing.max_message_bytes >= 16, "processing.max_message_bytes", "must be >= 16",
             processing.max_message_bytes)
    _require(processing.checkpoint_every_messages >= 1, "processing.checkpoint_every_messages", "must be >= 1",
             processing.checkpoint_every_messages)
    seconds = processing.checkpoint_every_seconds
    _require(math.isfinite(seconds) and seconds > 0, "processing.checkpoint_every_seconds",
             "must be a finite number > 0", seconds)

    try:
        fair = config.postprocessor.build()
    except ConfigError:
        raise
    except ValueError as error:
        message = str(error)
        argument = message.split(" ", 1)[0]
        key = f"postprocessor.{argument}" if argument in _fields("postprocessor") else "postprocessor"
        raise ConfigError(f"{key}: {message}") from None
    modes = type(fair).prediction_modes
    _require(processing.mode in modes, "processing.mode", f"must be one of {modes} for {type(fair).__name__}",
             processing.mode)

    models = config.models
    _require(bool(models.eta) == bool(models.tau), "models.tau" if models.eta else "models.eta",
             "models.eta and models.tau must be given together", models.tau if models.eta else models.eta)
    for name in ("eta", "tau"):
        path = getattr(models, name)
        _require(not path or Path(path).is_file(), f"models.{name}", "no such file", path)
    _require(not models.groups or len(models.groups) == fair.n_groups, "models.groups",
             f"must list the {fair.n_groups} group labels of tau's columns", models.groups)
    _require(not models.learn or models.enabled, "models.learn", "needs models.eta and models.tau", models.learn)
    _require(not models.learn or bool(topics.feedback), "models.learn", "needs topics.feedback", models.learn)

    metrics = config.metrics
    _require(0 <= metrics.port <= 65535, "metrics.port", "must be in 0..65535 (0: off)", metrics.port)
    _require(bool(metrics.host.strip()), "metrics.host", "must not be empty", metrics.host)
    _require(math.isfinite(metrics.interval_seconds) and metrics.interval_seconds > 0, "metrics.interval_seconds",
             "must be a finite number > 0", metrics.interval_seconds)
    _require(metrics.audit_window >= 1, "metrics.audit_window", "must be >= 1", metrics.audit_window)
    _require(config.log.level.upper() in LOG_LEVELS, "log.level", f"must be one of {LOG_LEVELS}", config.log.level)
    progress = config.log.progress_seconds
    _require(math.isfinite(progress) and progress >= 0, "log.progress_seconds", "must be a finite number >= 0 (0: off)",
             progress)


def _validate_security(kafka: KafkaConfig) -> None:
    protocol = kafka.security_protocol
    _require(protocol in SECURITY_PROTOCOLS, "kafka.security_protocol", f"must be one of {SECURITY_PROTOCOLS}",
             protocol)
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


def log_level(config: Config) -> int:
    """The configured level as a :mod:`logging` constant."""
    return getattr(logging, config.log.level.upper())
