"""The detection figure of docs/security.md: how often the multilingual base model detects a
clip's language, with no restriction and restricted to a two-language tenant's list (the
clip's language and one other), on the language corpora (``tests/support/languages.py``):
the recorded prompts (es, fr, it, ru) and the espeak sentences (de, es, it, pt).

Detection as the server runs it: the first window of speech on a full 30 s encoder window,
one encode (``FasterWhisperEngine.detect_language``), int8 on this machine's cores. Every
pair of a corpus's languages is a tenant; a clip counts once per pair it belongs to.

    .venv/bin/python scripts/restricted_detection.py [PROMPTS_PER_LANGUAGE] [SENTENCES]

SENTENCES: only the first SENTENCES espeak sentences of each language (default all four; 0
leaves the espeak corpus out).
"""

from __future__ import annotations

import itertools
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.corpus_languages import LanguageClip  # noqa: E402
from tests.support.languages import base_model_dir, language_corpus  # noqa: E402
from tests.support.real_speech import prompts  # noqa: E402

from asrserve.audio.features import prepare  # noqa: E402
from asrserve.engine.whisper import EngineConfig, FasterWhisperEngine  # noqa: E402

WINDOWS: dict[Path, np.ndarray] = {}  # each clip's detection window, made once


def corpus_rows(
    engine: FasterWhisperEngine, label: str, clips: list[LanguageClip]
) -> tuple[list[str], tuple[int, int, int]]:
    """Per pair: clips, right unrestricted, right restricted; and the totals."""
    languages = sorted({clip.language for clip in clips})
    rows, totals = [], [0, 0, 0]
    for pair in itertools.combinations(languages, 2):
        mine = [clip for clip in clips if clip.language in pair]
        free = [engine_detect(engine, clip, ()) for clip in mine]
        kept = [engine_detect(engine, clip, pair) for clip in mine]
        right = (
            sum(d == c.language for d, c in zip(free, mine, strict=True)),
            sum(d == c.language for d, c in zip(kept, mine, strict=True)),
        )
        rows.append(f"| {label} | {'+'.join(pair)} | {len(mine)} | {right[0]} | {right[1]} |")
        totals = [totals[0] + len(mine), totals[1] + right[0], totals[2] + right[1]]
    return rows, (totals[0], totals[1], totals[2])


def engine_detect(engine: FasterWhisperEngine, clip: LanguageClip, among: tuple[str, ...]) -> str:
    """The clip's language as the server detects it, among ``among`` (empty: all)."""
    if clip.path not in WINDOWS:
        prepared = prepare(clip.path, engine, max_seconds=3600, vad=True, windows=(30.0,))
        WINDOWS[clip.path] = prepared.chunks[0].features
    return engine.detect_language([WINDOWS[clip.path]], among)[0][0]


def main() -> None:
    per_language = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    sentences = int(sys.argv[2]) if len(sys.argv) > 2 else None
    started = time.monotonic()
    base = FasterWhisperEngine(EngineConfig(base_model_dir(), "base", "cpu", 0, "int8", 2))
    synthetic = language_corpus()
    corpora = {
        "recorded prompts": [
            LanguageClip(r.path, r.language, r.text, r.english, r.duration)
            for r in prompts(per_language, ("es", "fr", "it", "ru"))
        ],
        "espeak sentences": [
            clip
            for clip in synthetic
            if clip in [c for c in synthetic if c.language == clip.language][:sentences]
        ],
    }
    print("| corpus | tenant | clips | right, unrestricted | right, restricted |")
    print("|---|---|---|---|---|")
    for label, clips in corpora.items():
        if not clips:
            continue
        rows, (n, free, kept) = corpus_rows(base, label, clips)
        print("\n".join(rows))
        print(f"| {label} | all pairs | {n} | {free / n:.1%} | {kept / n:.1%} |", flush=True)
    print(f"({time.monotonic() - started:.0f} s)")


if __name__ == "__main__":
    main()
