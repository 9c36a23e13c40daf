"""Timing shared by the benchmark scripts: the best of a few runs, the one least disturbed by others.

>>> best_seconds(lambda: sum(range(1000)), repeats=2) > 0
True
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def best_seconds(
    function: Callable[[], Any], repeats: int = 3, clock: Callable[[], float] = time.perf_counter
) -> float:
    """Shortest of ``repeats`` timings of ``function()`` by ``clock`` (wall time; ``time.process_time``: CPU)."""
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        function()
        best = min(best, clock() - start)
    return best
