"""Wire formats of the daemon: input and feedback messages in, predictions and dead letters out.

Input (JSON object, UTF-8)::

    {"id": "order-1", "eta": 0.42, "tau": [0.7, 0.3]}           # base model scores
    {"id": 17, "features": {"age": 41, "income": 3.2}}            # raw features, scored by the base models
    {"id": "c-9", "proba": [0.2, 0.5, 0.3], "tau": [0.7, 0.3]}     # classification: class probabilities
    ... optional "distribution": true asks for the full distribution in the output

Feedback (JSON object): ``{"id": ..., "features": {...}, "y": 0.37, "s": 1}``.

Output (compact JSON, fixed key order, so replays are byte-identical)::

    {"id":"order-1","prediction":0.24,"eta":0.42,"state_version":1523,"partition":0,"offset":1530}
    {"id":"c-9","prediction":"b","state_version":80,"partition":1,"offset":95}     # classification

Messages parse into the records of :mod:`connectors.kafka.records`.  A message that cannot be used
raises :class:`Invalid` with one of :data:`REASONS`; the daemon then copies the original bytes to the
dead-letter topic with the headers of :func:`dead_letter_headers` (:func:`encode_dead_letter`).

Examples
--------
>>> parser = InputParser(n_groups=2, max_bytes=1024)
>>> parser.parse(b'{"id": "a", "eta": 0.5, "tau": [0.25, 0.75]}')
InputSample(source=None, id='a', prediction=0.5, tau=[0.25, 0.75], features=None, distribution=False)
>>> try:
...     parser.parse(b'{"id": "a", "eta": 0.5, "tau": [0.5, 0.6]}')
... except Invalid as error:
...     print(error.reason)
tau_not_distribution
>>> encode_output("a", 0.25, 0.5, 3, 0, 7)
b'{"id":"a","prediction":0.25,"eta":0.5,"state_version":3,"partition":0,"offset":7}'
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from connectors.kafka.records import DeadLetter, Feedback, InputSample
from streamfair.validation import SUM_TOLERANCE

#: Every dead-letter reason, in the order the checks run.
REASONS: tuple[str, ...] = (
    "unreadable_record",  # the Kafka client could not decode the record (a header key that is not UTF-8)
    "empty",  # null value (tombstone) or zero bytes
    "oversized",  # more than processing.max_message_bytes
    "not_utf8",  # bytes that are not UTF-8
    "invalid_json",  # not parseable as JSON
    "not_object",  # JSON, but not an object
    "missing_id",  # no "id"
    "bad_id",  # id not a non-empty string (<= 256 chars) or an integer
    "bad_flag",  # "distribution" present but not true/false
    "ambiguous_input",  # both "eta"/"tau" and "features"
    "missing_prediction",  # neither "eta"+"tau" nor "features"
    "bad_eta",  # eta not a number
    "bad_tau",  # tau not a list of numbers
    "non_finite",  # NaN or +-Infinity in eta, proba, tau, features or y
    "tau_length",  # tau has the wrong number of entries
    "tau_not_distribution",  # tau has entries outside [0, 1] or does not sum to 1
    "bad_proba",  # classification: proba not a list of numbers
    "proba_length",  # classification: proba does not have one entry per class
    "proba_not_distribution",  # classification: proba has entries outside [0, 1] or does not sum to 1
    "bad_features",  # features not an object of numbers / strings
    "unknown_feature",  # a feature name outside models.features
    "no_models",  # features given, but no base models configured
    "model_error",  # a base model raised or returned something unusable
    "missing_label",  # feedback without "y" or "s"
    "bad_label",  # feedback "y" not a number (classification: not one of the classes)
    "bad_group",  # feedback "s" not one of the configured group labels
    "processing_error",  # anything else raised while handling the message (its type in a header)
)

#: The reason of a record the Kafka client could not decode (:class:`~connectors.kafka.transport.UnreadableRecord`).
UNREADABLE_RECORD = "unreadable_record"
MAX_ID_LENGTH = 256
#: ``|sum(tau) - 1|`` allowed here: half the post-processor's own tolerance, so that no tau accepted
#: here can be refused by it because of a different summation order.
TAU_TOLERANCE = SUM_TOLERANCE / 2
HEADER_PREFIX = "streamfair."


class Invalid(Exception):
    """A message that cannot be processed: ``reason`` is one of :data:`REASONS`."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def group_label(value: Any) -> str:
    """The string a group label is compared by: ``str(value)``, with ``False``/``True`` as ``"0"``/``"1"``.

    >>> group_label(True), group_label(1), group_label("b")
    ('1', '1', 'b')
    """
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def _is_number(value: Any) -> bool:
    return (type(value) is float or type(value) is int) or (
        isinstance(value, (int, float)) and not isinstance(value, bool)
    )


#: The scanner behind ``json.loads``: ``(object, end)`` for the JSON value starting at an index.
_scan_json = json.decoder.JSONDecoder().scan_once  # type: ignore[attr-defined]  # set by __init__, not in the stubs


def _decode(value: bytes | None, max_bytes: int) -> dict:
    if not value:
        raise Invalid("empty", "null or empty value")
    if len(value) > max_bytes:
        raise Invalid("oversized", f"{len(value)} bytes > {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as error:
        raise Invalid("not_utf8", str(error)) from None
    try:  # the common case, a compact object, straight through the scanner json.loads uses (same result)
        obj, end = _scan_json(text, 0)
        if end == len(text) and type(obj) is dict:
            return obj
    except Exception:  # noqa: BLE001 -- anything else is decided, with json.loads's own message, below
        pass
    try:
        obj = json.loads(text)
    except ValueError as error:  # JSONDecodeError, or a recursion/number error
        raise Invalid("invalid_json", str(error)) from None
    except RecursionError:
        raise Invalid("invalid_json", "nested too deeply") from None
    if type(obj) is not dict:
        raise Invalid("not_object", f"JSON {type(obj).__name__}, expected an object")
    return obj


def _decode_input(value: bytes | None, max_bytes: int) -> dict:
    """:func:`_decode` of an input message, through orjson in the common case (a fifth of the time).

    orjson accepts and rejects the same texts as ``json.loads`` and parses the same floats, but
    makes a float of an integer beyond 64 bits.  Its object is used where that cannot change the
    outcome of :meth:`InputParser.parse`, which makes floats of the scores: score messages whose
    ``id`` and ``distribution`` are not floats.  Everything else goes to :func:`_decode`.
    """
    if value and len(value) <= max_bytes:
        try:
            obj = orjson.loads(value)
        except orjson.JSONDecodeError:
            pass
        else:
            if (type(obj) is dict and type(obj.get("id")) is not float and type(obj.get("distribution")) is not float
                    and "features" not in obj):
                return obj
    return _decode(value, max_bytes)


def _check_id(obj: dict) -> int | str:
    if "id" not in obj:
        raise Invalid("missing_id", "no 'id' field")
    ident = obj["id"]
    if type(ident) is str:
        if 0 < len(ident) <= MAX_ID_LENGTH and (ident.isascii() or _encodes(ident)):
            return ident
    elif type(ident) is int:
        return ident
    raise Invalid("bad_id", f"id must be a non-empty Unicode string of <= {MAX_ID_LENGTH} characters or an integer, "
                            f"got {_short(ident)}")


def _encodes(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (JSON's ``\\ud800`` escapes give lone surrogates, which do not)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _finite_float(value: int | float, what: str) -> float:
    """``float(value)``, or :class:`Invalid` ``"non_finite"`` for NaN, infinities and huge integers."""
    try:
        number = float(value)
    except OverflowError:
        raise Invalid("non_finite", f"{what} is too large") from None
    if not math.isfinite(number):
        raise Invalid("non_finite", f"{what} is {number!r}")
    return number


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _check_features(features: Any, allowed: frozenset | None) -> dict:
    if type(features) is not dict or not features:
        raise Invalid("bad_features", f"features must be a non-empty object, got {_short(features)}")
    for name, value in features.items():
        if type(value) is str:
            continue
        if not _is_number(value):
            raise Invalid("bad_features", f"feature {name!r} must be a number or a string, got {_short(value)}")
        _finite_float(value, f"feature {name!r}")
    if allowed is not None:
        unknown = features.keys() - allowed
        if unknown:
            raise Invalid("unknown_feature", f"unknown feature names {sorted(unknown)[:5]}")
    return features


class InputParser:
    """Validate input messages.

    Parameters
    ----------
    n_groups
        Expected length of ``tau``.
    max_bytes
        Larger messages are dead letters (``"oversized"``).
    features
        Allowed feature names (``None``: any).
    models
        Whether base models are configured (otherwise ``features`` messages are dead letters).
    n_classes
        Classification: messages carry ``"proba"``, the base model's ``n_classes`` class
        probabilities, instead of ``"eta"`` (``None``: regression).

    >>> parser = InputParser(2, 1024, n_classes=3)
    >>> parser.parse(b'{"id": 1, "proba": [0.2, 0.5, 0.3], "tau": [1, 0]}').prediction
    [0.2, 0.5, 0.3]
    >>> try:
    ...     parser.parse(b'{"id": 1, "proba": [0.2, 0.5], "tau": [1, 0]}')
    ... except Invalid as error:
    ...     print(error.reason)
    proba_length
    """

    def __init__(self, n_groups: int, max_bytes: int, features: Sequence[str] | None = None, models: bool = False,
                 n_classes: int | None = None):
        self.n_groups = int(n_groups)
        self.max_bytes = int(max_bytes)
        self.features = frozenset(features) if features else None
        self.models = bool(models)
        self.n_classes = None if n_classes is None else int(n_classes)
        self._score = "eta" if n_classes is None else "proba"

    def parse(self, value: bytes | None, source: Any = None) -> InputSample:
        """The sample of message ``value`` (read from the consumer record ``source``).

        It carries scores (``eta`` or ``proba``, and ``tau``), or features (then the scores are ``None``).
        """
        obj = _decode_input(value, self.max_bytes)
        ident = _check_id(obj)
        flag = obj.get("distribution", False)
        if flag is not True and flag is not False:
            raise Invalid("bad_flag", f"distribution must be true or false, got {_short(flag)}")
        score = self._score
        has_scores = score in obj or "tau" in obj
        if "features" in obj:
            if has_scores:
                raise Invalid("ambiguous_input", f"give either {score} and tau, or features, not both")
            if not self.models:
                raise Invalid("no_models", "features given but no base models are configured (models.eta, models.tau)")
            return InputSample(source, ident, None, None, _check_features(obj["features"], self.features), flag)
        if score not in obj or "tau" not in obj:
            raise Invalid("missing_prediction", f"needs {score} and tau, or features")
        prediction = self._eta(obj["eta"]) if self.n_classes is None else self.check_proba(obj["proba"])
        return InputSample(source, ident, prediction, self.check_tau(obj["tau"]), None, flag)

    @staticmethod
    def _eta(eta: Any) -> float:
        if type(eta) is float and math.isfinite(eta):  # the common case
            return eta
        if not _is_number(eta):
            raise Invalid("bad_eta", f"eta must be a number, got {_short(eta)}")
        return _finite_float(eta, "eta")

    def check_tau(self, tau: Any) -> list[float]:
        """``tau`` as a list of floats: a probability vector of length ``n_groups``."""
        return _check_distribution("tau", tau, self.n_groups, "groups")

    def check_proba(self, proba: Any) -> list[float]:
        """``proba`` as a list of floats: a probability vector of length ``n_classes``."""
        if self.n_classes is None:
            raise ValueError("check_proba needs a classification parser, got n_classes=None")
        return _check_distribution("proba", proba, self.n_classes, "classes")


def _check_distribution(name: str, vector: Any, length: int, what: str) -> list[float]:
    """``vector`` (``tau`` or ``proba``) as floats; :class:`Invalid` ``bad_<name>``, ``<name>_length``, ..."""
    if type(vector) is list and len(vector) == length:  # the common case: floats only, the list itself
        for t in vector:
            if type(t) is not float or not 0.0 <= t <= 1.0:  # False for NaN
                break
        else:
            if abs(math.fsum(vector) - 1.0) <= TAU_TOLERANCE:
                return vector
    if type(vector) is not list:
        raise Invalid(f"bad_{name}", f"{name} must be a list of numbers, got {_short(vector)}")
    values = []
    for t in vector:  # one pass: JSON numbers are exactly int or float (bool is neither here)
        if type(t) is float:
            if not math.isfinite(t):
                raise Invalid("non_finite", f"{name} is {vector!r}")
            values.append(t)
        elif type(t) is int:
            values.append(_finite_float(t, f"a {name} entry"))
        else:
            raise Invalid(f"bad_{name}", f"{name} must be a list of numbers, got {_short(vector)}")
    if len(values) != length:
        raise Invalid(f"{name}_length", f"{name} has {len(values)} entries, expected {length} (one per {what[:-1]})")
    if min(values) < 0.0 or max(values) > 1.0 or abs(math.fsum(values) - 1.0) > TAU_TOLERANCE:
        raise Invalid(f"{name}_not_distribution", f"{name} must be probabilities summing to 1, got {values!r}")
    return values


class FeedbackParser:
    """Validate feedback messages ``{"id", "features", "y", "s"}``.

    Labels for the base models need all four; with ``labels_only`` (labels for the group-robust
    post-processor only) ``{"id", "y"}`` is enough, and ``features`` and ``s`` are checked when present
    and otherwise returned as ``None``.  With ``classes`` (classification) ``y`` must be one of the
    class labels (compared by :func:`group_label`) and is returned as that label.

    >>> FeedbackParser(["0", "1"], 1024, labels_only=True).parse(b'{"id": 3, "y": 0.5}')
    Feedback(source=None, id=3, features=None, y=0.5, s=None)
    >>> parser = FeedbackParser(["0", "1"], 1024, classes=["no", "yes"])
    >>> feedback = parser.parse(b'{"id": 3, "features": {"a": 1}, "y": "yes", "s": 0}')
    >>> feedback.features, feedback.y, feedback.s
    ({'a': 1}, 'yes', 0)
    """

    def __init__(self, groups: Sequence[str], max_bytes: int, features: Sequence[str] | None = None,
                 labels_only: bool = False, classes: Sequence[Any] | None = None):
        self.groups = {group_label(g) for g in groups}
        self.max_bytes = int(max_bytes)
        self.features = frozenset(features) if features else None
        self.labels_only = bool(labels_only)
        self.classes = None if classes is None else {group_label(c): c for c in classes}

    def _label(self, y: Any) -> Any:
        if self.classes is not None:
            if type(y) not in (int, float, str, bool) or group_label(y) not in self.classes:
                raise Invalid("bad_label", f"y must be one of the classes {sorted(self.classes)}, got {_short(y)}")
            return self.classes[group_label(y)]
        if not _is_number(y):
            raise Invalid("bad_label", f"y must be a number, got {_short(y)}")
        return _finite_float(y, "y")

    def parse(self, value: bytes | None, source: Any = None) -> Feedback:
        """The feedback of message ``value`` (read from the consumer record ``source``)."""
        obj = _decode(value, self.max_bytes)
        ident = _check_id(obj)
        if "features" not in obj and not self.labels_only:
            raise Invalid("bad_features", "feedback needs features")
        features = _check_features(obj["features"], self.features) if "features" in obj else None
        if "y" not in obj or ("s" not in obj and not self.labels_only):
            raise Invalid("missing_label", "feedback needs y" + ("" if self.labels_only else " and s"))
        y = self._label(obj["y"])
        if "s" not in obj:
            return Feedback(source, ident, features, y, None)
        s = obj["s"]
        if type(s) not in (int, str, bool) or group_label(s) not in self.groups:
            raise Invalid("bad_group", f"s must be one of {sorted(self.groups)}, got {_short(s)}")
        return Feedback(source, ident, features, y, s)


# ---------------------------------------------------------------------------- output
def message_key(ident: int | str) -> bytes:
    """The output record key: the id as UTF-8 (integers in decimal)."""
    return ident.encode("utf-8") if type(ident) is str else str(ident).encode("ascii")


def same_key_ids(ident: int | str) -> tuple[int | str, ...]:
    """The ids whose output key (:func:`message_key`) is that of ``ident``: ``ident`` first, then its twin.

    An integer's key is its decimal form, so ``12`` and ``"12"`` have one key; a string that is not
    the decimal form of an integer (``"012"``, ``"+12"``, ``" 12"``, ``"1_2"``) has no twin.  A feedback
    label goes to the sample of the first of them that the post-processor holds.

    >>> same_key_ids(12), same_key_ids("-3"), same_key_ids("012"), same_key_ids("a")
    ((12, '12'), ('-3', -3), ('012',), ('a',))
    """
    if type(ident) is int:
        return ident, str(ident)
    try:
        number = int(ident)
    except ValueError:
        return (ident,)
    return (ident, number) if str(number) == ident else (ident,)


#: ``json.dumps`` of a ``str`` (with its defaults, ``ensure_ascii=True``) without the encoder's dispatch.
_json_string = json.encoder.encode_basestring_ascii


def encode_output(
    ident: int | str,
    prediction: Any,
    eta: float | None,
    state_version: int,
    partition: int,
    offset: int,
    atoms: Iterable[Any] | None = None,
    proba: Iterable[float] | None = None,
    prediction_text: str | None = None,
) -> bytes:
    """One prediction as compact JSON; ``atoms``/``proba`` add the full distribution.

    ``eta=None`` is classification: ``prediction`` and ``atoms`` are class labels (JSON strings,
    numbers or booleans), there is no ``"eta"``, and the distribution lists ``"classes"``.
    ``prediction_text``: the JSON text of a regression ``prediction``, if the caller has it
    (``repr(float(prediction))``; a partition task renders its grid once).  ``state_version``,
    ``partition`` and ``offset`` are integers, written as they are.

    >>> encode_output(5, "yes", None, 2, 1, 9, ["no", "yes"], [0.25, 0.75])
    b'{"id":5,"prediction":"yes","state_version":2,"partition":1,"offset":9,"distribution":{"classes":["no","yes"],"proba":[0.25,0.75]}}'
    """
    # what json.dumps gives, without its encoder's dispatch for the ids a message can have (0.8 µs of an int's 0.83)
    ident_text = _json_string(ident) if type(ident) is str else str(ident) if type(ident) is int else json.dumps(ident)
    if eta is None:
        fields = f'{{"id":{ident_text},"prediction":{json.dumps(prediction)}'
    else:
        fields = f'{{"id":{ident_text},"prediction":{prediction_text or repr(float(prediction))},"eta":{float(eta)!r}'
    position = f'"state_version":{state_version},"partition":{partition},"offset":{offset}'
    if proba is None:
        return f"{fields},{position}}}".encode()
    if atoms is None:
        raise ValueError("atoms must be given with proba, got atoms=None")
    if eta is None:
        atoms_text = f'"classes":[{",".join(json.dumps(a) for a in atoms)}]'
    else:
        atoms_text = f'"atoms":[{",".join(repr(float(a)) for a in atoms)}]'
    proba_text = ",".join(repr(float(q)) for q in proba)
    return f'{fields},{position},"distribution":{{{atoms_text},"proba":[{proba_text}]}}}}'.encode()


def header_values(headers: Iterable[tuple[str, bytes | None]]) -> list[tuple[str, bytes]]:
    """``headers`` as the producers take them: a header without a value (Kafka allows it) gets the empty value.

    kafka-python refuses a header whose value is not ``bytes``, so a record copying the input's
    headers would be refused, and with it the message's dead letter.

    >>> header_values([("traceparent", None), ("b3", b"1")])
    [('traceparent', b''), ('b3', b'1')]
    """
    return [(name, b"" if value is None else value) for name, value in headers]


def dead_letter_headers(
    reason: str, detail: str, topic: str, partition: int, offset: int, original: Sequence[tuple[str, bytes]] = (),
    error_type: str | None = None,
) -> list[tuple[str, bytes]]:
    """The original headers followed by ``streamfair.reason/detail/source.topic/partition/offset``.

    ``error_type`` (the exception's class name, for ``processing_error``) adds ``streamfair.error_type``.

    >>> dead_letter_headers("processing_error", "boom", "in", 0, 5, error_type="KeyError")[-1]
    ('streamfair.error_type', b'KeyError')
    """
    headers = [
        *original,
        (HEADER_PREFIX + "reason", reason.encode()),
        (HEADER_PREFIX + "detail", detail[:500].encode("utf-8", "replace")),
        (HEADER_PREFIX + "source.topic", topic.encode("utf-8")),
        (HEADER_PREFIX + "source.partition", str(partition).encode()),
        (HEADER_PREFIX + "source.offset", str(offset).encode()),
    ]
    if error_type is not None:
        headers.append((HEADER_PREFIX + "error_type", error_type.encode("utf-8", "replace")))
    return headers


def encode_dead_letter(dead: DeadLetter) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes]]]:
    """``(key, value, headers)`` of the dead-letter record of ``dead``: the source's bytes, why, and where from.

    A record needs a key or a value: a source with neither gets the empty key.  The source's own
    ``streamfair.*`` headers (a dead letter sent back to the input) are left out: the record's
    reason and position are this failure's, not a reader's guess between two.

    >>> from collections import namedtuple
    >>> Record = namedtuple("Record", "topic partition offset timestamp key value headers")
    >>> key, value, headers = encode_dead_letter(DeadLetter(Record("in", 1, 5, 0, None, None, []), "empty", "null"))
    >>> key, value, headers[0]
    (b'', None, ('streamfair.reason', b'empty'))
    """
    source = dead.source
    headers = dead_letter_headers(dead.reason, dead.detail, source.topic, source.partition, source.offset,
                                  header_values(header for header in source.headers or []
                                                if not header[0].startswith(HEADER_PREFIX)), dead.error_type)
    key = source.key if source.key is not None or source.value is not None else b""
    return key, source.value, headers
