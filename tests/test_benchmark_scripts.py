"""Every script of ``benchmarks/`` has a command line: ``--help`` describes it without running it, and an
unknown argument is an error (exit code 2) instead of being ignored by a run of several minutes."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest

from tests.support import REPO

SCRIPTS = sorted(
    path for path in (REPO / "benchmarks").glob("*.py") if 'if __name__ == "__main__":' in path.read_text()
)


def run(script, *arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(script), *arguments], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_the_scripts_are_found():
    assert {"bench_anytime.py", "bench_daemon.py", "bench_dro.py", "callgrind_step.py"} <= {p.name for p in SCRIPTS}


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_help_describes_the_script_without_running_it(script):
    result = run(script, "--help")
    assert result.returncode == 0, result.stderr
    summary = ast.get_docstring(ast.parse(script.read_text())).splitlines()[0]
    assert result.stdout.startswith(f"usage: {script.name}")
    assert summary in result.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda path: path.name)
def test_an_unknown_argument_is_an_error(script):
    result = run(script, "--no-such-option")
    assert result.returncode == 2
    assert result.stderr.startswith(f"usage: {script.name}") and "error:" in result.stderr
