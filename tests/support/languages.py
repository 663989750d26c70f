"""faster-whisper's own language detection, transcription and translation of the multilingual
corpora: the reference the served base model is held to (``tests/test_languages.py``).

Two corpora: real recorded prompts (Asterisk's, from Debian: Spanish, French, Italian,
Russian; ``tests/support/real_speech.py``), detected, transcribed and translated; and
synthetic sentences (espeak-ng: German, Spanish, Italian, Portuguese), translated. Whisper
base is far from perfect on both, so the gate is the engine run directly on the same files,
not absolute accuracy. Run on its own to print the prompts' figures:
``python -m tests.support.languages``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.bench.wer import wer
from asrserve.engine.sources import resolve
from tests.support.corpus_languages import LanguageClip, build_language_corpus
from tests.support.real_speech import prompts
from tests.support.servers import ROOT

LANGUAGE_CORPUS = ROOT / ".corpus" / "languages"
MODEL_CACHE = ROOT / ".corpus" / "models"  # joined once, shared by the reference and servers
# faster-whisper's own defaults (temperature fallback included), at the service's beam.
DECODE: dict[str, Any] = {"beam_size": 5}
REAL_LANGUAGES = ("es", "fr", "it", "ru")
PROMPTS_PER_LANGUAGE = 6


@dataclass(frozen=True)
class Translation:
    """One clip translated into English, and whether a segment reports a temperature above 0:
    the served path reports the temperature of the text it kept (a draw, different from run
    to run), faster-whisper its last one when every try failed, whichever it kept (so there
    it says the fallback ran)."""

    text: str
    sampled: bool


@dataclass(frozen=True)
class Heard:
    """What one system made of one clip."""

    clip: LanguageClip
    detected: str  # the language it found with none given
    transcript: str  # with the clip's language given
    translation: Translation


@dataclass(frozen=True)
class Score:
    """One language's figures over its clips."""

    language: str
    clips: int
    detection: float  # share of clips detected as their language
    wer: float  # transcription, against the original text
    translation_wer: float  # against the English sentences


def base_model_dir() -> Path:
    """The multilingual base model, joined from its packages into the shared cache."""
    return resolve("base", cache_dir=MODEL_CACHE, offline=True).path


def language_corpus() -> list[LanguageClip]:
    return build_language_corpus(LANGUAGE_CORPUS)


def real_prompts(per_language: int = PROMPTS_PER_LANGUAGE) -> list[LanguageClip]:
    """Recorded prompts in Spanish, French, Italian and Russian, the same prompts in each,
    with the English prompt's script as the translation's reference."""
    return [
        LanguageClip(r.path, r.language, r.text, r.english, r.duration)
        for r in prompts(per_language, REAL_LANGUAGES)
    ]


def _text(segments: Iterable[Any]) -> str:
    return "".join(segment.text for segment in segments).strip()


def hear(model: Any, clip: LanguageClip) -> Heard:
    """faster-whisper's ``WhisperModel.transcribe`` on one clip: detect, transcribe, translate.

    When detection finds the clip's language, the detecting call's transcript is the one
    with that language given (faster-whisper decodes the detected language exactly as a
    given one), so the transcription is only run again for a clip detected wrongly.
    """
    segments, info = model.transcribe(str(clip.path), **DECODE)
    transcript = _text(segments)
    if info.language != clip.language:
        segments, _ = model.transcribe(str(clip.path), language=clip.language, **DECODE)
        transcript = _text(segments)
    return Heard(clip, info.language, transcript, translate(model, clip))


def translate(model: Any, clip: LanguageClip) -> Translation:
    segments, _ = model.transcribe(str(clip.path), task="translate", **DECODE)
    decoded = list(segments)
    return Translation(_text(decoded), any(s.temperature > 0 for s in decoded))


def _model(model_dir: Path) -> Any:
    """faster-whisper's model, loaded as the reference runs it (int8, 2 threads)."""
    from faster_whisper import WhisperModel

    return WhisperModel(str(model_dir), device="cpu", compute_type="int8", cpu_threads=2)


def reference(model_dir: Path, clips: Sequence[LanguageClip]) -> list[Heard]:
    """faster-whisper's results on every clip, with the model loaded once."""
    model = _model(model_dir)
    return [hear(model, clip) for clip in clips]


def reference_translations(model_dir: Path, clips: Sequence[LanguageClip]) -> list[Translation]:
    """faster-whisper's translation of every clip into English."""
    model = _model(model_dir)
    return [translate(model, clip) for clip in clips]


def score(label: str, heard: Sequence[Heard]) -> Score:
    """Detection accuracy, transcription WER and translation WER over ``heard``."""
    return Score(
        label,
        len(heard),
        sum(h.detected == h.clip.language for h in heard) / len(heard),
        wer([h.clip.text for h in heard], [h.transcript for h in heard]),
        wer([h.clip.english for h in heard], [h.translation.text for h in heard]),
    )


def scores(heard: Sequence[Heard]) -> dict[str, Score]:
    """Per language: detection accuracy, transcription WER and translation WER."""
    languages = dict.fromkeys(h.clip.language for h in heard)
    return {
        language: score(language, [h for h in heard if h.clip.language == language])
        for language in languages
    }


def report(heard: Sequence[Heard]) -> str:
    """The figures as a table, then every clip's results."""
    lines = ["language  clips  detection  WER    translation WER"]
    for s in [*scores(heard).values(), score("all", heard)]:
        figures = f"{s.detection:>9.2f}  {s.wer:.3f}  {s.translation_wer:.3f}"
        lines.append(f"{s.language:<9} {s.clips:>5}  {figures}")
    for h in heard:
        lines += [
            f"{h.clip.path.name} ({h.clip.duration:.1f} s) detected {h.detected}",
            f"  said:       {h.clip.text}",
            f"  heard:      {h.transcript}",
            f"  English:    {h.clip.english}",
            f"  translated: {h.translation.text}" + (" (sampled)" if h.translation.sampled else ""),
        ]
    return "\n".join(lines)


def main() -> None:
    started = time.monotonic()
    clips = real_prompts()
    model_dir = base_model_dir()
    ready = time.monotonic()
    heard = reference(model_dir, clips)
    done = time.monotonic()
    print(report(heard))
    print(
        f"corpus and model {ready - started:.1f} s, reference over {len(clips)} clips"
        f" ({sum(c.duration for c in clips):.0f} s of audio) {done - ready:.1f} s"
    )


if __name__ == "__main__":
    main()
