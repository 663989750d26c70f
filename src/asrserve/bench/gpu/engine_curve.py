"""The engine alone: audio seconds per second and peak memory at each batch size.

Each English recording that makes one window is a full 30 s window (the same encoder work
whatever its length); a batch of ``b`` takes the first ``b`` of them, over again where
there are fewer. The model loads as the service loads it (``load_engines``: the int8
weights converted on first use), once per compute type; a batch of one runs first so that
no row pays for the kernels' first start. Each row is one timed batch, with the words its
windows got wrong (WER against their references) and, on CUDA, the most memory PyTorch's
allocator held during it (``torch.cuda.max_memory_allocated``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from asrserve.audio.features import FULL_WINDOW_S, prepare
from asrserve.bench.gpu.clips import Clip
from asrserve.bench.wer import wer
from asrserve.engine.base import ChunkInput, Engine
from asrserve.engine.registry import load_engines
from asrserve.settings import Settings
from asrserve.vocabulary import TranscriptionOptions

MAX_SECONDS = 600.0


@dataclass(frozen=True)
class Memory:
    """Peak memory on the device: counted afresh, then read (None: not counted there)."""

    reset: Callable[[], None]
    read: Callable[[], int | None]


UNCOUNTED = Memory(lambda: None, lambda: None)


@dataclass(frozen=True)
class CurveSpec:
    engine: str  # "transformers" or "ctranslate2"
    model_dir: Path
    model_id: str
    device: str  # "cpu" or "cuda"
    dtypes: tuple[str, ...]
    batch_sizes: tuple[int, ...]
    clips: list[Clip]
    cache: Path
    beam_size: int


def settings(spec: CurveSpec, dtype: str) -> Settings:
    return Settings(
        engine=spec.engine,
        device=spec.device,
        compute_type=dtype,
        models=(str(spec.model_dir),),
        model_cache_dir=spec.cache,
        offline=True,
        beam_size=spec.beam_size,
        cpu_replicas=1,
    )


def windows(engine: Engine, clips: list[Clip]) -> list[tuple[ChunkInput, str]]:
    """Each English clip that is one window of speech, as a full window, with its text."""
    out = []
    for clip in clips:
        if clip.language != "en":
            continue
        prepared = prepare(
            clip.path, engine, max_seconds=MAX_SECONDS, vad=True, windows=(FULL_WINDOW_S,)
        )
        if len(prepared.chunks) == 1:
            out.append((prepared.chunks[0], clip.text))
    if not out:
        raise SystemExit("gpu check: no English recording makes one window")
    return out


def memory(spec: CurveSpec) -> Memory:
    """PyTorch's allocator on a CUDA device; nothing counted elsewhere (CTranslate2 has its
    own allocator, the CPU none that PyTorch counts)."""
    if spec.engine != "transformers" or spec.device != "cuda":
        return UNCOUNTED
    from asrserve.engine.pytorch import devices

    return Memory(
        lambda: devices.reset_peak_memory("cuda:0"), lambda: devices.peak_memory("cuda:0")
    )


def batch_row(
    engine: Engine,
    batch: list[tuple[ChunkInput, str]],
    options: TranscriptionOptions,
    peak: Memory,
) -> dict[str, Any]:
    """One timed batch: its audio, wall time, peak memory and WER."""
    peak.reset()
    start = time.perf_counter()
    results = engine.transcribe_batch([chunk for chunk, _ in batch], options)
    wall = time.perf_counter() - start
    audio = sum(chunk.duration for chunk, _ in batch)
    texts = ["".join(segment.text for segment in segments) for segments in results]
    return {
        "batch_size": len(batch),
        "audio_s": round(audio, 2),
        "wall_s": round(wall, 4),
        "audio_s_per_s": round(audio / wall, 2),
        "peak_bytes": peak.read(),
        "wer": round(wer([text for _, text in batch], texts), 4),
    }


def measure_dtype(spec: CurveSpec, dtype: str) -> dict[str, Any]:
    start = time.perf_counter()
    engine = load_engines(settings(spec, dtype))[0][spec.model_id]
    loaded = time.perf_counter() - start
    peak = memory(spec)
    try:
        pairs = windows(engine, spec.clips)
        options = TranscriptionOptions(model=spec.model_id, language="en", beam_size=spec.beam_size)
        engine.transcribe_batch([pairs[0][0]], options)  # the kernels' first start
        rows = [
            batch_row(engine, [pairs[i % len(pairs)] for i in range(size)], options, peak)
            for size in spec.batch_sizes
        ]
    finally:
        engine.unload()
    return {"load_s": round(loaded, 2), "windows": len(pairs), "rows": rows}


def measure(spec: CurveSpec) -> dict[str, Any]:
    """Every compute type's rows; CTranslate2 on CUDA only where it can run there."""
    if spec.engine == "ctranslate2" and spec.device == "cuda":
        from asrserve.engine.choice import MACHINE

        why_not = MACHINE.ctranslate2_cuda()
        if why_not is not None:
            return {"skipped": why_not}
    return {
        "engine": spec.engine,
        "model": spec.model_id,
        "device": spec.device,
        "beam_size": spec.beam_size,
        "dtypes": {dtype: measure_dtype(spec, dtype) for dtype in spec.dtypes},
    }
