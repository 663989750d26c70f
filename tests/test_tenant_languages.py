"""Languages per tenant, end to end: keys made with ``asrserve keys create --languages
--default-language``, an app with auth on serving base, and the ``openai`` client (and plain
HTTP for whisper-asr-webservice's ``/detect-language``), the app in this process.

What is about requests, keys and answers runs on a fake multilingual base that "detects"
German (``tests/support/fakes.py``): a key limited to German and French has English refused
naming both; a key with a default (French) is transcribed in it, not in what detection would
say; ``/v1/models`` shows each key's languages.

What only the real model shows runs the real base: with the key limited to German and
French, a German clip with no language is German; a Spanish clip is detected as the one of
the two Whisper's language probabilities put first (computed here, with faster-whisper's own
``detect_language`` on the window the app detects on, by the app's own replica), on the
transcription route and on ``/detect-language``.
"""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from starlette.testclient import TestClient

from asrserve.audio.features import prepare
from asrserve.engine.base import Engine
from asrserve.engine.registry import load_engines
from asrserve.engine.whisper import FasterWhisperEngine
from asrserve.settings import Settings
from tests.support.corpus_languages import LanguageClip
from tests.support.fakes import FakeEngine
from tests.support.inprocess import URL, served
from tests.support.keys import auth, new_key_here
from tests.support.languages import MODEL_CACHE

ALLOWED = ("de", "fr")
AUTH_ON = {"ASRSERVE_AUTH": "on", "ASRSERVE_MODELS": "base"}


def clip_of(clips: list[LanguageClip], name: str) -> LanguageClip:
    return next(clip for clip in clips if clip.path.name == name)


def whisper_ranking(engine: FasterWhisperEngine, clip: LanguageClip) -> list[tuple[str, float]]:
    """faster-whisper's probability of every language on the window the app detects on
    (the first speech, on a full 30 s window), most probable first."""
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


def client_for(http: TestClient, key: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{URL}/v1", api_key=key, max_retries=0, http_client=http)


def german_fake(settings: Settings) -> list[dict[str, Engine]]:
    """One device with a multilingual fake base whose detection always says German."""
    base = FakeEngine(model_id="base", language="de")
    base.multilingual = True
    return [{"base": base}]


def test_a_key_is_held_to_its_languages(
    tmp_path: Path, language_corpus: list[LanguageClip]
) -> None:
    german = clip_of(language_corpus, "de_00.wav")
    data = tmp_path / "data"
    listed = new_key_here(data, "de-fr", "--languages", ",".join(ALLOWED))
    defaulted = new_key_here(data, "fr-first", "--languages", "de,fr", "--default-language", "fr")
    with served(data, AUTH_ON, german_fake) as http:
        oai, first = client_for(http, listed), client_for(http, defaulted)
        with pytest.raises(openai.BadRequestError) as refused, german.path.open("rb") as audio:
            oai.audio.transcriptions.create(model="base", file=audio, language="en")
        assert (refused.value.code, refused.value.param) == ("language_not_allowed", "language")
        assert "allows only de, fr" in refused.value.message

        assert language_of(first, german) == "fr"  # the key's default, not detected

        cards = {card.id: card.model_dump() for card in oai.models.list()}
        assert (cards["base"]["allowed_languages"], cards["base"]["default_language"]) == (
            ["de", "fr"],
            None,
        )
        mine = first.models.retrieve("base").model_dump()
        assert (mine["allowed_languages"], mine["default_language"]) == (["de", "fr"], "fr")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_detection_is_held_to_the_key_languages(
    tmp_path: Path, base_model: Path, language_corpus: list[LanguageClip]
) -> None:
    """``base_model``: the model joined into ``MODEL_CACHE``, where the app finds it."""
    german = clip_of(language_corpus, "de_00.wav")
    # Heard as French among the two; es_00.wav, heard as German, is then decoded as German
    # with every fallback temperature (15 s): the same claim, at seven times the cost.
    spanish = clip_of(language_corpus, "es_01.flac")
    data = tmp_path / "data"
    listed = new_key_here(data, "de-fr", "--languages", ",".join(ALLOWED))
    replicas: list[dict[str, Engine]] = []

    def real(settings: Settings) -> list[dict[str, Engine]]:
        replicas.extend(load_engines(settings))
        return replicas

    env = {**AUTH_ON, "ASRSERVE_MODEL_CACHE_DIR": str(MODEL_CACHE), "ASRSERVE_OFFLINE": "1"}
    with served(data, env, real) as http:
        engine = replicas[0]["base"]
        if not isinstance(engine, FasterWhisperEngine):
            raise TypeError(f"base runs on {type(engine).__name__}, not faster-whisper")
        ranked = whisper_ranking(engine, spanish)
        assert ranked[0][0] == "es"  # unrestricted, Whisper hears the clip's own language
        expected = next(code for code, _ in ranked if code in ALLOWED)

        oai = client_for(http, listed)
        assert language_of(oai, german) == "de"
        assert language_of(oai, spanish) == expected

        with spanish.path.open("rb") as audio:
            detected = http.post(
                "/detect-language",
                files={"audio_file": (spanish.path.name, audio)},
                headers=auth(listed),
            )
        assert detected.status_code == 200, detected.text
        assert detected.json()["language_code"] == expected
