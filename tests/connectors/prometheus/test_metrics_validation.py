"""The Prometheus connector rejects bad input with a ``ValueError`` naming the argument and the offending value.

A rejected update leaves the exported series and the audit windows as they were.
"""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest
from prometheus_client import CollectorRegistry, generate_latest

from connectors.prometheus import AuditWindow, MetricsServer, StreamfairMetrics, SurrogateMetrics, WeightedHistogram
from connectors.prometheus import serve as serve_metrics
from tests.support.errors import check_error

NAN, INF = math.nan, math.inf


# ---------------------------------------------------------------- AuditWindow
def window() -> AuditWindow:
    w = AuditWindow([0.0, 1.0], n_groups=2, size=5)
    w.add([[1.0, 0.0], [0.0, 1.0]], y=[0.0, 1.0], groups=[0, 1])
    return w


def window_state(w: AuditWindow) -> bytes:
    return pickle.dumps(w.__dict__)


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(size=True), ("size", "True")),
        (dict(atoms="ab"), ("atoms", "'ab'")),
        (dict(atoms=[[0.0], [1.0, 2.0]]), ("atoms",)),
        (dict(atoms=[[0.0, 1.0]]), ("atoms", "(1, 2)")),
        (dict(atoms=[0.0, NAN]), ("atoms", "entry 1", "nan")),
    ],
)
def test_audit_window_constructor_rejects(kwargs, fragments):
    check_error(lambda: AuditWindow(**{"atoms": [0.0, 1.0], "n_groups": 2, "size": 3, **kwargs}), *fragments)


@pytest.mark.parametrize(
    "proba,y,groups,fragments",
    [
        ([[0.5, 0.6]], [0.0], [0], ("proba", "row 0", "[0.5, 0.6]")),  # does not sum to one
        ([[-0.5, 1.5]], [0.0], [0], ("proba", "row 0", "[-0.5, 1.5]")),
        ([[1.0, 0.0], [0.4, 0.4]], [0.0, 1.0], [0, 1], ("proba", "row 1", "[0.4, 0.4]")),
        ([[NAN, 1.0]], [0.0], [0], ("proba", "row 0", "nan")),
        ([[1.0], [0.0, 1.0]], [0.0, 1.0], [0, 1], ("proba must be an array of numbers",)),  # ragged
        ("ab", [0.0], [0], ("proba must be an array of numbers",)),
        ([[1.0, 0.0]], [NAN], [0], ("y must be finite", "nan")),
        ([[1.0, 0.0]], [INF], [0], ("y must be finite", "inf")),
        ([[1.0, 0.0]], ["a"], [0], ("y must be numbers", "'a'")),
        ([[1.0, 0.0]] * 2, [[0.0, 1.0]], [0, 1], ("y must have shape", "(1, 2)")),  # was flattened
        ([[1.0, 0.0]] * 2, [0.0, 1.0], [[0, 1]], ("groups must have shape (2,)", "(1, 2)")),  # was flattened
        ([[1.0, 0.0]] * 2, [0.0, 1.0], [0, 5], ("groups", "0..1", "entry 1 is 5")),
        ([[1.0, 0.0]] * 2, [0.0, 1.0], [0, -1], ("groups", "0..1", "entry 1 is -1")),
        ([[1.0, 0.0]], [0.0], [0.0], ("groups", "float64")),
    ],
)
def test_audit_window_add_rejects_and_adds_nothing(proba, y, groups, fragments):
    w = window()
    before = window_state(w)
    check_error(lambda: w.add(proba, y, groups), *fragments)
    assert window_state(w) == before


def test_audit_window_adding_no_rows_is_a_no_op():
    """``add`` of ``n = 0`` rows (``np.asarray([])`` is float) used to be refused as non-integer groups."""
    w = window()
    before = window_state(w)
    w.add(np.zeros((0, 2)), [], [])
    assert window_state(w) == before


# ---------------------------------------------------------------- StreamfairMetrics
@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(groups="ab"), ("groups", "'ab'")),  # the characters were taken as two groups
        (dict(groups=None), ("groups", "None")),
        (dict(ks=5), ("ks", "<= 1", "5")),  # a KS distance is at most 1: 5 points is 0.05
        (dict(ks="a"), ("ks", "'a'")),
        (dict(audit_window=True), ("audit_window", "True")),
        (dict(registry="x"), ("registry", "'x'")),
    ],
)
def test_streamfair_metrics_constructor_rejects(kwargs, fragments):
    check_error(lambda: StreamfairMetrics(**{"groups": ["a", "b"], "ks": 0.05, **kwargs}), *fragments)


def metrics() -> StreamfairMetrics:
    m = StreamfairMetrics(["a", "b"], ks=0.05, audit_window=10)
    m.add_feedback(0, [0.0, 1.0], [[1.0, 0.0], [0.0, 1.0]], [0.0, 1.0], [0, 1])
    m.set_dro_weights(0, [1.0, 1.0], 0.5)
    return m


def metrics_state(m: StreamfairMetrics) -> bytes:
    return generate_latest(m.registry) + pickle.dumps({part: w.__dict__ for part, w in m._audits.items()})


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda m: m.time_update(NAN).__enter__(), ("n must be an integer", "nan")),
        (lambda m: m.time_update(2.5).__enter__(), ("n must be an integer", "2.5")),
        (lambda m: m.time_update("a").__enter__(), ("n must be an integer", "'a'")),
        (lambda m: m.set_dro_weights(0, [1.0, 2.0], NAN), ("robust_value", "nan")),
        (lambda m: m.set_dro_weights(0, [1.0, 2.0], INF), ("robust_value", "inf")),
        (lambda m: m.set_dro_weights(0, [1.0, 2.0], "a"), ("robust_value", "'a'")),  # weights were set first
        (lambda m: m.set_dro_weights(0, "ab"), ("weights", "'ab'")),
        # new atoms start a new window: it replaced the old one before the rows were checked
        (lambda m: m.add_feedback(0, [0.0, 2.0], [[NAN, 1.0]], [0.0], [0]), ("proba", "nan")),
        (lambda m: m.add_feedback(0, [0.0, 1.0], [[0.5, 0.6]], [0.0], [0]), ("proba", "[0.5, 0.6]")),
        (lambda m: m.add_feedback(0, [[0.0], [1.0, 2.0]], [[0.0, 1.0]], [0.0], [0]), ("atoms must be numbers",)),
        (lambda m: m.observe(None), ("fair", "diagnostics()", "None")),
    ],
)
def test_streamfair_metrics_rejects_and_exports_nothing(call, fragments):
    m = metrics()
    before = metrics_state(m)
    check_error(lambda: call(m), *fragments)
    assert metrics_state(m) == before


# ---------------------------------------------------------------- WeightedHistogram
def histogram() -> WeightedHistogram:
    h = WeightedHistogram("demo_seconds", "Demo.", CollectorRegistry(), buckets=(0.001, 0.01))
    h.observe(0.002, n=3)
    return h


@pytest.mark.parametrize(
    "args,fragments",
    [
        ((NAN,), ("value must be a finite number", "nan")),
        ((INF,), ("value must be a finite number", "inf")),
        ((-INF,), ("value must be a finite number", "-inf")),
        (("a",), ("value must be a finite number", "'a'")),
        ((None,), ("value must be a finite number", "None")),
        ((0.002, NAN), ("n must be an integer", "nan")),
        ((0.002, 2.5), ("n must be an integer", "2.5")),
        ((0.002, INF), ("n must be an integer", "inf")),
        ((0.002, True), ("n must be an integer", "True")),
        ((0.002, None), ("n must be an integer", "None")),
    ],
)
def test_weighted_histogram_observe_rejects_and_counts_nothing(args, fragments):
    h = histogram()
    before = (list(h._counts), h._sum)
    check_error(lambda: h.observe(*args), *fragments)
    assert (list(h._counts), h._sum) == before


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(buckets=(NAN,)), ("buckets", "nan")),
        (dict(buckets=(0.1, INF)), ("buckets", "inf")),  # +Inf is added: it was exported twice
        (dict(buckets=(0.1, 0.1)), ("buckets", "(0.1, 0.1)")),
        (dict(buckets=("a",)), ("buckets", "('a',)")),
        (dict(registry=None), ("registry", "None")),
    ],
)
def test_weighted_histogram_constructor_rejects(kwargs, fragments):
    config = {"name": "demo_seconds", "documentation": "Demo.", "registry": CollectorRegistry(), **kwargs}
    check_error(lambda: WeightedHistogram(**config), *fragments)


# ---------------------------------------------------------------- SurrogateMetrics
class Counts:
    """An optimiser's cumulative counts (weak references to it are kept, as to a real one)."""

    def __init__(self, **counts):
        self.__dict__.update(counts)


@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(models="ab"), ("models", "'ab'")),
        (dict(models=None), ("models", "None")),
        (dict(registry="x"), ("registry", "'x'")),
    ],
)
def test_surrogate_metrics_constructor_rejects(kwargs, fragments):
    check_error(lambda: SurrogateMetrics(**kwargs), *fragments)


@pytest.mark.parametrize(
    "call,fragments",
    [
        (lambda m: m.observe_sso(Counts(n_oracle_calls=NAN, n_inner_steps=1)), ("sso.n_oracle_calls", "nan")),
        (lambda m: m.observe_sso(Counts(n_oracle_calls=INF, n_inner_steps=1)), ("sso.n_oracle_calls", "inf")),
        (lambda m: m.observe_sso(Counts(n_oracle_calls=-1, n_inner_steps=1)), ("sso.n_oracle_calls", "-1")),
        (lambda m: m.observe_sso(Counts(n_oracle_calls=1.5, n_inner_steps=1)), ("sso.n_oracle_calls", "1.5")),
        (lambda m: m.observe_sso(Counts(n_oracle_calls=2, n_inner_steps=NAN)), ("sso.n_inner_steps", "nan")),
        (lambda m: m.observe_sso(None), ("sso.n_oracle_calls", "None")),
        (lambda m: m.observe_tuner(Counts(outer_iterations=NAN, skipped_steps=0)), ("tuner.outer_iterations", "nan")),
        (lambda m: m.observe_tuner(Counts(outer_iterations=3, skipped_steps=-1)), ("tuner.skipped_steps", "-1")),
    ],
)
def test_surrogate_metrics_rejects_bad_counts_and_exports_nothing(call, fragments):
    m = SurrogateMetrics()
    before = generate_latest(m.registry)
    check_error(lambda: call(m), *fragments)
    assert generate_latest(m.registry) == before


# ---------------------------------------------------------------- MetricsServer and serve
@pytest.mark.parametrize("start", [MetricsServer, serve_metrics], ids=["MetricsServer", "serve"])
@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(port=True), ("port", "True")),  # bound port 1
        (dict(host=None), ("host", "None")),
        (dict(host=5), ("host", "5")),
        (dict(registry=None), ("registry", "None")),
        (dict(live=5), ("live", "5")),
        (dict(ready="ok"), ("ready", "'ok'")),
    ],
)
def test_metrics_server_rejects(start, kwargs, fragments):
    check_error(lambda: start(**{"registry": CollectorRegistry(), "port": 0, "host": "127.0.0.1", **kwargs}),
                *fragments)


def test_numpy_integers_are_integers():
    """``audit_window`` and ``port`` given as numpy integers (as read from an array) were refused."""
    assert StreamfairMetrics(["a", "b"], ks=0.05, audit_window=np.int64(5)).audit_window == 5
    server = MetricsServer(CollectorRegistry(), port=np.int64(0), host="127.0.0.1")
    try:
        assert server.port > 0
    finally:
        server.close()
