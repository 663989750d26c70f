"""Subtitles people can read, end to end: the real model behind a real server, asked for
subtitles over plain HTTP as ``/v1/jobs/{id}/transcript?format=srt|vtt`` (the corpus's long
file, over two minutes of speech), ``/v1/audio/transcriptions`` and whisper-asr-webservice's
``/asr`` (JFK: what those routes add is taking the shaping as form fields and query
parameters), with the default limits and tighter ones: every cue within its limits, cue times
monotonic and inside the audio, and the cues' text, joined, the text of the same job's
transcript. Shaping where it has no effect is a 400 naming the parameter."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from asrserve.audio.decode import decode
from asrserve.bench.corpus import Clip
from asrserve.engine.base import SAMPLING_RATE
from asrserve.subtitles import CueLimits
from tests.support.api import submit_job, transcribe, wait_job
from tests.support.servers import JFK, Server
from tests.support.subtitles import Cue, check_cues, parse_srt, parse_vtt

pytestmark = pytest.mark.slow

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
TIGHT = {
    "max_line_width": "24",
    "max_line_count": "1",
    "max_words_per_cue": "4",
    "max_cue_seconds": "2.5",
}
TIGHT_LIMITS = CueLimits(24, 1, 4, 2.5)
MILLISECOND = 0.0015  # the files' times are rounded to whole milliseconds


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        yield client


def normalised(text: str) -> str:
    return " ".join(text.split())


def check(cues: list[Cue], limits: CueLimits, duration: float, text: str) -> None:
    """Every cue within ``limits``, the timeline monotonic and within the audio, and the
    cues' text, joined, the transcript's ``text``."""
    check_cues(cues, duration)
    for cue in cues:
        assert 1 <= len(cue.lines) <= limits.max_line_count, cue
        assert all(len(line) <= limits.max_line_width for line in cue.lines), cue
        assert cue.end - cue.start <= limits.max_cue_seconds + MILLISECOND, cue
        if limits.max_words_per_cue is not None:
            assert len(cue.text.split()) <= limits.max_words_per_cue, cue
    assert normalised(" ".join(cue.text for cue in cues)) == normalised(text)


def newest_job(http: httpx.Client, filename: str) -> dict[str, Any]:
    """The job a synchronous request just ran (the newest; its file's name checked)."""
    response = http.get("/v1/jobs", params={"limit": 1})
    assert response.status_code == 200, response.text
    (job,) = response.json()["data"]
    assert (job["filename"], job["priority"], job["status"]) == (
        filename,
        "interactive",
        "succeeded",
    )
    assert job["options"]["word_timestamps"] is True
    return dict(job)


def job_text(http: httpx.Client, job_id: str) -> str:
    response = http.get(f"/v1/jobs/{job_id}/transcript", params={"format": "json"})
    assert response.status_code == 200, response.text
    text: str = response.json()["text"]
    return text


def jfk_text(http: httpx.Client, job_id: str) -> str:
    text = job_text(http, job_id)
    assert "fellow Americans" in text, text
    return text


def test_subtitles_of_a_long_file_are_cut_within_their_limits(
    http: httpx.Client, long_clip: Clip
) -> None:
    duration = long_clip.duration
    # an async job submitted as srt keeps word timestamps; shaping is given at fetch
    job = wait_job(http, submit_job(http, long_clip.path, response_format="srt")["id"])
    assert job["status"] == "succeeded" and job["options"]["word_timestamps"] is True, job
    text = job_text(http, job["id"])
    assert len(text.split()) > 200, text
    url = f"/v1/jobs/{job['id']}/transcript"
    shown: dict[tuple[str, bool], list[Cue]] = {}
    for fmt, parse in (("srt", parse_srt), ("vtt", parse_vtt)):
        for tight in (False, True):
            response = http.get(url, params={"format": fmt, **(TIGHT if tight else {})})
            assert response.status_code == 200, response.text
            cues = parse(response.text)
            check(cues, TIGHT_LIMITS if tight else CueLimits(), duration, text)
            shown[fmt, tight] = cues
    assert len(shown["srt", True]) > len(shown["srt", False]) > 10
    assert shown["srt", False] == shown["vtt", False]
    assert any(len(cue.lines) == 2 for cue in shown["srt", False])  # paragraphs re-cut

    # karaoke: a cue per word's time, the word underlined, the cue's text around it
    params = {"format": "vtt", "highlight_words": "true", **TIGHT}
    karaoke = parse_vtt(http.get(url, params=params).text)
    check_cues(karaoke, duration)
    underlined = [cue for cue in karaoke if "<u>" in cue.text]
    assert len(underlined) == len(text.split())
    assert all(len(re.findall(r"<u>[^<\s]+</u>", cue.text)) == 1 for cue in underlined)
    plain = {(cue.text) for cue in shown["vtt", True]}
    assert {re.sub("</?u>", "", cue.text) for cue in karaoke} == plain


def test_the_sync_route_and_asr_take_shaping_with_the_upload(http: httpx.Client) -> None:
    """The tight limits given with the upload, not at fetch: as extra form fields of the
    synchronous route (through the openai client) and as ``/asr``'s query parameters. JFK's
    segments run past four words, so unshaped cues would not pass the check."""
    duration = decode(JFK, 60).shape[0] / SAMPLING_RATE
    base_url = f"{str(http.base_url).rstrip('/')}/v1"
    with (
        openai.OpenAI(base_url=base_url, api_key="x", max_retries=0, timeout=600.0) as client,
        JFK.open("rb") as audio,
    ):
        answer = client.audio.transcriptions.create(
            model="whisper-1", file=audio, response_format="srt", extra_body=TIGHT
        )
    sync = newest_job(http, JFK.name)
    check(parse_srt(answer), TIGHT_LIMITS, duration, jfk_text(http, sync["id"]))

    # whisper-asr-webservice's /asr, shaping as query parameters
    with JFK.open("rb") as audio:
        files = {"audio_file": (JFK.name, audio)}
        response = http.post("/asr", params={"output": "srt", **TIGHT}, files=files)
    assert response.status_code == 200, response.text
    peer = newest_job(http, JFK.name)
    check(parse_srt(response.text), TIGHT_LIMITS, duration, jfk_text(http, peer["id"]))


def error_of(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code == 400, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


def test_shaping_where_it_changes_nothing_is_a_400_naming_the_parameter(
    http: httpx.Client,
) -> None:
    error = error_of(transcribe(http, JFK, "text", max_line_width="30"))
    assert error["param"] == "max_line_width" and "srt or vtt" in error["message"]
    error = error_of(transcribe(http, JFK, "srt", max_line_count="0"))
    assert error["param"] == "max_line_count" and "between 1 and 10" in error["message"]
    with JFK.open("rb") as audio:
        files = {"file": ("jfk.flac", audio)}
        data = {"response_format": "srt", "max_cue_seconds": "3"}
        error = error_of(http.post("/v1/jobs", files=files, data=data))
    assert error["param"] == "max_cue_seconds" and "fetched" in error["message"]
    missing = "/v1/jobs/job_none/transcript"
    error = error_of(http.get(missing, params={"format": "json", "max_words_per_cue": "3"}))
    assert error["param"] == "max_words_per_cue"
    for query, param in (
        ({"output": "txt", "max_line_count": "1"}, "max_line_count"),
        ({"output": "tsv", "highlight_words": "true"}, "highlight_words"),
        ({"output": "srt", "max_cue_seconds": "soon"}, "max_cue_seconds"),
    ):
        with JFK.open("rb") as audio:
            answer = http.post("/asr", params=query, files={"audio_file": ("jfk.flac", audio)})
        assert error_of(answer)["param"] == param
