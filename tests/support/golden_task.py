"""Golden outputs of the daemon's per-partition processing: predictions, dead letters, checkpoints.

``run(case)`` feeds a fixed record stream (valid messages, broken ones, feedback labels) through one
partition's task, takes a checkpoint half way and at the end, and returns every byte the task
produced.  ``tests/data/golden_task.json`` holds that record from a fixed version of the code: any later
refactoring must reproduce it byte for byte, and its half-way checkpoints (written by that version)
must restore and continue to the same end.  Re-recording is a deliberate act:
``python -m tests.support.golden_task`` (from the repository's root) writes the file from the current code.
"""

from __future__ import annotations

import json
import math

import numpy as np

from connectors.kafka.codec import FeedbackParser, InputParser
from connectors.kafka.records import TaskResult
from connectors.kafka.task import PartitionTask
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support import DATA
from tests.support.consumer_records import Record

GOLDEN = DATA / "golden_task.json"
N_MESSAGES = 600
HALF = N_MESSAGES // 2

#: Broken messages mixed into the stream, by offset: each must come out as a dead letter.
BROKEN = {
    5: b"not json",
    17: b'{"id": "x17", "eta": "high", "tau": [0.5, 0.5]}',
    40: b'{"id": "x40", "eta": 0.1, "tau": [0.9, 0.9]}',
    41: b'{"id": "x41", "proba": [0.2, 0.8, 0.1], "tau": [0.5, 0.5]}',
    99: b'{"eta": 0.2, "tau": [0.5, 0.5]}',
    250: b'{"id": "x250", "eta": NaN, "tau": [0.5, 0.5]}',
    420: None,
}


def _message(case: str, i: int, rng: np.random.Generator) -> bytes | None:
    if i in BROKEN:
        return BROKEN[i]
    s = int(rng.random() < 0.35)
    tau1 = rng.uniform(0.55, 0.95) if s else rng.uniform(0.05, 0.45)
    eta = float(np.clip(0.4 * s - 0.2 + 0.3 * rng.standard_normal(), -1.0, 1.0))
    body: dict = {"id": f"m{i}", "tau": [1 - tau1, tau1]}
    if case == "classification":
        score = 1 / (1 + math.exp(-3 * eta))  # libm's exp: numpy's rounds differently on CPUs with AVX-512
        body["proba"] = [1 - score, score]
    else:
        body["eta"] = eta
    if i % 97 == 3:
        body["distribution"] = True
    return json.dumps(body).encode()


def records(case: str) -> list[Record]:
    """The fixed input stream of ``case`` (offsets 0 .. N_MESSAGES-1, with broken messages)."""
    rng = np.random.default_rng(23)
    return [Record("in", 0, i, 1_000 + i, None, _message(case, i, rng), []) for i in range(N_MESSAGES)]


def feedback(upto: int) -> list[Record]:
    """Labels ``{"id", "y"}`` for every 7th message before ``upto`` (and one unknown id)."""
    out = [Record("fb", 0, j, 0, None, json.dumps({"id": f"m{i}", "y": 0.1 * (i % 9) - 0.4}).encode(), [])
           for j, i in enumerate(range(1, upto, 7))]
    return out + [Record("fb", 0, len(out), 0, None, b'{"id": "nobody", "y": 0.0}', [])]


#: The three post-processors (default profile, small memory) and the micro-batched daemon path.
CASES = {
    "regression": dict(fair=lambda: FairRegressionPostProcessor(n_groups=2, memory=160, seed=3), batch_size=1),
    "regression_batch4": dict(fair=lambda: FairRegressionPostProcessor(n_groups=2, memory=160, seed=3),
                              batch_size=4),
    "classification": dict(fair=lambda: FairClassificationPostProcessor(n_classes=2, n_groups=2, memory=160, seed=3),
                           batch_size=1),
    "robust": dict(fair=lambda: GroupRobustFairRegressionPostProcessor(n_groups=2, memory=160, seed=3, refresh=16),
                   batch_size=1),
}


def task_for(case: str, point=None) -> PartitionTask:
    """A new task of ``case``, or the one continuing from checkpoint ``point``."""
    spec = CASES[case]
    n_classes = 2 if case == "classification" else None
    options = dict(parser=InputParser(2, 4096, n_classes=n_classes), batch_size=spec["batch_size"], mode="sample",
                   feedback_parser=FeedbackParser(["0", "1"], 4096, labels_only=True))
    if point is not None:
        return PartitionTask.from_checkpoint(point, models=None, **options)
    return PartitionTask("in", 0, spec["fair"](), **options)


def play(task: PartitionTask, stream: list[Record], labels: list[Record]) -> dict:
    """Process ``stream`` in polls of 37 records, then ``labels``; return outputs, dead letters, checkpoint."""
    outputs: list[list] = []
    dead: list[list] = []

    def collect(result: TaskResult) -> None:
        for output in result.outputs:
            outputs.append([output.key.decode(), output.value.decode(), output.timestamp, output.partition])
        for letter in result.dead_letters:
            error_type = [] if letter.error_type is None else [letter.error_type]
            dead.append([letter.source.topic, letter.source.offset, letter.reason, letter.detail, *error_type])

    for start in range(0, len(stream), 37):
        collect(task.process(stream[start : start + 37]))
    if task.uses_labels:
        collect(task.add_feedback(labels))
    return {"outputs": outputs, "dead": dead, "checkpoint": task.checkpoint().to_bytes().decode()}


def run(case: str) -> dict:
    """Both halves of the stream: the first from a new task, the second continuing from its checkpoint."""
    from connectors.kafka.checkpoint import Checkpoint

    stream = records(case)
    first = play(task_for(case), stream[:HALF], feedback(HALF))
    point = Checkpoint.from_bytes(first["checkpoint"].encode())
    second = play(task_for(case, point), stream[HALF:], feedback(N_MESSAGES)[len(feedback(HALF)) - 1 :])
    return {"first": first, "second": second}


def record_all() -> dict:
    return {case: run(case) for case in CASES}


if __name__ == "__main__":
    GOLDEN.write_text(json.dumps(record_all(), indent=0, sort_keys=True) + "\n")
    print(f"wrote {GOLDEN} ({GOLDEN.stat().st_size} bytes)")
