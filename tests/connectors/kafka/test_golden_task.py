"""The daemon's processing reproduces the recorded bytes: predictions, dead letters, checkpoints."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from connectors.kafka.checkpoint import Checkpoint
from tests.support import REPO
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


@pytest.mark.slow
def test_the_recorded_bytes_do_not_depend_on_the_cpus_vector_instructions(tmp_path):
    """The same bytes with numpy's AVX2 and AVX-512 loops switched off and the kernel compiled for any x86-64 CPU.

    numpy's ``exp`` takes another code path on CPUs with AVX-512 and differs in the last bit: the
    post-processors take their exponentials from the kernel, so a replay on another machine gives
    the recorded bytes.  (Compiling the kernel for a generic CPU takes tens of seconds.)
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_CPU_NAME": "generic",
           "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"}
    code = ("import json, numpy; from tests.support.golden_task import CASES, GOLDEN, run; "
            "assert 'X86_V3' not in numpy._core._multiarray_umath.__cpu_features__ or "
            "not numpy._core._multiarray_umath.__cpu_features__['X86_V3']; "
            "recorded = json.loads(GOLDEN.read_text()); "
            "print(sorted(case for case in CASES if run(case) != recorded[case]))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                            cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
