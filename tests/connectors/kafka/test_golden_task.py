"""The daemon's processing reproduces the recorded bytes: predictions, dead letters, checkpoints."""

from __future__ import annotations

import json

import pytest

from connectors.kafka.checkpoint import Checkpoint
from tests.support.golden_task import CASES, GOLDEN, HALF, N_MESSAGES, feedback, play, records, run, task_for

RECORDED = json.loads(GOLDEN.read_text())


@pytest.mark.parametrize("case", sorted(CASES))
def test_outputs_dead_letters_and_checkpoints_are_the_recorded_bytes(case):
    assert run(case) == RECORDED[case]


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_recorded_checkpoint_restores_and_continues_to_the_recorded_end(case):
    point = Checkpoint.from_bytes(RECORDED[case]["first"]["checkpoint"].encode())
    assert point.offset == HALF
    labels = feedback(N_MESSAGES)[len(feedback(HALF)) - 1 :]
    assert play(task_for(case, point), records(case)[HALF:], labels) == RECORDED[case]["second"]
