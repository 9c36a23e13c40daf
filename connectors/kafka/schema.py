"""How a configuration key is declared: its type, default, allowed values and one-line documentation.

A :class:`Setting` is declared once; the TOML file, the ``STREAMFAIR_*`` environment variables
and the command-line flags all go through its :meth:`~Setting.parse` and :meth:`~Setting.check`,
its environment variable is :attr:`Setting.env`, and the documentation table is made from
:attr:`Setting.doc` and :meth:`Setting.allowed` (see :func:`connectors.kafka.config.config_table`).
The declarations themselves are the fields of the sections in :mod:`connectors.kafka.config`.

Examples
--------
>>> timeout = Setting(INTEGER, 10000, "session timeout", Range(1)).named("kafka.session_timeout_ms")
>>> timeout.env, timeout.parse(" 3000 ")
('STREAMFAIR_KAFKA_SESSION_TIMEOUT_MS', 3000)
>>> timeout.check(0)
Traceback (most recent call last):
...
connectors.kafka.schema.ConfigError: kafka.session_timeout_ms: must be >= 1, got 0
>>> timeout.allowed()
'integer >= 1'
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

ENV_PREFIX = "STREAMFAIR_"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


class ConfigError(ValueError):
    """An invalid setting; the message starts with the dotted key.

    A ``ValueError``, so callers that only know the standard exceptions still catch it:

    >>> try:
    ...     INTEGER.parse("kafka.linger_ms", "soon")
    ... except ValueError as error:
    ...     print(type(error).__name__, error)
    ConfigError kafka.linger_ms: expected an integer, got 'soon'
    """


# ---------------------------------------------------------------------------- value types
@dataclass(frozen=True)
class ValueType:
    """How a value is read: from TOML (typed) or from the environment and ``--set`` (text).

    ``parse(key, value)`` returns the typed value or raises :class:`ConfigError` naming ``key``.

    >>> BOOLEAN.parse("topics.create", " Yes "), NUMBERS.parse("postprocessor.p", "0.3, 0.7")
    (True, [0.3, 0.7])
    >>> LABELS.parse("postprocessor.classes", '["no", "yes"]'), STRINGS.name
    (['no', 'yes'], 'list of strings')
    """

    name: str  # in the documentation table
    parse: Callable[[str, Any], Any]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _string(key: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected a string, got {value!r}")
    return value


def _boolean(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
        return value.strip().lower() in _TRUE
    raise ConfigError(f"{key}: expected true or false, got {value!r}")


def _integer(key: str, value: Any) -> int:
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected an integer, got {value!r}") from None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ConfigError(f"{key}: expected an integer, got {value!r}")


def _number(key: str, value: Any) -> float:
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise ConfigError(f"{key}: expected a number, got {value!r}") from None
    if not _is_number(value):
        raise ConfigError(f"{key}: expected a number, got {value!r}")
    return float(value)


def _text_list(value: str) -> list:
    """Text (an environment variable, ``--set``) as a list: a JSON list, else its comma-separated parts.

    >>> _text_list('["f", "m"]'), _text_list("f, m"), _text_list("[0.4, 0.6]")
    (['f', 'm'], ['f', 'm'], [0.4, 0.6])
    """
    try:
        parsed = json.loads(value)
    except ValueError:
        parsed = None
    return parsed if isinstance(parsed, list) else [part.strip() for part in value.split(",") if part.strip()]


def _strings(key: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = _text_list(value)
    if isinstance(value, list) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return [str(v) for v in value]
    raise ConfigError(f"{key}: expected a list of strings, got {value!r}")


def _numbers(key: str, value: Any) -> list[float]:
    if isinstance(value, str):
        value = _text_list(value)
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list of numbers, got {value!r}")
    return [_number(key, v) for v in value]


def _number_or_numbers(key: str, value: Any) -> float | list[float]:
    if isinstance(value, list) or (isinstance(value, str) and ("," in value or value.lstrip().startswith("["))):
        return _numbers(key, value)
    return _number(key, value)


def _labels(key: str, value: Any) -> list:
    """Class labels: a list, or text that is a JSON list or comma-separated labels."""
    if isinstance(value, str):
        value = _text_list(value)
    if not isinstance(value, list):
        raise ConfigError(f"{key}: expected a list, got {value!r}")
    return value


def _json(key: str, value: Any) -> Any:
    """Any value; text is read as JSON when it is JSON (a matrix, a number), else kept as text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


STRING = ValueType("string", _string)
BOOLEAN = ValueType("true/false", _boolean)
INTEGER = ValueType("integer", _integer)
NUMBER = ValueType("number", _number)
STRINGS = ValueType("list of strings", _strings)
NUMBERS = ValueType("list of numbers", _numbers)
NUMBER_OR_NUMBERS = ValueType("number or list of numbers", _number_or_numbers)
LABELS = ValueType("list of labels", _labels)
JSON = ValueType("TOML or JSON value", _json)


# ---------------------------------------------------------------------------- allowed values
class Rule:
    """The values a setting allows beyond its type.

    A rule says what is wrong with a value (:meth:`problem`) and describes what it allows
    (:meth:`describe`); :meth:`Setting.check` turns the problem into a :class:`ConfigError`.

    >>> class Even(Rule):
    ...     def problem(self, value):
    ...         return None if value % 2 == 0 else ("must be even", value)
    ...     def describe(self, type_name):
    ...         return f"even {type_name}"
    >>> Even().problem(4), Even().problem(3), Even().describe("integer")
    (None, ('must be even', 3), 'even integer')
    """

    def problem(self, value: Any) -> tuple[str, Any] | None:
        """``None`` if ``value`` is allowed, else ``(message, value shown)``."""
        raise NotImplementedError

    def describe(self, type_name: str) -> str:
        """The allowed values of a setting of type ``type_name``, for the documentation table."""
        raise NotImplementedError


@dataclass(frozen=True)
class Range(Rule):
    """``low <= value`` (``low < value`` if ``strict``), ``value <= high`` if given, finite for numbers.

    >>> port = Range(0, 65535, note="0: off")
    >>> port.problem(8080), port.problem(70000), port.describe("integer")
    (None, ('must be in 0..65535 (0: off)', 70000), 'integer in 0..65535 (0: off)')
    >>> Range(0, strict=True, finite=True).problem(float("inf"))
    ('must be a finite number > 0', inf)
    """

    low: float
    high: float | None = None
    strict: bool = False
    finite: bool = False  # a number (float) setting: NaN and infinities are refused
    note: str = ""  # e.g. "0: off"

    def problem(self, value: Any) -> tuple[str, Any] | None:
        above = value > self.low if self.strict else value >= self.low
        if (not self.finite or math.isfinite(value)) and above and (self.high is None or value <= self.high):
            return None
        return "must be " + ("a finite number " if self.finite else "") + self._bounds(), value

    def _bounds(self) -> str:
        if self.high is not None:
            text = f"in {self.low:g}..{self.high:g}"
        else:
            text = f"{'>' if self.strict else '>='} {self.low:g}"
        return text + (f" ({self.note})" if self.note else "")

    def describe(self, type_name: str) -> str:
        return f"{type_name} {self._bounds()}"


@dataclass(frozen=True)
class OneOf(Rule):
    """One of ``choices`` (``""`` too if ``empty`` is allowed; upper/lower case alike if ``ignore_case``).

    >>> level = OneOf(("DEBUG", "INFO"), ignore_case=True)
    >>> level.problem("info"), level.problem("trace")
    (None, ("must be one of ('DEBUG', 'INFO')", 'trace'))
    >>> OneOf(("PLAIN", "SCRAM-SHA-256"), empty=True).describe("string")
    'one of `PLAIN`, `SCRAM-SHA-256` or empty'
    """

    choices: tuple[str, ...]
    empty: bool = False
    ignore_case: bool = False

    def problem(self, value: Any) -> tuple[str, Any] | None:
        given = value.upper() if self.ignore_case else value
        if given in self.choices or (self.empty and value == ""):
            return None
        return f"must be one of {self.choices}", value

    def describe(self, type_name: str) -> str:
        return "one of " + ", ".join(f"`{choice}`" for choice in self.choices) + (" or empty" if self.empty else "")


@dataclass(frozen=True)
class Pattern(Rule):
    """Text matching ``regex`` (``""`` too if ``empty``); for a list, every entry, and at least one.

    For a list, the problem shows the first entry that does not match:

    >>> servers = Pattern(r"^[a-z0-9.-]+:[0-9]+$", "host:port", "entries must be host:port")
    >>> servers.problem(["a:9092", "b:9092"]), servers.problem(["a:9092", "b"]), servers.problem([])
    (None, ('entries must be host:port', 'b'), ('needs at least one host:port', []))
    >>> servers.describe("list of strings")
    'list of strings (host:port)'
    """

    regex: str
    what: str  # e.g. "host:port"
    message: str  # why a value does not match
    empty: bool = False

    def problem(self, value: Any) -> tuple[str, Any] | None:
        if isinstance(value, list):
            if not value:
                return f"needs at least one {self.what}", value
            for entry in value:
                if not re.match(self.regex, entry):
                    return self.message, entry
            return None
        if (self.empty and value == "") or re.match(self.regex, value):
            return None
        return self.message, value

    def describe(self, type_name: str) -> str:
        return f"{type_name} ({self.what}{' or empty' if self.empty else ''})"


@dataclass(frozen=True)
class NotEmpty(Rule):
    """Text with something other than spaces.

    >>> NotEmpty().problem("scoring"), NotEmpty().problem("  ")
    (None, ('must not be empty', '  '))
    """

    def problem(self, value: Any) -> tuple[str, Any] | None:
        return None if value.strip() else ("must not be empty", value)

    def describe(self, type_name: str) -> str:
        return f"non-empty {type_name}"


# ---------------------------------------------------------------------------- the setting
#: The default of a post-processor parameter that is left to the chosen constructor.
CONSTRUCTOR_DEFAULT = "the class's own"


@dataclass(frozen=True)
class Setting:
    """One configuration key, declared once.

    Parameters
    ----------
    type
        How values are read (:data:`STRING`, :data:`INTEGER`, ...).
    default
        The value when no source sets it (:data:`CONSTRUCTOR_DEFAULT` for a post-processor
        parameter left to the constructor).
    doc
        One line for the documentation table.
    rule
        The allowed values beyond the type (``None``: any).
    optional
        ``None`` is a value: an empty string or ``none`` in the environment or ``--set`` means it.
    flag
        The command-line shortcut (``"--group-id"``), if any.
    key
        ``section.name``; set by :meth:`named` where the setting is declared.

    Examples
    --------
    An optional setting reads an empty string or ``none`` as ``None``, which every rule allows:

    >>> rack = Setting(STRING, None, "rack of this instance", NotEmpty(), optional=True).named("kafka.rack")
    >>> rack.section, rack.name, rack.env
    ('kafka', 'rack', 'STREAMFAIR_KAFKA_RACK')
    >>> rack.parse("none"), rack.parse("eu-1a"), rack.allowed()
    (None, 'eu-1a', 'non-empty string, or none')
    >>> rack.check(" ")
    Traceback (most recent call last):
    ...
    connectors.kafka.schema.ConfigError: kafka.rack: must not be empty, got ' '
    """

    type: ValueType
    default: Any
    doc: str
    rule: Rule | None = None
    optional: bool = False
    flag: str | None = None
    key: str = ""

    def named(self, key: str) -> Setting:
        """The same setting under its key."""
        return dataclasses.replace(self, key=key)

    @property
    def section(self) -> str:
        return self.key.partition(".")[0]

    @property
    def name(self) -> str:
        return self.key.partition(".")[2]

    @property
    def env(self) -> str:
        """The environment variable: ``STREAMFAIR_<SECTION>_<NAME>``."""
        return env_name(self.key)

    def parse(self, value: Any) -> Any:
        """The typed value of a TOML value, or of text from the environment or ``--set``."""
        if self.optional and (value is None or (isinstance(value, str) and value.strip().lower() in ("", "none"))):
            return None
        return self.type.parse(self.key, value)

    def check(self, value: Any) -> None:
        """Raise :class:`ConfigError` naming the key if ``value`` is not allowed."""
        if self.rule is None or value is None:
            return
        problem = self.rule.problem(value)
        if problem is not None:
            message, shown = problem
            raise ConfigError(f"{self.key}: {message}, got {shown!r}")

    def allowed(self) -> str:
        """Type and allowed values, for the documentation table."""
        text = self.type.name if self.rule is None else self.rule.describe(self.type.name)
        return text + (", or none" if self.optional else "")


def env_name(key: str) -> str:
    """``section.name`` -> ``STREAMFAIR_SECTION_NAME``.

    >>> env_name("consumer.client_rack")
    'STREAMFAIR_CONSUMER_CLIENT_RACK'
    """
    return f"{ENV_PREFIX}{key.replace('.', '_')}".upper()


def setting(type: ValueType, default: Any, doc: str, rule: Rule | None = None, *, optional: bool = False,
            flag: str | None = None) -> Any:
    """A dataclass field declaring a :class:`Setting` (its key is the section and the field's name).

    A list default is copied for every instance (a ``default_factory``):

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Cache:
    ...     size: int = setting(INTEGER, 100, "entries kept", Range(1))
    ...     tags: list[str] = setting(STRINGS, ["a"], "labels")
    >>> Cache(), Cache().tags is Cache().tags
    (Cache(size=100, tags=['a']), False)
    """
    declared = Setting(type, default, doc, rule, optional, flag)
    if isinstance(default, list):
        return dataclasses.field(default_factory=lambda: list(default), metadata={"setting": declared})
    return dataclasses.field(default=default, metadata={"setting": declared})


def section_settings(section: str, cls: type) -> dict[str, Setting]:
    """``{key: Setting}`` of the fields of the dataclass ``cls`` declared with :func:`setting`.

    >>> from dataclasses import dataclass
    >>> @dataclass(frozen=True)
    ... class Cache:
    ...     size: int = setting(INTEGER, 100, "entries kept", Range(1))
    >>> declared = section_settings("cache", Cache)
    >>> list(declared), declared["cache.size"].env, declared["cache.size"].allowed()
    (['cache.size'], 'STREAMFAIR_CACHE_SIZE', 'integer >= 1')
    """
    return {f"{section}.{f.name}": f.metadata["setting"].named(f"{section}.{f.name}")
            for f in dataclasses.fields(cls) if "setting" in f.metadata}
