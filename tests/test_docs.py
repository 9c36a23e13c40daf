"""Every ```python block of README.md and docs/*.md runs, so the documentation cannot rot.

The blocks of one page run in order in one namespace (a later block may use what an earlier one
defined), in a temporary working directory.  A block that needs a Kafka broker uses the name
``BOOTSTRAP``: it is then the address of the test broker (the ``kafka_broker`` fixture).  A block
fenced as ```python no-run (it needs your own cluster or a package the tests do not install) is
compiled, not run; there must be few.  docs/own-model.md runs end to end in tests/test_own_model.py.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from test_cli import JARGON

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: run by its own end-to-end test (it needs the daemon between its blocks)
OWN_MODEL = REPO / "docs" / "own-model.md"
FENCE = re.compile(r"^( *)```python([^\n]*)\n(.*?)^\1```", re.S | re.M)  # also indented, in a list item
NO_RUN = "no-run"


@dataclass(frozen=True)
class Block:
    page: Path
    line: int
    info: str
    code: str

    @property
    def runs(self) -> bool:
        return self.info != NO_RUN

    def compiled(self):
        return compile(self.code, f"{self.page.relative_to(REPO)}:{self.line}", "exec")


def python_blocks(page: Path) -> list[Block]:
    text = page.read_text(encoding="utf-8")
    return [Block(page, text.count("\n", 0, m.start()) + 2, m.group(2).strip(), textwrap.dedent(m.group(3)))
            for m in FENCE.finditer(text)]


def run_blocks(blocks: list[Block], namespace: dict) -> None:
    """Compile every block (so a no-run block is at least valid Python) and run the runnable ones, in order."""
    for block in blocks:
        code = block.compiled()
        if block.runs:
            exec(code, namespace)


@pytest.mark.parametrize("page", [p for p in PAGES if p != OWN_MODEL], ids=lambda p: str(p.relative_to(REPO)))
def test_code_blocks_run(page, tmp_path, monkeypatch, request):
    blocks = python_blocks(page)
    namespace = {"__name__": "__main__"}
    if any("BOOTSTRAP" in block.code for block in blocks):
        namespace["BOOTSTRAP"] = request.getfixturevalue("kafka_broker").bootstrap
    monkeypatch.chdir(tmp_path)
    run_blocks(blocks, namespace)


def test_fences_are_python_or_python_no_run_and_no_run_is_rare():
    blocks = [block for page in PAGES for block in python_blocks(page)]
    assert {block.info for block in blocks} <= {"", NO_RUN}
    assert len(blocks) >= 15  # the fence pattern finds them (indented ones too)
    assert sum(not block.runs for block in blocks) <= 4


def test_user_facing_pages_have_no_internal_jargon_or_local_paths():
    for page in [*PAGES, REPO / "CONTRIBUTING.md"]:
        text = page.read_text(encoding="utf-8")
        assert not JARGON.search(text), f"{page.name}: {JARGON.search(text).group(0)!r}"
        assert not re.search(r"(?<![\w.])/(work|tmp|root|home)/", text), page.name
