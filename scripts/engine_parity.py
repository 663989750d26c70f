"""The accuracy tables of docs/engines.md: the transformers engine against CTranslate2 as it
is served (int8 on the CPU) and at float32 (the same arithmetic as PyTorch's), on the real
recordings the tests use (``tests/support/real_speech.py``).

English (tiny.en): the LibriVox sentences and 30 recorded prompts, beam 5 with word
timestamps, adaptive and full windows: WER, and how far apart the words' times are. Other
languages (base): the Spanish, French, Italian and Russian prompts, detected, transcribed
(language given) and translated, beam 5, per language. Windows are batched across files as
the scheduler's key has them (``tests/support/engines.py``).

    .venv/bin/python scripts/engine_parity.py [PROMPTS_PER_LANGUAGE] [ENGLISH_CLIPS]

PROMPTS_PER_LANGUAGE 0: the English table alone (base is not loaded); ENGLISH_CLIPS: only the
first that many English recordings (default all).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support import engines  # noqa: E402
from tests.support.languages import MODEL_CACHE, REAL_LANGUAGES, real_prompts  # noqa: E402
from tests.support.real_speech import english  # noqa: E402

from asrserve.bench.wer import wer  # noqa: E402
from asrserve.engine.base import Engine  # noqa: E402
from asrserve.transcript import Transcript  # noqa: E402
from asrserve.vocabulary import Task, TranscriptionOptions  # noqa: E402

WINDOWS = {"adaptive": (5.0, 10.0, 15.0, 20.0, 30.0), "full": (30.0,)}


def trio(model: str) -> dict[str, Engine]:
    return {
        "transformers": engines.transformers(model, MODEL_CACHE),
        "ctranslate2 int8": engines.ctranslate2(model, MODEL_CACHE),
        "ctranslate2 float32": engines.ctranslate2(model, MODEL_CACHE, "float32"),
    }


def gaps(mine: list[Transcript], theirs: list[Transcript]) -> np.ndarray:
    out = []
    for a, b in zip(mine, theirs, strict=True):
        if [w.word for w in a.words] == [w.word for w in b.words]:
            pairs = zip(a.words, b.words, strict=True)
            out += [max(abs(x.start - y.start), abs(x.end - y.end)) for x, y in pairs]
    return np.array(out)


def english_table(count: int | None) -> None:
    clips = english(30)[:count]
    refs = [clip.text for clip in clips]
    options = TranscriptionOptions(beam_size=5, word_timestamps=True)
    print(f"tiny.en, {len(clips)} English recordings ({sum(c.duration for c in clips):.0f} s)")
    heard: dict[str, list[Transcript]] = {}
    for name, engine in trio("tiny.en").items():
        for label, windows in WINDOWS.items():
            start = time.perf_counter()
            files = engines.prepared(engine, [clip.path for clip in clips], windows)
            heard[f"{name}/{label}"] = engines.transcripts(engine, files, [options] * len(files))
            score = wer(refs, [t.text for t in heard[f"{name}/{label}"]])
            print(f"  {name:<20} {label:<8} WER {score:.4f} ({time.perf_counter() - start:.0f} s)")
    for other in ("ctranslate2 int8", "ctranslate2 float32"):
        found = gaps(heard["transformers/adaptive"], heard[f"{other}/adaptive"])
        same = sum(
            a.text == b.text
            for a, b in zip(heard["transformers/adaptive"], heard[f"{other}/adaptive"], strict=True)
        )
        spread = (
            f": max {found.max():.3f} s, p99 {np.percentile(found, 99):.3f} s,"
            f" {int((found > 0.1).sum())} over 0.1 s"
            if found.size  # none where no clip's words are the same in both
            else ""
        )
        print(
            f"  against {other}: {same}/{len(clips)} texts equal; word times over"
            f" {len(found)} words{spread}"
        )


def languages_table(per_language: int) -> None:
    clips = real_prompts(per_language)
    print(f"base, {per_language} recorded prompts per language, beam 5")
    print(f"  {'engine':<20} {'lang':<5} {'detected':>8} {'WER':>7} {'translation WER':>16}")
    for name, engine in trio("base").items():
        files = engines.prepared(engine, [clip.path for clip in clips], (30.0,))
        detected = engines.detected(engine, files)
        given = [TranscriptionOptions(beam_size=5, language=clip.language) for clip in clips]
        heard = engines.transcripts(engine, files, given)
        translate = [o.model_copy(update={"task": Task.TRANSLATE}) for o in given]
        translated = engines.transcripts(engine, files, translate)
        for language in (*REAL_LANGUAGES, "all"):
            at = [i for i, c in enumerate(clips) if language in ("all", c.language)]
            right = sum(detected[i] == clips[i].language for i in at) / len(at)
            said = wer([clips[i].text for i in at], [heard[i].text for i in at])
            english_wer = wer([clips[i].english for i in at], [translated[i].text for i in at])
            sampled = sum(any(s.temperature > 0 for s in translated[i].segments) for i in at)
            note = f" ({sampled} sampled)" if sampled else ""
            print(
                f"  {name:<20} {language:<5} {right:>8.2f} {said:>7.4f} {english_wer:>16.4f}{note}"
            )


def main() -> None:
    per_language = int(sys.argv[1]) if len(sys.argv) > 1 else 6
    english_table(int(sys.argv[2]) if len(sys.argv) > 2 else None)
    if per_language:
        languages_table(per_language)


if __name__ == "__main__":
    main()
