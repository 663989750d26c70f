"""whisper-asr-webservice's routes where tiny.en and a multilingual base are served at once:
as the peer's clients call them, naming no model, ``/detect-language`` and
``/asr?task=translate`` are answered by the multilingual model (the default, tiny.en, cannot
tell languages apart nor translate), and ``/v1/models`` describes both.

Which model answers, and what the routes make of its answer, is HTTP semantics: the app in
this process (``tests/support/inprocess.py``) on fake forward passes of both models, each
recording what it was asked. What the real base detects and translates is
``tests/test_languages.py``'s (``test_english_detected``, ``test_translation_no_worse``).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from asrserve.vocabulary import Task
from tests.support.fakes import FakeEngine
from tests.support.inprocess import served
from tests.support.servers import JFK


def test_peer_routes_on_a_multilingual_model(tmp_path: Path) -> None:
    tiny, base = FakeEngine(model_id="tiny.en"), FakeEngine(model_id="base")
    base.multilingual = True  # detects "en" at 0.9; each window decoded to its length
    env = {"ASRSERVE_MODELS": "tiny.en,base"}
    with served(tmp_path / "data", env, lambda _: [{"tiny.en": tiny, "base": base}]) as http:
        audio = JFK.read_bytes()
        detected = http.post("/detect-language", files={"audio_file": ("a", audio)})
        assert detected.status_code == 200, detected.text
        assert detected.json() == {
            "detected_language": "english",
            "language_code": "en",
            "confidence": 0.9,
        }
        assert (base.detections, tiny.detections) == ([1], [])
        translated = http.post(
            "/asr",
            params={"task": "translate", "output": "json"},
            files={"audio_file": ("jfk.flac", audio)},
        )
        assert translated.status_code == 200, translated.text
        result = json.loads(translated.text)
        assert (result["language"], result["text"]) == ("en", " 11.0")  # JFK's one window
        assert ([o.task for o in base.options], tiny.batches) == ([Task.TRANSLATE], [])
        cards = {card["id"]: card for card in http.get("/v1/models").json()["data"]}
    assert (cards["base"]["languages"], cards["base"]["translate"]) == ("multilingual", True)
    assert (cards["base"]["default"], cards["tiny.en"]["default"]) == (False, True)


@pytest.mark.parametrize(
    "params",
    [
        {"output": "json", "min_speakers": "2"},
        {"output": "srt", "min_speakers": "2"},
        {"output": "vtt", "max_speakers": "3"},
        {"output": "json", "word_timestamps": "true", "max_speakers": "3"},
    ],
    ids=["json", "srt", "vtt", "word_timestamps"],
)
def test_asr_speaker_counts_without_diarize_are_refused_in_every_output(
    tmp_path: Path, params: dict[str, str]
) -> None:
    """``min_speakers``/``max_speakers`` without ``diarize=true`` is a 400 naming
    ``diarize`` whatever the output (subtitles and word timestamps had taken and dropped
    them), and nothing reaches the engine."""
    engine = FakeEngine(model_id="tiny.en")
    with served(tmp_path / "data", {}, lambda _: [{"tiny.en": engine}]) as http:
        refused = http.post(
            "/asr", params=params, files={"audio_file": ("jfk.flac", JFK.read_bytes())}
        )
    assert (refused.status_code, refused.json()["error"]["param"]) == (400, "diarize")
    assert engine.batches == []
