"""Code shared by the tests (imported as ``tests.support.<module>``) and the recorders of the golden files."""

from __future__ import annotations

from pathlib import Path

#: the repository's root folder
REPO = Path(__file__).resolve().parents[2]
#: the recorded files the golden tests compare against
DATA = REPO / "tests" / "data"
