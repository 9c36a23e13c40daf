"""What ``streamfair serve`` sets for its process: the garbage collector while the daemon runs."""

from __future__ import annotations

import gc
import logging
import signal
import weakref

import pytest

from connectors.kafka import daemon as serve
from connectors.kafka.daemon import YOUNG_GENERATION_THRESHOLD, serving_garbage_collection
from connectors.kafka.partitions import Partitions


class Cycle:
    """An object that refers to itself: only the collector frees it."""

    def __init__(self) -> None:
        self.me = self


def tracked(obj: object) -> bool:
    """Whether the collector's generations hold ``obj`` (a frozen object is in none of them)."""
    return any(other is obj for other in gc.get_objects())


@pytest.fixture
def python_settings():
    """Python's thresholds, restored after each test, which starts with nothing frozen.

    Unfrozen rather than asserted: Python 3.12 moves its immortal objects into the frozen generation
    at each full collection, so its freeze count is not 0 between tests.
    """
    thresholds = gc.get_threshold()
    gc.unfreeze()
    yield thresholds
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def test_the_heap_is_collected_then_frozen_and_pythons_settings_come_back(python_settings):
    gc.collect()  # as any full collection before serving: Python 3.12's own frozen objects are not the host's
    alive = [Cycle()]  # alive when serving starts: frozen
    garbage = weakref.ref(Cycle())  # unreachable already: collected first, not frozen for ever
    assert garbage() is not None and tracked(alive)
    with serving_garbage_collection():
        assert garbage() is None
        assert not tracked(alive) and gc.get_freeze_count() > 0
        assert gc.get_threshold() == (YOUNG_GENERATION_THRESHOLD, *python_settings[1:])
        made_while_serving = [Cycle()]
        assert tracked(made_while_serving)
    assert gc.get_threshold() == python_settings
    assert gc.get_freeze_count() == 0 and tracked(alive)


def test_pythons_settings_come_back_after_an_error_and_what_the_host_froze_stays_frozen(python_settings):
    with pytest.raises(RuntimeError, match="boom"), serving_garbage_collection():
        raise RuntimeError("boom")
    assert gc.get_threshold() == python_settings and gc.get_freeze_count() == 0

    gc.collect()  # the host application froze its own heap before serving
    gc.freeze()
    frozen = gc.get_freeze_count()
    with serving_garbage_collection():
        pass
    assert gc.get_freeze_count() >= frozen > 0
    assert gc.get_threshold() == python_settings


def test_serve_runs_the_daemon_under_the_serving_garbage_collection(python_settings, monkeypatch):
    seen = []

    def run(daemon, once=False, max_messages=None):
        seen.append((gc.get_threshold()[0], gc.get_freeze_count() > 0, once))
        return 0

    monkeypatch.setattr(serve.Daemon, "run", run)
    monkeypatch.setattr(serve, "setup_logging", lambda level: logging.getLogger("tests.serve"))
    monkeypatch.setattr(signal, "signal", lambda signum, handler: None)  # pytest keeps its own handlers
    from connectors.cli.commands import main

    assert main(["serve", "--once", "--set", "topics.input=orders"]) == 0
    assert seen == [(YOUNG_GENERATION_THRESHOLD, True, True)]
    assert gc.get_threshold() == python_settings and gc.get_freeze_count() == 0


def test_warm_up_runs_the_throwaway_task_and_exits_without_serving_or_metrics(monkeypatch, caplog):
    warmed = []

    def refuse(*args, **kwargs):
        raise AssertionError("--warm-up must neither serve nor open a metrics endpoint")

    original = Partitions.warm_up
    monkeypatch.setattr(serve.Daemon, "run", refuse)
    monkeypatch.setattr(serve, "metrics_observers", refuse)
    monkeypatch.setattr(Partitions, "warm_up", lambda self: warmed.append(original(self)))
    monkeypatch.setattr(serve, "setup_logging", lambda level: logging.getLogger("tests.serve"))
    monkeypatch.setattr(signal, "signal", lambda signum, handler: None)
    from connectors.cli.commands import main

    with caplog.at_level(logging.INFO, logger="tests.serve"):
        assert main(["serve", "--warm-up", "--set", "metrics.port=9109"]) == 0
    assert len(warmed) == 1 and warmed[0].outputs  # the task ran on its synthetic messages
    assert [record.getMessage() for record in caplog.records] == ["warmed_up"]
