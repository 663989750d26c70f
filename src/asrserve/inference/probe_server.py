"""A worker node's own small HTTP server (``--metrics-port``): ``/healthz``, ``/readyz`` and
Prometheus ``/metrics``, for orchestrators' probes and the scraper.

It runs on threads of its own, not on the node's event loop, and reads nothing but a flag
and the metrics registry, so neither a forward pass nor a stuck loop delays a liveness
answer: a probe that times out during inference and restarts the pod (truecharts#20042)
cannot happen here. Readiness is the model loaded, the node not draining and its broker
reachable (the check the node passes in, bounded by its own timeout).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

StartResponse = Callable[..., Any]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


READ_TIMEOUT_S = 10.0  # a connection idle this long mid-request is closed


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass  # probes every few seconds would drown the node's own log


def probe_app(
    registry: CollectorRegistry, ready: threading.Event, reachable: Callable[[], bool]
) -> WsgiApp:
    metrics = make_wsgi_app(registry)

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if path == "/healthz":
            return _plain(start_response, "200 OK", b'{"status":"ok"}')
        if path == "/readyz":
            if ready.is_set() and reachable():
                return _plain(start_response, "200 OK", b'{"status":"ready"}')
            return _plain(start_response, "503 Service Unavailable", b'{"status":"not ready"}')
        body: Iterable[bytes] = metrics(environ, start_response)
        return body

    return app


def _plain(start_response: StartResponse, status: str, body: bytes) -> list[bytes]:
    start_response(status, [("Content-Type", "application/json")])
    return [body]


class ProbeServer:
    """Serves :func:`probe_app` on ``host:port`` until :meth:`close`."""

    def __init__(
        self,
        host: str,
        port: int,
        registry: CollectorRegistry,
        reachable: Callable[[], bool] = lambda: True,
        read_timeout_s: float = READ_TIMEOUT_S,
    ) -> None:
        """A client that sends or reads nothing for ``read_timeout_s`` is dropped: each
        connection holds a thread, and a slow one would hold it for good."""
        self.ready = threading.Event()
        handler = type("_Handler", (_QuietHandler,), {"timeout": read_timeout_s})
        self._server = make_server(
            host,
            port,
            probe_app(registry, self.ready, reachable),
            ThreadingWSGIServer,
            handler_class=handler,
        )
        self.port = self._server.server_port
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="probe-server", daemon=True
        )
        self._thread.start()

    def close(self) -> None:
        self.ready.clear()
        self._server.shutdown()
        self._server.server_close()
