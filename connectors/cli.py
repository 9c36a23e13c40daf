"""The ``streamfair`` command: one sub-command per module, imported only when used.

Each sub-command module defines ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys

COMMANDS = {
    "demo": ("connectors.demo", "run the embedded demo: broker, synthetic producer, daemon, report"),
    "serve": ("connectors.daemon", "run the Kafka consumer daemon"),
    "broker": ("connectors.broker", "run the bundled Kafka-protocol broker (Tansu) on 127.0.0.1"),
    "experiment": ("connectors.experiment", "reproduce the paper's experiments (tables and plots)"),
    "bench": ("connectors.bench", "run the benchmarks and print their tables"),
    "report": ("connectors.report", "render a PNG of fairness and risk over time"),
    "classification-experiment": (
        "connectors.classification_experiment",
        "complex metrics and constraints (seed 003): paper vs ours",
    ),
    "surrogates-experiment": (
        "connectors.surrogates_experiment",
        "black-box macro-F1 on COMPAS and Adult (seed 000, A-T4), paper vs ours",
    ),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="streamfair", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, (module_name, help_text) in COMMANDS.items():
        command = sub.add_parser(name, help=help_text)
        if name == chosen:
            module = importlib.import_module(module_name)
            module.add_arguments(command)
            command.set_defaults(run=module.run)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
