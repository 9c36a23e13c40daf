"""``streamfair bench``: run the benchmark scripts of ``benchmarks/`` and print their tables.

Each ``benchmarks/bench_<name>.py`` defines ``main() -> str`` returning a Markdown table.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
from pathlib import Path

#: The repository's ``benchmarks/`` folder (this file is ``connectors/cli/bench.py``).
BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def available() -> dict[str, Path]:
    """Benchmark names (``bench_<name>.py``) found in the repository's ``benchmarks/`` folder.

    >>> {"anytime", "core", "daemon", "river"} <= set(available())
    True
    """
    return {path.stem.removeprefix("bench_"): path for path in sorted(BENCHMARKS.glob("bench_*.py"))}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("names", nargs="*", help=f"benchmarks to run (default: all of {sorted(available())})")


def run(args: argparse.Namespace) -> int:
    found = available()
    if not found:
        raise SystemExit(f"no benchmarks found in {BENCHMARKS}: run streamfair bench from a source checkout")
    unknown = sorted(set(args.names) - set(found))
    if unknown:
        raise SystemExit(f"unknown benchmark(s) {unknown}; available: {sorted(found)}")
    # Importable by name, so that benchmarks which start worker processes can be re-imported there.
    sys.path.insert(0, str(BENCHMARKS))
    for name in args.names or sorted(found):
        module = importlib.import_module(f"bench_{name}")
        start = time.perf_counter()
        table = module.main()
        print(f"\n## {name} ({time.perf_counter() - start:.1f} s)\n\n{table}", flush=True)
    return 0
