"""One input partition's processing task: its own post-processor, position and (optionally) models.

Semantics, per partition, in offset order:

* **predict before learn.**  Message ``i`` is predicted with the state that has learned the valid
  messages before it (so the prediction never depends on the message itself), then it is learned.
  With ``batch_size = b > 1`` learning is a mini-batch step every ``b`` valid messages
  (``learn_many(..., batch_size=b)``), and messages are predicted with the state after the last
  completed batch.  Either way the result depends only on the partition's message sequence, not on
  how records arrive in polls, so a replay from a checkpoint reproduces every output byte for byte.
* **draws keyed by id**: a sampled prediction is the post-processor's draw under the key ``id``
  (``predict_one(..., key=id)``: a function of the state and the id).
* Each prediction block is computed as a ``(b, ...)`` array with the message at row ``i mod b``,
  padded when a poll ends mid-batch, so floating-point results never depend on poll boundaries.
* Feedback (labels for the base models) is buffered and learned at the next checkpoint, so base
  models change only at checkpoints and each label is learned once (the daemon holds feedback back
  while a replay repeats outputs sent before, :mod:`connectors.kafka.feedback_hold`).  With the group-robust
  post-processor every sample is learned under its message id, and a feedback label ``y`` is
  applied at the next checkpoint too, in feedback order, as ``learn_label(id, y)`` (the delayed-label
  correction of its DRO group risks); ids with the same output key match (``12`` and ``"12"``).

Examples
--------
>>> from collections import namedtuple
>>> from streamfair import FairRegressionPostProcessor
>>> Record = namedtuple("Record", "topic partition offset timestamp key value headers")
>>> task = PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2),
...                      parser=InputParser(2, 1024))
>>> rec = Record("in", 0, 7, 0, b"a", b'{"id":"a","eta":0.3,"tau":[0.5,0.5]}', [])
>>> result = task.process([rec])
>>> result.outputs[0].key, result.dead_letters, task.offset, task.fair.n_samples
(b'a', [], 8, 1)
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from connectors.kafka.checkpoint import Checkpoint, restore_postprocessor
from connectors.kafka.codec import (
    UNREADABLE_RECORD,
    FeedbackParser,
    InputParser,
    Invalid,
    encode_output,
    header_values,
    message_key,
    same_key_ids,
)
from connectors.kafka.models import BaseModels
from connectors.kafka.records import Audit, DeadLetter, Feedback, InputSample, Output, TaskResult
from connectors.kafka.transport import UnreadableRecord
from streamfair import DualPostProcessor
from streamfair.validation import check_distributions, check_finite

T = TypeVar("T")


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
    groups
        The group labels of tau's columns, in order, recorded in checkpoints (``None``: not recorded).
    pending_eta, pending_tau, pending_keys
        Samples predicted but not yet learned, and their message ids: fewer than ``batch_size``, each
        score an input of ``fair`` with one tau row over its groups (``ValueError`` naming them otherwise).
    pending_labels
        Feedback labels ``(id, y)`` of pending samples, applied at the first checkpoint after their
        mini-batch is learned.
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
        groups: Sequence[str] | None = None,
        pending_eta: Sequence[Any] = (),
        pending_tau: Sequence[Sequence[float]] = (),
        pending_keys: Sequence[Any] = (),
        pending_labels: Sequence[tuple[Any, float]] = (),
    ):
        if len(pending_eta) >= batch_size:
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
        self.groups = None if groups is None else list(groups)
        self.classification = fair.prediction_input == "proba"
        self._pending_eta, self._pending_tau = _check_pending(fair, pending_eta, pending_tau, pending_keys)
        self.uses_labels = fair.uses_labels
        self._pending_keys = list(pending_keys) if self.uses_labels else []
        self._labels = [(ident, y) for ident, y in pending_labels]  # feedback labels for the robust post-processor
        self._feedback: list[Feedback] = []  # for the base models
        self._feedback_next: int | None = None
        k = fair.n_groups
        self._fill_tau = [1.0 / k] * k
        m = len(fair.atoms)
        self._fill_prediction = [1.0 / m] * m if self.classification else 0.0
        self._labels_out = fair.labels.tolist()
        # The JSON text of each regression prediction (a grid value), rendered once.
        self._label_texts = {} if self.classification else {label: repr(label) for label in self._labels_out}
        self.processed = 0  # input records handled since this task was created (valid or not)
        self.learned = 0  # samples learned by this task object, and the time it took (for metrics)
        self.learn_seconds = 0.0
        self.labels_applied = 0  # feedback labels the robust post-processor matched to a learned sample
        self.labels_unmatched = 0  # ... and those whose id it did not know (never seen, expired, repeated)
        self.feedback_failed = 0  # feedback samples the base models raised on (skipped, at checkpoints)
        self.batches_failed = 0  # mini-batches whose learning raised (left unlearned, their messages answered)
        self._reported: tuple[Counter, Counter] = (Counter(), Counter())  # what unreported() has given

    def unreported(self) -> tuple[Counter, Counter]:
        """The labels by outcome (``applied``, ``unmatched``) and the failures by kind
        (``feedback_failed``, ``batch_failed``) since the last call.

        The daemon adds them to its stats at each durable checkpoint: a task rewound to its
        checkpoint is dropped with its counts, and its replay counts them again.
        """
        now = (Counter(applied=self.labels_applied, unmatched=self.labels_unmatched),
               Counter(feedback_failed=self.feedback_failed, batch_failed=self.batches_failed))
        labels, errors = now[0] - self._reported[0], now[1] - self._reported[1]
        self._reported = now
        return labels, errors

    # ------------------------------------------------------------------ checkpoints
    @classmethod
    def from_checkpoint(cls, point: Checkpoint, *, models: BaseModels | None, fair: DualPostProcessor | None = None,
                        **options: Any) -> PartitionTask:
        """Continue from ``point``; with ``learn_models``, its pickled models (if any) replace ``models``.

        ``fair``: the post-processor to continue with (``None``: the checkpoint's own, restored).
        Pending samples that fill batches of ``batch_size`` (smaller than the checkpoint's) are
        learned at once, in steps of ``batch_size``.  ``ValueError`` naming ``pending_eta``,
        ``pending_tau`` or ``pending_keys`` when the pending samples are not inputs of ``fair``.
        """
        if point.models is not None and models is not None and options.get("learn_models"):
            models = BaseModels.from_bytes(point.models, models.groups, models.classes, models.origin)
        fair = restore_postprocessor(point.state) if fair is None else fair
        keys = point.pending_keys
        eta, tau = _check_pending(fair, point.pending_eta, point.pending_tau, keys)
        b = options.get("batch_size", 1)
        full = len(eta) // b * b
        if full:
            _learn_batches(fair, eta[:full], tau[:full], keys[:full], b)
        return cls(
            point.topic,
            point.partition,
            fair,
            models=models,
            offset=point.offset,
            feedback_offset=point.feedback_offset,
            topic_id=point.topic_id,
            pending_eta=eta[full:],
            pending_tau=tau[full:],
            pending_keys=keys[full:],
            pending_labels=point.pending_labels,
            **options,
        )

    def checkpoint(self) -> Checkpoint:
        """Learn the buffered feedback, then snapshot everything (an independent copy).

        A label goes to the sample whose id has the label's output key (``12`` and ``"12"`` alike, see
        :func:`~connectors.kafka.codec.same_key_ids`), its own id first.  A label of a sample still in
        the open mini-batch waits, in the checkpoint and under that sample's id, until its batch is
        learned: applying it now would find no such sample, and whether it did would depend on when
        the checkpoint came.
        """
        waiting = set(self._pending_keys)
        labels, self._labels = self._labels, []
        for ident, y in labels:
            for sample_id in same_key_ids(ident):
                if sample_id in waiting:
                    self._labels.append((sample_id, y))
                    break
                if self._applies(self.fair.learn_label, sample_id, y):
                    self.labels_applied += 1
                    break
            else:
                self.labels_unmatched += 1
        for feedback in self._feedback:
            if not self._applies(self._base_models().learn, feedback.features, feedback.y, feedback.s):
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
            pending_labels=list(self._labels),
            models=self._base_models().to_bytes() if self.learn_models else None,
            topic_id=self.topic_id,
            models_origin=self._base_models().origin if self.learn_models else None,
            groups=self.groups,
        )

    @staticmethod
    def _applies(learn: Callable[..., Any], *sample: Any) -> bool:
        """``learn(*sample)`` is truthy or ``None``; a label or model that raises is skipped (False)."""
        try:
            return learn(*sample) is not False
        except Exception:  # noqa: BLE001 -- one bad feedback sample must not block the checkpoint
            return False

    # ------------------------------------------------------------------ input
    def process(self, records: Sequence[Any]) -> TaskResult:
        """Predict (then learn) every valid record in order; every invalid one becomes a dead letter.

        Whatever goes wrong with one message makes that message a dead letter: :class:`Invalid` with
        its reason, any other exception as ``"processing_error"`` with the exception's type.  A message
        whose prediction raises is undone, as if it had never been sent.  The outputs come in input
        order; the dead letters of messages that did not parse come first (in input order), then those
        of messages whose prediction raised.
        """
        # feature messages (scored by the base models) come only from a parser that accepts them
        valid, dead = _parse_each(records, self._input_sample if self.parser.models else self.parser.parse)
        outputs = self._predict_isolated(valid, dead) if valid else []
        if records:
            self.offset = records[-1].offset + 1
            self.processed += len(records)
        return TaskResult(outputs, dead, [])

    def _input_sample(self, value: bytes | None, record: Any) -> InputSample:
        """The parsed input ``value`` of ``record``; a feature message is scored by the base models."""
        sample = self.parser.parse(value, record)
        if sample.features is not None:
            eta, tau = self._base_models().score(sample.features)
            sample = sample._replace(prediction=eta, tau=tau)
        return sample

    def _base_models(self) -> BaseModels:
        """The base models: only feature messages and feedback for the models reach them (the parsers see to it)."""
        if self.models is None:
            raise RuntimeError("this task has no base models (models=None)")
        return self.models

    def _headers(self, record: Any) -> list[tuple[str, bytes]] | None:
        """The input's headers named in ``propagate_headers``, in their order (``None``: none; a header
        without a value gets the empty value, see :func:`~connectors.kafka.codec.header_values`)."""
        copied = self.propagate_headers
        return header_values((name, value) for name, value in record.headers if name.lower() in copied) or None

    def _outputs(self, samples: list[InputSample], predictions: list[Any], versions: Sequence[int],
                 probas: np.ndarray | None) -> list[Output]:
        """The output of each sample: its fair prediction, made by the state after its version's samples.

        ``probas``: the served distributions, given when an output of ``samples`` carries one.  This
        is the daemon's per-message path, so what is the same for the whole poll is looked up once.
        """
        partition, texts, atoms, every = self.partition, self._label_texts, self._labels_out, self.distribution
        regression, from_input, copies_headers = not self.classification, self.key_from_input, self.propagate_headers
        served = [None] * len(samples) if probas is None else probas
        outputs = []
        for sample, prediction, version, proba in zip(samples, predictions, versions, served, strict=True):
            record = sample.source
            carried = proba if sample.distribution or every else None
            value = encode_output(sample.id, prediction, sample.prediction if regression else None, version, partition,
                                  record.offset, atoms, carried, texts.get(prediction))
            key = record.key if from_input and record.key is not None else message_key(sample.id)
            headers = self._headers(record) if copies_headers and record.headers else None
            outputs.append(Output(record, key, value, record.timestamp, partition, headers))
        return outputs

    def _predict_isolated(self, valid: list[InputSample], dead: list[DeadLetter]) -> list[Output]:
        """The output of every sample; a sample whose prediction raises is appended to ``dead`` instead.

        The poll is computed at once; if that raises, the state goes back to before the poll and the
        samples are computed one at a time, each failing one dead-lettered and undone.  Outputs never
        depend on poll boundaries, so the survivors get the same bytes either way.  With mini-batches,
        a sample whose own prediction stands but which completes a batch whose learning raises is not
        to blame (the batch holds samples answered before it): it is answered, and the batch is left
        unlearned (:attr:`batches_failed`), so that the next sample starts a new one.
        """
        predict = self._predict_learn if self.batch_size == 1 else self._predict_batches
        before = self._snapshot()
        try:
            return predict(valid)
        except Exception:  # noqa: BLE001 -- find the message(s) responsible below
            self._restore(before)
        outputs: list[Output] = []
        for sample in valid:
            before = self._snapshot()
            try:
                outputs += predict([sample])
            except Exception as error:  # noqa: BLE001
                self._restore(before)
                answered = self._answer_leaving_the_batch_unlearned(sample)
                if answered is None:
                    dead.append(DeadLetter.of_error(sample.source, error))
                else:
                    outputs += answered
        return outputs

    def _answer_leaving_the_batch_unlearned(self, sample: InputSample) -> list[Output] | None:
        """The output of a sample whose prediction stands, its mini-batch dropped; ``None`` if the prediction raises.

        Predicting alone changes no state (the draws are keyed), so the sample that failed with
        learning is predicted again without it.
        """
        if self.batch_size == 1 or len(self._pending_eta) + 1 < self.batch_size:
            return None  # no batch was learned: the sample's own prediction raised
        try:
            outputs = self._predict_chunk(len(self._pending_eta), [sample])
        except Exception:  # noqa: BLE001 -- its own prediction raises: the sample is to blame
            return None
        self.batches_failed += 1
        self._drop_pending()
        return outputs

    def _snapshot(self) -> tuple:
        """What a prediction step changes: the post-processor's state and the pending mini-batch."""
        return (self.fair.state_dict(), list(self._pending_eta), list(self._pending_tau), list(self._pending_keys),
                self.learned, self.learn_seconds)

    def _restore(self, snapshot: tuple) -> None:
        state, pending_eta, pending_tau, pending_keys, self.learned, self.learn_seconds = snapshot
        self.fair = type(self.fair).from_state_dict(state)
        self._pending_eta, self._pending_tau, self._pending_keys = pending_eta, pending_tau, pending_keys

    def _predict_batches(self, valid: list[InputSample]) -> list[Output]:
        """Predict in blocks of the pending mini-batch; learn each batch once it is full."""
        b = self.batch_size
        outputs: list[Output] = []
        i, n = 0, len(valid)
        while i < n:
            start = len(self._pending_eta)
            chunk = valid[i : i + b - start]
            outputs += self._predict_chunk(start, chunk)
            for sample in chunk:
                assert sample.tau is not None  # valid samples are scored: parsed, or by the base models
                self._pending_eta.append(sample.prediction)
                self._pending_tau.append(sample.tau)
                if self.uses_labels:
                    self._pending_keys.append(sample.id)
            if len(self._pending_eta) == b:
                self._learn()
            i += len(chunk)
        return outputs

    def _predict_learn(self, valid: list[InputSample]) -> list[Output]:
        """``batch_size = 1``: every message predicted, then learned, in one post-processor call per poll.

        The same floats as predicting each message (``predict_one`` under its id) and then learning
        it (``learn_one`` under its id): the post-processor's ``predict_learn_many`` is bit for bit
        that sequence.  The served distributions are computed only for the messages that carry them.
        """
        fair = self.fair
        version = fair.n_samples  # samples learned when the first message is predicted
        started = time.perf_counter()
        wanted = self._wants_distribution(valid)
        served = fair.predict_learn_many([sample.prediction for sample in valid], [sample.tau for sample in valid],
                                         mode=self.mode, keys=[sample.id for sample in valid], return_proba=wanted)
        predictions, probas = served if wanted else (served, None)
        self.learn_seconds += time.perf_counter() - started  # the predictions are included
        self.learned += len(valid)
        return self._outputs(valid, predictions.tolist(), range(version, version + len(valid)), probas)

    def _predict_chunk(self, start: int, chunk: list[InputSample]) -> list[Output]:
        """The outputs of ``chunk``, the samples at rows ``start ...`` of the pending mini-batch."""
        fair, b = self.fair, self.batch_size
        etas = [sample.prediction for sample in chunk]
        taus = [sample.tau for sample in chunk]
        keys = [sample.id for sample in chunk]
        stop = start + len(chunk)
        if b > 1:  # rows at their position within the batch, padding elsewhere: shape-stable floats
            fill, pad = self._fill_prediction, [""] * start
            etas = [fill] * start + etas + [fill] * (b - stop)
            taus = [self._fill_tau] * start + taus + [self._fill_tau] * (b - stop)
            keys = pad + keys + [""] * (b - stop)  # keyed padding: its draws leave the counter alone
        predictions = fair.predict_many(etas, taus, mode=self.mode, keys=keys)[start:stop].tolist()
        probas = fair.proba_many(etas, taus)[start:stop] if self._wants_distribution(chunk) else None
        return self._outputs(chunk, predictions, [fair.n_samples] * len(chunk), probas)

    def _wants_distribution(self, samples: list[InputSample]) -> bool:
        """Whether an output of ``samples`` carries the served distribution."""
        return self.distribution or any(sample.distribution for sample in samples)

    def _learn(self) -> None:
        started = time.perf_counter()
        _learn_batches(self.fair, self._pending_eta, self._pending_tau, self._pending_keys, self.batch_size)
        self.learn_seconds += time.perf_counter() - started
        self.learned += len(self._pending_eta)
        self._drop_pending()

    def _drop_pending(self) -> None:
        """Empty the pending mini-batch, learned or not."""
        self._pending_eta.clear()
        self._pending_tau.clear()
        self._pending_keys = []

    # ------------------------------------------------------------------ feedback
    def add_feedback(self, records: Sequence[Any]) -> TaskResult:
        """Parse feedback records and buffer them (learned at the next checkpoint).

        The result's ``feedback`` holds the valid records, its ``dead_letters`` the others (input order).
        """
        parser = self.feedback_parser
        if parser is None:
            raise RuntimeError("this task reads no feedback (feedback_parser=None)")
        accepted, dead = _parse_each(records, parser.parse)
        for feedback in accepted:
            if self.learn_models:
                self._feedback.append(feedback)
            if self.uses_labels:
                self._labels.append((feedback.id, feedback.y))
        if records:
            self._feedback_next = records[-1].offset + 1
        return TaskResult([], dead, accepted)

    def audit(self, feedback: Sequence[Feedback]) -> Audit | None:
        """The served distributions of the regression feedback that has features and a group.

        Each record's features are scored by the task's base models and served by its post-processor
        at its current state, as an input message with those features would be; records without
        features or group (labels for the post-processor only) and those the models reject are left
        out.  ``None`` when there is nothing to audit: no base models, classification (labels are
        classes, not values), or no such record.  Nothing changes in the task.
        """
        if self.models is None or self.classification:
            return None
        etas, taus, ys, groups = [], [], [], []
        for record in feedback:
            if record.features is None or record.s is None:
                continue
            try:
                eta, tau = self.models.score(record.features)
            except Invalid:  # the same features as input would be a dead letter: nothing to audit
                continue
            etas.append(eta)
            taus.append(tau)
            ys.append(record.y)
            groups.append(record.s)
        if not etas:
            return None
        return Audit(self.fair.atoms, self.fair.proba_many(etas, taus), ys, groups)

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


def _parse_each(records: Sequence[Any], parse: Callable[[bytes | None, Any], T]) -> tuple[list[T], list[DeadLetter]]:
    """``parse(record.value, record)`` for every record in order: the parsed, and a dead letter for each that raised.

    Whatever goes wrong with one message is that message's: :class:`Invalid` with its reason, any
    other exception as ``"processing_error"`` with the exception's type.  A record the client could not
    decode (:class:`~connectors.kafka.transport.UnreadableRecord`) is ``"unreadable_record"``.
    """
    parsed: list[T] = []
    dead: list[DeadLetter] = []
    for record in records:
        if record.__class__ is UnreadableRecord:
            dead.append(DeadLetter(record, UNREADABLE_RECORD, record.detail))
            continue
        try:
            parsed.append(parse(record.value, record))
        except Invalid as error:
            dead.append(DeadLetter(record, error.reason, error.detail))
        except Exception as error:  # noqa: BLE001 -- one message's failure, whatever it is, is that message's
            dead.append(DeadLetter.of_error(record, error))
    return parsed, dead


def _check_pending(fair: DualPostProcessor, eta: Sequence[Any], tau: Sequence[Sequence[float]],
                   keys: Sequence[Any]) -> tuple[list[float | list[float]], list[list[float]]]:
    """The samples ``fair`` predicted but has not learned yet, checked as its inputs.

    Parameters
    ----------
    fair
        The post-processor that will learn them.
    eta, tau, keys
        Their scores (finite numbers, or class-probability rows for classification), their tau rows
        (one probability vector over ``fair``'s groups per score) and, when ``fair`` learns under
        ids, one message id per score.

    Returns
    -------
    tuple of list
        ``eta`` and ``tau`` as lists of floats (or of rows of floats).

    Raises
    ------
    ValueError
        Naming ``pending_eta``, ``pending_tau`` or ``pending_keys``, and what is wrong with it.
    """
    n = len(eta)
    if fair.uses_labels and len(keys) != n:
        raise ValueError(f"pending_keys must have one id per pending sample ({n}), got {len(keys)}")
    if not n and not len(tau):
        return [], []
    if fair.prediction_input == "proba":
        scores = check_distributions("pending_eta", eta, n, len(fair.atoms))
    else:
        scores = check_finite("pending_eta", eta, n)
    return scores.tolist(), check_distributions("pending_tau", tau, n, fair.n_groups).tolist()


def _learn_batches(fair: DualPostProcessor, eta: Sequence[Any], tau: Sequence[Sequence[float]], keys: Sequence[Any],
                   batch_size: int) -> None:
    """Learn ``eta``, ``tau`` in mini-batches of ``batch_size`` (a multiple of it); the ids only when labels follow."""
    fair.learn_many(np.array(eta), np.array(tau), batch_size=batch_size, keys=keys if fair.uses_labels else None)
