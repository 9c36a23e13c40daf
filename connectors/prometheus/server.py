r"""The metrics endpoint: ``/metrics`` plus ``/healthz`` (liveness) and ``/readyz`` (readiness) over HTTP.

>>> import urllib.request
>>> from prometheus_client import CollectorRegistry
>>> server = serve(CollectorRegistry(), port=0, host="127.0.0.1")
>>> with urllib.request.urlopen(f"http://127.0.0.1:{server.port}{HEALTH_PATH}", timeout=5) as response:
...     response.status, response.read()
(200, b'ok\n')
>>> server.close()
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from numbers import Integral
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from connectors.prometheus.collectors import check_registry

METRICS_PATH, HEALTH_PATH, READY_PATH = "/metrics", "/healthz", "/readyz"


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # scrapes every few seconds would flood stderr
        pass


Probe = Callable[[], "tuple[bool, str]"]


class MetricsServer:
    """``/metrics`` (Prometheus text or OpenMetrics), ``/healthz`` and ``/readyz`` in a background thread.

    Parameters
    ----------
    registry
        What ``/metrics`` exposes (a :class:`~prometheus_client.CollectorRegistry`).
    port
        TCP port, an integer in ``0..65535``; 0 picks a free one (see :attr:`port`).
    host
        Bind address, a string (``"0.0.0.0"``: every interface, as a container needs).
    live, ready
        ``() -> (ok, message)`` for ``/healthz`` and ``/readyz`` (200 if ok, else 503); ``None``: always ok.

    Attributes
    ----------
    port : int
        The port actually bound.

    Examples
    --------
    A registry with one counter, and a readiness probe that says the daemon is restoring:

    >>> import urllib.error, urllib.request
    >>> from prometheus_client import CollectorRegistry, Counter
    >>> registry = CollectorRegistry()
    >>> Counter("demo_events_total", "Events seen.", registry=registry).inc(3)
    >>> server = MetricsServer(registry, port=0, host="127.0.0.1", ready=lambda: (False, "restoring"))
    >>> url = f"http://127.0.0.1:{server.port}"
    >>> with urllib.request.urlopen(url + METRICS_PATH, timeout=5) as response:
    ...     [line for line in response.read().decode().splitlines() if line.startswith("demo_events_total")]
    ['demo_events_total 3.0']
    >>> try:
    ...     urllib.request.urlopen(url + READY_PATH, timeout=5)
    ... except urllib.error.HTTPError as error:
    ...     with error:
    ...         error.code, error.read()
    (503, b'restoring\\n')
    >>> server.close()
    """

    def __init__(self, registry: CollectorRegistry, port: int = 0, host: str = "0.0.0.0",
                 live: Probe | None = None, ready: Probe | None = None):
        host, port = listen_address(host, port)
        for name, probe in (("live", live), ("ready", ready)):
            if probe is not None and not callable(probe):
                raise ValueError(f"{name} must be a callable () -> (ok, message) or None, got {probe!r}")
        self._metrics = make_wsgi_app(check_registry(registry))
        self._probes = {HEALTH_PATH: live or _always_ok, READY_PATH: ready or _always_ok}
        self._server = make_server(host, port, self._app, server_class=_Server, handler_class=_QuietHandler)
        self.host, self.port = host, int(self._server.server_port)
        self._thread = threading.Thread(target=self._server.serve_forever, name="streamfair-metrics", daemon=True)
        self._thread.start()

    def _app(self, environ: dict, start_response: Callable) -> list[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == METRICS_PATH:
            return self._metrics(environ, start_response)
        if path in self._probes:
            ok, message = self._probes[path]()
            status = "200 OK" if ok else "503 Service Unavailable"
        elif path == "/":
            status, message = "200 OK", f"streamfair: {METRICS_PATH} {HEALTH_PATH} {READY_PATH}"
        else:
            status, message = "404 Not Found", f"no such path {path!r}"
        start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
        return [(message + "\n").encode("utf-8")]

    def close(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _always_ok() -> tuple[bool, str]:
    return True, "ok"


def listen_address(host: Any, port: Any) -> tuple[str, int]:
    """``(host, port)`` to listen on: a string and an integer in ``0..65535``, else ``ValueError``.

    >>> listen_address("127.0.0.1", 9100)
    ('127.0.0.1', 9100)
    >>> listen_address("127.0.0.1", True)
    Traceback (most recent call last):
    ...
    ValueError: port must be an integer in 0..65535, got True
    """
    if isinstance(port, bool) or not isinstance(port, Integral) or not 0 <= int(port) <= 65535:
        raise ValueError(f"port must be an integer in 0..65535, got {port!r}")
    if not isinstance(host, str):
        raise ValueError(f"host must be a string (an address or a host name), got {host!r}")
    return host, int(port)


def serve(registry: CollectorRegistry, port: int = 0, host: str = "0.0.0.0", live: Probe | None = None,
          ready: Probe | None = None) -> MetricsServer:
    """Start a :class:`MetricsServer` (close it with ``.close()``).

    Parameters
    ----------
    registry
        What ``/metrics`` exposes (a :class:`~prometheus_client.CollectorRegistry`).
    port
        TCP port, an integer in ``0..65535``; 0 picks a free one.
    host
        Bind address, a string (``"0.0.0.0"``: every interface).
    live, ready
        ``() -> (ok, message)`` for ``/healthz`` and ``/readyz``; ``None``: always ok.

    Returns
    -------
    MetricsServer
        The server, already serving in a background thread.

    Examples
    --------
    The root path lists the three endpoints:

    >>> import urllib.request
    >>> from prometheus_client import CollectorRegistry
    >>> server = serve(CollectorRegistry(), port=0, host="127.0.0.1")
    >>> with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/", timeout=5) as response:
    ...     response.status, response.read().decode()
    (200, 'streamfair: /metrics /healthz /readyz\\n')
    >>> server.close()
    """
    return MetricsServer(registry, port, host, live, ready)
