"""``streamfair serve``: the Kafka daemon's command line (fair predictions on a live stream).

The configuration comes from a TOML file, the environment, ``--set`` and the shortcut flags (in that
order; see :mod:`connectors.kafka.config`); :class:`~connectors.kafka.loop.Daemon` runs until a stop
signal (SIGTERM or SIGINT: a final checkpoint, then exit 0; a second signal exits at once), or with
``--once`` until every owned partition is drained.  A configuration error exits 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from typing import Any

from connectors.kafka.config import Config, ConfigError, load_config, log_level
from connectors.kafka.logs import log_event, setup_logging
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver

#: After a stop signal the process exits (code 1) at the latest after this many seconds.
SHUTDOWN_DEADLINE_S = 9.5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``streamfair serve``."""
    parser.add_argument("--config", help="TOML configuration file (default: $STREAMFAIR_CONFIG)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="override one setting (repeatable)")
    parser.add_argument("--bootstrap-servers", help="kafka.bootstrap_servers (comma-separated host:port)")
    parser.add_argument("--group-id", help="kafka.group_id")
    parser.add_argument("--input-topic", help="topics.input")
    parser.add_argument("--output-topic", help="topics.output")
    parser.add_argument("--guarantee", choices=("at_least_once", "exactly_once"), help="processing.guarantee")
    parser.add_argument("--log-level", help="log.level")
    parser.add_argument("--metrics-port", type=int, help="metrics.port (0: off)")
    parser.add_argument("--once", action="store_true", help="stop when every owned partition is drained")
    parser.add_argument("--max-messages", type=int, default=None, help="stop after about this many input records")


_SHORTCUTS = {
    "bootstrap_servers": "kafka.bootstrap_servers",
    "group_id": "kafka.group_id",
    "input_topic": "topics.input",
    "output_topic": "topics.output",
    "guarantee": "processing.guarantee",
    "log_level": "log.level",
    "metrics_port": "metrics.port",
}


def config_from_args(args: argparse.Namespace) -> Config:
    """The configuration from file, environment, ``--set`` and the shortcut flags (in that order)."""
    overrides = list(args.overrides)
    for name, key in _SHORTCUTS.items():
        value = getattr(args, name, None)
        if value is not None:
            overrides.append(f"{key}={value}")
    return load_config(args.config, overrides=overrides)


def metrics_observers(config: Config) -> list[DaemonObserver]:
    """``connectors.prometheus.metrics.make_observer(config)`` when ``metrics.port`` is set."""
    if not config.metrics.port:
        return []
    try:
        module = importlib.import_module("connectors.prometheus.metrics")
    except ModuleNotFoundError:
        raise ConfigError("metrics.port: set, but the connectors.prometheus.metrics module is not installed") from None
    return [module.make_observer(config)]


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
