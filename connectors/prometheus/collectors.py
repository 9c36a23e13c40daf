"""Building blocks on ``prometheus_client``: duration buckets that resolve microseconds, a histogram of
counted observations, and removing a labelled series.

>>> from prometheus_client import CollectorRegistry
>>> registry = CollectorRegistry()
>>> latency = WeightedHistogram("demo_seconds", "A poll's mean per record.", registry)
>>> latency.observe(0.002, n=10)
>>> registry.get_sample_value("demo_seconds_count"), registry.get_sample_value("demo_seconds_bucket", {"le": "0.0025"})
(10.0, 10.0)
"""

from __future__ import annotations

import bisect
import math
import threading
from collections.abc import Iterable, Iterator, Sequence
from numbers import Integral
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from streamfair.validation import is_real

#: Histogram buckets for durations, 1 microsecond to 10 seconds (the client's defaults start at 5 ms).
LATENCY_BUCKETS: tuple[float, ...] = (
    1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3,
    1e-2, 2.5e-2, 5e-2, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
)


class WeightedHistogram(Collector):
    """A histogram whose observations carry a count: ``observe(value, n)`` adds ``value`` ``n`` times in O(1).

    Used for per-message and per-sample durations measured over a batch (the batch's mean, counted
    once per message), so that quantiles are over messages, not batches.

    Parameters
    ----------
    name, documentation
        The metric's name and help text.
    registry
        The :class:`~prometheus_client.CollectorRegistry` it is registered on (at construction).
    buckets
        Upper bounds of the buckets, in seconds: distinct finite numbers, in any order (``+Inf``
        is added).

    Examples
    --------
    A batch of 10 messages that took 2 ms each, then one of 0.5 s (``n = 0`` counts nothing):

    >>> from prometheus_client import CollectorRegistry, generate_latest
    >>> registry = CollectorRegistry()
    >>> histogram = WeightedHistogram("batch_seconds", "Time per message.", registry, buckets=(0.001, 0.01))
    >>> histogram.observe(0.002, n=10)
    >>> histogram.observe(0.5)
    >>> histogram.observe(0.1, n=0)
    >>> print(generate_latest(registry).decode(), end="")
    # HELP batch_seconds Time per message.
    # TYPE batch_seconds histogram
    batch_seconds_bucket{le="0.001"} 0.0
    batch_seconds_bucket{le="0.01"} 10.0
    batch_seconds_bucket{le="+Inf"} 11.0
    batch_seconds_count 11.0
    batch_seconds_sum 0.52
    """

    def __init__(self, name: str, documentation: str, registry: CollectorRegistry,
                 buckets: Sequence[float] = LATENCY_BUCKETS):
        self.name, self.documentation = name, documentation
        self._bounds = bucket_bounds(buckets) + [math.inf]
        check_registry(registry)
        self._counts = [0] * len(self._bounds)
        self._sum = 0.0
        self._lock = threading.Lock()
        registry.register(self)

    def observe(self, value: float, n: int = 1) -> None:
        """Count ``value`` (seconds) ``n`` times; ``n <= 0`` is ignored.

        Parameters
        ----------
        value
            The observation, in seconds: a finite number.
        n
            How many observations of ``value``: an integer.
        """
        if type(n) is not int:  # the usual count needs no ABC check
            check_count("n", n)
        if not is_real(value):
            raise ValueError(f"value must be a finite number, got {value!r}")
        if n <= 0:
            return
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            self._counts[index] += n
            self._sum += value * n

    def describe(self) -> Iterator[HistogramMetricFamily]:
        """The metric's name, type and help text, for the registry (without samples).

        Yields
        ------
        HistogramMetricFamily
            One empty histogram family.
        """
        yield HistogramMetricFamily(self.name, self.documentation)

    def collect(self) -> Iterator[HistogramMetricFamily]:
        """The histogram's current samples, for a scrape (the registry calls it).

        Yields
        ------
        HistogramMetricFamily
            One histogram family: cumulative bucket counts, ``_count`` and ``_sum``.
        """
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative, buckets = 0, []
        for bound, count in zip(self._bounds, counts, strict=True):
            cumulative += count
            buckets.append((floatToGoString(bound), float(cumulative)))
        yield HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=total)


def remove_series(metric: Any, *labels: str) -> None:
    """Drop the series of ``metric`` with these label values (nothing if it was never set).

    >>> from prometheus_client import CollectorRegistry, Gauge
    >>> registry = CollectorRegistry()
    >>> lag = Gauge("lag_records", "Records behind.", ["partition"], registry=registry)
    >>> lag.labels("0").set(5)
    >>> remove_series(lag, "0")
    >>> remove_series(lag, "0")                              # already gone: no error
    >>> registry.get_sample_value("lag_records", {"partition": "0"}) is None
    True
    """
    try:
        metric.remove(*labels)
    except KeyError:  # never set for this partition
        pass


def bucket_bounds(buckets: Any) -> list[float]:
    """The finite upper bounds of histogram buckets, sorted; ``ValueError`` unless they are distinct finite numbers.

    >>> bucket_bounds([0.01, 0.001])
    [0.001, 0.01]
    >>> bucket_bounds([0.01, float("inf")])
    Traceback (most recent call last):
    ...
    ValueError: buckets must be distinct finite numbers (+Inf is added), got [0.01, inf]
    """
    try:
        bounds = sorted(float(b) for b in buckets)
    except (TypeError, ValueError):
        raise ValueError(f"buckets must be a sequence of numbers, got {buckets!r}") from None
    if not all(math.isfinite(b) for b in bounds) or len(set(bounds)) != len(bounds):
        raise ValueError(f"buckets must be distinct finite numbers (+Inf is added), got {buckets!r}")
    return bounds


def check_registry(registry: Any) -> CollectorRegistry:
    """``registry`` if it is a :class:`~prometheus_client.CollectorRegistry`, else ``ValueError``.

    >>> check_registry(None)
    Traceback (most recent call last):
    ...
    ValueError: registry must be a prometheus_client CollectorRegistry, got None
    """
    if not isinstance(registry, CollectorRegistry):
        raise ValueError(f"registry must be a prometheus_client CollectorRegistry, got {registry!r}")
    return registry


def check_count(name: str, n: Any) -> int:
    """A number of observations: an integer (``bool`` refused; ``n <= 0`` is up to the caller).

    >>> check_count("n", 2.5)
    Traceback (most recent call last):
    ...
    ValueError: n must be an integer, got 2.5
    """
    if isinstance(n, bool) or not isinstance(n, Integral):
        raise ValueError(f"{name} must be an integer, got {n!r}")
    return int(n)


def label_values(name: str, values: Any, minimum: int) -> list[str]:
    """Label values as strings: a sequence (not a string) of at least ``minimum`` distinct ones, else ``ValueError``.

    >>> label_values("groups", [0, 1], 2)
    ['0', '1']
    >>> label_values("groups", "ab", 2)
    Traceback (most recent call last):
    ...
    ValueError: groups must be a sequence of distinct labels (at least 2), got 'ab'
    """
    if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
        raise ValueError(f"{name} must be a sequence of distinct labels (at least {minimum}), got {values!r}")
    values = list(values)
    labels = [str(v) for v in values]
    if len(labels) < minimum or len(set(labels)) != len(labels):
        raise ValueError(f"{name} must be a sequence of distinct labels (at least {minimum}), got {values!r}")
    return labels
