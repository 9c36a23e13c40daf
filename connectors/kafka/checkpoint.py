"""Checkpoints of one partition's task: post-processor state, input position, pending micro-batch.

A checkpoint is one record of the compacted changelog topic, keyed ``"<input topic>:<partition>"``
(or, when larger than a record should be, parts under a manifest: :mod:`connectors.kafka.changelog`).
Its value is UTF-8 JSON (format ``streamfair.checkpoint/1``): the post-processor's
:meth:`~streamfair.DualPostProcessor.state_dict` with every numpy array stored as base64 of its
little-endian float64/int64 bytes, so the encoding is exact (floats round-trip through ``repr``)
and deterministic, and decoding never unpickles anything.  Only the optional online-learning base
models (River objects, whose persistence format is pickle) are stored as a base64 pickle.

Examples
--------
>>> from streamfair import FairRegressionPostProcessor
>>> fair = FairRegressionPostProcessor(L=5, n_groups=2)
>>> fair.learn_one(0.3, [0.4, 0.6])
>>> point = Checkpoint("in", 2, offset=10, feedback_offset=None, state=fair.state_dict())
>>> again = Checkpoint.from_bytes(point.to_bytes())
>>> again.offset, again.key
(10, b'in:2')
>>> restored = FairRegressionPostProcessor.from_state_dict(again.state)
>>> bool((restored.proba_one(0.1, [0.5, 0.5]) == fair.proba_one(0.1, [0.5, 0.5])).all())
True
"""

from __future__ import annotations

import base64
import json
import reprlib
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from streamfair import DualPostProcessor, FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from streamfair.validation import check_integer, is_real

FORMAT = "streamfair.checkpoint/1"
_ARRAY = "__ndarray__"


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        dtype = "<f8" if value.dtype.kind == "f" else "<i8"
        data = np.ascontiguousarray(value, dtype=dtype).tobytes()
        return {_ARRAY: dtype, "shape": list(value.shape), "data": base64.b64encode(data).decode("ascii")}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encode(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if _ARRAY in value:
            data = base64.b64decode(value["data"])
            return np.frombuffer(data, dtype=value[_ARRAY]).reshape(value["shape"]).copy()
        return {k: _decode(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_decode(v) for v in value]
    return value


_REQUIRED = object()
#: The JSON values a checkpoint's fields may hold, by their Python type, as error messages name them.
_KINDS = {str: "a string", list: "a list", dict: "an object", type(None): "null"}


def _field(payload: dict, name: str, *kinds: type, default: Any = _REQUIRED) -> Any:
    """The field ``name`` of a checkpoint's JSON object ``payload``.

    Parameters
    ----------
    payload
        The checkpoint's JSON object.
    name
        The field.
    *kinds
        The Python types of the JSON values it may hold (keys of ``_KINDS``); none: any value.
    default
        Its value when absent (a field older versions did not write); not given: the field is required.

    Returns
    -------
    Any
        Its value.

    Raises
    ------
    ValueError
        Naming the field, if it is required and absent, or of another kind (then with its value).
    """
    if name not in payload:
        if default is _REQUIRED:
            raise ValueError(f"checkpoint has no field {name!r}")
        return default
    value = payload[name]
    if kinds and type(value) not in kinds:
        raise ValueError(f"{name} must be {' or '.join(_KINDS[kind] for kind in kinds)}, got {reprlib.repr(value)}")
    return value


def _offset(payload: dict, name: str) -> int | None:
    """The offset field ``name`` of ``payload``: null (``None``) or an integer >= 0, else ``ValueError`` naming it."""
    value = _field(payload, name)
    return None if value is None else check_integer(name, value, 0)


def _is_row(value: Any) -> bool:
    """Whether ``value`` is a list of finite numbers."""
    return type(value) is list and all(map(is_real, value))


def _pending(payload: dict) -> tuple[list, list, list]:
    """The pending samples of ``payload``: its fields ``pending_eta``, ``pending_tau`` and ``pending_keys``.

    Parameters
    ----------
    payload
        A checkpoint's JSON object.

    Returns
    -------
    tuple of list
        The scores (finite numbers, or rows of them for classification), one tau row (finite numbers) per score,
        and one id per score, or none (a post-processor that learns under no ids, or an older checkpoint).

    Raises
    ------
    ValueError
        Naming the first field that is not so, and its value.
    """
    eta, tau = _field(payload, "pending_eta", list), _field(payload, "pending_tau", list)
    keys = _field(payload, "pending_keys", list, default=[])
    if not all(is_real(x) or _is_row(x) for x in eta):
        raise ValueError(f"pending_eta must hold finite numbers or rows of them, got {reprlib.repr(eta)}")
    if not all(map(_is_row, tau)):
        raise ValueError(f"pending_tau must hold rows of finite numbers, got {reprlib.repr(tau)}")
    if len(tau) != len(eta):
        raise ValueError(f"pending_tau must have one row per pending sample ({len(eta)}), got {len(tau)}")
    if keys and len(keys) != len(eta):
        raise ValueError(f"pending_keys must have one id per pending sample ({len(eta)}) or none, got {len(keys)}")
    return eta, tau, keys


def _pending_labels(payload: dict, keys: list) -> list[tuple[Any, float]]:
    """The field ``pending_labels`` of ``payload`` (none when absent): ``[id, y]`` pairs, each id one of ``keys``."""
    labels = _field(payload, "pending_labels", list, default=[])
    if not all(type(pair) is list and len(pair) == 2 and pair[0] in keys and is_real(pair[1]) for pair in labels):
        raise ValueError(f"pending_labels must hold [id, y] pairs of pending ids and finite numbers, "
                         f"got {reprlib.repr(labels)}")
    return [(ident, y) for ident, y in labels]


#: The post-processors a checkpoint can hold, by the ``"class"`` entry of their ``state_dict``.
POSTPROCESSORS = {cls.__name__: cls for cls in (
    FairRegressionPostProcessor, GroupRobustFairRegressionPostProcessor, FairClassificationPostProcessor)}


def restore_postprocessor(state: dict):
    """The post-processor of class ``state["class"]`` that continues exactly from ``state``.

    >>> from streamfair.dro import GroupRobustFairRegressionPostProcessor
    >>> robust = GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=1)
    >>> robust.learn_one(0.3, [0.4, 0.6], key="a")
    >>> again = restore_postprocessor(Checkpoint.from_bytes(Checkpoint("in", 0, 1, None, robust.state_dict())
    ...                                                      .to_bytes()).state)
    >>> type(again).__name__, again.learn_label("a", 0.2), bool((again.dro_diagnostics().weights ==
    ...                                                           robust.dro_diagnostics().weights).all())
    ('GroupRobustFairRegressionPostProcessor', True, True)
    """
    name = state.get("class")
    if name not in POSTPROCESSORS:
        raise ValueError(f"state class must be one of {sorted(POSTPROCESSORS)}, got {name!r}")
    return POSTPROCESSORS[name].from_state_dict(state)


def changed_settings(restored: DualPostProcessor, configured: DualPostProcessor) -> dict[str, list]:
    """The settings in which ``configured`` differs from ``restored``: ``{name: [restored's, configured's]}``.

    The settings are the class (``"class"``; when it differs, nothing else is compared) and the
    constructor arguments (:meth:`~streamfair.DualPostProcessor.get_params`, JSON values, as a
    checkpoint stores them; a profile has arguments of its own, ``None`` where the other has none).
    Empty when the checkpoint's post-processor is the configured one.

    >>> from streamfair import FairRegressionPostProcessor
    >>> restored = FairRegressionPostProcessor(L=10, n_groups=2, ks=0.05, memory=160)
    >>> changed_settings(restored, FairRegressionPostProcessor(L=10, n_groups=2, ks=0.02, memory=160))
    {'ks': [[0.05, 0.05], [0.02, 0.02]]}
    >>> changed_settings(restored, FairRegressionPostProcessor(L=10, n_groups=2, ks=0.05, memory=160))
    {}
    """
    old, new = ({"class": type(fair).__name__, **fair.get_params()} for fair in (restored, configured))
    names = ["class"] if old["class"] != new["class"] else list(dict.fromkeys([*old, *new]))  # profiles differ
    return {name: [old.get(name), new.get(name)] for name in names if old.get(name) != new.get(name)}


def checkpoint_key(topic: str, partition: int) -> bytes:
    """Changelog key of a task: ``b"<topic>:<partition>"``.

    >>> checkpoint_key("orders", 3)
    b'orders:3'
    """
    return f"{topic}:{partition}".encode()


@dataclass
class Checkpoint:
    """What one task needs to continue exactly.

    Attributes
    ----------
    topic, partition
        The input partition this task owns.
    offset
        Next input offset to process (everything before it is reflected in ``state``).
    feedback_offset
        Next feedback offset (feedback before it has been learned by ``models``), or ``None``.
    state
        The post-processor's ``state_dict()``.
    pending_eta, pending_tau
        Samples already predicted but not yet learned (micro-batch of ``processing.batch_size``);
        for classification ``pending_eta`` holds class-probability rows.
    pending_keys
        Their message ids (the robust post-processor learns each sample under its id, for delayed labels).
    pending_labels
        Feedback labels ``(id, y)`` of pending samples, waiting for their mini-batch to be learned.
    models
        Pickled base models (only when they learn online), else ``None``.
    models_origin
        The :attr:`~connectors.kafka.models.BaseModels.origin` of ``models``: the digest of the model
        files they descend from (``None``: unknown, as in older checkpoints).
    topic_id
        The input topic's id (a UUID string) when ``offset`` was read: a topic deleted and created again
        gets a new id, so an offset of the old one is recognised.  ``None`` when unknown (older
        checkpoints, brokers without topic ids).
    groups
        The group labels of tau's columns, in order, under which ``state`` was learned: the columns
        of its per-group arrays follow them.  ``None`` when unknown (older checkpoints).

    Examples
    --------
    A fresh post-processor with one sample predicted but not learned yet:

    >>> from streamfair import FairRegressionPostProcessor
    >>> state = FairRegressionPostProcessor(L=5, n_groups=2).state_dict()
    >>> point = Checkpoint("orders", 0, offset=42, feedback_offset=None, state=state,
    ...                    pending_eta=[0.3], pending_tau=[[0.5, 0.5]], pending_keys=["a"])
    >>> point.key, point.n_samples
    (b'orders:0', 0)
    >>> again = Checkpoint.from_bytes(point.to_bytes())
    >>> again.offset, again.pending_eta, again.pending_keys, again.to_bytes() == point.to_bytes()
    (42, [0.3], ['a'], True)
    >>> Checkpoint.from_bytes(b'{"format": "other/2"}')
    Traceback (most recent call last):
    ...
    ValueError: checkpoint format must be 'streamfair.checkpoint/1', got 'other/2'
    """

    topic: str
    partition: int
    offset: int | None
    feedback_offset: int | None
    state: dict
    pending_eta: list[float | list[float]] = field(default_factory=list)
    pending_tau: list[list[float]] = field(default_factory=list)
    pending_keys: list = field(default_factory=list)
    pending_labels: list[tuple[Any, float]] = field(default_factory=list)
    models: bytes | None = None
    topic_id: str | None = None
    models_origin: str | None = None
    groups: list[str] | None = None

    @property
    def key(self) -> bytes:
        return checkpoint_key(self.topic, self.partition)

    @property
    def n_samples(self) -> int:
        """Samples the post-processor had learned from."""
        return int(self.state["n_samples"])

    def to_bytes(self) -> bytes:
        """Deterministic UTF-8 JSON."""
        payload = {
            "format": FORMAT,
            "topic": self.topic,
            "partition": self.partition,
            "offset": self.offset,
            "feedback_offset": self.feedback_offset,
            "state": _encode(self.state),
            "pending_eta": _encode(list(self.pending_eta)),
            "pending_tau": [[float(x) for x in row] for row in self.pending_tau],
            "pending_keys": list(self.pending_keys),
            "models": None if self.models is None else base64.b64encode(self.models).decode("ascii"),
        }
        if self.pending_labels:
            payload["pending_labels"] = [[ident, float(y)] for ident, y in self.pending_labels]
        if self.topic_id is not None:
            payload["topic_id"] = self.topic_id
        if self.models_origin is not None:
            payload["models_origin"] = self.models_origin
        if self.groups is not None:
            payload["groups"] = list(self.groups)
        return json.dumps(payload, separators=(",", ":"), allow_nan=False).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, key: bytes | None = None) -> Checkpoint:
        """Parse :meth:`to_bytes` output.

        Parameters
        ----------
        data
            The checkpoint's bytes: a changelog record's value.
        key
            The changelog key they were read under (``None``: not checked): the checkpoint's
            :attr:`key`, its topic and partition, must be this one.

        Returns
        -------
        Checkpoint
            The checkpoint, its fields of the types written (positions integers >= 0 or ``None``,
            pending samples of finite numbers, one tau row and at most one id per score).

        Raises
        ------
        ValueError
            If ``data`` is not a checkpoint of this format (or of ``key``), naming the field that is not
            and its value.
        """
        try:
            payload = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ValueError(f"checkpoint is not JSON: {error}") from None
        if not isinstance(payload, dict) or payload.get("format") != FORMAT:
            found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
            raise ValueError(f"checkpoint format must be {FORMAT!r}, got {found!r}")
        topic, partition = _field(payload, "topic", str), check_integer("partition", _field(payload, "partition"), 0)
        if key is not None and checkpoint_key(topic, partition) != key:
            raise ValueError(f"topic and partition must be those of the key {key.decode()!r}, "
                             f"got {topic!r} and {partition}")
        state = _field(payload, "state", dict)
        try:
            state = _decode(state)
        except (KeyError, TypeError, ValueError) as error:
            raise ValueError(f"state holds an array that is not one: {error!r}") from None
        eta, tau, keys = _pending(payload)
        models = _field(payload, "models", str, type(None))
        try:
            pickled = None if models is None else base64.b64decode(models)
        except ValueError as error:
            raise ValueError(f"models must be base64, got {reprlib.repr(models)} ({error})") from None
        groups = _field(payload, "groups", list, type(None), default=None)
        if groups is not None and not all(type(label) is str for label in groups):
            raise ValueError(f"groups must be a list of strings, got {reprlib.repr(groups)}")
        return cls(
            topic=topic,
            partition=partition,
            offset=_offset(payload, "offset"),
            feedback_offset=_offset(payload, "feedback_offset"),
            state=state,
            pending_eta=eta,
            pending_tau=tau,
            pending_keys=keys,
            pending_labels=_pending_labels(payload, keys),
            models=pickled,
            topic_id=_field(payload, "topic_id", str, type(None), default=None),
            models_origin=_field(payload, "models_origin", str, type(None), default=None),
            groups=groups,
        )
