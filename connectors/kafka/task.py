"""One input partition's processing task: its own post-processor, position and (optionally) models.

Semantics, per partition, in offset order:

* **predict before learn.**  Message ``i`` is predicted with the state that has learned the valid
  messages before it (so the prediction never depends on the message itself), then it is learned.
  With ``batch_size = b > 1`` learning is a mini-batch step every ``b`` valid messages
  (``learn_many(..., batch_size=b)``), and messages are predicted with the state after the last
  completed batch.  Either way the result depends only on the partition's message sequence, not on
  how records arrive in polls, so a replay from a checkpoint reproduces every output byte for byte.
* **draws keyed by id**: a sampled prediction is the atom drawn by ``keyed_uniform(seed, id)``.
* Each prediction block is computed as a ``(b, ...)`` array with the message at row ``i mod b``,
  padded when a poll ends mid-batch, so floating-point results never depend on poll boundaries.
* Feedback (labels for the base models) is buffered and learned at the next checkpoint, so base
  models change only at checkpoints and replays stay deterministic.  With the group-robust
  post-processor every sample is learned under its message id, and a feedback label ``y`` is
  applied at the next checkpoint too, in feedback order, as ``learn_label(id, y)`` (the delayed-label
  correction of its DRO group risks).

Examples
--------
>>> from collections import namedtuple
>>> from streamfair import FairRegressionPostProcessor
>>> Record = namedtuple("Record", "topic partition offset timestamp key value headers")
>>> task = PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2),
...                      parser=InputParser(2, 1024))
>>> rec = Record("in", 0, 7, 0, b"a", b'{"id":"a","eta":0.3,"tau":[0.5,0.5]}', [])
>>> out = []
>>> task.process([rec], lambda *a: out.append(a), lambda *a: None)
>>> out[0][0], task.offset, task.fair.n_samples
(b'a', 8, 1)
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

import numpy as np

from streamfair import DualPostProcessor
from streamfair.keyed_random import keyed_uniforms, sample_index, sample_indices

from connectors.kafka.checkpoint import Checkpoint, restore_postprocessor
from connectors.kafka.codec import PROCESSING_ERROR, FeedbackParser, InputParser, Invalid, encode_output, message_key
from connectors.kafka.models import BaseModels

#: ``emit(key, value, timestamp_ms, partition, headers)`` sends one prediction (``headers``: a list or None).
Emit = Callable[[bytes, bytes, int, int, Any], None]
#: ``dead(record, reason, detail[, error_type])`` sends one record to the dead-letter topic;
#: ``error_type`` names the exception when something other than validation failed.
Dead = Callable[..., None]


def _dead_on_error(dead: Dead, record: Any, error: Exception) -> None:
    """Dead-letter ``record`` for an unexpected exception raised while handling it."""
    dead(record, PROCESSING_ERROR, f"{type(error).__name__}: {error}", type(error).__name__)


class PartitionTask:
    """Processing state of one input partition.

    Parameters
    ----------
    topic, partition
        The input partition.
    fair
        Its post-processor: regression (``eta`` inputs), group-robust regression, or classification
        (``proba`` inputs, class-label outputs).
    parser
        Validates input messages.
    batch_size
        Valid messages per learning step (1: the paper's per-sample algorithm).
    mode
        ``"sample"``, ``"mean"`` or ``"mode"`` (see :meth:`streamfair.DualPostProcessor.predict_one`).
    distribution
        Always include the full distribution (otherwise only when a message asks for it).
    models
        Base models for feature messages (``None``: only score messages are accepted).
    learn_models, feedback_parser
        Whether feedback trains ``models`` (then they are part of checkpoints), and its parser.
    output_key
        ``"id"``: outputs are keyed by the message id; ``"input"``: by the input record's key (the id
        when it has none).
    propagate_headers
        Names of input headers (compared in lower case) copied to the output, e.g. trace context.
    offset, feedback_offset
        Next input / feedback offset (``None``: not known yet).
    topic_id
        Id of the input topic ``offset`` belongs to (``None``: unknown).
    pending_eta, pending_tau, pending_keys
        Samples predicted but not yet learned, and their message ids.
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        fair: DualPostProcessor,
        *,
        parser: InputParser,
        batch_size: int = 1,
        mode: str = "sample",
        distribution: bool = False,
        models: BaseModels | None = None,
        learn_models: bool = False,
        feedback_parser: FeedbackParser | None = None,
        output_key: str = "id",
        propagate_headers: Sequence[str] = (),
        offset: int | None = None,
        feedback_offset: int | None = None,
        topic_id: str | None = None,
        pending_eta: Sequence[Any] = (),
        pending_tau: Sequence[Sequence[float]] = (),
        pending_keys: Sequence[Any] = (),
    ):
        if len(pending_eta) != len(pending_tau) or len(pending_eta) >= batch_size:
            raise ValueError(f"pending samples must be fewer than batch_size={batch_size}, got {len(pending_eta)}")
        self.topic = topic
        self.partition = int(partition)
        self.fair = fair
        self.parser = parser
        self.batch_size = int(batch_size)
        self.mode = mode
        self.distribution = bool(distribution)
        self.models = models
        self.learn_models = bool(learn_models)
        self.feedback_parser = feedback_parser
        self.key_from_input = output_key == "input"
        self.propagate_headers = frozenset(name.lower() for name in propagate_headers)
        self.offset = offset
        self.feedback_offset = feedback_offset
        self.topic_id = topic_id
        self.classification = fair.prediction_input == "proba"
        self._pending_eta = [[float(q) for q in x] if self.classification else float(x) for x in pending_eta]
        self._pending_tau = [[float(x) for x in row] for row in pending_tau]
        self.robust = fair.uses_labels
        if self.robust and len(pending_keys) != len(self._pending_eta):
            raise ValueError(f"pending_keys must have one id per pending sample ({len(self._pending_eta)}), "
                             f"got {len(pending_keys)}")
        self._pending_keys = list(pending_keys) if self.robust else []
        self._labels: list[tuple[Any, float]] = []  # feedback labels for the robust post-processor
        self._feedback: list[tuple[dict, float, Any]] = []
        self._feedback_next: int | None = None
        k = fair.n_groups
        self._fill_tau = [1.0 / k] * k
        m = len(fair.atoms)
        self._fill_prediction = [1.0 / m] * m if self.classification else 0.0
        self._labels_out = fair.labels.tolist()
        self.processed = 0  # input records handled since this task was created (valid or not)
        self.learned = 0  # samples learned by this task object, and the time it took (for metrics)
        self.learn_seconds = 0.0
        self.labels_applied = 0  # feedback labels the robust post-processor matched to a learned sample
        self.labels_unmatched = 0  # ... and those whose id it did not know (never seen, expired, repeated)
        self.feedback_failed = 0  # feedback samples the base models raised on (skipped, at checkpoints)

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def from_checkpoint(cls, point: Checkpoint, *, models: BaseModels | None, **options: Any) -> PartitionTask:
        """Continue from ``point``; with ``learn_models``, its pickled models (if any) replace ``models``."""
        if point.models is not None and models is not None and options.get("learn_models"):
            models = BaseModels.from_bytes(point.models, models.groups, models.classes)
        return cls(
            point.topic,
            point.partition,
            restore_postprocessor(point.state),
            models=models,
            offset=point.offset,
            feedback_offset=point.feedback_offset,
            topic_id=point.topic_id,
            pending_eta=point.pending_eta,
            pending_tau=point.pending_tau,
            pending_keys=point.pending_keys,
            **options,
        )

    def checkpoint(self) -> Checkpoint:
        """Learn the buffered feedback, then snapshot everything (an independent copy)."""
        for ident, y in self._labels:
            if self._applies(self.fair.learn_label, ident, y):
                self.labels_applied += 1
            else:
                self.labels_unmatched += 1
        self._labels.clear()
        for features, y, s in self._feedback:
            if not self._applies(self.models.learn, features, y, s):
                self.feedback_failed += 1
        self._feedback.clear()
        if self._feedback_next is not None:
            self.feedback_offset = self._feedback_next
        return Checkpoint(
            topic=self.topic,
            partition=self.partition,
            offset=self.offset,
            feedback_offset=self.feedback_offset,
            state=self.fair.state_dict(),
            pending_eta=list(self._pending_eta),
            pending_tau=[list(row) for row in self._pending_tau],
            pending_keys=list(self._pending_keys),
            models=self.models.to_bytes() if self.learn_models else None,
            topic_id=self.topic_id,
        )

    @staticmethod
    def _applies(learn: Callable[..., Any], *sample: Any) -> bool:
        """``learn(*sample)`` is truthy or ``None``; a label or model that raises is skipped (False)."""
        try:
            return learn(*sample) is not False
        except Exception:  # noqa: BLE001 -- one bad feedback sample must not block the checkpoint
            return False

    # ------------------------------------------------------------------ input
    def process(self, records: Sequence[Any], emit: Emit, dead: Dead) -> None:
        """Predict (then learn) every valid record in order; invalid ones go to ``dead``.

        Whatever goes wrong with one message sends that message to ``dead``: :class:`Invalid` with its
        reason, any other exception as ``"processing_error"`` with the exception's type.  A message
        whose prediction raises is undone, as if it had never been sent; one whose output ``emit``
        refuses stays learned (its prediction was made).
        """
        parse = self.parser.parse
        models = self.models
        valid = []
        for record in records:
            try:
                ident, eta, tau, features, want = parse(record.value)
                if features is not None:
                    eta, tau = models.score(features)
            except Invalid as error:
                dead(record, error.reason, error.detail)
                continue
            except Exception as error:  # noqa: BLE001 -- one message's failure, whatever it is, is that message's
                _dead_on_error(dead, record, error)
                continue
            valid.append((record, ident, eta, tau, want or self.distribution))
        if valid:
            for record, key, value in self._predict_isolated(valid, dead):
                try:
                    if self.key_from_input and record.key is not None:
                        key = record.key
                    emit(key, value, record.timestamp, self.partition, record.headers and self._headers(record))
                except Exception as error:  # noqa: BLE001 -- e.g. an output the producer refuses
                    _dead_on_error(dead, record, error)
        if records:
            self.offset = records[-1].offset + 1
            self.processed += len(records)

    def _headers(self, record: Any) -> list[tuple[str, bytes]] | None:
        """The input's headers named in ``propagate_headers``, in their order (``None``: none)."""
        if not self.propagate_headers:
            return None
        return [(name, value) for name, value in record.headers if name.lower() in self.propagate_headers] or None

    def _predict_isolated(self, valid: list, dead: Dead) -> list[tuple[Any, bytes, bytes]]:
        """``(record, key, value)`` of every output; a message whose prediction raises goes to ``dead``.

        The poll is computed at once; if that raises, the state goes back to before the poll and the
        messages are computed one at a time, each failing one dead-lettered and undone.  Outputs never
        depend on poll boundaries, so the survivors get the same bytes either way.
        """
        predict = self._predict_learn if self.batch_size == 1 else self._predict_batches
        before = self._snapshot()
        outputs: list[tuple[Any, bytes, bytes]] = []
        try:
            predict(valid, outputs.append)
            return outputs
        except Exception:  # noqa: BLE001 -- find the message(s) responsible below
            self._restore(before)
        outputs = []
        for item in valid:
            before = self._snapshot()
            one: list[tuple[Any, bytes, bytes]] = []
            try:
                predict([item], one.append)
            except Exception as error:  # noqa: BLE001
                self._restore(before)
                _dead_on_error(dead, item[0], error)
                continue
            outputs.extend(one)
        return outputs

    def _snapshot(self) -> tuple:
        """What a prediction step changes: the post-processor's state and the pending mini-batch."""
        return (self.fair.state_dict(), list(self._pending_eta), list(self._pending_tau), list(self._pending_keys),
                self.learned, self.learn_seconds)

    def _restore(self, snapshot: tuple) -> None:
        state, pending_eta, pending_tau, pending_keys, self.learned, self.learn_seconds = snapshot
        self.fair = type(self.fair).from_state_dict(state)
        self._pending_eta, self._pending_tau, self._pending_keys = pending_eta, pending_tau, pending_keys

    def _predict_batches(self, valid: list, out: Callable[[tuple], None]) -> None:
        """Predict in blocks of the pending mini-batch; learn each batch once it is full."""
        b = self.batch_size
        i, n = 0, len(valid)
        while i < n:
            start = len(self._pending_eta)
            chunk = valid[i : i + b - start]
            self._emit_chunk(start, chunk, out)
            for _, ident, eta, tau, _ in chunk:
                self._pending_eta.append(eta)
                self._pending_tau.append(tau)
                if self.robust:
                    self._pending_keys.append(ident)
            if len(self._pending_eta) == b:
                self._learn()
            i += len(chunk)

    def _predict_learn(self, valid: list, out: Callable[[tuple], None]) -> None:
        """``batch_size = 1``: every message predicted, then learned, in one post-processor call per poll.

        The same floats as predicting each message (``proba_many`` of one row) and then learning it
        (``learn_one`` under its id): the post-processor's ``proba_learn_many`` is bit for bit that sequence.
        """
        fair, labels, mode, partition = self.fair, self._labels_out, self.mode, self.partition
        version = fair.n_samples  # samples learned when the first message is predicted
        started = time.perf_counter()
        probas = fair.proba_learn_many([c[2] for c in valid], [c[3] for c in valid], keys=[c[1] for c in valid])
        self.learn_seconds += time.perf_counter() - started  # the predictions are included
        self.learned += len(valid)
        if mode == "sample":
            u = keyed_uniforms(fair.seed, [c[1] for c in valid]).tolist()
        for j, (record, ident, eta, _, want) in enumerate(valid):
            proba = probas[j]
            if mode == "sample":
                prediction = labels[sample_index(proba, u[j])]
            elif mode == "mode":
                prediction = labels[int(proba.argmax())]
            else:  # "mean" (regression): the 1-row product of the batch path, for the same bits
                prediction = float((proba[None, :] @ fair.atoms)[0])
            if self.classification:
                eta = None
            if want:
                value = encode_output(ident, prediction, eta, version + j, partition, record.offset, labels, proba)
            else:
                value = encode_output(ident, prediction, eta, version + j, partition, record.offset)
            out((record, message_key(ident), value))

    def _emit_chunk(self, start: int, chunk: list, out: Callable[[tuple], None]) -> None:
        fair, b = self.fair, self.batch_size
        etas = [c[2] for c in chunk]
        taus = [c[3] for c in chunk]
        if b > 1:  # rows at their position within the batch, padding elsewhere: shape-stable floats
            stop = start + len(chunk)
            fill = self._fill_prediction
            etas = [fill] * start + etas + [fill] * (b - stop)
            taus = [self._fill_tau] * start + taus + [self._fill_tau] * (b - stop)
        proba = fair.proba_many(etas, taus)
        if self.mode == "sample":
            u = keyed_uniforms(fair.seed, [c[1] for c in chunk])
            labels = self._labels_out
            predictions = [labels[i] for i in sample_indices(proba[start : start + len(chunk)], u)]
        else:
            predictions = fair.predict_many(etas, taus, mode=self.mode)[start : start + len(chunk)].tolist()
        version = fair.n_samples
        partition = self.partition
        for j, (record, ident, eta, _, want) in enumerate(chunk):
            eta = None if self.classification else eta
            if want:
                value = encode_output(ident, predictions[j], eta, version, partition, record.offset,
                                      self._labels_out, proba[start + j])
            else:
                value = encode_output(ident, predictions[j], eta, version, partition, record.offset)
            out((record, message_key(ident), value))

    def _learn(self) -> None:
        started = time.perf_counter()
        if self.robust:
            self.fair.learn_many(np.array(self._pending_eta), np.array(self._pending_tau),
                                 batch_size=None if self.batch_size == 1 else self.batch_size, keys=self._pending_keys)
            self._pending_keys.clear()
        else:
            self.fair.learn_many(np.array(self._pending_eta), np.array(self._pending_tau), batch_size=self.batch_size)
        self.learn_seconds += time.perf_counter() - started
        self.learned += len(self._pending_eta)
        self._pending_eta.clear()
        self._pending_tau.clear()

    # ------------------------------------------------------------------ feedback
    def add_feedback(self, records: Sequence[Any], dead: Dead) -> list[tuple[Any, Any, dict, float, Any]]:
        """Parse feedback records; buffer them for the models.  Returns the valid ``(record, id, x, y, s)``."""
        accepted = []
        for record in records:
            try:
                ident, features, y, s = self.feedback_parser.parse(record.value)
            except Invalid as error:
                dead(record, error.reason, error.detail)
                continue
            except Exception as error:  # noqa: BLE001 -- one message's failure is that message's
                _dead_on_error(dead, record, error)
                continue
            accepted.append((record, ident, features, y, s))
            if self.learn_models:
                self._feedback.append((features, y, s))
            if self.robust:
                self._labels.append((ident, y))
        if records:
            self._feedback_next = records[-1].offset + 1
        return accepted

    @property
    def next_feedback_offset(self) -> int | None:
        """The feedback offset after the last feedback record read (``None``: none read yet)."""
        return self._feedback_next if self._feedback_next is not None else self.feedback_offset

    def move_feedback(self, offset: int) -> None:
        """Continue the feedback from ``offset`` (its log was lost); the feedback already read is kept."""
        self._feedback_next = self.feedback_offset = offset

    @property
    def n_pending(self) -> int:
        """Samples predicted but not yet learned."""
        return len(self._pending_eta)
