"""A worker node's probe server, over real HTTP on loopback."""

from __future__ import annotations

import socket

import httpx
from prometheus_client import CollectorRegistry, Counter

from asrserve.inference.probe_server import ProbeServer


def test_liveness_readiness_and_metrics() -> None:
    registry = CollectorRegistry()
    Counter("probe_test_total", "a counter", registry=registry).inc()
    broker_up = [True]
    server = ProbeServer("127.0.0.1", 0, registry, lambda: broker_up[0])
    base = f"http://127.0.0.1:{server.port}"
    try:
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        loading = httpx.get(f"{base}/readyz")
        assert (loading.status_code, loading.json()) == (503, {"status": "not ready"})
        server.ready.set()  # the model is loaded
        assert httpx.get(f"{base}/readyz").json() == {"status": "ready"}
        broker_up[0] = False  # Redis stops answering: not ready, still alive
        assert httpx.get(f"{base}/readyz").status_code == 503
        assert httpx.get(f"{base}/healthz").status_code == 200
        assert "probe_test_total 1.0" in httpx.get(f"{base}/metrics").text
    finally:
        server.close()


def test_a_client_that_stalls_mid_request_is_dropped() -> None:
    """A connection that sends half a request and then nothing is closed by the server
    (its read timeout, short here), and the server keeps answering others."""
    server = ProbeServer("127.0.0.1", 0, CollectorRegistry(), read_timeout_s=0.2)
    try:
        with socket.create_connection(("127.0.0.1", server.port)) as stalled:
            stalled.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")  # no blank line: unfinished
            stalled.settimeout(30)  # the test's own bound, far past the server's
            assert stalled.recv(1024) == b""  # closed by the server, nothing answered
        assert httpx.get(f"http://127.0.0.1:{server.port}/healthz").status_code == 200
    finally:
        server.close()
