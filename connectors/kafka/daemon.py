"""``streamfair serve``: the Kafka daemon's command line (fair predictions on a live stream).

The configuration comes from a TOML file, the environment, ``--set`` and the shortcut flags (in that
order; see :mod:`connectors.kafka.config`); :class:`~connectors.kafka.loop.Daemon` runs until a stop
signal (SIGTERM or SIGINT: a final checkpoint, then exit 0; a second signal exits at once), or with
``--once`` until every owned partition is drained.  A configuration error exits 2.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

from connectors.kafka.config import Config, ConfigError, add_config_arguments, config_from_args, log_level
from connectors.kafka.logs import log_event, setup_logging
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver
from connectors.prometheus import make_observer

#: After a stop signal the process exits (code 1) at the latest after this many seconds.
SHUTDOWN_DEADLINE_S = 9.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``streamfair serve``: the configuration flags of the schema, ``--once``, ``--max-messages``.

    >>> parser = argparse.ArgumentParser(prog="streamfair serve")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--once", "--group-id", "scoring", "--set", "processing.batch_size=64"])
    >>> args.once, args.max_messages, args.group_id, args.overrides
    (True, None, 'scoring', ['processing.batch_size=64'])
    """
    add_config_arguments(parser)
    parser.add_argument("--once", action="store_true", help="stop when every owned partition is drained")
    parser.add_argument("--max-messages", type=int, default=None, help="stop after about this many input records")


def metrics_observers(config: Config) -> list[DaemonObserver]:
    """:func:`connectors.prometheus.make_observer` when ``metrics.port`` is set.

    >>> from connectors.kafka.config import load_config
    >>> metrics_observers(load_config(env={}))  # metrics.port = 0: no endpoint
    []
    """
    return [make_observer(config)] if config.metrics.port else []


def _give_up(logger: logging.Logger) -> None:
    """Last resort when a blocking client call (e.g. a transaction commit to a dead broker) hangs."""
    log_event(logger, logging.ERROR, "shutdown_timeout", seconds=SHUTDOWN_DEADLINE_S)
    os._exit(1)


def run(args: argparse.Namespace) -> int:
    """Run the daemon with the configuration of ``args``; the process's exit code."""
    try:
        config = config_from_args(args)
        observers = metrics_observers(config)
    except ConfigError as error:
        print(f"streamfair serve: configuration error: {error}", file=sys.stderr)
        return 2
    logger = setup_logging(log_level(config))
    daemon = Daemon(config, observers, logger)
    signals: list[int] = []

    def handle(signum: int, frame: Any) -> None:
        signals.append(signum)
        if len(signals) > 1:
            log_event(logger, logging.ERROR, "forced_exit", signal=signal.Signals(signum).name)
            os._exit(130)
        log_event(logger, logging.INFO, "stopping", signal=signal.Signals(signum).name)
        daemon.stop()
        watchdog = threading.Timer(SHUTDOWN_DEADLINE_S, _give_up, args=(logger,))
        watchdog.daemon = True
        watchdog.start()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    try:
        return daemon.run(once=args.once, max_messages=args.max_messages)
    except ValueError as error:  # topics or models that do not fit the configuration
        log_event(logger, logging.ERROR, "fatal", error=str(error))
        return 2
