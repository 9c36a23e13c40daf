"""Pure logic of the daemon: message validation, output encoding, checkpoints, partition tasks.

The records here are plain named tuples (no broker); the broker tests are in test_daemon_kafka.py.
"""

from __future__ import annotations

import json
import pickle
from collections import Counter

import numpy as np
import pytest
from river import linear_model

from connectors.kafka import codec
from connectors.kafka.checkpoint import Checkpoint
from connectors.kafka.codec import (
    REASONS,
    FeedbackParser,
    InputParser,
    Invalid,
    dead_letter_headers,
    encode_dead_letter,
    encode_output,
    message_key,
    same_key_ids,
)
from connectors.kafka.models import BaseModels
from connectors.kafka.partitions import SyntheticRecord
from connectors.kafka.records import DeadLetter, InputSample
from connectors.kafka.task import PartitionTask
from streamfair import FairRegressionPostProcessor
from tests.support.consumer_records import Record

#: One malformed input per reason, for a parser with K=2, max 300 bytes, models configured and
#: allowed features {"a", "b"}.
MALFORMED = {
    "empty": None,
    "oversized": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "pad": "' + b"x" * 300 + b'"}',
    "not_utf8": b'{"id": "\xff\xfe", "eta": 0.1, "tau": [0.5, 0.5]}',
    "invalid_json": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5]',
    "not_object": b'[1, 2, 3]',
    "missing_id": b'{"eta": 0.1, "tau": [0.5, 0.5]}',
    "bad_id": b'{"id": 1.5, "eta": 0.1, "tau": [0.5, 0.5]}',
    "bad_flag": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "distribution": "yes"}',
    "ambiguous_input": b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "features": {"a": 1}}',
    "missing_prediction": b'{"id": "x", "eta": 0.1}',
    "bad_eta": b'{"id": "x", "eta": "0.1", "tau": [0.5, 0.5]}',
    "bad_tau": b'{"id": "x", "eta": 0.1, "tau": {"0": 0.5}}',
    "non_finite": b'{"id": "x", "eta": NaN, "tau": [0.5, 0.5]}',
    "tau_length": b'{"id": "x", "eta": 0.1, "tau": [0.2, 0.3, 0.5]}',
    "tau_not_distribution": b'{"id": "x", "eta": 0.1, "tau": [0.7, 0.7]}',
    "bad_features": b'{"id": "x", "features": {"a": [1, 2]}}',
    "unknown_feature": b'{"id": "x", "features": {"a": 1, "zzz": 2}}',
}


@pytest.fixture
def parser():
    return InputParser(n_groups=2, max_bytes=300, features=["a", "b"], models=True)


@pytest.mark.parametrize("reason", sorted(MALFORMED))
def test_each_malformed_kind_gets_its_reason(parser, reason):
    with pytest.raises(Invalid) as error:
        parser.parse(MALFORMED[reason])
    assert error.value.reason == reason
    assert error.value.reason in REASONS


@pytest.mark.parametrize(
    "value, reason",
    [
        (b'{"id": "x", "eta": Infinity, "tau": [0.5, 0.5]}', "non_finite"),
        (b'{"id": "x", "eta": 1e999, "tau": [0.5, 0.5]}', "non_finite"),
        (b'{"id": "x", "eta": 0.1, "tau": [0.5, NaN]}', "non_finite"),
        (b'{"id": true, "eta": 0.1, "tau": [0.5, 0.5]}', "bad_id"),
        (b'{"id": "", "eta": 0.1, "tau": [0.5, 0.5]}', "bad_id"),
        (b'{"id": "x", "eta": true, "tau": [0.5, 0.5]}', "bad_eta"),
        (b'{"id": "x", "eta": 0.1, "tau": [true, false]}', "bad_tau"),
        (b'{"id": "x", "eta": 0.1, "tau": ["0.5", "0.5"]}', "bad_tau"),
        (b'{"id": "x", "eta": 0.1, "tau": [1.2, -0.2]}', "tau_not_distribution"),
        (b'{"id": "x", "features": {}}', "bad_features"),
        (b'{"id": "x", "features": {"a": NaN}}', "non_finite"),
        (b"", "empty"),
        (b'"just a string"', "not_object"),
    ],
)
def test_more_malformed_variants(parser, value, reason):
    with pytest.raises(Invalid) as error:
        parser.parse(value)
    assert error.value.reason == reason


def test_pathological_json_is_a_dead_letter_not_a_crash():
    cases = [
        (b"[" * 100_000 + b"]" * 100_000, "invalid_json"),  # nesting deeper than the recursion limit
        (b'{"id": ' + b"9" * 5000 + b"}", "invalid_json"),  # over Python's int-digits limit
        (b'{"id": "x", "eta": ' + b"9" * 400 + b', "tau": [0.5, 0.5]}', "non_finite"),  # overflows a float
    ]
    for value, reason in cases:
        with pytest.raises(Invalid) as error:
            InputParser(2, 10**6).parse(value)
        assert error.value.reason == reason


#: Inputs where orjson and json.loads could part: integers beyond 64 bits (orjson makes floats of
#: them), literals only json.loads takes, escapes, whitespace, byte-order marks.
DECODER_EDGES = [
    *[value for value in MALFORMED.values() if value is not None],
    b'{"id": 18446744073709551615, "eta": 0.1, "tau": [0.5, 0.5]}',  # the largest 64-bit integer id
    b'{"id": 18446744073709551616, "eta": 0.1, "tau": [0.5, 0.5]}',  # one more: json.loads keeps an int id
    b'{"id": -9223372036854775809, "eta": 0.1, "tau": [0.5, 0.5]}',
    b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "distribution": 100000000000000000000}',
    b'{"id": "x", "eta": 100000000000000000000000, "tau": [0.5, 0.5]}',
    b'{"id": "x", "eta": 0.1, "tau": [100000000000000000000000, 0]}',
    b'{"id": "x", "features": {"a": 100000000000000000000000}}',
    b'{"id": "x", "eta": 1e400, "tau": [0.5, 0.5]}',
    b'{"id": "x", "eta": -Infinity, "tau": [0.5, 0.5]}',
    b'{"id": "\\ud800", "eta": 0.1, "tau": [0.5, 0.5]}',  # a lone surrogate: no UTF-8 form
    b'{"id": "caf\\u00e9", "eta": 0.1, "tau": [0.5, 0.5]}',
    b'\xef\xbb\xbf{"id": "x", "eta": 0.1, "tau": [0.5, 0.5]}',
    b' {"id": "x", "eta": 0.1, "tau": [0.5, 0.5]}\n',
    b'{"id": "x", "id": "y", "eta": 0.1, "eta": 0.2, "tau": [0.5, 0.5]}',
    b'{"id": "x", "eta": 0.12345678901234567890123, "tau": [0.30000000000000004, 0.7]}',
    b'{"id": "x", "eta": 0.1, "tau": [0.5, 0.5], "distribution": true}',
]


def _outcome(parse, value):
    try:
        sample = parse(value)
    except Invalid as error:
        return "invalid", error.reason, str(error)
    return "valid", repr(sample), [type(x) for x in (sample.id, sample.prediction)]


@pytest.mark.parametrize("value", DECODER_EDGES)
def test_orjson_decodes_inputs_as_json_loads_would(parser, value, monkeypatch):
    fast = _outcome(parser.parse, value)

    def refuse(_):
        raise codec.orjson.JSONDecodeError("refused", "", 0)

    monkeypatch.setattr(codec.orjson, "loads", refuse)  # everything through json.loads
    assert fast == _outcome(parser.parse, value)


#: Three-field messages near the edges of the checks: the id's type, length and characters, eta's
#: type and finiteness, tau's every check, and a third field other than tau.
THREE_FIELDS = [
    {"id": ident, "eta": eta, "tau": tau}
    for ident in ("a", "é", "\ud800", "x" * 256, "x" * 257, "", 7, 1.5, None)
    for eta in (0.25, -3, 10**400, float("nan"), float("-inf"), "0.1", None, True)
    for tau in ([0.3, 0.7], [0, 1], [0.3, 0.8], [-0.1, 1.1], [0.5], [0.5, "0.5"], "x", [1e400, 0.0])
] + [{"id": "a", "eta": 0.25, other: value} for other, value in (("features", {"a": 1}), ("x", [0.3, 0.7]))]


def test_the_common_message_is_decided_as_the_general_checks_decide_it():
    """A three-field message is decided as the same message with ``"distribution": false`` (the flag's default)."""
    parser = InputParser(2, 4096)
    for message in THREE_FIELDS:
        text = json.dumps(message)
        general = _outcome(parser.parse, (text[:-1] + ', "distribution": false}').encode())
        assert _outcome(parser.parse, text.encode()) == general, text


def test_features_without_models_are_dead_letters():
    with pytest.raises(Invalid) as error:
        InputParser(2, 1000).parse(b'{"id": 1, "features": {"a": 1.0}}')
    assert error.value.reason == "no_models"


def test_valid_messages_parse(parser):
    assert parser.parse(b'{"id": 7, "eta": -2, "tau": [1, 0], "extra": "ignored"}') == InputSample(
        None, 7, -2.0, [1.0, 0.0], None, False)
    record = Record("in", 0, 3, 0, None, b'{"id": "q", "features": {"a": 1, "b": "red"}, "distribution": true}', [])
    assert parser.parse(record.value, record) == InputSample(record, "q", None, None, {"a": 1, "b": "red"}, True)
    # a sum off by less than the library's tolerance is accepted
    assert parser.parse(b'{"id": "q", "eta": 0, "tau": [0.3333333, 0.6666667]}').tau == [0.3333333, 0.6666667]


@pytest.mark.parametrize(
    "value, reason",
    [
        (b'{"id": 1, "features": {"a": 1}, "y": 0.5}', "missing_label"),
        (b'{"id": 1, "features": {"a": 1}, "y": "0.5", "s": 1}', "bad_label"),
        (b'{"id": 1, "features": {"a": 1}, "y": NaN, "s": 1}', "non_finite"),
        (b'{"id": 1, "features": {"a": 1}, "y": 0.5, "s": 7}', "bad_group"),
        (b'{"id": 1, "y": 0.5, "s": 1}', "bad_features"),
    ],
)
def test_feedback_reasons(value, reason):
    with pytest.raises(Invalid) as error:
        FeedbackParser(["0", "1"], 1000).parse(value)
    assert error.value.reason == reason


def test_feedback_group_labels_match_booleans_and_strings():
    feedback = FeedbackParser([0, 1], 1000)
    parsed = feedback.parse(b'{"id": 1, "features": {"a": 1}, "y": 2, "s": true}')
    assert (parsed.y, parsed.s) == (2.0, True)
    assert feedback.parse(b'{"id": 1, "features": {"a": 1}, "y": 2, "s": "0"}').s == "0"


@pytest.mark.parametrize(
    "body, reason, shown",
    [
        ('{"id": "a", "eta": "0.1", "tau": [0.5, 0.5]}', "bad_eta", "'0.1'"),
        ('{"id": "a", "eta": 0.1, "tau": ["0.5", "0.5"]}', "bad_tau", "['0.5', '0.5']"),
    ],
)
def test_a_number_in_a_json_string_is_a_dead_letter_naming_it(body, reason, shown):
    """The library refuses ``"0.1"`` as eta or a tau entry; the daemon sends the message to the dead letters
    with a reason and a detail naming the value, and goes on."""
    task = _task()
    valid = b'{"id": "b", "eta": 0.1, "tau": [0.5, 0.5]}'
    result = task.process([Record("in", 0, 0, 0, b"a", body.encode(), []), Record("in", 0, 1, 0, b"b", valid, [])])
    (dead,) = result.dead_letters
    key, value, headers = encode_dead_letter(dead)
    assert (key, value, dict(headers)["streamfair.reason"]) == (b"a", body.encode(), reason.encode())
    assert shown in dict(headers)["streamfair.detail"].decode()
    assert [output.key for output in result.outputs] == [b"b"] and task.fair.n_samples == 1


#: Ids as a message may carry them: the integer and string forms of one key, and strings int() reads as an
#: integer whose key they are not (Arabic-Indic digits among them).
IDS = [12, "12", "012", "+12", " 12", "12 ", "1_2", "12.0", "\u0661\u0662", -3, "-3", "-03", 0, "0", "-0", 2**70,
       str(2**70), "a", "m12"]


@pytest.mark.parametrize("ident", IDS)
def test_same_key_ids_are_the_ids_of_the_same_output_key(ident):
    twins = same_key_ids(ident)
    assert twins[0] == ident and len({message_key(twin) for twin in twins}) == 1
    assert [other for other in IDS if message_key(other) == message_key(ident)] == [
        other for other in IDS if any(type(other) is type(t) and other == t for t in twins)]


def test_output_is_compact_json_with_fixed_fields():
    value = encode_output('he said "hi"', np.float64(0.25), -0.5, 12, 2, 99, [-1.0, 0.0, 1.0],
                          np.array([0.2, 0.5, 0.3]))
    decoded = json.loads(value)
    assert list(decoded) == ["id", "prediction", "eta", "state_version", "partition", "offset", "distribution"]
    assert decoded["id"] == 'he said "hi"'
    assert decoded["distribution"] == {"atoms": [-1.0, 0.0, 1.0], "proba": [0.2, 0.5, 0.3]}
    assert b", " not in value and b": " not in value
    # floats survive exactly (repr round-trips)
    x = 0.1 + 0.2
    assert json.loads(encode_output(1, x, x, 0, 0, 0))["prediction"] == x


@pytest.mark.parametrize("ident", [0, -12, 10**30, "m1", 'he said "hi"', "é", "\u2028", True, None])
def test_the_output_id_is_the_json_text_of_the_id(ident):
    """``json.dumps``'s text, also where it is written without it (strings, integers; not ``True``)."""
    value = encode_output(ident, 0.5, 0.5, 0, 0, 0)
    assert value.startswith(b'{"id":' + json.dumps(ident).encode() + b',"prediction":')


def test_a_dead_letter_of_a_dead_letter_has_one_reason_and_one_position():
    """A dead letter sent back to the input kept its first ``streamfair.*`` headers ahead of the new ones."""
    first = SyntheticRecord("in", 2, 40, 0, b"k", b"not json", [("trace", b"abc")])
    _, _, headers = encode_dead_letter(DeadLetter(first, "invalid_json", "boom"))
    again = SyntheticRecord("in", 0, 7, 0, b"k", b"not json", headers)
    _, _, headers = encode_dead_letter(DeadLetter(again, "invalid_json", "boom"))
    names = [name for name, _ in headers]
    assert names[0] == "trace" and len(names) == len(set(names)) == 6
    assert dict(headers)["streamfair.source.offset"] == b"7"


def test_dead_letter_headers_keep_the_originals_first():
    headers = dead_letter_headers("invalid_json", "boom", "in", 2, 40, [("trace", b"abc")])
    assert headers[0] == ("trace", b"abc")
    assert dict(headers[1:]) == {
        "streamfair.reason": b"invalid_json",
        "streamfair.detail": b"boom",
        "streamfair.source.topic": b"in",
        "streamfair.source.partition": b"2",
        "streamfair.source.offset": b"40",
    }


# ---------------------------------------------------------------------------- tasks and checkpoints
def _stream(n, seed, bad_every=0):
    """Records of one partition: valid score messages, and every ``bad_every``-th one malformed."""
    rng = np.random.default_rng(seed)
    records = []
    for i in range(n):
        s = int(rng.integers(0, 2))
        tau = [0.8, 0.2] if s == 0 else [0.2, 0.8]
        eta = float(np.clip(0.6 * s - 0.3 + 0.2 * rng.standard_normal(), -1, 1))
        body = {"id": f"m{i}", "eta": eta, "tau": tau, "distribution": i % 7 == 0}
        value = json.dumps(body).encode()
        if bad_every and i % bad_every == bad_every - 1:
            value = value[:-3]
        records.append(Record("in", 0, i, 1000 + i, f"m{i}".encode(), value, []))
    return records


def _task(batch_size=1, **kwargs):
    fair = FairRegressionPostProcessor(L=10, n_groups=2, memory=160, seed=3, **kwargs)
    return PartitionTask("in", 0, fair, parser=InputParser(2, 10_000), batch_size=batch_size)


def _run(task, records, splits):
    """Feed ``records`` in polls cut at ``splits``; return (outputs, dead letters)."""
    outputs, dead = [], []
    bounds = [0, *splits, len(records)]
    for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
        result = task.process(records[start:stop])
        outputs += [(out.key, out.value, out.timestamp, out.partition) for out in result.outputs]
        dead += [(letter.source.offset, letter.reason) for letter in result.dead_letters]
    return outputs, dead


def test_per_sample_task_equals_the_library_bit_for_bit():
    records = _stream(400, seed=1, bad_every=13)
    outputs, dead = _run(_task(), records, [5, 6, 150, 151, 152])
    reference = FairRegressionPostProcessor(L=10, n_groups=2, memory=160, seed=3)
    expected = []
    for record in records:
        try:
            body = json.loads(record.value)
        except ValueError:
            continue
        version = reference.n_samples
        prediction = reference.predict_one(body["eta"], body["tau"], key=body["id"])
        proba = reference.proba_one(body["eta"], body["tau"]) if body["distribution"] else None
        expected.append(encode_output(body["id"], prediction, body["eta"], version, 0, record.offset,
                                      reference.atoms if proba is not None else None, proba))
        reference.learn_one(body["eta"], body["tau"])
    assert [v for _, v, _, _ in outputs] == expected
    assert [reason for _, reason in dead] == ["invalid_json"] * (400 // 13)
    assert [t for _, _, t, _ in outputs][:3] == [1000, 1001, 1002]  # the input's timestamp is kept


@pytest.mark.parametrize("batch_size", [4, 16])
def test_minibatch_outputs_do_not_depend_on_poll_boundaries(batch_size):
    records = _stream(300, seed=2, bad_every=11)
    rng = np.random.default_rng(batch_size)
    whole, _ = _run(_task(batch_size), records, [])
    for _ in range(3):
        splits = sorted(rng.choice(np.arange(1, 300), size=25, replace=False).tolist())
        split, _ = _run(_task(batch_size), records, splits)
        assert split == whole  # byte-identical, distributions included


def test_minibatch_task_equals_library_chunks():
    batch_size = 8
    records = _stream(200, seed=4)
    outputs, _ = _run(_task(batch_size), records, [3, 50, 51])
    reference = FairRegressionPostProcessor(L=10, n_groups=2, memory=160, seed=3)
    bodies = [json.loads(r.value) for r in records]
    predictions, versions = [], []
    for start in range(0, len(bodies), batch_size):
        chunk = bodies[start:start + batch_size]
        eta, tau = [b["eta"] for b in chunk], [b["tau"] for b in chunk]
        versions += [reference.n_samples] * len(chunk)
        predictions += list(reference.predict_many(eta, tau, keys=[b["id"] for b in chunk]))
        if len(chunk) == batch_size:
            reference.learn_many(eta, tau, batch_size=batch_size)
    decoded = [json.loads(v) for _, v, _, _ in outputs]
    assert [d["prediction"] for d in decoded] == predictions
    assert [d["state_version"] for d in decoded] == versions
    assert reference.n_samples == 200 and versions[-1] == 192


@pytest.mark.parametrize("batch_size", [1, 8])
def test_checkpoint_restore_continues_byte_identically(batch_size):
    records = _stream(300, seed=5, bad_every=17)
    whole, _ = _run(_task(batch_size), records, [])
    first = _task(batch_size)
    head, _ = _run(first, records[:123], [40])
    point = Checkpoint.from_bytes(first.checkpoint().to_bytes())
    assert point.offset == 123 and len(point.pending_eta) == first.n_pending
    resumed = PartitionTask.from_checkpoint(point, models=None, parser=InputParser(2, 10_000), batch_size=batch_size)
    tail, _ = _run(resumed, records[123:], [77])
    assert head + tail == whole
    assert resumed.fair.n_samples + resumed.n_pending == first.fair.n_samples + first.n_pending + 300 - 123 - 10


def test_checkpoint_json_is_deterministic_and_exact():
    task = _task(4)
    _run(task, _stream(50, seed=6), [])
    data = task.checkpoint().to_bytes()
    again = Checkpoint.from_bytes(data)
    assert again.to_bytes() == data
    restored = FairRegressionPostProcessor.from_state_dict(again.state)
    probe = np.linspace(-1, 1, 9), np.tile([0.3, 0.7], (9, 1))
    assert np.array_equal(restored.proba_many(*probe), task.fair.proba_many(*probe))
    with pytest.raises(ValueError, match="format"):
        Checkpoint.from_bytes(b'{"format": "other"}')
    with pytest.raises(ValueError, match="not JSON"):
        Checkpoint.from_bytes(b"\x00garbage")


def test_feature_messages_use_the_models_and_feedback_is_learned_at_checkpoints():
    regressor, classifier = linear_model.LinearRegression(), linear_model.LogisticRegression()
    models = BaseModels(regressor, classifier, ["0", "1"])
    task = PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2),
                         parser=InputParser(2, 1000, models=True), models=models, learn_models=True,
                         feedback_parser=FeedbackParser(["0", "1"], 1000))
    feature = Record("in", 0, 0, 0, b"1", b'{"id": 1, "features": {"x": 1.0}}', [])
    outputs = [out.value for out in task.process([feature]).outputs]
    feedback = [Record("fb", 0, i, 0, None, json.dumps({"id": i, "features": {"x": 1.0}, "y": 0.8, "s": 1}).encode(),
                       []) for i in range(20)]
    assert [f.id for f in task.add_feedback(feedback).feedback] == list(range(20))
    outputs += [out.value for out in task.process([feature._replace(offset=1)]).outputs]
    assert json.loads(outputs[0])["eta"] == json.loads(outputs[1])["eta"] == 0.0  # not learned yet
    point = task.checkpoint()
    assert point.feedback_offset == 20 and point.models is not None
    outputs += [out.value for out in task.process([feature._replace(offset=2)]).outputs]
    assert json.loads(outputs[2])["eta"] > 0.3  # learned y = 0.8 at the checkpoint
    restored_regressor, _ = pickle.loads(point.models)
    assert restored_regressor.predict_one({"x": 1.0}) == json.loads(outputs[2])["eta"]


def test_model_errors_are_dead_letters():
    class Broken:
        def predict_one(self, x):
            raise RuntimeError("boom")

        def predict_proba_one(self, x):
            return {}

    models = BaseModels(Broken(), linear_model.LogisticRegression(), [0, 1])
    with pytest.raises(Invalid) as error:
        models.score({"x": 1.0})
    assert error.value.reason == "model_error"
    assert models.score.__self__.groups == ["0", "1"]


class LearnsNoPoison(FairRegressionPostProcessor):
    """Learning raises on a batch that holds the prediction ``POISON`` (a stand-in for a defect of learning)."""

    POISON = 0.123456789

    def learn_many(self, predictions, tau, *args, **kwargs):
        if np.any(np.asarray(predictions) == self.POISON):
            raise ZeroDivisionError("a defect of learning")
        return super().learn_many(predictions, tau, *args, **kwargs)


def test_a_mini_batch_whose_learning_raises_is_left_unlearned_and_every_message_is_answered():
    """The message completing the batch was blamed and dead-lettered, the poisoned sample stayed pending (and in
    the checkpoints), and every message after it was dead-lettered in its turn."""
    etas = [0.1, LearnsNoPoison.POISON, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.15, 0.25]
    records = [Record("in", 0, i, 0, None, json.dumps({"id": f"m{i}", "eta": eta, "tau": [0.4, 0.6]}).encode(), [])
               for i, eta in enumerate(etas)]
    task = PartitionTask("in", 0, LearnsNoPoison(L=5, n_groups=2, seed=2), parser=InputParser(2, 4096), batch_size=4)
    answered = []
    for start in range(0, len(records), 4):
        result = task.process(records[start:start + 4])
        assert result.dead_letters == []
        answered += [json.loads(output.value)["id"] for output in result.outputs]
    assert answered == [f"m{i}" for i in range(12)] and task.batches_failed == 1
    assert task.unreported() == (Counter(), Counter(batch_failed=1))  # the daemon's errors_total{kind}, once
    assert task.unreported() == (Counter(), Counter())
    reference = PartitionTask("in", 0, FairRegressionPostProcessor(L=5, n_groups=2, seed=2),
                              parser=InputParser(2, 4096), batch_size=4)
    reference.process(records[4:])  # the first batch never learned
    assert task.fair.n_samples == reference.fair.n_samples == 8
    np.testing.assert_array_equal(task.fair._optimizer.w, reference.fair._optimizer.w)


def test_a_group_classifier_whose_labels_are_none_of_the_groups_is_a_model_error():
    """Every message got the uniform tau (no correction), silently: the groups configured as f, m, say, and the
    classifier trained on 0 and 1, or the other way round."""
    class Labelled:
        def predict_one(self, x):
            return 0.3

        def predict_proba_one(self, x):
            return {"f": 0.9, "m": 0.1}

    models = BaseModels(Labelled(), Labelled(), ["0", "1"])
    with pytest.raises(Invalid) as error:
        models.score({"x": 1.0})
    assert error.value.reason == "model_error"
    assert "labels ['f', 'm'] are none of ['0', '1'] (models.groups)" in str(error.value)
    partly = BaseModels(Labelled(), Labelled(), ["f", "x"])  # one label known: the others are dropped, as before
    assert partly.score({"x": 1.0}) == (0.3, [1.0, 0.0])


@pytest.mark.slow
def test_every_tau_the_parser_accepts_is_accepted_by_the_library():
    """No poison pill: a tau that passes validation never makes the post-processor raise."""
    rng = np.random.default_rng(12)
    parser = InputParser(n_groups=5, max_bytes=10_000)
    fair = FairRegressionPostProcessor(L=5, n_groups=5)
    accepted = rejected = 0
    for _ in range(3000):
        tau = rng.dirichlet(np.ones(5))
        tau[int(rng.integers(0, 5))] += rng.choice([-1, 1]) * rng.uniform(0, 1.2e-6)
        value = json.dumps({"id": 1, "eta": 0.0, "tau": tau.tolist()}).encode()
        try:
            parsed = parser.parse(value)
        except Invalid as error:
            assert error.reason in ("tau_not_distribution",)
            rejected += 1
            continue
        fair.proba_many([parsed.prediction], [parsed.tau])
        fair.learn_one(parsed.prediction, parsed.tau)
        accepted += 1
    assert accepted > 500 and rejected > 500
