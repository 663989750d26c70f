"""Two engines on the same model and the same files, for the gates that hold one to the
other: each file's windows decoded in batches across files (as the scheduler batches them),
its transcript assembled as the served path assembles it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from asrserve.audio.chunk import assemble
from asrserve.audio.features import PreparedAudio, prepare
from asrserve.engine.base import Engine, RawSegment
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import TranscriptionOptions

BATCH = 16


def prepared(
    engine: Engine, paths: Sequence[Path], windows: tuple[float, ...]
) -> list[PreparedAudio]:
    return [prepare(path, engine, max_seconds=3600, vad=True, windows=windows) for path in paths]


def transcripts(
    engine: Engine,
    files: Sequence[PreparedAudio],
    options: Sequence[TranscriptionOptions],
    batch: int = BATCH,
) -> list[Transcript]:
    """Each file's transcript with its options; windows of files with equal options and
    encoder windows share batches of ``batch``, as the scheduler's batch key has them."""
    results: list[dict[int, list[RawSegment]]] = [{} for _ in files]
    keys = {
        (o, chunk.features.shape[-1])
        for o, f in zip(options, files, strict=True)
        for chunk in f.chunks
    }
    for shared, frames in sorted(keys, key=lambda key: (str(key[0]), key[1])):
        windows = [
            (i, n, chunk)
            for i, (o, f) in enumerate(zip(options, files, strict=True))
            if o == shared
            for n, chunk in enumerate(f.chunks)
            if chunk.features.shape[-1] == frames
        ]
        for start in range(0, len(windows), batch):
            part = windows[start : start + batch]
            decoded = engine.transcribe_batch([chunk for _, _, chunk in part], shared)
            for (i, n, _), segments in zip(part, decoded, strict=True):
                results[i][n] = segments
    return [
        assemble(
            [results[i][n] for n in range(len(f.chunks))],
            f.layout.speech,
            f.duration,
            options[i],
            multilingual=engine.multilingual,
        )
        for i, f in enumerate(files)
    ]


def detected(engine: Engine, files: Sequence[PreparedAudio]) -> list[str]:
    """Each file's language from its first window on a full 30 s window, in one batch."""
    from asrserve.engine.decoding import full_window

    firsts = []
    for f in files:
        chunk = f.chunks[0]
        widened = full_window(chunk) or chunk
        firsts.append(widened.features)
    return [code for code, _ in engine.detect_language(firsts)]


def ctranslate2(model: str, cache: Path, compute_type: str = "default") -> Engine:
    """The CTranslate2 engine on ``model`` (one replica, both cores)."""
    from asrserve.engine import loading

    settings = Settings(
        engine="ctranslate2",
        models=(model,),
        model_cache_dir=cache,
        cpu_replicas=1,
        cpu_threads=2,
        compute_type=compute_type,
    )
    return loading.load(settings, settings.model_cache)[0][model]


def transformers(model: str, cache: Path) -> Engine:
    """The transformers engine on ``model`` (float32, one replica of one thread: the suite
    runs two test files at once on two cores)."""
    from asrserve.engine.pytorch import loading

    settings = Settings(
        engine="transformers",
        models=(model,),
        model_cache_dir=cache,
        cpu_replicas=1,
        cpu_threads=1,
        offline=True,
    )
    return loading.load(settings, settings.model_cache)[0][model]
