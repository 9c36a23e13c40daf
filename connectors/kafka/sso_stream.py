"""Train a linear or logistic model with SSO from a labelled Kafka topic.

:class:`SSOStream` consumes JSON records ``{"x": [x_1, ..., x_d], "y": label}`` (or ``"x"`` as an
object keyed by feature names when ``features`` is given; missing names count as 0) in batches of
``batch_size`` (default 125) and makes one :meth:`streamfair.surrogates.SSO.step` per batch: one
oracle call (the batch's target gradient) reused for ``m`` cheap parameter updates.  With ``m = 1``
and a numeric ``alpha`` the model state is bit for bit that of :class:`streamfair.surrogates.SGD`
on the same batches.

Consumer settings: a group consumer with manual commits (``enable_auto_commit=False``; a batch's
offsets are committed right after the step that learned it, so a restarted group resumes at the
first record not yet learned), ``auto_offset_reset="earliest"``, ``session_timeout_ms=6000``
(Tansu's group joins are slow), a short ``fetch_max_wait_ms``.  :meth:`SSOStream.run` stops when
it has caught up with every assigned partition's *fetch high-watermark* (``consumer.highwater``;
``end_offsets`` is wrong on Tansu) or after ``max_batches`` steps.

Determinism: batches are formed per partition in offset order, so for a single-partition topic the
model state is a function of the topic content (and of the SSO settings) only.  With several
partitions the interleaving of the partitions' batches follows the fetches.  A record that is not
valid JSON with a finite ``x`` of the right size and a finite ``y`` is skipped and counted in
:attr:`SSOStream.invalid` (it is still committed with its batch).

Each step updates a :class:`connectors.prometheus.SurrogateMetrics` when one is given.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from kafka import ConsumerRebalanceListener, KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from connectors.kafka.clients import caught_up
from connectors.prometheus import SurrogateMetrics
from streamfair.surrogates import SSO, SSOStep
from streamfair.validation import check_integer

__all__ = ["BatchStep", "SSOStream", "decode_labelled"]

SESSION_TIMEOUT_MS, HEARTBEAT_INTERVAL_MS, FETCH_MAX_WAIT_MS = 6000, 2000, 50


def decode_labelled(value: bytes, n_features: int,
                    features: Sequence[Hashable] | None = None) -> tuple[np.ndarray, float]:
    """``(x, y)`` of one JSON record; raises ``ValueError`` naming what is wrong.

    >>> decode_labelled(b'{"x": [1, 2.5], "y": -1}', 2)
    (array([1. , 2.5]), -1.0)
    >>> decode_labelled(b'{"x": {"b": 2}, "y": 0.5}', 2, features=["a", "b"])
    (array([0., 2.]), 0.5)
    """
    try:
        record = json.loads(value)
    except (TypeError, ValueError, UnicodeDecodeError):
        raise ValueError(f"value must be a JSON object, got {value[:40]!r}") from None
    if not isinstance(record, dict) or "x" not in record or "y" not in record:
        raise ValueError(f"value must be a JSON object with 'x' and 'y', got {value[:40]!r}")
    x = record["x"]
    if features is not None and isinstance(x, dict):
        x = [x.get(str(name), 0.0) for name in features]
    try:
        x = np.asarray(x, dtype=float)
        y = float(record["y"])
    except (TypeError, ValueError):
        raise ValueError(f"x and y must be numbers, got x={record['x']!r}, y={record['y']!r}") from None
    if x.shape != (n_features,) or not np.all(np.isfinite(x)) or not math.isfinite(y):
        raise ValueError(f"x must be {n_features} finite numbers and y finite, got x={record['x']!r}, y={y!r}")
    return x, y


@dataclass(frozen=True)
class BatchStep:
    """One learned batch: where it came from and the SSO step's diagnostics.

    >>> sso = SSO(2, m=1)
    >>> X, y = np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([1.0, -1.0])
    >>> batch = BatchStep(partition=0, first_offset=10, last_offset=11, X=X, y=y, step=sso.step(X, y))
    >>> batch.last_offset - batch.first_offset + 1, batch.step.loss_at_z, batch.step.inner_steps
    (2, 0.5, 1)
    """

    partition: int
    first_offset: int
    last_offset: int
    X: np.ndarray  # (b, d) the batch as learned
    y: np.ndarray  # (b,)
    step: SSOStep  # step.loss_at_z is the batch's prequential loss (before learning it)


class _Revocations(ConsumerRebalanceListener):
    """Drops the uncommitted buffer of a revoked partition (its new owner re-reads it)."""

    def __init__(self, stream: SSOStream):
        self.stream = stream

    def on_partitions_revoked(self, revoked) -> None:
        for tp in revoked:
            self.stream._buffers.pop(tp.partition, None)

    def on_partitions_assigned(self, assigned) -> None:
        pass


class SSOStream:
    """SSO on batches of a labelled Kafka topic, with manual offset commits.

    Parameters
    ----------
    bootstrap_servers
        Kafka bootstrap servers (e.g. ``Broker().bootstrap``).
    topic, group_id
        The labelled topic and the consumer group (its committed offsets are the resume point).
    sso
        The optimiser to train; its ``n_features`` fixes the size of ``x``.
    batch_size
        Records per SSO step (batches of at least 125 are recommended for SSO).
    features
        Feature names, when ``x`` is sent as an object.
    metrics, model
        Optional :class:`~connectors.prometheus.SurrogateMetrics` updated after every step, and the
        ``model`` label to use.
    **consumer_settings
        Extra :class:`kafka.KafkaConsumer` settings (they override the defaults above).

    Attributes
    ----------
    steps : list of BatchStep
        Every batch learned, in order.
    invalid : int
        Records skipped because they did not decode.

    Examples
    --------
    Four batches of a noiseless linear model ``y = 2 x_1 - x_2`` on the bundled broker; a record
    that is not JSON (at offset 100) is skipped, counted, and committed with its batch:

    >>> import json
    >>> import numpy as np
    >>> from kafka import KafkaAdminClient, KafkaProducer
    >>> from kafka.admin import NewTopic
    >>> from connectors.kafka.broker import Broker
    >>> X = np.random.default_rng(0).standard_normal((500, 2))
    >>> with Broker() as broker:
    ...     admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    ...     _ = admin.create_topics([NewTopic("labelled", 1, 1)])
    ...     admin.close()
    ...     producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    ...     for i, x in enumerate(X):
    ...         _ = producer.send("labelled", b"not json") if i == 100 else None
    ...         _ = producer.send("labelled", json.dumps({"x": x.tolist(), "y": 2 * x[0] - x[1]}).encode())
    ...     producer.flush()
    ...     with SSOStream(broker.bootstrap, "labelled", "doc", SSO(2, m=10), batch_size=125) as stream:
    ...         steps = stream.run()
    >>> len(steps), stream.invalid, [(s.first_offset, s.last_offset) for s in steps]
    (4, 1, [(0, 125), (126, 250), (251, 375), (376, 500)])

    Each step moves the model's outputs half way to the labels (the target-space step ``1 / (2 L)``),
    so the batch's loss, measured before learning it, falls about four-fold per batch:

    >>> [round(batch.step.loss_at_z, 2) for batch in steps]
    [2.28, 0.71, 0.14, 0.03]
    """

    def __init__(self, bootstrap_servers: str | Sequence[str], topic: str, group_id: str, sso: SSO, *,
                 batch_size: int = 125, features: Sequence[Hashable] | None = None,
                 metrics: SurrogateMetrics | None = None, model: str = "default", **consumer_settings: Any):
        if not isinstance(sso, SSO):
            raise ValueError(f"sso must be a streamfair.surrogates.SSO, got {type(sso).__name__}")
        if not (isinstance(topic, str) and topic):
            raise ValueError(f"topic must be a non-empty string, got {topic!r}")
        if not (isinstance(group_id, str) and group_id):
            raise ValueError(f"group_id must be a non-empty string, got {group_id!r}")
        if features is not None and len(features) != sso.n_features:
            raise ValueError(f"features must name the {sso.n_features} features of sso, got {list(features)!r}")
        self.sso, self.topic = sso, topic
        self.batch_size = check_integer("batch_size", batch_size, 1)
        self.features = None if features is None else list(features)
        self.metrics, self.model = metrics, model
        if metrics is not None:
            metrics._model(model)  # validates the label now rather than after the first batch
        settings = {
            "bootstrap_servers": bootstrap_servers,
            "group_id": group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": "earliest",
            "session_timeout_ms": SESSION_TIMEOUT_MS,
            "heartbeat_interval_ms": HEARTBEAT_INTERVAL_MS,
            "fetch_max_wait_ms": FETCH_MAX_WAIT_MS,
            "allow_auto_create_topics": False,
        }
        settings.update(consumer_settings)
        self.consumer = KafkaConsumer(**settings)
        self.consumer.subscribe([topic], listener=_Revocations(self))
        self._buffers: dict[int, list[tuple[int, np.ndarray, float]]] = {}
        self.steps: list[BatchStep] = []
        self.invalid = 0

    def run(self, max_batches: int | None = None, timeout_s: float = 60.0) -> list[BatchStep]:
        """Learn full batches until caught up with the high-watermarks (or ``max_batches`` steps).

        A trailing partial batch stays buffered, uncommitted.

        Parameters
        ----------
        max_batches
            Stop after this many steps; ``None``: when caught up.
        timeout_s
            Seconds to wait for partitions to be assigned and caught up; then ``TimeoutError``.

        Returns
        -------
        list of BatchStep
            The batches learned by this call, in order.
        """
        if max_batches is not None:
            max_batches = check_integer("max_batches", max_batches, 1)
        learned: list[BatchStep] = []
        deadline = time.monotonic() + timeout_s
        while True:
            # full batches left by an earlier call (or poll) first, in partition order
            for partition in sorted(self._buffers):
                buffer = self._buffers[partition]
                while len(buffer) >= self.batch_size and (max_batches is None or len(learned) < max_batches):
                    learned.append(self._learn(TopicPartition(self.topic, partition), buffer))
            if max_batches is not None and len(learned) >= max_batches:
                break
            if caught_up(self.consumer, self.consumer.assignment()):
                break
            for tp, records in sorted(self.consumer.poll(timeout_ms=100).items()):
                buffer = self._buffers.setdefault(tp.partition, [])
                for record in records:
                    try:
                        buffer.append((record.offset, *decode_labelled(record.value, self.sso.n_features,
                                                                       self.features)))
                    except ValueError:
                        self.invalid += 1
            if time.monotonic() > deadline:
                raise TimeoutError(f"{self.topic!r}: not caught up with the high-watermark after {timeout_s} s")
        return learned

    def close(self) -> None:
        """Leave the group and close the consumer (buffered, uncommitted records are dropped)."""
        self.consumer.close()

    def __enter__(self) -> SSOStream:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _learn(self, tp: TopicPartition, buffer: list) -> BatchStep:
        batch = buffer[: self.batch_size]
        del buffer[: self.batch_size]
        X = np.stack([x for _, x, _ in batch])
        y = np.array([label for _, _, label in batch])
        step = self.sso.step(X, y)
        # commit past the batch (and past any invalid records inside it)
        self.consumer.commit({tp: OffsetAndMetadata(batch[-1][0] + 1, "", -1)})
        if self.metrics is not None:
            self.metrics.observe_sso(self.sso, self.model)
        done = BatchStep(tp.partition, batch[0][0], batch[-1][0], X, y, step)
        self.steps.append(done)
        return done
