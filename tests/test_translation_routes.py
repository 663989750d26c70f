"""Translation, model cards and whisper-asr-webservice's routes, over loopback.

Against the shared tiny.en server (English-only): translation and detection are 400s saying
so, an unknown model is a 400 naming the served ones, ``/asr`` answers every ``output`` on real
speech, driven exactly as whisper-asr-webservice's README drives it (its curl example:
query parameters and an ``audio_file`` part), raw PCM included, and a Batch API translation
line fails validation.

In this process, on fake forward passes of tiny.en and a multilingual base served at once
(``tests/support/inprocess.py``): the official ``openai`` client's translation answers
(plain and verbose) come from base, and its model list names both. That the real base
translates through this client is ``tests/test_languages.py``'s ``test_translation_no_worse``;
the peer's routes on both models are ``tests/test_peer_routes_inprocess.py``'s.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import openai
import pytest

from asrserve.audio.decode import decode
from asrserve.bench.wer import wer_one
from asrserve.vocabulary import Task
from tests.support.batches import client_for, create_batch, ended, line, wait_for
from tests.support.fakes import FakeEngine
from tests.support.inprocess import URL, served
from tests.support.servers import JFK, REAL_SPEECH, Server
from tests.support.subtitles import parse_srt, parse_vtt

TIMEOUT = httpx.Timeout(300.0, connect=10.0)
TRANSLATIONS = "/v1/audio/translations"


@pytest.fixture(scope="module")
def http(server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def jfk_text() -> str:
    text: str = json.loads((REAL_SPEECH / "references.json").read_text())["jfk.flac"]
    return text


def asr(http: httpx.Client, audio: bytes, name: str = "jfk.flac", **query: str) -> httpx.Response:
    """``curl -X POST -H "content-type: multipart/form-data" -F "audio_file=@/path/to/file"
    0.0.0.0:9000/asr?output=json``, as the peer's README has it."""
    return http.post("/asr", params=query, files={"audio_file": (name, audio)})


def translate(oai: openai.OpenAI, path: Path, **kwargs: Any) -> Any:
    """``client.audio.translations.create(model=..., file=...)``, unchanged. This openai
    release marks the method deprecated (a DeprecationWarning on each call): its shape and
    request are what they were, and what this server answers."""
    with path.open("rb") as audio, warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return oai.audio.translations.create(file=audio, **kwargs)


def error_of(response: httpx.Response, status: int) -> dict[str, Any]:
    assert response.status_code == status, response.text
    error: dict[str, Any] = response.json()["error"]
    return error


# --- tiny.en: what an English-only model refuses ------------------------------------------


@pytest.mark.slow
def test_translation_on_an_english_only_model_is_a_400_saying_so(server: Server) -> None:
    with (
        openai.OpenAI(base_url=f"{server.url}/v1", api_key="x", max_retries=0) as oai,
        pytest.raises(openai.BadRequestError) as caught,
    ):
        translate(oai, JFK, model="whisper-1")
    assert caught.value.code == "translation_unsupported"
    body = caught.value.body
    assert isinstance(body, dict) and body["param"] == "model"
    assert "'tiny.en' is English-only" in body["message"]


@pytest.mark.slow
def test_unknown_model_is_a_400_naming_the_served_ones(http: httpx.Client) -> None:
    for path in ("/v1/audio/transcriptions", TRANSLATIONS):
        response = http.post(
            path, files={"file": ("a.flac", JFK.read_bytes())}, data={"model": "x"}
        )
        error = error_of(response, 400)
        assert (error["code"], error["param"]) == ("model_not_found", "model")
        assert "use one of 'tiny.en', 'whisper-1', 'gpt-4o-transcribe-diarize'" in error["message"]
    error = error_of(asr(http, JFK.read_bytes(), model="large-v9"), 400)
    assert (error["code"], error["param"]) == ("model_not_found", "model")


@pytest.mark.slow
def test_models_list_the_english_only_model_and_its_alias(http: httpx.Client) -> None:
    (card,) = http.get("/v1/models").json()["data"]
    assert card == {
        "id": "tiny.en",
        "object": "model",
        "created": 0,
        "owned_by": "asrserve",
        "languages": ["en"],
        "translate": False,
        "default": True,
        "aliases": ["whisper-1", "gpt-4o-transcribe-diarize"],
        "keep_alive": -1,
        "loaded": True,
        "allowed_languages": None,  # no key: any language
        "default_language": "en",
    }
    assert http.get("/v1/models/whisper-1").json() == card
    paths = http.get("/openapi.json").json()["paths"]
    translation = paths[TRANSLATIONS]["post"]["requestBody"]["content"]["multipart/form-data"]
    assert set(translation["schema"]["properties"]) == {
        "file",
        "model",
        "language",  # the speech's (detected if left out), as on a transcription
        "prompt",
        "response_format",
        "temperature",
        "timestamp_granularities[]",
        "beam_size",
        "include[]",
        "keywords[]",  # faster-whisper's hotwords apply to a translation too
        "chunking_strategy",
        "deadline_s",
        "keep_alive",
        "stream",
        *("max_line_width", "max_line_count", "max_words_per_cue", "max_cue_seconds"),
        "highlight_words",
    }
    for route in ("/asr", "/detect-language"):
        form = paths[route]["post"]["requestBody"]["content"]["multipart/form-data"]
        assert form["schema"]["required"] == ["audio_file"]


# --- /asr and /detect-language, as whisper-asr-webservice's users call them ---------------


@pytest.mark.slow
def test_asr_answers_every_output_as_a_download(http: httpx.Client, jfk_text: str) -> None:
    audio = JFK.read_bytes()
    answers = {output: asr(http, audio, output=output) for output in ("txt", "vtt", "srt", "tsv")}
    answers["json"] = asr(http, audio, output="json")
    for output, response in answers.items():
        assert response.status_code == 200, response.text
        assert response.headers["content-type"] == "text/plain; charset=utf-8"
        disposition = f'attachment; filename="jfk.flac.{output}"'
        assert response.headers["content-disposition"] == disposition
        assert response.headers["asr-engine"] == "faster_whisper"
    result = json.loads(answers["json"].text)
    assert set(result) == {"text", "segments", "language"} and result["language"] == "en"
    assert wer_one(jfk_text, result["text"]) <= 0.1, result["text"]
    segments = result["segments"]
    assert segments and all(s["words"] is None for s in segments)
    assert answers["txt"].text == "".join(f"{s['text'].strip()}\n" for s in segments)
    cues = parse_srt(answers["srt"].text)  # cut from word timestamps, not one a segment
    assert wer_one(jfk_text, " ".join(c.text for c in cues)) <= 0.1, cues
    header, *rows = answers["tsv"].text.splitlines()
    assert header == "start\tend\ttext"
    assert rows == [f"{round(c.start * 1000)}\t{round(c.end * 1000)}\t{c.text}" for c in cues]
    assert parse_vtt(answers["vtt"].text) == cues


@pytest.mark.slow
def test_asr_options(http: httpx.Client, jfk_text: str) -> None:
    audio = JFK.read_bytes()
    words = asr(http, audio, output="json", word_timestamps="true", language="en")
    assert words.status_code == 200, words.text
    first = json.loads(words.text)["segments"][0]["words"][0]
    assert set(first) == {"word", "start", "end", "probability"}
    prompted = asr(http, audio, initial_prompt="Kennedy's inaugural address.", vad_filter="true")
    assert prompted.status_code == 200 and wer_one(jfk_text, prompted.text) <= 0.1
    for query, code, param in [
        ({"task": "translate"}, "translation_unsupported", "model"),
        ({"language": "de"}, "unsupported_language", "language"),
        ({"initial_prompt": "p" * 1001}, "prompt_too_long", "initial_prompt"),
    ]:
        error = error_of(asr(http, audio, **query), 400)
        assert (error["code"], error["param"]) == (code, param)
    assert error_of(asr(http, audio, output="docx"), 422)["param"] == "output"


@pytest.mark.slow
def test_asr_reads_raw_pcm_when_told_not_to_encode(http: httpx.Client, jfk_text: str) -> None:
    samples = np.round(decode(JFK, max_seconds=60) * 32767).astype("<i2").tobytes()
    response = asr(http, samples, name="jfk.pcm", encode="false", output="txt")
    assert response.status_code == 200, response.text
    assert wer_one(jfk_text, response.text) <= 0.1, response.text
    assert response.headers["content-disposition"] == 'attachment; filename="jfk.pcm.txt"'
    empty = error_of(asr(http, b"", encode="false"), 400)
    assert (empty["code"], empty["param"]) == ("empty_file", "audio_file")
    missing = error_of(http.post("/asr", files={"other": ("a", b"x")}), 400)
    assert missing["param"] == "audio_file"


@pytest.mark.slow
def test_detect_language_needs_a_multilingual_model(http: httpx.Client) -> None:
    response = http.post("/detect-language", files={"audio_file": ("jfk.flac", JFK.read_bytes())})
    error = error_of(response, 400)
    assert (error["code"], error["param"]) == ("detection_unsupported", "model")


@pytest.mark.slow
def test_batch_translation_lines_fail_validation_on_english_only(
    server: Server, tmp_path: Path
) -> None:
    client = client_for(server)
    lines = [line("a", "file-x", url=TRANSLATIONS)]
    batch_id = create_batch(client, lines, tmp_path, endpoint=TRANSLATIONS)
    batch = wait_for(server, batch_id, ended, timeout=30)
    assert (batch["status"], batch["endpoint"]) == ("failed", TRANSLATIONS)
    (error,) = batch["errors"]["data"]
    assert (error["code"], error["param"], error["line"]) == (
        "translation_unsupported",
        "body.model",
        1,
    )


# --- tiny.en and base served at once: the openai client's translation --------------------


def test_openai_client_translates_with_a_multilingual_model(tmp_path: Path) -> None:
    """In this process: the answers the client parses, on a fake base beside tiny.en. The
    real base's translations through this client (recorded and synthetic speech into
    English, WER within 0.02 of faster-whisper's) are ``tests/test_languages.py``'s
    ``test_translation_no_worse``."""
    tiny, base = FakeEngine(model_id="tiny.en"), FakeEngine(model_id="base")
    base.multilingual = True  # each window decoded to its length (tests/support/fakes.py)
    env = {"ASRSERVE_MODELS": "tiny.en,base"}
    with served(tmp_path / "data", env, lambda _: [{"tiny.en": tiny, "base": base}]) as http:
        oai = openai.OpenAI(base_url=f"{URL}/v1", api_key="x", max_retries=0, http_client=http)
        plain = translate(oai, JFK, model="base")
        verbose = translate(oai, JFK, model="base", response_format="verbose_json")
        ids = [model.id for model in oai.models.list()]
    assert plain.text == verbose.text == "11.0"  # JFK's one window, its length
    assert ([o.task for o in base.options], tiny.batches) == ([Task.TRANSLATE] * 2, [])
    assert verbose.language == "en" and (verbose.model_extra or {})["task"] == "translate"
    assert ids == ["tiny.en", "base"]
