"""The real-speech accuracy table of docs/benchmarks.md: WER of asrserve's decoding paths and
of faster-whisper itself on the Debian real-speech corpus (``tests/support/real_speech.py``).

Columns: asrserve as served (its windows: adaptive for English-only models, full for
multilingual ones), asrserve on full 30 s windows, the ``none`` policy (faster-whisper's
sequential ``transcribe`` as asrserve calls it) and faster-whisper's ``transcribe`` with its
own defaults. English with tiny.en; Spanish, French, Italian and Russian with base, each
transcribed with its language given and translated into English; the espeak sentences of
the language corpus translated too. Every path at beam 5, int8, on this machine's cores.

    .venv/bin/python scripts/accuracy_table.py [PROMPTS_PER_LANGUAGE] [ENGLISH_CLIPS]

PROMPTS_PER_LANGUAGE 0: the English row alone (base is not loaded); ENGLISH_CLIPS: only the
first that many English recordings (default all).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.languages import base_model_dir, language_corpus  # noqa: E402
from tests.support.real_speech import english, prompts  # noqa: E402

from asrserve.audio.decode import decode  # noqa: E402
from asrserve.bench.wer import wer  # noqa: E402
from asrserve.engine.whisper import (  # noqa: E402
    EngineConfig,
    FasterWhisperEngine,
    bundled_model_path,
)
from asrserve.inference.direct import transcribe_file  # noqa: E402
from asrserve.settings import Settings  # noqa: E402
from asrserve.vocabulary import Task, TranscriptionOptions  # noqa: E402

Path_ = Callable[[Path, TranscriptionOptions], str]
BEAM = 5


def paths(engine: FasterWhisperEngine) -> dict[str, Path_]:
    """Each column's way to turn one file into text."""
    settings = Settings()
    served = engine.capabilities.windows(settings.windows)

    def windows(chosen: tuple[float, ...], first_window_s: float = 30.0) -> Path_:
        return lambda path, options: (
            transcribe_file(
                engine,
                path,
                options,
                max_seconds=3600,
                windows=chosen,
                first_window_s=first_window_s,
            ).text
        )

    def none(path: Path, options: TranscriptionOptions) -> str:
        return engine.transcribe(decode(path, 3600), options).text

    def own(path: Path, options: TranscriptionOptions) -> str:
        segments, _ = engine.weights.model.transcribe(
            str(path), beam_size=BEAM, language=options.language, task=options.task.value
        )
        return "".join(segment.text for segment in segments).strip()

    return {
        "asrserve": windows(served, settings.first_window_s),
        "full windows": windows((30.0,)),
        "none": none,
        "faster-whisper": own,
    }


def row(
    label: str,
    engine: FasterWhisperEngine,
    clips: list[tuple[Path, str]],
    language: str | None = None,
    task: Task = Task.TRANSCRIBE,
) -> str:
    options = TranscriptionOptions(
        model=engine.model_id, beam_size=BEAM, language=language, task=task
    )
    refs = [text for _, text in clips]
    figures = [
        wer(refs, [hear(path, options) for path, _ in clips]) for hear in paths(engine).values()
    ]
    return f"| {label} | {len(clips)} | " + " | ".join(f"{f:.4f}" for f in figures) + " |"


def main() -> None:
    per_language = int(sys.argv[1]) if len(sys.argv) > 1 else 12
    english_clips = int(sys.argv[2]) if len(sys.argv) > 2 else None
    started = time.monotonic()
    print("| set | clips | asrserve | full windows | none | faster-whisper |")
    print("|---|---|---|---|---|---|")
    tiny = FasterWhisperEngine(EngineConfig(bundled_model_path(), "tiny.en", "cpu", 0, "int8", 2))
    en = [(r.path, r.text) for r in english(30)][:english_clips]
    print(row("en, tiny.en, transcription", tiny, en), flush=True)
    if per_language:
        other_languages(per_language)
    print(f"({time.monotonic() - started:.0f} s)")


def other_languages(per_language: int) -> None:
    """The rows of base: the recorded prompts and the espeak sentences."""
    base = FasterWhisperEngine(EngineConfig(base_model_dir(), "base", "cpu", 0, "int8", 2))
    recorded = prompts(per_language, ("es", "fr", "it", "ru"))
    for language in ("es", "fr", "it", "ru"):
        mine = [r for r in recorded if r.language == language]
        said = [(r.path, r.text) for r in mine]
        print(row(f"{language}, base, transcription", base, said, language=language), flush=True)
        meant = [(r.path, r.english) for r in mine]
        print(row(f"{language}, base, translation", base, meant, task=Task.TRANSLATE), flush=True)
    synthetic = [(c.path, c.english) for c in language_corpus()]
    print(row("espeak de/es/it/pt, base, translation", base, synthetic, task=Task.TRANSLATE))


if __name__ == "__main__":
    main()
