"""No input stops processing: every message becomes exactly one output or one dead letter.

The bulk runs on :class:`~connectors.kafka.task.PartitionTask` without a broker (hypothesis, derandomized:
random bytes, mutated valid messages, odd Unicode including lone surrogates, huge numbers, deep
nesting); a smaller seeded stream goes through the daemon and the real broker.
"""

from __future__ import annotations

import json
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from river import linear_model

from connectors.kafka.codec import REASONS, InputParser
from connectors.kafka.loop import Daemon
from connectors.kafka.models import BaseModels
from connectors.kafka.task import PartitionTask
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support.consumer_records import Record
from tests.support.kafka_daemon import ensure_topics_for, produce, read_topic
from tests.support.kafka_daemon import settings as daemon_settings

VALID = {"id": "m", "eta": 0.25, "tau": [0.3, 0.7]}
SURROGATE_ID = b'{"id": "\\ud800", "eta": 0.1, "tau": [0.5, 0.5]}'

# ---------------------------------------------------------------------------- input strategies
odd_text = st.one_of(
    st.text(max_size=12),
    st.text(st.characters(codec=None, categories=None), max_size=6),  # any code point, surrogates included
    st.sampled_from(["\ud800", "\udfff", "a\ud83d", "\x00", "\u202e", "🙂", "é" * 300, ""]),
)
huge_numbers = st.one_of(
    st.integers(min_value=-(10**40), max_value=10**40),
    st.sampled_from([10**308, -(10**400), 2**63, -(2**64)]),
    st.floats(allow_nan=True, allow_infinity=True),
)
json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), huge_numbers, odd_text),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(odd_text, inner, max_size=4)),
    max_leaves=12,
)


def _dumps(obj) -> bytes:
    return json.dumps(obj, allow_nan=True).encode("utf-8", "surrogatepass")


@st.composite
def structured(draw) -> bytes:
    """A message that is close to valid: each field valid or replaced by an odd JSON value."""
    obj = {}
    for name, good in (("id", draw(st.one_of(odd_text, st.integers(-(10**30), 10**30)))),
                       ("eta", draw(st.floats(-2, 2))),
                       ("tau", draw(st.sampled_from([[0.5, 0.5], [1.0, 0.0], [0.3, 0.7]]))),
                       ("features", {"x": draw(st.floats(-3, 3))}),
                       ("distribution", draw(st.booleans()))):
        choice = draw(st.integers(0, 5))
        if choice == 0:
            continue  # field left out
        obj[name] = draw(json_values) if choice == 1 else good
    if draw(st.booleans()):
        obj.pop("features", None)
    return _dumps(obj)


@st.composite
def mutated(draw) -> bytes:
    """A valid message with a few bytes flipped, deleted or inserted."""
    data = bytearray(_dumps({**VALID, "id": draw(odd_text) or "m"}))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data) - 1)) if data else 0
        action = draw(st.integers(0, 2))
        if action == 0 and data:
            data[at] = draw(st.integers(0, 255))
        elif action == 1 and data:
            del data[at]
        else:
            data.insert(at, draw(st.integers(0, 255)))
    return bytes(data)


deep = st.integers(1, 200_000).map(lambda n: b'{"id": 1, "eta": ' + b"[" * n + b"]" * n + b', "tau": [1, 0]}')
valid = st.builds(lambda i, e: _dumps({"id": i, "eta": e, "tau": [0.4, 0.6]}), st.integers(0, 10**6),
                  st.floats(-1, 1))
messages = st.one_of(st.binary(max_size=120), structured(), mutated(), deep, valid, st.none(),
                     st.just(SURROGATE_ID), json_values.map(_dumps))


# ---------------------------------------------------------------------------- task fuzzing
def _models() -> BaseModels:
    return BaseModels(linear_model.LinearRegression(), linear_model.LogisticRegression(), ["0", "1"])


TASKS = {
    "regression": lambda: PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2, seed=1),
                                        parser=InputParser(2, 4096, models=True), models=_models()),
    "minibatch": lambda: PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2, seed=1),
                                       parser=InputParser(2, 4096), batch_size=3),
    "robust": lambda: PartitionTask("in", 0, GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=2),
                                    parser=InputParser(2, 4096)),
    "classification": lambda: PartitionTask(
        "in", 0, FairClassificationPostProcessor(n_groups=2, classes=["a", "b"], seed=1),
        parser=InputParser(2, 4096, n_classes=2)),
}


def run_task(task: PartitionTask, values: list, poll: int) -> tuple[list, list]:
    """Feed ``values`` as records in polls of ``poll``; returns the outputs and dead letters."""
    records = [Record("in", 0, i, i, None, v, []) for i, v in enumerate(values)]
    outputs, dead = [], []
    for start in range(0, len(records), poll):
        result = task.process(records[start:start + poll])
        outputs += [(output.key, output.value, output.timestamp) for output in result.outputs]
        dead += [(letter.source.offset, letter.reason, letter.error_type) for letter in result.dead_letters]
    return outputs, dead


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(TASKS))
@settings(max_examples=150, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(values=st.lists(messages, min_size=1, max_size=25), poll=st.integers(1, 9))
def test_no_input_stops_a_task_and_inputs_equal_outputs_plus_dead_letters(kind, values, poll):
    task = TASKS[kind]()
    outputs, dead = run_task(task, values, poll)
    output_offsets = [json.loads(v)["offset"] for _, v, _ in outputs]
    dead_offsets = [offset for offset, _, _ in dead]
    assert sorted(output_offsets + dead_offsets) == list(range(len(values)))  # each input once, in one place
    assert {reason for _, reason, _ in dead} <= set(REASONS)
    assert task.offset == len(values)
    assert task.fair.n_samples + task.n_pending == len(outputs)  # learned exactly what was answered
    for offset in output_offsets:
        assert json.loads(values[offset])["id"] is not None


def test_lone_surrogate_id_is_a_dead_letter_and_the_stream_continues():
    task = TASKS["regression"]()
    values = [_dumps({**VALID, "id": "a"}), SURROGATE_ID, _dumps({**VALID, "id": "b"})]
    outputs, dead = run_task(task, values, poll=3)
    assert [k for k, _, _ in outputs] == [b"a", b"b"] and dead == [(1, "bad_id", None)]


class PoisonedRegression(FairRegressionPostProcessor):
    """A post-processor with a bug: it raises on one particular eta (whichever call reaches it)."""

    POISON = 0.123

    def predict_learn_many(self, eta, tau, mode="sample", keys=None, return_proba=False):
        if self.POISON in list(eta):
            raise ZeroDivisionError("a bug in the library")
        return super().predict_learn_many(eta, tau, mode, keys, return_proba)

    def predict_many(self, eta, tau, mode="sample", keys=None):
        if self.POISON in list(eta):
            raise ZeroDivisionError("a bug in the library")
        return super().predict_many(eta, tau, mode, keys)


@pytest.mark.parametrize("batch_size", [1, 4])
def test_an_exception_from_the_library_dead_letters_that_message_only(batch_size):
    rng = np.random.default_rng(batch_size)
    etas = rng.uniform(-1, 1, 60).tolist()
    etas[17] = etas[41] = PoisonedRegression.POISON
    values = [_dumps({"id": f"m{i}", "eta": e, "tau": [0.4, 0.6]}) for i, e in enumerate(etas)]

    def task():
        return PartitionTask("in", 0, PoisonedRegression(L=5, n_groups=2, seed=2), parser=InputParser(2, 4096),
                             batch_size=batch_size)

    poisoned, dead = run_task(task(), values, poll=10)
    assert dead == [(17, "processing_error", "ZeroDivisionError"), (41, "processing_error", "ZeroDivisionError")]
    clean, _ = run_task(task(), [v for i, v in enumerate(values) if i not in (17, 41)], poll=60)
    # the same predictions as a stream without the poisoned messages (only the offsets differ)
    strip = [{k: v for k, v in json.loads(value).items() if k != "offset"} for _, value, _ in poisoned]
    assert strip == [{k: v for k, v in json.loads(value).items() if k != "offset"} for _, value, _ in clean]


# ---------------------------------------------------------------------------- on the real broker
def fuzz_stream(n: int, seed: int) -> list[bytes | None]:
    """A seeded mix of valid messages, mutated ones, random bytes and the known poison pills."""
    rng = np.random.default_rng(seed)
    out: list[bytes | None] = [SURROGATE_ID, None, b"[" * 100_000, b'{"id": 1, "eta": 1e999, "tau": [1, 0]}']
    while len(out) < n:
        kind = int(rng.integers(0, 4))
        body = _dumps({"id": int(rng.integers(0, 10**6)), "eta": float(rng.uniform(-1, 1)), "tau": [0.5, 0.5]})
        if kind == 0:
            out.append(body)
        elif kind == 1:
            data = bytearray(body)
            data[int(rng.integers(0, len(data)))] = int(rng.integers(0, 256))
            out.append(bytes(data))
        elif kind == 2:
            out.append(rng.bytes(int(rng.integers(1, 60))))
        else:
            out.append(_dumps({"id": "".join(chr(int(c)) for c in rng.integers(0xD700, 0xE100, 3)),
                               "eta": 0.1, "tau": [0.5, 0.5]}))
    return out


def test_fuzzed_stream_through_the_broker_every_input_is_answered_or_dead_lettered(kafka_broker):
    values = daemon_settings(kafka_broker, "fuzz")
    config = ensure_topics_for(kafka_broker, values)
    stream = fuzz_stream(900, seed=13)
    produce(kafka_broker, config.topics.input, [(i % 3, b"k", v, None) for i, v in enumerate(stream)])
    daemon = Daemon(config)
    assert daemon.run(once=True) == 0
    outputs = read_topic(kafka_broker, config.topics.output)
    dead = read_topic(kafka_broker, config.topics.dead_letter)
    assert len(outputs) + len(dead) == len(stream) == daemon.stats.consumed
    answered = {(r.partition, json.loads(r.value)["offset"]) for r in outputs}
    dead_at = {(int(dict(r.headers)["streamfair.source.partition"]), int(dict(r.headers)["streamfair.source.offset"]))
               for r in dead}
    assert not answered & dead_at and len(answered | dead_at) == len(stream)
    reasons = Counter(dict(r.headers)["streamfair.reason"].decode() for r in dead)
    assert reasons == daemon.stats.dead_letters and reasons["bad_id"] >= 1 and len(outputs) > 150
    surrogate = [r for r in dead if r.value == SURROGATE_ID]
    assert len(surrogate) == 1 and dict(surrogate[0].headers)["streamfair.reason"] == b"bad_id"
