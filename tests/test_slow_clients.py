"""Slow and surplus clients against a real server: an upload that stalls or trickles gets
408 while everyone else is served; uploads past the limit get 503 at once."""

from __future__ import annotations

import contextlib
import os
import select
import socket
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from asrserve.bench.corpus import Clip
from tests.support.faults import (
    FILES,
    JOBS,
    SHORT_CLIPS,
    SYNC,
    assert_error,
    assert_retry_after,
    healthy,
    listing,
    upload_files,
    uploads_receiving,
)
from tests.support.payloads import by_name
from tests.support.raw_http import raw_upload, read_answer, read_response
from tests.support.servers import Server
from tests.support.wait import wait_until

slow = pytest.mark.slow


def open_upload(port: int, path: str, declared: int = 200_000, sent: int = 4096) -> socket.socket:
    """A raw client that starts an upload of ``declared`` bytes and stops after ``sent``."""
    return raw_upload(port, path, declared=declared, body=bytes(sent))


def trickle(sock: socket.socket, every: float) -> tuple[int, dict[str, str], dict[str, Any], bool]:
    """Send one byte of the file every ``every`` s until the server answers; the answer."""
    while not select.select([sock], [], [], every)[0]:
        sock.sendall(b"\x01")
    return read_response(sock)


# The transcription served meanwhile (the server's first, a 3 s clip) must end within IDLE_S:
# it took 1.1 s on two busy cores. The trickling upload outlasts the stalled one by a second.
IDLE_S = 2.0
TOTAL_S = 3.0


def answer(sock: socket.socket) -> tuple[int, dict[str, Any]]:
    """Status and JSON body of the one response, without waiting for the server to close
    the connection (a refused upload's, whose body never came, stays open until uvicorn's
    keep-alive timeout: 5 s)."""
    status, _, body = read_answer(sock)
    return status, body


@slow
def test_stalled_upload_gets_408(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    """A client that stops sending gets 408 after the idle timeout, one that trickles
    after the total timeout; meanwhile the server serves everyone else. No file stays."""
    clip = by_name(corpus)[SHORT_CLIPS[0]]
    env = {
        "ASRSERVE_UPLOAD_IDLE_TIMEOUT_S": str(IDLE_S),
        "ASRSERVE_UPLOAD_TIMEOUT_S": str(TOTAL_S),
    }
    srv = make_server(tmp_path / "data", env=env).start()
    with (
        open_upload(srv.port, JOBS) as stalled,
        open_upload(srv.port, SYNC) as trickling,
        ThreadPoolExecutor(1) as pool,
    ):
        trickled = pool.submit(trickle, trickling, 0.25)
        with httpx.Client(base_url=srv.url, timeout=60) as client:
            resp = client.post(SYNC, files=upload_files(clip))  # served while the two hang
            assert resp.status_code == 200 and resp.json()["text"].strip(), resp.text
            assert not select.select([stalled], [], [], 0)[0], "the stalled upload was answered"

            status, headers, body, closed = read_response(stalled)
            assert status == 408 and body["error"]["code"] == "upload_timeout", body
            assert f"sent nothing for {IDLE_S:g} s" in body["error"]["message"]
            assert closed and headers["connection"] == "close"
            assert not trickled.done(), "the trickling upload ended before the stalled one"

            status, _, body, closed = trickled.result(timeout=TOTAL_S + 10)
            assert status == 408 and body["error"]["code"] == "upload_timeout", body
            assert f"took longer than {TOTAL_S:g} s" in body["error"]["message"]
            assert closed

            healthy(srv, client)
            jobs = {job["id"] for job in client.get(JOBS).json()["data"]}
            assert set(os.listdir(srv.data_dir / "audio")) <= jobs


@slow
def test_uploads_past_the_limit_get_503(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    """Two uploads in progress with a limit of two: the third is refused at once with 503
    and Retry-After, nothing read or written; when one ends, uploads are taken again."""
    clip = by_name(corpus)[SHORT_CLIPS[1]]
    env = {
        "ASRSERVE_MAX_CONCURRENT_UPLOADS": "2",
        "ASRSERVE_MAX_UPLOADS_PER_KEY": "2",  # one client here: it may take the whole pool
        "ASRSERVE_UPLOAD_IDLE_TIMEOUT_S": "60",
        # The holders send nothing: with the minimum rate on, each is dropped (408) 10 s
        # after it began, a bound that a slow run of the checks below could outlast.
        "ASRSERVE_UPLOAD_MIN_RATE_BYTES_S": "0",
    }
    srv = make_server(tmp_path / "data", env=env).start()
    holders = [open_upload(srv.port, JOBS), open_upload(srv.port, FILES)]
    with contextlib.ExitStack() as stack, httpx.Client(base_url=srv.url, timeout=60) as client:
        for holder in holders:
            stack.enter_context(holder)

        def why() -> str:
            lines = [line for line in srv.log().splitlines() if "GET /metrics" not in line]
            return "the two held uploads to fill the slots; server log:\n" + "\n".join(lines[-20:])

        # Read from the server, not by a probing upload: a probe that reached the gate before
        # the second holder would take its slot, and the holder would be the one refused.
        # 30 s: short of the holders' 60 s idle timeout, which would end them as well.
        wait_until(lambda: uploads_receiving(client) == 2, 30, why)

        # Each holder's spool file is made when its first body bytes are read, which may
        # come after its slot is taken: the listing to compare with holds both.
        def both_spooled() -> set[str] | None:
            names = listing(srv.data_dir)
            return names if len(names) == 2 else None

        before = wait_until(both_spooled, 60, "the held uploads to spool their first bytes")
        for path in (SYNC, JOBS):
            resp = client.post(path, files=upload_files(clip))
            error = assert_error(resp, 503, "too_many_uploads")
            assert "2 uploads" in error["message"], error
            assert_retry_after(resp)
            with open_upload(srv.port, path, sent=0) as sock:  # answered with no body sent
                status, body = answer(sock)
            assert (status, body["error"]["code"]) == (503, "too_many_uploads"), body
        assert listing(srv.data_dir) == before
        healthy(srv, client)

        holders.pop().close()  # a client gives up: its slot and its partial file go

        def served() -> httpx.Response | None:
            resp = client.post(SYNC, files=upload_files(clip))
            return None if resp.status_code == 503 else resp

        resp = wait_until(served, 60, "the slot to be freed", every=0)
        assert resp.status_code == 200 and resp.json()["text"].strip(), resp.text
        files = client.get(FILES).json()["data"]
        assert files == [] and os.listdir(srv.data_dir / "files") == []
