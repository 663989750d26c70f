"""Languages per tenant, end to end: keys made with ``asrserve keys create --languages
--default-language``, a server with auth on serving the multilingual base model, and the
``openai`` client (and plain HTTP for whisper-asr-webservice's ``/detect-language``).

A key limited to German and French: English is refused naming both; a German clip with no
language is German; a Spanish clip is detected as the one of the two Whisper's language
probabilities put first (computed here, on the window the server detects on, with
faster-whisper's own ``detect_language``); ``/detect-language`` answers the same. A key with
a default is transcribed in it. ``/v1/models`` shows each key's languages.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import openai
import pytest

from asrserve.audio.features import prepare
from asrserve.engine.whisper import EngineConfig, FasterWhisperEngine
from tests.support.corpus_languages import LanguageClip
from tests.support.keys import auth, new_key
from tests.support.languages import MODEL_CACHE
from tests.support.servers import Server

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]

ALLOWED = ("de", "fr")


def clip_of(clips: list[LanguageClip], name: str) -> LanguageClip:
    return next(clip for clip in clips if clip.path.name == name)


def whisper_ranking(model_dir: Path, clip: LanguageClip) -> list[tuple[str, float]]:
    """faster-whisper's probability of every language on the window the server detects on
    (the first speech, on a full 30 s window), most probable first."""
    engine = FasterWhisperEngine(EngineConfig(model_dir, "base", "cpu", 0, "int8", 2))
    prepared = prepare(clip.path, engine, max_seconds=3600, vad=True, windows=(30.0,))
    _, _, ranked = engine.weights.model.detect_language(features=prepared.chunks[0].features)
    return sorted(ranked, key=lambda pair: -pair[1])


def language_of(oai: openai.OpenAI, clip: LanguageClip) -> str:
    """The ``language`` of the clip's verbose transcript, no language given."""
    with clip.path.open("rb") as audio:
        answer = oai.audio.transcriptions.create(
            model="base", file=audio, response_format="verbose_json"
        )
    return answer.language


def test_a_key_is_held_to_its_languages(
    tmp_path: Path, make_server: type[Server], base_model: Path, language_corpus: list[LanguageClip]
) -> None:
    german, spanish = clip_of(language_corpus, "de_00.wav"), clip_of(language_corpus, "es_00.wav")
    ranked = whisper_ranking(base_model, spanish)
    assert ranked[0][0] == "es"  # unrestricted, Whisper hears the clip's own language
    expected = next(code for code, _ in ranked if code in ALLOWED)

    data = tmp_path / "data"
    listed = new_key(data, "de-fr", "--languages", ",".join(ALLOWED))
    defaulted = new_key(data, "fr-first", "--languages", "de,fr", "--default-language", "fr")
    env = {
        "ASRSERVE_AUTH": "on",
        "ASRSERVE_MODELS": "base",
        "ASRSERVE_MODEL_CACHE_DIR": str(MODEL_CACHE),
        "ASRSERVE_OFFLINE": "1",
    }
    server = make_server(data, env=env).start(timeout=180.0)
    url = server.url + "/v1"
    with (
        openai.OpenAI(base_url=url, api_key=listed, max_retries=0, timeout=300) as oai,
        openai.OpenAI(base_url=url, api_key=defaulted, max_retries=0, timeout=300) as first,
    ):
        with pytest.raises(openai.BadRequestError) as refused, german.path.open("rb") as audio:
            oai.audio.transcriptions.create(model="base", file=audio, language="en")
        assert (refused.value.code, refused.value.param) == ("language_not_allowed", "language")
        assert "allows only de, fr" in refused.value.message

        assert language_of(oai, german) == "de"
        assert language_of(oai, spanish) == expected
        assert language_of(first, german) == "fr"  # the key's default, not detected

        cards = {card.id: card.model_dump() for card in oai.models.list()}
        assert (cards["base"]["allowed_languages"], cards["base"]["default_language"]) == (
            ["de", "fr"],
            None,
        )
        mine = first.models.retrieve("base").model_dump()
        assert (mine["allowed_languages"], mine["default_language"]) == (["de", "fr"], "fr")

    with spanish.path.open("rb") as audio:
        detected = httpx.post(
            f"{server.url}/detect-language",
            files={"audio_file": (spanish.path.name, audio)},
            headers=auth(listed),
            timeout=300,
        )
    assert detected.status_code == 200, detected.text
    assert detected.json()["language_code"] == expected
