"""Hostile JSON bodies, Batch API input files and prompts, against a real server.

* Every body the app reads whole is limited (``max_json_body_bytes``) while it is read: a
  chunked body is cut off with ``413 request_too_large`` long before it ends, without the
  server's peak memory growing with it; a declared ``Content-Length`` over the limit is
  refused before the body is sent.
* Errors echo at most a short prefix of a client's value (a 10,000-character id).
* A batch input file is read line by line (split on ``\\n`` only) with a per-line limit: a
  5 MB line fails alone as ``line_too_long``; ``\\r`` does not split lines, so admission and
  validation count the same requests.
* ``prompt`` is capped (``prompt_too_long``) on the form endpoints and in Batch API lines.
* JSON that parses but cannot be used (an integer of thousands of digits, a lone surrogate
  escape) fails its line, or its request with a 400 naming the field, and never stops the
  Batch API runner for the batches after it.
"""

from __future__ import annotations

import http.client
import json
import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest

from asrserve.bench.soak import rss_bytes
from asrserve.request_schema import MAX_PROMPT_CHARS
from tests.support.batches import ENDPOINT, client_for, create_batch, ended, line, wait_for
from tests.support.servers import Server

pytestmark = pytest.mark.slow

MIB = 1024 * 1024
BATCH_API_MAX_REQUESTS = 3
JSON_LIMIT = 64 * 1024  # the default max_json_body_bytes
LINE_LIMIT = 64 * 1024  # the default batch_api_max_line_bytes


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    env = {"ASRSERVE_BATCH_API_MAX_REQUESTS": str(BATCH_API_MAX_REQUESTS)}
    server = Server(tmp_path_factory.mktemp("hostile-json") / "data", env=env)
    server.start()
    yield server
    server.stop()


def healthy(server: Server) -> None:
    assert server.alive, server.log()
    assert httpx.get(f"{server.url}/healthz", timeout=10).json() == {"status": "ok"}


def request_head(server: Server, path: str, headers: dict[str, str]) -> bytes:
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{server.port}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def answer(sock: socket.socket) -> tuple[int, dict[str, object]]:
    sock.setblocking(True)
    sock.settimeout(30)
    response = http.client.HTTPResponse(sock)
    response.begin()
    body: dict[str, object] = json.loads(response.read())
    return response.status, body


def stream_until_answered(server: Server, total: int) -> tuple[int, dict[str, object], int]:
    """POST a chunked JSON body of ``total`` bytes to /v1/batches, sending for as long as the
    server has not answered: (status, body, bytes sent before the answer came)."""
    head = request_head(
        server,
        "/v1/batches",
        {"Content-Type": "application/json", "Transfer-Encoding": "chunked"},
    )
    piece = b" " * (64 * 1024)
    chunk = f"{len(piece):x}\r\n".encode() + piece + b"\r\n"
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as sock:
        sock.sendall(head)
        sock.setblocking(False)
        pending, sent, ended_body = memoryview(b""), 0, False
        while True:
            sending = [sock] if pending or not ended_body else []
            readable, writable, _ = select.select([sock], sending, [], 30)
            assert readable or writable, "the server neither read nor answered for 30 s"
            if readable:
                break
            if not pending:
                ended_body = sent >= total
                pending = memoryview(b"0\r\n\r\n" if ended_body else chunk)
            count = sock.send(pending)
            pending, sent = pending[count:], sent + count
        status, body = answer(sock)
    return status, body, sent


def test_a_streamed_json_body_is_cut_off_at_the_limit(srv: Server) -> None:
    assert srv.proc is not None
    peak_before = rss_bytes(srv.proc.pid, "VmHWM")
    total = 200 * MIB
    status, body, sent = stream_until_answered(srv, total)
    assert status == 413, body
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "request_too_large"
    assert str(JSON_LIMIT) in error["message"]
    assert sent < total // 4  # answered while the body was still coming
    assert rss_bytes(srv.proc.pid, "VmHWM") - peak_before < 50 * MIB
    healthy(srv)


def test_a_declared_length_over_the_limit_is_refused_before_the_body(srv: Server) -> None:
    head = request_head(
        srv,
        "/v1/batches",
        {"Content-Type": "application/json", "Content-Length": str(300 * MIB)},
    )
    with socket.create_connection(("127.0.0.1", srv.port), timeout=30) as sock:
        sock.sendall(head + b'{"input_file_id": ')  # and nothing more: no answer before
        status, body = answer(sock)
    assert status == 413
    error = body["error"]
    assert isinstance(error, dict) and error["code"] == "request_too_large"
    healthy(srv)


@pytest.mark.parametrize(
    ("method", "path", "json_body"),
    [
        (
            "POST",
            "/v1/batches",
            {"input_file_id": "f" * 10_000, "endpoint": ENDPOINT, "completion_window": "24h"},
        ),
        ("GET", "/v1/batches/" + "b" * 5000, None),
        ("GET", "/v1/files/" + "f" * 5000, None),
        ("GET", "/v1/jobs/" + "j" * 5000, None),
    ],
    ids=["batch-input-file", "batch", "file", "job"],
)
def test_a_long_id_is_not_echoed(
    srv: Server, method: str, path: str, json_body: dict[str, str] | None
) -> None:
    response = httpx.request(method, f"{srv.url}{path}", json=json_body)
    assert response.status_code == 404
    assert len(response.json()["error"]["message"]) < 200


def batch_file(client: openai.OpenAI, data: bytes) -> str:
    return client.files.create(file=("in.jsonl", data), purpose="batch").id


def failed_batch_errors(srv: Server, batch_id: str) -> list[tuple[str, int | None]]:
    batch = wait_for(srv, batch_id, ended, timeout=60)
    assert batch["status"] == "failed", batch
    return [(error["code"], error["line"]) for error in batch["errors"]["data"]]


def test_a_huge_line_fails_alone_and_the_server_stays_up(srv: Server) -> None:
    client = client_for(srv)
    huge = json.dumps({"custom_id": "huge", "padding": "x" * (5 * 1000 * 1000)})
    data = "\n".join([line("a", "file-a"), huge, line("b", "file-b")]).encode() + b"\n"
    batch = client.batches.create(
        input_file_id=batch_file(client, data),
        endpoint=ENDPOINT,  # type: ignore[arg-type]
        completion_window="24h",
    )
    assert failed_batch_errors(srv, batch.id) == [("line_too_long", 2)]
    healthy(srv)


def test_admission_and_validation_count_lines_alike(srv: Server, tmp_path: Path) -> None:
    """Lines end at \\n only: four requests on four lines are one too many at once (400),
    four requests separated by \\r are one line, and invalid JSON (not four requests)."""
    client = client_for(srv)
    requests = [line(f"r{i}", f"file-{i}") for i in range(BATCH_API_MAX_REQUESTS + 1)]
    over = batch_file(client, "\n".join(requests).encode())
    response = httpx.post(
        f"{srv.url}/v1/batches",
        json={"input_file_id": over, "endpoint": ENDPOINT, "completion_window": "24h"},
    )
    assert response.status_code == 400, response.text
    assert response.json()["error"]["code"] == "too_many_requests"

    batch_id = create_batch(client, ["\r".join(requests)], tmp_path)
    assert failed_batch_errors(srv, batch_id) == [("invalid_json", 1)]


def test_a_batch_file_is_counted_once_at_upload(srv: Server) -> None:
    """Its requests are counted when it is uploaded (8 MiB of blank lines and one request:
    blank runs read in blocks) and kept on its record, never shown: creating a batch on it
    reads none of its bytes (here they are gone from the disk, and it is still admitted)."""
    client = client_for(srv)
    data = b"\n" * (8 * MIB) + line("only", "file-a").encode()
    file_id = batch_file(client, data)
    shown = httpx.get(f"{srv.url}/v1/files/{file_id}").json()
    assert sorted(shown) == sorted(
        [
            "id",
            "object",
            "bytes",
            "created_at",
            "filename",
            "purpose",
            "status",
            "expires_at",
            "status_details",
        ]
    )
    (srv.data_dir / "files" / file_id).unlink()
    response = httpx.post(
        f"{srv.url}/v1/batches",
        json={"input_file_id": file_id, "endpoint": ENDPOINT, "completion_window": "24h"},
    )
    assert response.status_code == 200, response.text
    assert response.json()["status"] == "validating"
    healthy(srv)


def test_a_long_prompt_is_refused_on_the_form_endpoint(srv: Server) -> None:
    prompt = "p" * 5000
    assert len(prompt) > MAX_PROMPT_CHARS
    response = httpx.post(
        f"{srv.url}/v1/audio/transcriptions",
        files={"file": ("a.wav", b"not audio: refused before decoding")},
        data={"model": "whisper-1", "prompt": prompt},
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["param"], error["code"]) == ("prompt", "prompt_too_long")


def test_a_long_prompt_fails_its_batch_line(srv: Server, tmp_path: Path) -> None:
    client = client_for(srv)
    lines = [line("ok", "file-a"), line("long", "file-b", prompt="p" * 5000)]
    batch = wait_for(srv, create_batch(client, lines, tmp_path), ended, timeout=60)
    assert batch["status"] == "failed", batch
    (error,) = batch["errors"]["data"]
    assert (error["code"], error["param"], error["line"]) == ("prompt_too_long", "body.prompt", 2)


def test_poisoned_lines_fail_their_batch_and_the_next_batch_still_runs(
    srv: Server, tmp_path: Path
) -> None:
    """Legal JSON that Python cannot use: an integer of 5000 digits (``json.loads`` raises a
    plain ValueError) and lone surrogates (storing them fails later). Each is a line error;
    the runner goes on to validate another batch."""
    client = client_for(srv)
    envelope = f'"method": "POST", "url": "{ENDPOINT}"'
    poisoned = [
        '{"custom_id": "big", '
        + envelope
        + ', "body": {"file": "file-a", "beam_size": 1'
        + "1" * 5000
        + "}}",
        '{"custom_id": "\\ud800", ' + envelope + ', "body": {"file": "file-b"}}',
        '{"custom_id": "p", ' + envelope + ', "body": {"file": "file-c", "prompt": "a\\udfff"}}',
    ]
    first = create_batch(client, poisoned, tmp_path)
    errors = wait_for(srv, first, ended, timeout=60)["errors"]["data"]
    assert [(e["code"], e["param"], e["line"]) for e in errors] == [
        ("invalid_json", None, 1),
        ("invalid_encoding", "custom_id", 2),
        ("invalid_encoding", "body.prompt", 3),
    ]
    second = create_batch(client, [line("later", "file-missing")], tmp_path)
    assert wait_for(srv, second, ended, timeout=60)["status"] == "completed"
    healthy(srv)


@pytest.mark.parametrize(
    ("metadata", "param"),
    [
        ('{"note": "\\ud83d"}', "metadata.note"),
        ('{"\\ud83d": "x"}', "metadata.\\ud83d"),  # in a key: was a 500
    ],
)
def test_a_lone_surrogate_in_a_batch_request_is_a_400_naming_it(
    srv: Server, metadata: str, param: str
) -> None:
    body = (
        '{"input_file_id": "file-x", "endpoint": "' + ENDPOINT + '", "completion_window": '
        '"24h", "metadata": ' + metadata + "}"
    )
    response = httpx.post(
        f"{srv.url}/v1/batches", content=body, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("invalid_encoding", param)
    healthy(srv)
