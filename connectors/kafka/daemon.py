"""``streamfair serve``: the Kafka daemon's command line (fair predictions on a live stream).

The configuration comes from a TOML file, the environment, ``--set`` and the shortcut flags (in that
order; see :mod:`connectors.kafka.config`); :class:`~connectors.kafka.loop.Daemon` runs until a stop
signal (SIGTERM or SIGINT: a final checkpoint, then exit 0; a second signal exits at once), or with
``--once`` until every owned partition is drained.  A configuration error exits 2.  The process
serves under :func:`serving_garbage_collection`.  ``--warm-up`` only compiles the configuration's
kernels into numba's cache and exits, without a broker (for building a container image).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import logging
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

from connectors.cli.arguments import integer_at_least
from connectors.kafka.config import Config, add_config_arguments, config_from_args, log_level
from connectors.kafka.logs import log_event, setup_logging
from connectors.kafka.loop import EXIT_CONFIGURATION, Daemon
from connectors.kafka.observer import DaemonObserver
from connectors.prometheus import make_observer

#: After a stop signal the process exits (code 1) at the latest after this many seconds.
SHUTDOWN_DEADLINE_S = 9.5
#: Net allocations of tracked objects between two collections of the youngest generation while
#: serving (Python's default is 700).  Each record in flight on the producer holds about ten
#: until the broker acknowledges its batch, and a partition's 64 KiB batch holds hundreds of records:
#: with the default they outlive collection after collection and are promoted, to be traversed again.
YOUNG_GENERATION_THRESHOLD = 50_000


@contextlib.contextmanager
def serving_garbage_collection() -> Iterator[None]:
    """Garbage collection for a long-running process, Python's settings restored on exit.

    What is alive when serving starts (modules, compiled kernels, base models, the configuration)
    lives as long as the process: it is frozen (:func:`gc.freeze`, after a collection) so that full
    collections stop traversing it, and the youngest generation is collected every
    :data:`YOUNG_GENERATION_THRESHOLD` net allocations.  Reference counting frees the records'
    objects either way; what changes is how often the collector walks the objects still alive (a
    young collection walks the young objects alive, whatever the threshold).  Measured on the daemon
    with kafka-python (120,000 messages): with Python's settings the collector took 9.6 µs per
    message, in pauses of up to 77 ms (full collections, mostly over what this freezes); with these
    it did not run.  Reference cycles (the Kafka client leaves some per poll) wait for the next young
    collection, at most :data:`YOUNG_GENERATION_THRESHOLD` objects.  A heap the host application
    froze itself before serving stays frozen after it.

    >>> import gc
    >>> with serving_garbage_collection():
    ...     gc.get_threshold()[0], gc.get_freeze_count() > 0
    (50000, True)
    >>> gc.get_threshold()[0] == YOUNG_GENERATION_THRESHOLD
    False
    """
    thresholds, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    gc.unfreeze()
    gc.collect()
    # Python 3.12 moves its immortal objects into the frozen generation at each full collection:
    # only what exceeds them is the host's (collected once with the rest here, and frozen again).
    host_froze = frozen_before > gc.get_freeze_count()
    gc.freeze()
    gc.set_threshold(YOUNG_GENERATION_THRESHOLD, *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not host_froze:  # what the host froze itself stays frozen
            gc.unfreeze()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``streamfair serve``: the configuration flags of the schema, ``--once``, ``--max-messages``.

    >>> parser = argparse.ArgumentParser(prog="streamfair serve")
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["--once", "--group-id", "scoring", "--set", "processing.batch_size=64"])
    >>> args.once, args.max_messages, args.warm_up, args.group_id, args.overrides
    (True, None, False, 'scoring', ['processing.batch_size=64'])
    """
    add_config_arguments(parser)
    parser.add_argument("--once", action="store_true", help="stop when every owned partition is drained")
    parser.add_argument("--max-messages", type=integer_at_least(1), default=None,
                        help="stop after about this many input records")
    parser.add_argument("--warm-up", action="store_true",
                        help="compile the configuration's kernels into numba's cache (NUMBA_CACHE_DIR) and exit, "
                             "without a broker or metrics: for building a container image")


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
        observers = [] if args.warm_up else metrics_observers(config)
    except (ValueError, OSError) as error:  # a ConfigError; the metrics port or the history file could not be used
        print(f"streamfair serve: configuration error: {error}", file=sys.stderr)
        return EXIT_CONFIGURATION
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
        if args.warm_up:  # numba keeps what it compiles in its cache, if it can write one
            log_event(logger, logging.INFO, "warmed_up", seconds=daemon.warm_up())
            return 0
        with serving_garbage_collection():
            return daemon.run(once=args.once, max_messages=args.max_messages)
    except ValueError as error:  # topics or models that do not fit the configuration
        log_event(logger, logging.ERROR, "fatal", error=str(error))
        return EXIT_CONFIGURATION
