"""The ```python blocks of the documentation pages: found, compiled, run in order in one namespace."""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

from tests.support import REPO

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
