"""SIGTERM mid-work against a real server: new connections refused at once, the job in
flight finished within the grace period (or handed back without it), queued jobs kept, and
after the restarts every job completes exactly once."""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer_one
from tests.support.api import wait_job
from tests.support.db import read_db
from tests.support.faults import JOBS, upload_files, wait_running
from tests.support.payloads import by_name
from tests.support.servers import Server
from tests.support.wait import wait_until

slow = pytest.mark.slow


def jobs_at_rest(data_dir: Path) -> dict[str, dict[str, Any]]:
    rows = read_db(
        data_dir,
        "SELECT j.id, j.status, j.attempts, j.result IS NOT NULL AS has_result,"
        " q.claimed FROM jobs j LEFT JOIN queue q ON q.job_id = j.id",
    )
    return {row["id"]: dict(row) for row in rows}


def refuses_connections(srv: Server) -> bool:
    try:
        httpx.get(f"{srv.url}/healthz", timeout=1)
    except httpx.ConnectError:
        return True
    except (httpx.ReadError, httpx.RemoteProtocolError):
        pass  # accepted just as the listener closed, then reset: poll again
    return False


def status_of(data_dir: Path, job_id: str) -> str:
    (row,) = read_db(data_dir, "SELECT status FROM jobs WHERE id = ?", (job_id,))
    return str(row["status"])


def sigterm(srv: Server, grace: float, draining: Callable[[], None] | None = None) -> None:
    """SIGTERM: new connections are refused while the process still drains (``draining``
    checks what it holds then); then it exits cleanly."""
    assert srv.proc is not None
    srv.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: refuses_connections(srv), 30, "connections to be refused", every=0.02)
    if draining is not None:
        draining()
    if grace > 0:
        assert srv.proc.poll() is None, "exited before the drain could be seen"
    # uvicorn re-raises the signal once it has shut down cleanly
    assert srv.proc.wait(grace + 15) == -signal.SIGTERM, srv.log()
    assert "Application shutdown complete" in srv.log()


@slow
@pytest.mark.timeout(400)
def test_sigterm_drains_in_flight_and_keeps_the_rest(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    """SIGTERM stops new connections at once, lets the job in flight (still running once the
    listener is closed) finish within the grace period and leaves the queued ones queued.
    With no grace left the running job is handed back instead. After the restarts every job
    completes exactly once."""
    clips = by_name(corpus)
    data_dir = tmp_path / "data"
    # the two that are running at a SIGTERM: 20-26 s of speech, a window each
    names = ("clip_04.m4a", "clip_01.flac", "clip_05.wav", "clip_06.flac", "clip_08.ogg")
    env = {"ASRSERVE_PREFETCH_JOBS": "1", "ASRSERVE_SHUTDOWN_GRACE_S": "60"}
    first = make_server(data_dir, env=env).start()
    with httpx.Client(base_url=first.url, timeout=60) as client:
        ids = []
        for name in names:
            resp = client.post(JOBS, files=upload_files(clips[name]))
            assert resp.status_code == 202, resp.text
            ids.append(resp.json()["id"])
        wait_running(client, ids[0])

    def first_in_flight() -> None:  # still running once the listener is closed: drained
        assert status_of(data_dir, ids[0]) == "running", jobs_at_rest(data_dir)[ids[0]]

    sigterm(first, 60, first_in_flight)
    rest = jobs_at_rest(data_dir)
    assert rest[ids[0]] == {**rest[ids[0]], "status": "succeeded", "attempts": 1}
    for job_id in ids[1:]:
        assert rest[job_id] == {
            "id": job_id,
            "status": "queued",
            "attempts": 0,
            "has_result": 0,
            "claimed": 0,
        }

    second = make_server(data_dir, env={**env, "ASRSERVE_SHUTDOWN_GRACE_S": "0"}).start()
    with httpx.Client(base_url=second.url, timeout=60) as client:
        wait_running(client, ids[1])
    sigterm(second, 0)
    rest = jobs_at_rest(data_dir)
    assert rest[ids[1]]["claimed"] == 0 and not rest[ids[1]]["has_result"], rest[ids[1]]
    # handed back as it was: queued again, the interrupted attempt not counted
    assert (rest[ids[1]]["status"], rest[ids[1]]["attempts"]) == ("queued", 0), rest[ids[1]]
    assert all(rest[i]["status"] != "succeeded" for i in ids[1:]), rest

    third = make_server(data_dir).start()
    with httpx.Client(base_url=third.url, timeout=60) as client:
        final = {job_id: wait_job(client, job_id) for job_id in ids}
    third.stop()
    for job_id, name in zip(ids, names, strict=True):
        job = final[job_id]
        assert job["status"] == "succeeded", job
        assert wer_one(clips[name].text, job["result"]["text"]) < 0.35, job["result"]["text"]
    rest = jobs_at_rest(data_dir)
    assert [rest[i]["attempts"] for i in ids] == [1, 1, 1, 1, 1]  # handing back is no attempt
    assert all(rest[i]["has_result"] and rest[i]["claimed"] is None for i in ids), rest
    for srv in (first, second, third):
        assert srv.log_path is not None
        assert "Traceback" not in srv.log_path.read_text(errors="replace")
