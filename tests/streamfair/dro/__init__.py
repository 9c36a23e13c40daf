"""Tests of :mod:`streamfair.dro`; :func:`load_benchmark` gives them what lives with the benchmark scripts."""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType

from tests.support import REPO


def load_benchmark(name: str) -> ModuleType:
    """The module of ``benchmarks/<name>.py``, imported as when the script runs (its folder importable).

    The LP references (scipy is not a library dependency) and the scenario of the measured table
    of ``docs/dro.md`` live with their benchmark; the tests use the same code.

    >>> load_benchmark("bench_dro_robust").CONFIG["L"]
    10
    """
    if name in sys.modules:
        return sys.modules[name]
    folder = REPO / "benchmarks"
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))
    spec = importlib.util.spec_from_file_location(name, folder / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
