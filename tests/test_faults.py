"""Storage faults around intake and running jobs: a full disk, a read-only data dir, the
disk filling under running jobs. (SIGTERM mid-work is in test_shutdown.py, slow and surplus
clients in test_slow_clients.py.)

The disk is filled for real: the data dir is a small tmpfs (we run as root in a container;
without CAP_SYS_ADMIN these tests skip, saying so). A read-only data dir is a read-only bind
mount over it. The claims are the service's handling of the storage errors (507 and 503
with Retry-After, nothing left behind, accepted jobs surviving, the result's store retried),
so everything runs in this process: the intake's error paths alone with the kernel's own
ENOSPC and EROFS, and the whole app (``tests/support/inprocess.py``: its stores, uploads,
decode and scheduler real) with a fake engine whose forward passes a
:class:`~tests.support.turnstile.Turnstile` holds, which keeps accepted jobs unfinished while
the disk fills, where a real server needed a long clip on the real model.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sqlite3
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from asrserve.api.errors import install_error_handlers
from asrserve.api.uploads import UploadGate, UploadLimits, receive_upload
from asrserve.bench.corpus import Clip
from asrserve.drivers.disk import DISK_RESERVE_BYTES, free_bytes
from asrserve.drivers.sqlite import translated
from tests.support.api import job_status, wait_job
from tests.support.db import read_db
from tests.support.faults import (
    FILES,
    JOBS,
    MIB,
    SHORT_CLIPS,
    SYNC,
    assert_error,
    assert_retry_after,
    listing,
    upload_files,
)
from tests.support.inprocess import in_process
from tests.support.payloads import by_name
from tests.support.raw_http import BOUNDARY, multipart_head
from tests.support.turnstile import Turnstile

# --------------------------------------------------------------------------------------
# Helpers: mounts, filling a file system
# --------------------------------------------------------------------------------------


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(path: Path) -> None:
    # lazy: a server that still holds a file open there must not keep the mount alive
    subprocess.run(["umount", "-l", str(path)], check=False, capture_output=True)


@contextlib.contextmanager
def tmpfs(path: Path, size: int) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted on ``path``: a disk that really fills up."""
    path.mkdir(parents=True, exist_ok=True)
    try:
        _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"cannot mount a tmpfs to fill up (needs root, CAP_SYS_ADMIN): {detail}")
    try:
        yield path
    finally:
        _umount(path)


@contextlib.contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` read-only from now on (a read-only bind mount over itself); files already
    open for writing, such as the server's database, stay writable."""
    try:
        _mount("--bind", str(path), str(path))
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"cannot bind-mount the data dir read-only (needs CAP_SYS_ADMIN): {detail}")
    try:
        _mount("-o", "remount,bind,ro", str(path))
        yield path
    finally:
        _umount(path)


def fill(folder: Path, leave: int = 0) -> Path:
    """Append to ``folder/filler`` until only ``leave`` bytes are free (0: until ENOSPC)."""
    path = folder / "filler"
    block = bytes(MIB)
    with path.open("ab", buffering=0) as out:
        while (free := free_bytes(folder)) > leave:
            try:
                out.write(block[: min(MIB, free - leave)])
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
                break
    return path


def integrity(data_dir: Path) -> str:
    return str(read_db(data_dir, "PRAGMA integrity_check")[0][0])


STORE_RETRY = re.compile(r"store failed \((.+?)\); retrying")  # Consumer.durably's warning


# --------------------------------------------------------------------------------------
# In-process: the intake's error paths with the kernel's own errors (no model, no server)
# --------------------------------------------------------------------------------------


def intake_app(folder: Path, limits: UploadLimits, errors: dict[str, Exception]) -> FastAPI:
    """``/upload`` streams to ``folder``; ``/db/{name}`` raises one of ``errors``."""
    app = FastAPI()
    install_error_handlers(app)
    gate = UploadGate(limits)

    @app.post("/upload")
    async def upload(request: Request) -> dict[str, int]:
        got = await receive_upload(request, folder / "upload", 64 * MIB, gate)
        return {"size": got.size}

    @app.get("/db/{name}")
    async def database(name: str) -> None:
        raise errors[name]

    return app


def sqlite_error(sql: str, conn: sqlite3.Connection) -> sqlite3.OperationalError:
    try:
        conn.execute(sql)
    except sqlite3.OperationalError as exc:
        return exc
    raise AssertionError(f"{sql} did not fail")


def test_intake_maps_enospc_erofs_and_sqlite_errors(tmp_path: Path) -> None:
    """Disk full while writing → 507; read-only → 503; the database full → 507, read-only
    → 503: each with Retry-After and nothing left behind. Real errors from the kernel and
    SQLite, on a 2 MiB tmpfs, with the disk reserve off so the write itself fails."""
    with tmpfs(tmp_path / "small", 2 * MIB) as folder:
        db_path = folder / "t.db"
        with contextlib.closing(sqlite3.connect(db_path, isolation_level=None)) as conn:
            conn.execute("CREATE TABLE t (x BLOB)")
            filler = fill(folder)
            full = sqlite_error("INSERT INTO t VALUES (zeroblob(100000))", conn)
            filler.unlink()
        with contextlib.closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True)) as ro:
            readonly = sqlite_error("INSERT INTO t VALUES (1)", ro)
        errors: dict[str, Exception] = {"full": translated(full), "readonly": translated(readonly)}
        app = intake_app(folder, UploadLimits(min_free_bytes=0), errors)
        payload = os.urandom(3 * MIB)
        with TestClient(app) as client:
            resp = client.post("/upload", files={"file": ("big.wav", payload)})
            assert_error(resp, 507, "insufficient_storage")
            assert_retry_after(resp)
            assert sorted(os.listdir(folder)) == ["t.db"], "a partial upload was left behind"
            small = client.post("/upload", files={"file": ("small.wav", payload[:4096])})
            assert small.status_code == 200 and small.json() == {"size": 4096}

            for name, status, code in (
                ("full", 507, "insufficient_storage"),
                ("readonly", 503, "storage_unavailable"),
            ):
                resp = client.get(f"/db/{name}")
                assert_error(resp, status, code)
                assert_retry_after(resp)

            _mount("-o", "remount,ro", str(folder))
            resp = client.post("/upload", files={"file": ("ro.wav", payload[:4096])})
            error = assert_error(resp, 503, "storage_unavailable")
            assert "Read-only file system" in error["message"]
            assert_retry_after(resp)


def test_intake_keeps_the_disk_reserve(tmp_path: Path) -> None:
    """With the reserve on, an upload that would eat into it is refused before it is read
    (declared length) or as soon as it gets there (streamed), with nothing left behind."""
    with tmpfs(tmp_path / "reserve", 12 * MIB) as folder:
        app = intake_app(folder, UploadLimits(min_free_bytes=8 * MIB), {})
        with TestClient(app) as client:
            ok = client.post("/upload", files={"file": ("a.wav", os.urandom(2 * MIB))})
            assert ok.status_code == 200, ok.text
            (folder / "upload").unlink()
            declared = client.post("/upload", files={"file": ("b.wav", os.urandom(6 * MIB))})
            assert_error(declared, 507, "insufficient_storage")

            def stream() -> Iterator[bytes]:
                yield multipart_head("c.wav")
                for _ in range(6):
                    yield os.urandom(MIB)
                yield f"\r\n--{BOUNDARY}--\r\n".encode()

            streamed = client.post(
                "/upload",
                content=stream(),
                headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"},
            )
            assert_error(streamed, 507, "insufficient_storage")
            assert_retry_after(streamed)
            assert os.listdir(folder) == []


# --------------------------------------------------------------------------------------
# Disk full and read-only data dir under the whole app (in-process, a fake engine)
# --------------------------------------------------------------------------------------


@contextlib.contextmanager
def app_on(data_dir: Path) -> Iterator[tuple[TestClient, Turnstile]]:
    """The app over ``data_dir`` (one job claimed at a time), its engine's passes held at
    a turnstile until the test lets them through."""
    with in_process(data_dir, {"ASRSERVE_PREFETCH_JOBS": "1"}) as app:
        (engine,) = app.engines
        engine.gate = turnstile = Turnstile()
        try:
            yield app.client, turnstile
        finally:
            turnstile.set()


class Watch(logging.Handler):
    """Sets ``seen`` at the first log record whose message matches ``pattern``."""

    def __init__(self, pattern: re.Pattern[str]) -> None:
        super().__init__()
        self.pattern = pattern
        self.seen = threading.Event()
        self.match: re.Match[str] | None = None

    def emit(self, record: logging.LogRecord) -> None:
        found = self.pattern.search(record.getMessage())
        if found is not None and not self.seen.is_set():
            self.match = found
            self.seen.set()


@contextlib.contextmanager
def watching(pattern: re.Pattern[str]) -> Iterator[Watch]:
    watch = Watch(pattern)
    root = logging.getLogger()
    root.addHandler(watch)
    try:
        yield watch
    finally:
        root.removeHandler(watch)


def serving(client: httpx2.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    assert client.get(JOBS).status_code == 200


def chunked_upload(client: httpx2.Client, path: str, size: int) -> httpx2.Response:
    """A streamed body without Content-Length, so the server only learns its size as it
    reads."""

    def body() -> Iterator[bytes]:
        yield f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="purpose"\r\n\r\n'.encode()
        yield b"audio\r\n" + multipart_head("streamed.bin")
        for _ in range(size // MIB):
            yield os.urandom(MIB)
        yield f"\r\n--{BOUNDARY}--\r\n".encode()

    headers = {"content-type": f"multipart/form-data; boundary={BOUNDARY}"}
    return client.post(path, content=body(), headers=headers)


def refuse_every_upload(
    client: httpx2.Client, clip: Clip, status: int, code: str, data_dir: Path
) -> None:
    """Sync, async and Files API uploads all refused with ``status``; nothing stays."""
    before = listing(data_dir)
    for resp in (
        client.post(SYNC, files=upload_files(clip)),
        client.post(JOBS, files=upload_files(clip)),
        client.post(FILES, data={"purpose": "audio"}, files=upload_files(clip)),
        chunked_upload(client, FILES, 4 * MIB),
    ):
        assert_error(resp, status, code)
        assert_retry_after(resp)
    assert listing(data_dir) == before


def fill_with_files(client: httpx2.Client, blob: int) -> tuple[list[str], httpx2.Response]:
    """Upload ``blob``-byte files through the Files API until one is refused."""
    stored: list[str] = []
    for index in range(64):
        resp = client.post(
            FILES, data={"purpose": "audio"}, files={"file": (f"{index}.bin", os.urandom(blob))}
        )
        if resp.status_code != 200:
            return stored, resp
        stored.append(resp.json()["id"])
    raise AssertionError("the disk never filled")


def test_disk_full(corpus: list[Clip], tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The service's own uploads fill the disk down to its reserve: more uploads get 507,
    the jobs accepted before (held at the engine meanwhile) keep running and complete.
    Another writer then takes the last byte: still 507, still serving. Space freed: uploads
    work again; the database is sound."""
    clips = by_name(corpus)
    with tmpfs(tmp_path / "data", DISK_RESERVE_BYTES + 40 * MIB) as data_dir:
        with app_on(data_dir) as (client, turnstile):
            _disk_full_scenario(client, turnstile, clips, data_dir)
        assert integrity(data_dir) == "ok"
        assert read_db(data_dir, "SELECT * FROM queue") == []
        statuses = read_db(data_dir, "SELECT status, COUNT(*) AS n FROM jobs GROUP BY status")
        assert {row["status"]: row["n"] for row in statuses} == {"succeeded": 6}
        assert "Traceback" not in caplog.text


def _disk_full_scenario(
    client: TestClient, turnstile: Turnstile, clips: dict[str, Clip], data_dir: Path
) -> None:
    turnstile.hold()  # the device keeps the accepted jobs unfinished until the disk is full
    accepted = []
    for name in ("long_00.wav", *SHORT_CLIPS):
        resp = client.post(JOBS, files=upload_files(clips[name]))
        assert resp.status_code == 202, resp.text
        accepted.append(resp.json()["id"])

    stored: list[str] = []
    for blob in (8 * MIB, MIB, 128 * 1024, 16 * 1024):  # down to the last few KiB
        more, refused = fill_with_files(client, blob)
        stored += more
    assert len(stored) >= 4, stored
    error = assert_error(refused, 507, "insufficient_storage")
    assert_retry_after(refused)
    assert "storage is full" in error["message"]
    unfinished = [i for i in accepted if job_status(client, i) != "succeeded"]
    print(f"\ndisk full after {len(stored)} files; {len(unfinished)} accepted jobs unfinished")
    assert unfinished, "every job finished before the disk filled: nothing was shown"
    refuse_every_upload(client, clips[SHORT_CLIPS[0]], 507, "insufficient_storage", data_dir)
    serving(client)
    turnstile.set()
    for job_id in accepted:
        job = wait_job(client, job_id)
        assert job["status"] == "succeeded" and job["result"]["text"].strip(), job

    filler = fill(data_dir)  # someone else takes the rest: not a byte left
    assert free_bytes(data_dir) < 64 * 1024
    refuse_every_upload(client, clips[SHORT_CLIPS[1]], 507, "insufficient_storage", data_dir)
    serving(client)

    filler.unlink()
    for file_id in stored:
        assert client.delete(f"{FILES}/{file_id}").status_code == 200
    clip = clips[SHORT_CLIPS[2]]
    resp = client.post(JOBS, files=upload_files(clip))
    assert resp.status_code == 202, resp.text
    assert wait_job(client, resp.json()["id"])["status"] == "succeeded"
    resp = client.post(SYNC, files=upload_files(clip))
    assert resp.status_code == 200 and resp.json()["text"].strip(), resp.text


def test_read_only_data_dir(corpus: list[Clip], tmp_path: Path) -> None:
    """The data dir turns read-only under the running service: uploads get 503 with the
    reason, the service keeps serving and finishes the job it had accepted (held at the
    engine until then); writable again, uploads work. (A read-only bind mount: the
    database, already open, stays writable.)"""
    clips = by_name(corpus)
    data_dir = tmp_path / "data"
    with app_on(data_dir) as (client, turnstile):
        turnstile.hold()
        resp = client.post(JOBS, files=upload_files(clips["long_00.wav"]))
        assert resp.status_code == 202, resp.text
        accepted = resp.json()["id"]
        turnstile.until_waiting()  # its first window is at the engine: the job runs
        with read_only(data_dir):
            with pytest.raises(OSError, match="Read-only"):
                (data_dir / "probe").touch()
            before = listing(data_dir)
            for resp in (
                client.post(SYNC, files=upload_files(clips[SHORT_CLIPS[0]])),
                client.post(JOBS, files=upload_files(clips[SHORT_CLIPS[0]])),
                client.post(FILES, data={"purpose": "audio"}, files={"file": ("a", b"x" * 9)}),
            ):
                error = assert_error(resp, 503, "storage_unavailable")
                assert "Read-only file system" in error["message"], error
                assert_retry_after(resp)
            assert listing(data_dir) == before
            serving(client)
            turnstile.set()
            job = wait_job(client, accepted)
            assert job["status"] == "succeeded", job
        resp = client.post(SYNC, files=upload_files(clips[SHORT_CLIPS[0]]))
        assert resp.status_code == 200 and resp.json()["text"].strip(), resp.text
    assert integrity(data_dir) == "ok"


def test_jobs_survive_the_disk_filling_under_them(corpus: list[Clip], tmp_path: Path) -> None:
    """Another writer fills the disk to the last byte while a job runs (held at the engine
    until then): storing its result fails, and is retried until space is freed; then the
    accepted jobs all complete, without a restart."""
    clips = by_name(corpus)
    with (
        tmpfs(tmp_path / "data", DISK_RESERVE_BYTES + 16 * MIB) as data_dir,
        app_on(data_dir) as (client, turnstile),
        watching(STORE_RETRY) as retried,
    ):
        turnstile.hold()
        ids = []
        for name in ("long_00.wav", *SHORT_CLIPS):
            resp = client.post(JOBS, files=upload_files(clips[name]))
            assert resp.status_code == 202, resp.text
            ids.append(resp.json()["id"])
        turnstile.until_waiting()  # the first job's first window is at the engine
        assert job_status(client, ids[0]) == "running"
        filler = fill(data_dir)
        turnstile.set()
        assert retried.seen.wait(120), "storing the result never failed"
        assert retried.match is not None
        print(f"\nwith the disk full: {retried.match[0]}")
        # not stored: the job is still running, its result held in memory
        assert job_status(client, ids[0]) == "running"
        filler.unlink()
        for job_id in ids:
            assert wait_job(client, job_id, timeout=20)["status"] == "succeeded"
