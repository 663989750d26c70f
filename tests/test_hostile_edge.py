"""The HTTP edge against hostile clients, over real servers on loopback: invented methods
and the metrics' labels, DNS rebinding (``Host``), one caller's uploads and the others'
share, a drip-fed body, an oversized multipart boundary, a client that aborts mid-upload,
who may read the API's schema, and the data dir's file modes.

Two servers serve the whole module: one with auth off (the loopback default) and a low
minimum upload rate; one with auth on, keys, a small upload pool and an allowed host name.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import socket
import stat
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from asrserve.bench.corpus import Clip
from tests.support.faults import uploads_receiving
from tests.support.keys import auth, new_key
from tests.support.raw_http import raw_upload, read_response
from tests.support.servers import Server
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow

SYNC = "/v1/audio/transcriptions"
KNOWN_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
FILES = "/v1/files"
MIN_RATE = 1000  # bytes/s
TOTAL_TIMEOUT_S = 600  # far beyond anything a test here waits for
OPEN_ENV = {
    "ASRSERVE_UPLOAD_MIN_RATE_BYTES_S": str(MIN_RATE),
    "ASRSERVE_UPLOAD_RATE_GRACE_S": "1",
    "ASRSERVE_UPLOAD_IDLE_TIMEOUT_S": "60",
    "ASRSERVE_UPLOAD_TIMEOUT_S": str(TOTAL_TIMEOUT_S),
}
SHARE = 2
AUTH_ENV = {
    "ASRSERVE_AUTH": "on",
    "ASRSERVE_MAX_CONCURRENT_UPLOADS": "4",
    "ASRSERVE_MAX_UPLOADS_PER_KEY": str(SHARE),
    "ASRSERVE_UPLOAD_IDLE_TIMEOUT_S": "60",
    "ASRSERVE_UPLOAD_MIN_RATE_BYTES_S": "0",  # held uploads stay held (no drip-feed 408)
    "ASRSERVE_ALLOWED_HOSTS": "asr.example",
}


@pytest.fixture(scope="module")
def open_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = Server(tmp_path_factory.mktemp("edge-open") / "data", env=OPEN_ENV)
    srv.start()
    yield srv
    srv.stop()


class AuthServer(Server):
    alice: str = ""
    bob: str = ""
    admin: str = ""

    def uploads_receiving(self) -> int:
        """The ``asrserve_uploads_receiving`` gauge of its ``/metrics``."""
        with httpx.Client(base_url=self.url, timeout=30) as client:
            return uploads_receiving(client, auth(self.admin))


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AuthServer]:
    data = tmp_path_factory.mktemp("edge-auth") / "data"
    srv = AuthServer(data, env=AUTH_ENV)
    srv.alice, srv.bob = new_key(data, "alice"), new_key(data, "bob")
    srv.admin = new_key(data, "ops", "--admin")
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def short(corpus: list[Clip]) -> Clip:
    return min(corpus, key=lambda clip: clip.duration)


def label_values(metrics: str, label: str) -> set[str]:
    lines = (line for line in metrics.splitlines() if line.startswith("asrserve_http_"))
    return {value for line in lines for value in re.findall(rf'{label}="([^"]*)"', line)}


# --------------------------------------------------------------------------------------
# Item 6: invented methods and paths do not grow /metrics
# --------------------------------------------------------------------------------------


def test_invented_methods_and_paths_leave_the_metric_labels_bounded(open_server: Server) -> None:
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        for n in range(30):
            client.request(f"INVENTED{n}", f"/nowhere-{n}")
            client.request(f"BREW{n}", "/healthz")
        metrics = client.get("/metrics").text
    methods = label_values(metrics, "method")
    assert "other" in methods and methods <= KNOWN_METHODS | {"other"}, methods
    routes = label_values(metrics, "route")
    assert "unmatched" in routes and "/healthz" in routes, routes
    assert not any("nowhere" in route for route in routes), routes
    statuses = label_values(metrics, "status")
    assert all(re.fullmatch(r"[1-5][0-9][0-9]", status) for status in statuses), statuses


# --------------------------------------------------------------------------------------
# Item 9: DNS rebinding
# --------------------------------------------------------------------------------------


def test_auth_off_answers_only_loopback_host_names(open_server: Server) -> None:
    port = open_server.port
    with httpx.Client(base_url=open_server.url, timeout=30) as client:
        for path in ("/v1/jobs", "/healthz"):
            refused = client.get(path, headers={"Host": f"evil.example:{port}"})
            assert refused.status_code == 421, refused.text
            assert refused.json()["error"]["code"] == "misdirected_request"
        for host in (f"localhost:{port}", f"[::1]:{port}", "127.0.0.1", "LOCALHOST."):
            assert client.get("/v1/jobs", headers={"Host": host}).status_code == 200, host


def test_auth_on_with_allowed_hosts_checks_host_too(auth_server: AuthServer) -> None:
    with httpx.Client(base_url=auth_server.url, timeout=30) as client:
        headers = auth(auth_server.alice)
        refused = client.get("/v1/jobs", headers={**headers, "Host": "evil.example"})
        assert refused.status_code == 421, refused.text
        named = client.get("/v1/jobs", headers={**headers, "Host": "asr.example:443"})
        assert named.status_code == 200, named.text


def _handshake(port: int, host: str, origin: str | None) -> tuple[int, dict[str, Any]]:
    """A WebSocket handshake to the live route as a browser sends it: the refusal's status
    and body (an accepted one has no JSON body: the websockets client checks those)."""
    lines = [
        "GET /v1/realtime?intent=transcription HTTP/1.1",
        f"Host: {host}",
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
        "Sec-WebSocket-Version: 13",
        *([f"Origin: {origin}"] if origin is not None else []),
    ]
    with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        status, _, body, _ = read_response(sock)
    return status, body


def test_websockets_get_the_host_check_and_refuse_other_pages(open_server: Server) -> None:
    """Round two, item 11: with auth off any page the local user visits could open live
    sessions. A rebound name gets 421, a page of another origin 403; this server's own pages
    and clients that send no Origin (not browsers) are served."""
    port = open_server.port
    status, body = _handshake(port, f"evil.example:{port}", None)
    assert (status, body["error"]["code"]) == (421, "misdirected_request"), body
    status, body = _handshake(port, f"127.0.0.1:{port}", "https://evil.example")
    assert (status, body["error"]["code"]) == (403, "cross_origin_websocket"), body
    assert body["error"]["param"] == "Origin"
    url = f"ws://127.0.0.1:{port}/v1/realtime?intent=transcription"
    for origin in (f"http://127.0.0.1:{port}", None):
        with connect(url, origin=origin, open_timeout=10) as ws:  # type: ignore[arg-type]
            created = json.loads(ws.recv(timeout=30))
        assert created["type"] == "session.created", created
    assert httpx.get(f"{open_server.url}/healthz", timeout=30).status_code == 200


# --------------------------------------------------------------------------------------
# Item 8: one key's uploads leave the others their share; a drip feed gets 408
# --------------------------------------------------------------------------------------


def test_one_keys_stalled_uploads_leave_other_keys_room(auth_server: AuthServer) -> None:
    """Alice holds her share (2 of 4 slots) with stalled uploads: her next upload gets 503
    at once, Bob's is received."""
    alice, bob = auth(auth_server.alice), auth(auth_server.bob)
    held = f"Authorization: Bearer {auth_server.alice}\r\n"
    probe = {"file": ("empty.bin", b"")}  # past the gate it would be 400 (empty)
    wait_until(lambda: auth_server.uploads_receiving() == 0, 60, "earlier uploads to end")
    with contextlib.ExitStack() as stack, httpx.Client(base_url=auth_server.url) as client:
        for _ in range(SHARE):
            stack.enter_context(raw_upload(auth_server.port, FILES, headers=held))
        # Read from the server: the held uploads are in the gate once it reports them.
        wait_until(lambda: auth_server.uploads_receiving() == SHARE, 60, "the held uploads")
        resp = client.post(FILES, data={"purpose": "audio"}, files=probe, headers=alice)
        assert resp.status_code == 503, resp.text
        error = resp.json()["error"]
        assert error["code"] == "too_many_uploads" and "your share" in error["message"], error
        assert int(resp.headers["retry-after"]) > 0
        files = {"file": ("a.bin", os.urandom(4096))}
        accepted = client.post(FILES, data={"purpose": "audio"}, files=files, headers=bob)
        assert accepted.status_code == 200, accepted.text


def test_a_drip_feed_gets_408_from_the_minimum_rate(open_server: Server) -> None:
    """One byte every 0.2 s: far below the 1000 B/s minimum, never idle for the 60 s idle
    timeout, and the 600 s total timeout is far away: the minimum rate ends it."""
    with raw_upload(open_server.port, SYNC) as sock:
        for _ in range(100):  # 20 s: the rate's deadline is ~1.2 s after the start
            if select.select([sock], [], [], 0.2)[0]:
                break
            sock.sendall(b"\x01")
        else:
            pytest.fail("the drip feed was still being received after 20 s")
        status, headers, body, closed = read_response(sock)
    assert status == 408 and body["error"]["code"] == "upload_timeout", body
    assert f"slower than {MIN_RATE} bytes/s" in body["error"]["message"], body
    assert closed and headers["connection"] == "close"


# --------------------------------------------------------------------------------------
# Item 13: oversized boundary, aborted upload
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("length", [71, 2000])
def test_a_boundary_over_70_characters_is_400(open_server: Server, length: int) -> None:
    boundary = "b" * length
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        f"--{boundary}--\r\n"
    ).encode()
    content_type = f"multipart/form-data; boundary={boundary}"
    resp = httpx.post(
        f"{open_server.url}{SYNC}", content=body, headers={"Content-Type": content_type}
    )
    assert resp.status_code == 400, resp.text
    assert "malformed multipart" in resp.json()["error"]["message"]


def test_an_aborted_upload_logs_one_line_and_leaves_nothing(
    open_server: Server, short: Clip
) -> None:
    audio = open_server.data_dir / "audio"
    before = set(os.listdir(audio)) if audio.exists() else set()
    data = short.path.read_bytes()
    assert open_server.log_path is not None
    start = len(open_server.log_path.read_text(errors="replace"))
    sock = raw_upload(
        open_server.port, SYNC, declared=len(data) + 1000, body=data[: len(data) // 2]
    )
    sock.close()
    log_path = open_server.log_path

    def aborted() -> str | None:
        log = log_path.read_text(errors="replace")[start:]
        return log if "upload aborted" in log else None

    log = wait_until(aborted, 120, lambda: log_path.read_text()[-3000:], every=0.05)
    assert log.count("upload aborted") == 1, log[-3000:]
    assert "Traceback" not in log and "Exception in ASGI application" not in log, log[-3000:]
    assert (set(os.listdir(audio)) if audio.exists() else set()) == before


# --------------------------------------------------------------------------------------
# Item 15: the schema with auth on; the data dir's modes
# --------------------------------------------------------------------------------------


def test_schema_and_docs_need_a_key_with_auth_on(auth_server: AuthServer) -> None:
    with httpx.Client(base_url=auth_server.url, timeout=30) as client:
        for path in ("/openapi.json", "/docs", "/redoc"):
            refused = client.get(path)
            assert refused.status_code == 401, (path, refused.text)
            assert refused.json()["error"]["code"] == "invalid_api_key"
            assert client.get(path, headers=auth(auth_server.bob)).status_code == 200, path
        assert client.get("/healthz").status_code == 200


def test_everything_in_the_data_dir_is_owner_only(
    open_server: Server, auth_server: AuthServer, short: Clip
) -> None:
    """After real uploads (a job's audio, a file, the database, the traffic recordings):
    files 0600 at most, folders 0700 at most."""
    with httpx.Client(base_url=open_server.url, timeout=60) as client:
        with short.path.open("rb") as handle:
            queued = client.post("/v1/jobs", files={"file": handle})
        assert queued.status_code == 202, queued.text
        client.get(f"/v1/jobs/{queued.json()['id']}", params={"wait": 30})  # results written
        files = {"file": ("a.bin", os.urandom(1024))}
        assert client.post(FILES, data={"purpose": "audio"}, files=files).status_code == 200
    seen: dict[str, int] = {}
    for root in (open_server.data_dir, auth_server.data_dir):
        for path in root.rglob("*"):
            seen[str(path.relative_to(root))] = stat.S_IMODE(path.stat().st_mode)
    assert {"asrserve.db", "audio", "files"} <= set(seen), sorted(seen)
    assert any(name.startswith(f"audio{os.sep}") for name in seen), sorted(seen)
    shared = {name: oct(mode) for name, mode in seen.items() if mode & 0o077}
    assert not shared, shared
