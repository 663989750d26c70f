"""Crash durability (SIGKILL mid-work, restart, every accepted job finishes exactly once) and
bad input (precise status and OpenAI error shape; the server keeps working; no stray files).

Real servers (``asrserve serve`` subprocesses) and the real tiny.en model on the CPU.
"""

from __future__ import annotations

import io
import random
import wave
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from asrserve.bench.corpus import Clip, convert
from asrserve.bench.wer import wer_one
from tests.support.api import wait_job
from tests.support.db import read_db
from tests.support.errors import assert_error
from tests.support.payloads import by_name
from tests.support.servers import Limited, Server
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow

SYNC = "/v1/audio/transcriptions"
JOBS = "/v1/jobs"
BOTH = (SYNC, JOBS)

# Limits of the bad-input server; the good clip (clip_09.m4a, 3 s, 28 KB) is well within them.
MAX_SYNC_BYTES = 200_000
MAX_JOB_BYTES = 300_000
MAX_SECONDS = 10
GOOD_CLIP = "clip_09.m4a"
TOO_LONG_CLIP = "clip_02.mp3"  # 21 s but only 85 KB: over the duration limit, not the byte one


# --------------------------------------------------------------------------------------
# Durability
# --------------------------------------------------------------------------------------

# The long clip first, so it is claimed first and still running at the kill; then a mix of
# containers. 8 jobs, ~205 s of audio in all.
DURABILITY_CLIPS = (
    "long_00.wav",
    "clip_09.m4a",
    "clip_00.wav",
    "clip_05.wav",
    "clip_06.flac",
    "clip_08.ogg",
    "clip_03.ogg",
    "clip_07.mp3",
)


def _statuses(client: httpx.Client, ids: list[str]) -> dict[str, str]:
    listed = client.get(JOBS, params={"limit": 100})
    assert listed.status_code == 200, listed.text
    seen = {job["id"]: job["status"] for job in listed.json()["data"]}
    return {job_id: seen[job_id] for job_id in ids}


def _kill_mid_work(srv: Server, client: httpx.Client, ids: list[str]) -> None:
    """SIGKILL once one job has succeeded while another runs and others are still queued."""

    def mid_work() -> bool:
        statuses = set(_statuses(client, ids).values())
        assert "queued" in statuses, f"every job started before the kill could happen: {statuses}"
        return {"succeeded", "running", "queued"} <= statuses

    wait_until(mid_work, 60, lambda: f"a success and a running job\n{srv.log()}", every=0.05)
    srv.kill()
    assert srv.proc is not None and srv.proc.returncode == -9


def test_sigkill_mid_work_then_restart_finishes_every_job_once(
    corpus: list[Clip], make_server: type[Server], tmp_path: Path
) -> None:
    clips = by_name(corpus)
    data_dir = tmp_path / "data"
    # Two jobs in flight at a time, so at the kill some run while others wait in the queue.
    first = make_server(data_dir, env={"ASRSERVE_PREFETCH_JOBS": "2"}).start()
    ids: list[str] = []
    expected: dict[str, Clip] = {}
    with httpx.Client(base_url=first.url, timeout=60) as client:
        for name in DURABILITY_CLIPS:
            clip = clips[name]
            resp = client.post(JOBS, files={"file": (name, clip.path.read_bytes())})
            assert resp.status_code == 202, resp.text
            assert resp.headers["location"] == f"/v1/jobs/{resp.json()['id']}"
            ids.append(resp.json()["id"])
            expected[ids[-1]] = clip
        _kill_mid_work(first, client, ids)

    # The state the crash left behind, straight from the SQLite file (no server running).
    at_kill = {
        row["id"]: dict(row)
        for row in read_db(data_dir, "SELECT id, status, attempts, result, finished_at FROM jobs")
    }
    assert set(ids) <= set(at_kill), "a job answered 202 is missing from the database"
    running_at_kill = [i for i in ids if at_kill[i]["status"] == "running"]
    queued_at_kill = [i for i in ids if at_kill[i]["status"] == "queued"]
    done_at_kill = [i for i in ids if at_kill[i]["status"] == "succeeded"]
    assert running_at_kill, f"nothing was running at the kill: {at_kill}"
    assert len(running_at_kill) + len(queued_at_kill) + len(done_at_kill) == len(ids), at_kill
    print(
        f"\nat SIGKILL: {len(done_at_kill)} succeeded, {len(running_at_kill)} running,"
        f" {len(queued_at_kill)} queued"
    )

    second = make_server(data_dir).start()
    with httpx.Client(base_url=second.url, timeout=60) as client:
        final = {job_id: wait_job(client, job_id, timeout=120) for job_id in ids}

        listed = client.get(JOBS, params={"limit": 100})
        assert listed.status_code == 200, listed.text
        listed_jobs = {job["id"]: job for job in listed.json()["data"]}
        assert set(listed_jobs) == set(ids)
        assert {job["status"] for job in listed_jobs.values()} == {"succeeded"}

        for job_id in ids:
            transcript = client.get(f"{JOBS}/{job_id}/transcript", params={"format": "text"})
            assert transcript.status_code == 200, transcript.text
            assert transcript.text.strip() == final[job_id]["result"]["text"].strip()
    second.stop()  # graceful: every ack is written before the checks on the file

    for job_id in ids:
        job, clip = final[job_id], expected[job_id]
        assert job["status"] == "succeeded", job
        assert job["error"] is None
        assert job["attempts"] >= 1
        result = job["result"]
        assert result is not None
        assert result["duration"] == pytest.approx(clip.duration, abs=0.5)
        # One transcript of the whole clip: neither cut short nor stored twice over.
        assert wer_one(clip.text, result["text"]) < 0.35, (clip.path.name, result["text"])
        assert [seg["id"] for seg in result["segments"]] == list(range(len(result["segments"])))
        starts = [seg["start"] for seg in result["segments"]]
        assert starts == sorted(starts)
    for job_id in running_at_kill:
        assert final[job_id]["attempts"] >= 2, final[job_id]
    for job_id in queued_at_kill:
        assert final[job_id]["attempts"] == 1, final[job_id]
    for job_id in done_at_kill:  # finished before the crash: never run again
        assert final[job_id]["attempts"] == at_kill[job_id]["attempts"]
        assert final[job_id]["finished_at"] == at_kill[job_id]["finished_at"]

    # Exactly once, on disk: one row per job, one stored result each, nothing left queued.
    marks = ", ".join("?" for _ in ids)
    rows = read_db(
        data_dir,
        f"SELECT id, COUNT(*) AS n, COUNT(result) AS r FROM jobs WHERE id IN ({marks}) GROUP BY id",
        tuple(ids),
    )
    assert {row["id"]: (row["n"], row["r"]) for row in rows} == dict.fromkeys(ids, (1, 1))
    assert read_db(data_dir, "SELECT * FROM queue") == []


# --------------------------------------------------------------------------------------
# Bad input: one server with small limits
# --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Limited]:
    env = {
        "ASRSERVE_MAX_SYNC_UPLOAD_BYTES": str(MAX_SYNC_BYTES),
        "ASRSERVE_MAX_JOB_UPLOAD_BYTES": str(MAX_JOB_BYTES),
        "ASRSERVE_MAX_AUDIO_SECONDS": str(MAX_SECONDS),
    }
    srv = Server(tmp_path_factory.mktemp("limited") / "data", env=env)
    srv.start()
    try:
        with httpx.Client(base_url=srv.url, timeout=60) as client:
            yield Limited(srv, client)
    finally:
        srv.stop()


@pytest.fixture(scope="module")
def good_clip(corpus: list[Clip]) -> Clip:
    clip = by_name(corpus)[GOOD_CLIP]
    assert clip.duration < MAX_SECONDS and clip.path.stat().st_size < MAX_SYNC_BYTES
    return clip


@pytest.mark.parametrize("path", BOTH)
def test_empty_file(limited: Limited, path: str) -> None:
    resp = limited.rejected(path, files={"file": ("empty.wav", b"")})
    assert_error(resp, 400, code="empty_file", param="file")


@pytest.mark.parametrize("path", BOTH)
@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("random.wav", random.Random(1).randbytes(5000)),
        ("notes.txt", b"this is a text file, not audio\n" * 100),
        ("page.mp3", b"<!doctype html><html><body>hello</body></html>\n"),
    ],
    ids=["random-bytes", "text", "html"],
)
def test_non_audio_is_415(limited: Limited, path: str, name: str, payload: bytes) -> None:
    resp = limited.rejected(path, files={"file": (name, payload)})
    assert_error(resp, 415, code="unsupported_audio", param="file")


def _wav(pcm: bytes, rate: int = 16_000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(pcm)
    return buffer.getvalue()


@pytest.fixture(scope="module")
def corrupt_files(corpus: list[Clip], tmp_path_factory: pytest.TempPathFactory) -> dict[str, bytes]:
    clips = by_name(corpus)
    short_mp3 = tmp_path_factory.mktemp("corrupt") / "short.mp3"
    convert(clips["clip_00.wav"].path, short_mp3)  # 5.4 s, so its stated length is allowed
    m4a = clips[GOOD_CLIP].path.read_bytes()
    rng = random.Random(7)
    middle = bytearray(m4a)
    middle[5000:15000] = rng.randbytes(10_000)
    return {
        "truncated.mp3": short_mp3.read_bytes()[:2048],
        "truncated.m4a": m4a[:2048],  # the moov atom is at the end: nothing to read
        "truncated.ogg": clips["clip_08.ogg"].path.read_bytes()[:2048],
        "noise.wav": _wav(rng.randbytes(32_000)),  # a valid header over 1 s of random PCM
        "riff-garbage.wav": b"RIFF" + rng.randbytes(3000),
        "corrupt-middle.m4a": bytes(middle),  # passes the probe, fails in the decoder
    }


# What each damaged file gives: the sync status, and the job's fate (refused at upload with
# 415, or the status it ends in). Whatever FFmpeg can still read is transcribed (a partial or
# empty transcript); corrupt-middle.m4a passes the probe and fails in the decoder.
CORRUPT = {
    "truncated.mp3": (200, "succeeded"),
    "truncated.m4a": (415, "refused"),
    "truncated.ogg": (415, "refused"),
    "noise.wav": (200, "succeeded"),
    "riff-garbage.wav": (415, "refused"),
    "corrupt-middle.m4a": (415, "failed"),
}


@pytest.mark.parametrize(("name", "expected"), CORRUPT.items(), ids=list(CORRUPT))
def test_corrupt_audio_is_415_or_a_transcript(
    limited: Limited, corrupt_files: dict[str, bytes], name: str, expected: tuple[int, str]
) -> None:
    """Damaged audio: whatever FFmpeg can still read is transcribed, the rest is a 415.
    Never a 500."""
    sync_status, job_fate = expected
    payload = corrupt_files[name]
    resp = limited.client.post(SYNC, files={"file": (name, payload)})
    limited.healthy()
    if sync_status == 415:
        assert_error(resp, 415, code="unsupported_audio", param="file")
    else:
        assert resp.status_code == 200, resp.text
        assert set(resp.json()) == {"text"}, resp.text

    resp = limited.client.post(JOBS, files={"file": (name, payload)})
    limited.healthy()
    if job_fate == "refused":
        assert_error(resp, 415, code="unsupported_audio", param="file")
        return
    assert resp.status_code == 202, resp.text
    job = wait_job(limited.client, resp.json()["id"])
    assert job["status"] == job_fate, job
    if job_fate == "failed":
        assert job["error"]["status"] == 415 and job["error"]["code"] == "unsupported_audio"
        transcript = limited.client.get(f"{JOBS}/{job['id']}/transcript")
        assert_error(transcript, 415, code="unsupported_audio", param="file")


@pytest.mark.parametrize(
    ("path", "size"),
    [
        (SYNC, 1_000_000),  # refused on its Content-Length
        (SYNC, 250_000),  # under limit + multipart allowance: cut off while streaming
        (JOBS, 400_000),
    ],
)
def test_upload_over_byte_limit_is_413(limited: Limited, path: str, size: int) -> None:
    payload = random.Random(size).randbytes(size)
    resp = limited.rejected(path, files={"file": ("big.wav", payload)})
    limit = MAX_SYNC_BYTES if path == SYNC else MAX_JOB_BYTES
    error = assert_error(resp, 413, code="file_too_large", param="file")
    assert str(limit) in error["message"]


BOUNDARY = "asrserve-test-boundary-7f3a9c"


def _streamed_multipart(total: int, chunk: int = 16_384) -> Iterator[bytes]:
    """A hand-built multipart body, sent chunked (no Content-Length)."""
    yield (
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="model"\r\n\r\nwhisper-1\r\n'
        f"--{BOUNDARY}\r\n"
        'Content-Disposition: form-data; name="file"; filename="stream.wav"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n"
    ).encode()
    rng = random.Random(total)
    for sent in range(0, total, chunk):
        yield rng.randbytes(min(chunk, total - sent))
    yield f"\r\n--{BOUNDARY}--\r\n".encode()


@pytest.mark.parametrize("path", BOTH)
def test_streamed_upload_without_length_is_cut_off(limited: Limited, path: str) -> None:
    resp = limited.rejected(
        path,
        content=_streamed_multipart(1_000_000),
        headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"},
    )
    assert "content-length" not in resp.request.headers
    assert resp.request.headers["transfer-encoding"] == "chunked"
    assert_error(resp, 413, code="file_too_large", param="file")


@pytest.mark.parametrize("path", BOTH)
def test_audio_over_duration_limit_is_413(limited: Limited, corpus: list[Clip], path: str) -> None:
    clip = by_name(corpus)[TOO_LONG_CLIP]
    assert clip.duration > 2 * MAX_SECONDS and clip.path.stat().st_size < MAX_SYNC_BYTES
    resp = limited.rejected(path, files={"file": (clip.path.name, clip.path.read_bytes())})
    assert_error(resp, 413, code="audio_too_long", param="file")


BAD_PARAMS = [
    pytest.param(BOTH, {"response_format": "xml"}, "response_format", None, id="format-xml"),
    pytest.param(BOTH, {"temperature": "5"}, "temperature", None, id="temperature-5"),
    pytest.param(BOTH, {"temperature": "hot"}, "temperature", None, id="temperature-nan"),
    pytest.param(BOTH, {"model": "gpt-99"}, "model", "model_not_found", id="model-gpt-99"),
    pytest.param(
        BOTH,
        {"timestamp_granularities[]": "word", "response_format": "json"},
        "timestamp_granularities[]",
        None,
        id="words-with-json",
    ),
    pytest.param(BOTH, {"language": "fr"}, "language", "unsupported_language", id="language-fr"),
    pytest.param(BOTH, {"beam_size": "0"}, "beam_size", None, id="beam-size-0"),
    pytest.param(
        (JOBS,),
        {"callback_url": "ftp://x"},
        "callback_url",
        "invalid_callback_url",
        id="callback-ftp",
    ),
]


@pytest.mark.parametrize(("paths", "fields", "param", "code"), BAD_PARAMS)
def test_bad_parameter_is_400(
    limited: Limited,
    good_clip: Clip,
    paths: tuple[str, ...],
    fields: dict[str, str],
    param: str,
    code: str | None,
) -> None:
    for path in paths:
        files = {"file": (good_clip.path.name, good_clip.path.read_bytes())}
        resp = limited.rejected(path, files=files, data=fields)
        assert_error(resp, 400, code=code, param=param)


@pytest.mark.parametrize("path", BOTH)
def test_not_multipart_is_400(limited: Limited, path: str) -> None:
    resp = limited.rejected(path, json={"file": "audio.wav", "model": "whisper-1"})
    assert_error(resp, 400, param=None)


def _fields_only_multipart(**fields: str) -> bytes:
    parts = [
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'
        for name, value in fields.items()
    ]
    return ("".join(parts) + f"--{BOUNDARY}--\r\n").encode()


@pytest.mark.parametrize("path", BOTH)
def test_missing_file_part_is_400(limited: Limited, path: str) -> None:
    resp = limited.rejected(
        path,
        content=_fields_only_multipart(model="whisper-1", response_format="json"),
        headers={"content-type": f"multipart/form-data; boundary={BOUNDARY}"},
    )
    assert_error(resp, 400, param="file")
    # A file under another field name is not the audio either.
    resp = limited.rejected(path, data={"model": "whisper-1"}, files={"audio": ("a.wav", b"RIFF")})
    assert_error(resp, 400, param="file")


def test_unknown_job_is_404(limited: Limited) -> None:
    missing = f"{JOBS}/job_000000000000deadbeefdeadbeef"
    for method, url, params in (
        ("GET", missing, {}),
        ("GET", missing, {"wait": 1}),
        ("GET", f"{missing}/transcript", {}),
        ("DELETE", missing, {}),
    ):
        resp = limited.client.request(method, url, params=params)
        assert_error(resp, 404, code="job_not_found", param="job_id", kind="not_found_error")
    limited.healthy()


def test_good_clip_still_transcribes_after_bad_input(limited: Limited, good_clip: Clip) -> None:
    """Runs last in this module: after all of the above the server still does its job."""
    payload = good_clip.path.read_bytes()
    resp = limited.client.post(SYNC, files={"file": (good_clip.path.name, payload)})
    assert resp.status_code == 200, resp.text
    assert wer_one(good_clip.text, resp.json()["text"]) < 0.35, resp.text

    resp = limited.client.post(JOBS, files={"file": (good_clip.path.name, payload)})
    assert resp.status_code == 202, resp.text
    job = limited.client.get(f"{JOBS}/{resp.json()['id']}", params={"wait": 30}).json()
    assert job["status"] == "succeeded", job
    assert wer_one(good_clip.text, job["result"]["text"]) < 0.35, job["result"]["text"]
    limited.healthy()
    assert limited.server.log_path is not None
    assert "Traceback" not in limited.server.log_path.read_text(errors="replace")
