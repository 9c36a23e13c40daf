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

    numpy's ``exp`` takes another code path on CPUs with AVX-512 and differs in the last bit; the
    post-processors take their exponentials from the kernel, so a replay on another machine gives
    the recorded bytes.  Both recordings are checked: the daemon's task on its fixed stream and the
    ``paper`` profile's outputs (``tests/data/paper_profile.npz``).  (Compiling the kernel for a
    generic CPU takes tens of seconds.)
    """
    env = {**os.environ, "PYTHONPATH": str(REPO), "NUMBA_CACHE_DIR": str(tmp_path), "NUMBA_CPU_NAME": "generic",
           "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR"}
    code = ("import json, numpy; from tests.support.golden_task import CASES, GOLDEN, run; "
            "assert not numpy._core._multiarray_umath.__cpu_features__.get('X86_V3'); "
            "recorded = json.loads(GOLDEN.read_text()); "
            "print(sorted(case for case in CASES if run(case) != recorded[case]), end=' '); "
            "from tests.support import paper_profile_stream as paper; pinned = numpy.load(paper.GOLDEN); "
            "produced = paper.record_all(profile='paper'); "
            "print(sorted(key for key in pinned.files if produced[key].tobytes() != pinned[key].tobytes()))")
    result = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=900,
                            cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[] []"
