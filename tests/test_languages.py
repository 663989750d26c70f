"""The multilingual base model served over HTTP hears German, Spanish, Italian and Portuguese as
faster-whisper itself does: the same detected languages, the same transcription and translation
accuracy, on the same files in the same run (``tests/support/languages.py``).

One server (``ASRSERVE_MODELS=base``) for the module, and faster-whisper's reference computed
once beside it: synthetic speech is hard for base, so the gate is agreement with the engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import openai
import pytest

from asrserve.corpus import Clip
from asrserve.corpus_languages import LanguageClip
from tests.support.languages import MODEL_CACHE, Heard, reference, report, scores
from tests.support.servers import Server

pytestmark = [
    pytest.mark.slow,
    # this openai release marks audio.translations.create deprecated (a warning on each call);
    # its request is what it was, and what the server answers
    pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning:tests.test_languages"),
]

TIMEOUT = httpx.Timeout(300.0, connect=10.0)
WER_MARGIN = 0.02
AGREEMENT = 0.95


@pytest.fixture(scope="module")
def base_server(tmp_path_factory: pytest.TempPathFactory, base_model: Path) -> Iterator[Server]:
    env = {
        "ASRSERVE_MODELS": "base",
        "ASRSERVE_MODEL_CACHE_DIR": str(MODEL_CACHE),  # the join the reference uses
        "ASRSERVE_OFFLINE": "1",
    }
    server = Server(tmp_path_factory.mktemp("base-server") / "data", env=env)
    server.start(timeout=180.0)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def faster_whisper_heard(base_model: Path, language_corpus: list[LanguageClip]) -> list[Heard]:
    heard = reference(base_model, language_corpus)
    print(f"\nfaster-whisper on the language corpus:\n{report(heard)}")
    return heard


def _detected(http: httpx.Client, path: Path) -> str:
    """The language the server finds in ``path`` with none given."""
    with path.open("rb") as audio:
        response = http.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "base", "response_format": "verbose_json"},
        )
    assert response.status_code == 200, response.text
    language = response.json()["language"]
    assert isinstance(language, str)
    return language


def _hear(http: httpx.Client, oai: openai.OpenAI, clip: LanguageClip) -> Heard:
    with clip.path.open("rb") as audio:
        transcript = oai.audio.transcriptions.create(
            model="base", file=audio, language=clip.language
        ).text
    with clip.path.open("rb") as audio:
        translation = oai.audio.translations.create(model="base", file=audio).text
    return Heard(clip, _detected(http, clip.path), transcript.strip(), translation.strip())


@pytest.fixture(scope="module")
def http(base_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_server.url, timeout=TIMEOUT) as client:
        yield client


@pytest.fixture(scope="module")
def served_heard(
    base_server: Server, http: httpx.Client, language_corpus: list[LanguageClip]
) -> list[Heard]:
    """The server's results on every clip, requested concurrently so that they batch."""
    with (
        openai.OpenAI(base_url=base_server.url + "/v1", api_key="x", max_retries=0) as oai,
        ThreadPoolExecutor(8) as pool,
    ):
        heard = list(pool.map(lambda clip: _hear(http, oai, clip), language_corpus))
    print(f"\nthe served base model on the language corpus:\n{report(heard)}")
    return heard


def test_detected_languages_agree(
    served_heard: list[Heard], faster_whisper_heard: list[Heard]
) -> None:
    pairs = list(zip(served_heard, faster_whisper_heard, strict=True))
    disagree = [
        (s.clip.path.name, s.detected, f.detected) for s, f in pairs if s.detected != f.detected
    ]
    assert 1 - len(disagree) / len(pairs) >= AGREEMENT, disagree


def test_transcription_wer_matches_faster_whisper(
    served_heard: list[Heard], faster_whisper_heard: list[Heard]
) -> None:
    served, own = scores(served_heard), scores(faster_whisper_heard)
    assert served.keys() == own.keys() == {"de", "es", "it", "pt"}
    for language, score in served.items():
        assert abs(score.wer - own[language].wer) <= WER_MARGIN, (score, own[language])


def test_translation_wer_matches_faster_whisper(
    served_heard: list[Heard], faster_whisper_heard: list[Heard]
) -> None:
    served, own = scores(served_heard), scores(faster_whisper_heard)
    for language, score in served.items():
        assert abs(score.translation_wer - own[language].translation_wer) <= WER_MARGIN, (
            score,
            own[language],
        )


def test_english_detected(http: httpx.Client, corpus: list[Clip]) -> None:
    short = [clip for clip in corpus if clip.duration <= 30.0]
    with ThreadPoolExecutor(8) as pool:
        detected = list(pool.map(lambda clip: _detected(http, clip.path), short))
    assert detected == ["en"] * len(short), detected
