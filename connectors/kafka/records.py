"""The records of the daemon's message path, one way: parsed in, processed, sent out.

A consumer record is parsed by :mod:`connectors.kafka.codec` into an :class:`InputSample` (or a
:class:`Feedback`), the partition's task turns a poll of them into a :class:`TaskResult` of
:class:`Output` and :class:`DeadLetter` records, and the daemon sends those.  Every record is
immutable and read by field name; each keeps its ``source``, the consumer record it came from
(anything with ``topic``, ``partition``, ``offset``, ``timestamp``, ``key``, ``value`` and
``headers``), so a dead letter can always point at its origin.

Examples
--------
>>> from collections import namedtuple
>>> Record = namedtuple("Record", "topic partition offset timestamp key value headers")
>>> source = Record("in", 0, 7, 1000, None, b"{", [])
>>> dead = DeadLetter(source, "invalid_json", "Expecting property name")
>>> dead.reason, dead.source.offset, dead.error_type
('invalid_json', 7, None)
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

#: The dead-letter reason of a message whose handling raised an unexpected exception.
PROCESSING_ERROR = "processing_error"


class InputSample(NamedTuple):
    """One valid input message.

    Attributes
    ----------
    source
        The consumer record it was parsed from (``None`` when parsed from bare bytes).
    id
        The message id (a string or an integer).
    prediction
        The base model's prediction: ``eta`` (regression, a float) or ``proba`` (classification, the
        class probabilities); ``None`` for a features message not scored yet.
    tau
        ``P(S = s | x)`` per group, or ``None`` for a features message not scored yet.
    features
        The raw features to score with the base models, or ``None`` for a scores message.
    distribution
        Whether the message asks for the full distribution in its output.

    Examples
    --------
    A scores message, and a features message that the base models have not scored yet:

    >>> from connectors.kafka.codec import InputParser
    >>> InputParser(n_groups=2, max_bytes=1024).parse(b'{"id": 9, "eta": 0.1, "tau": [1, 0]}')
    InputSample(source=None, id=9, prediction=0.1, tau=[1.0, 0.0], features=None, distribution=False)
    >>> sample = InputParser(2, 1024, models=True).parse(b'{"id": "b", "features": {"age": 41}}')
    >>> sample.prediction, sample.tau, sample.features
    (None, None, {'age': 41})
    """

    source: Any
    id: int | str
    prediction: Any
    tau: list[float] | None
    features: dict | None
    distribution: bool


class Feedback(NamedTuple):
    """One valid feedback message: a label ``y`` (and, for the base models, ``features`` and group ``s``).

    ``features`` and ``s`` are ``None`` when the feedback is a label for the group-robust
    post-processor only; ``s`` is as given in the message (matched by
    :func:`~connectors.kafka.codec.group_label`).

    >>> from connectors.kafka.codec import FeedbackParser
    >>> parser = FeedbackParser(groups=["0", "1"], max_bytes=1024)
    >>> parser.parse(b'{"id": 3, "features": {"age": 41}, "y": 0.7, "s": 1}')
    Feedback(source=None, id=3, features={'age': 41}, y=0.7, s=1)
    """

    source: Any
    id: int | str
    features: dict | None
    y: Any
    s: Any


class Output(NamedTuple):
    """One prediction for the output topic.

    ``timestamp`` is the input's (``-1``: none), ``partition`` the input partition (the daemon
    writes there when the output topic is co-partitioned), ``headers`` the propagated input
    headers (``None``: none).

    >>> from connectors.kafka.codec import encode_output
    >>> output = Output(None, b"a", encode_output("a", 0.25, 0.5, 3, 0, 7), timestamp=-1, partition=0,
    ...                 headers=None)
    >>> output.key, output.value
    (b'a', b'{"id":"a","prediction":0.25,"eta":0.5,"state_version":3,"partition":0,"offset":7}')
    """

    source: Any
    key: bytes
    value: bytes
    timestamp: int
    partition: int
    headers: list[tuple[str, bytes]] | None


class DeadLetter(NamedTuple):
    """One record for the dead-letter topic: why ``source`` could not be processed.

    ``reason`` is one of :data:`~connectors.kafka.codec.REASONS`; ``error_type`` names the exception
    when something other than validation failed (reason ``"processing_error"``).

    >>> DeadLetter(None, "missing_id", "no 'id' field")
    DeadLetter(source=None, reason='missing_id', detail="no 'id' field", error_type=None)
    """

    source: Any
    reason: str
    detail: str
    error_type: str | None = None

    @classmethod
    def of_error(cls, source: Any, error: Exception) -> DeadLetter:
        """The ``"processing_error"`` dead letter of an unexpected exception raised while handling ``source``.

        >>> DeadLetter.of_error(None, KeyError("x"))
        DeadLetter(source=None, reason='processing_error', detail="KeyError: 'x'", error_type='KeyError')
        """
        return cls(source, PROCESSING_ERROR, f"{type(error).__name__}: {error}", type(error).__name__)


class TaskResult(NamedTuple):
    """What a task made of one poll of one partition, each list in input order.

    ``outputs`` and ``dead_letters`` for input records; ``feedback`` (the valid feedback records)
    and ``dead_letters`` for feedback records.

    >>> result = TaskResult(outputs=[], dead_letters=[DeadLetter(None, "empty", "null or empty value")],
    ...                     feedback=[])
    >>> [dead.reason for dead in result.dead_letters]
    ['empty']
    """

    outputs: list[Output]
    dead_letters: list[DeadLetter]
    feedback: list[Feedback]


class Audit(NamedTuple):
    """Labelled feedback scored the way its input would have been served, for auditing fairness.

    ``proba[i]`` is the distribution the task serves for the features of the ``i``-th feedback record
    (over the post-processor's ``atoms``), ``y[i]`` its label and ``groups[i]`` its group as given.

    The mean of each served distribution, next to its label:

    >>> audit = Audit(atoms=np.array([0.0, 0.5, 1.0]), proba=np.array([[0.5, 0.5, 0.0], [0.0, 0.5, 0.5]]),
    ...               y=[0.0, 1.0], groups=["a", "b"])
    >>> (audit.proba @ audit.atoms).tolist(), audit.y
    ([0.25, 0.75], [0.0, 1.0])
    """

    atoms: np.ndarray
    proba: np.ndarray
    y: list[float]
    groups: list[Any]
