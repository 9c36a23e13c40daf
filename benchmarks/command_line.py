r"""The command line of the benchmark scripts: ``--help`` shows the script's docstring, an unknown argument is an error.

>>> command = parser("Throughput of a path.\n\nRun: ``python benchmarks/bench_path.py``.")
>>> command.description, command.epilog, command.parse_args([])
('Throughput of a path.', 'Run: ``python benchmarks/bench_path.py``.', Namespace())
"""

from __future__ import annotations

import argparse


def parser(doc: str) -> argparse.ArgumentParser:
    """An argument parser that describes a script by ``doc``: its first line above the options, the rest below."""
    summary, _, details = doc.strip().partition("\n")
    return argparse.ArgumentParser(description=summary, epilog=details.strip() or None,
                                   formatter_class=argparse.RawDescriptionHelpFormatter)
