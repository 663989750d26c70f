"""The multilingual base model served over HTTP hears other languages as faster-whisper itself
does: no worse language detection, transcription or translation than its own ``transcribe``
(with its defaults, temperature fallback included), on the same files in the same run
(``tests/support/languages.py``), and no answer that loops.

Recorded prompts (Asterisk's, from Debian: es, fr, it, ru) are detected, transcribed and
translated; synthetic sentences (espeak-ng: de, es, it, pt), on which the fallback runs
most, are translated. One server (``ASRSERVE_MODELS=base``) for the module, every clip
requested concurrently so that they batch, and faster-whisper's reference computed once.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer
from asrserve.engine.fallback import TEMPERATURES, compression_ratio, repeats_phrase
from tests.support.corpus_languages import LanguageClip
from tests.support.languages import (
    MODEL_CACHE,
    REAL_LANGUAGES,
    Heard,
    Translation,
    real_prompts,
    reference,
    reference_translations,
    report,
    scores,
)
from tests.support.servers import Server

pytestmark = [
    pytest.mark.slow,
    # the reference and the served answers on both corpora, in the first test's set-up
    pytest.mark.timeout(900),
    # this openai release marks audio.translations.create deprecated (a warning on each call);
    # its request is what it was, and what the server answers
    pytest.mark.filterwarnings("ignore:deprecated:DeprecationWarning:tests.test_languages"),
]

TIMEOUT = httpx.Timeout(300.0, connect=10.0)
WER_MARGIN = 0.02


@pytest.fixture(scope="module")
def real() -> list[LanguageClip]:
    return real_prompts()


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


@dataclass(frozen=True)
class Own:
    """faster-whisper's results: the prompts heard, the synthetic sentences translated."""

    heard: list[Heard]
    translations: list[Translation]


@pytest.fixture(scope="module")
def own(base_model: Path, real: list[LanguageClip], language_corpus: list[LanguageClip]) -> Own:
    heard = reference(base_model, real)
    print(f"\nfaster-whisper on the recorded prompts:\n{report(heard)}")
    return Own(heard, reference_translations(base_model, language_corpus))


def _verbose(http: httpx.Client, route: str, path: Path, **data: str) -> dict[str, Any]:
    with path.open("rb") as audio:
        response = http.post(
            route,
            files={"file": (path.name, audio)},
            data={"model": "base", "response_format": "verbose_json", **data},
        )
    assert response.status_code == 200, response.text
    answer: dict[str, Any] = response.json()
    return answer


@dataclass(frozen=True)
class Answered:
    """What the server made of one clip, and the verbose answers it gave."""

    heard: Heard
    answers: list[dict[str, Any]]


def _translate(oai: openai.OpenAI, path: Path) -> dict[str, Any]:
    with path.open("rb") as audio:
        translation = oai.audio.translations.create(
            model="base", file=audio, response_format="verbose_json"
        )
    return translation.model_dump()


def _hear(http: httpx.Client, oai: openai.OpenAI, clip: LanguageClip) -> Answered:
    """As the reference hears a clip: transcribed with no language given (the detecting
    answer is the transcript when it finds the clip's language), again with the language
    given where it did not, and translated through the ``openai`` client."""
    route = "/v1/audio/transcriptions"
    detecting = _verbose(http, route, clip.path)
    answers = [detecting]
    if detecting["language"] != clip.language:
        answers.append(_verbose(http, route, clip.path, language=clip.language))
    answers.append(_translate(oai, clip.path))
    transcript = answers[-2]["text"].strip()
    return Answered(
        Heard(clip, detecting["language"], transcript, _translation(answers[-1])), answers
    )


def _translation(answer: dict[str, Any]) -> Translation:
    sampled = any(segment["temperature"] > 0 for segment in answer["segments"])
    return Translation(answer["text"].strip(), sampled)


@pytest.fixture(scope="module")
def http(base_server: Server) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_server.url, timeout=TIMEOUT) as client:
        yield client


@dataclass(frozen=True)
class Served:
    """The server's answers: the prompts heard, the synthetic sentences translated."""

    heard: list[Answered]
    translations: list[dict[str, Any]]

    @property
    def answers(self) -> list[dict[str, Any]]:
        return [answer for a in self.heard for answer in a.answers] + self.translations


@pytest.fixture(scope="module")
def served(
    base_server: Server,
    http: httpx.Client,
    real: list[LanguageClip],
    language_corpus: list[LanguageClip],
) -> Served:
    """Every request at once (eight at a time), so that they batch."""
    with (
        openai.OpenAI(base_url=base_server.url + "/v1", api_key="x", max_retries=0) as oai,
        ThreadPoolExecutor(8) as pool,
    ):
        heard = pool.map(lambda clip: _hear(http, oai, clip), real)
        translations = pool.map(lambda clip: _translate(oai, clip.path), language_corpus)
        out = Served(list(heard), list(translations))
    print(f"\nthe served base model on the recorded prompts:\n{report(_heard(out))}")
    return out


def _heard(served: Served) -> list[Heard]:
    return [answered.heard for answered in served.heard]


def test_real_speech_detected_and_transcribed_no_worse(served: Served, own: Own) -> None:
    """Per language of the recorded prompts: detection accuracy and transcription WER."""
    mine, theirs = scores(_heard(served)), scores(own.heard)
    assert mine.keys() == theirs.keys() == set(REAL_LANGUAGES)
    for language, figures in mine.items():
        reference_figures = theirs[language]
        assert figures.detection >= reference_figures.detection - WER_MARGIN, (
            figures,
            reference_figures,
        )
        assert figures.wer <= reference_figures.wer + WER_MARGIN, (figures, reference_figures)


def test_translation_no_worse(
    served: Served, own: Own, real: list[LanguageClip], language_corpus: list[LanguageClip]
) -> None:
    """Into English, over the recorded prompts and over the synthetic sentences: the served
    path keeps a sampled text on no more clips than faster-whisper's fallback runs on, and
    over the clips neither side samples its WER is within 0.02 of faster-whisper's.

    What this compares, and what it cannot: a served segment reports the temperature of the
    text it kept, while faster-whisper reports its last temperature when every try failed,
    though it keeps the try with the best log probability (the greedy one, often). So
    ``sampled`` is "kept a draw" on the served side and "the fallback ran" on faster-
    whisper's: on the synthetic sentences its fallback ran on clips 1, 2, 11, 13, 14 and 15
    and kept a draw on 2, 13 and 14 (one run, a /tmp script), where the served path kept
    draws on 2 and 12. Neither "kept a draw" nor a draw's words are the same from run to
    run, and which clips fall back differs between the sides for a reason of their own (the
    served path cuts at VAD's pauses: clip 12's windows are 0-2 s and 2.44-4.44 s, faster-
    whisper's 0-2 s and 2.6-4.6 s, and only the served greedy decode fails its log
    probability), so neither a clip-by-clip match nor a WER over sampled clips can be held
    here; a regression that moves the fallback onto other clips without adding any is not
    seen by this test. Sampled clips are held to no loop (the next test)."""
    english = {
        "recorded": [clip.english for clip in real],
        "synthetic": [clip.english for clip in language_corpus],
    }
    mine = {
        "recorded": [heard.translation for heard in _heard(served)],
        "synthetic": [_translation(answer) for answer in served.translations],
    }
    theirs = {"recorded": [heard.translation for heard in own.heard], "synthetic": own.translations}
    for name, refs in english.items():
        drawn = [i for i, t in enumerate(mine[name]) if t.sampled]
        reference_drawn = [i for i, t in enumerate(theirs[name]) if t.sampled]
        print(f"{name}: kept a draw on {drawn}, faster-whisper's fallback ran on {reference_drawn}")
        assert len(drawn) <= len(reference_drawn), (name, drawn, reference_drawn)
        kept = [i for i in range(len(refs)) if i not in {*drawn, *reference_drawn}]
        ours = wer([refs[i] for i in kept], [mine[name][i].text for i in kept])
        reference = wer([refs[i] for i in kept], [theirs[name][i].text for i in kept])
        print(f"{name}: {len(kept)} of {len(refs)} with neither, WER {ours:.4f} vs {reference:.4f}")
        assert ours <= reference + WER_MARGIN, (name, ours, reference)


def test_no_answer_loops(served: Served) -> None:
    """No transcript or translation, nor any segment of one, compresses over 2.4 (the mark
    of text that repeats itself), none of the recorded prompts' answers repeats a phrase, and
    each segment says the temperature it ended at."""
    answers = served.answers
    looped = [a["text"] for a in answers if compression_ratio(a["text"]) > 2.4]
    looped += [s["text"] for a in answers for s in a["segments"] if s["compression_ratio"] > 2.4]
    assert looped == []
    real = [answer["text"] for a in served.heard for answer in a.answers]
    assert [text for text in real if repeats_phrase(text)] == []
    temperatures = {s["temperature"] for a in answers for s in a["segments"]}
    assert temperatures <= set(TEMPERATURES)
    assert temperatures != {0.0}  # the synthetic sentences make some windows fall back


def test_english_detected(http: httpx.Client, corpus: list[Clip]) -> None:
    """English speech is detected as English by the served base model, no language given:
    the corpus's four shortest clips (3 to 10 s: the least speech to tell English by)."""
    short = sorted(corpus, key=lambda clip: clip.duration)[:4]
    with ThreadPoolExecutor(8) as pool:
        answers = list(
            pool.map(lambda clip: _verbose(http, "/v1/audio/transcriptions", clip.path), short)
        )
    assert [a["language"] for a in answers] == ["en"] * len(short)
