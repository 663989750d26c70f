"""The engine alone: audio seconds per second, peak memory and WER at each batch size, and
what the judgements read (``judge.py``).

Each English recording that makes one window is a full 30 s window (the same encoder work
whatever its length). A row at batch size ``b`` runs every window, ``b`` at a time: the
windows over again from the first until the last batch is full too (so a row of 64 on 30
windows is one batch of 64, each window twice over and four of them three times), so that
every row holds every window and rows' WERs compare. The model loads as the service loads it
(``load_engines``: the int8 weights converted on first use), once per compute type; a batch
of one runs first so that no row pays for the kernels' first start. Each row has its
batches' audio and wall time, the WER of its windows against their references, the WER
the float32 reference got on the same windows, and, on CUDA, the most memory PyTorch's
allocator held during it (``torch.cuda.max_memory_allocated``).

The float32 reference is every window decoded alone in float32: the float32 row at batch
size 1 where the run has one (the dry run), else a pass of its own on a float32 load (the
GPU run measures float16 and bfloat16 only). Each compute type also decodes the known clip
alone (``jfk.flac`` where the pack carries it, else the first English recording) and ten
seconds of silence (zeros, made here).

``break_decode`` (``run --break-decode``, for the test that the check can fail): each
window's words come back in reverse order, as a decode that went wrong would give them.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from asrserve.audio.features import FULL_WINDOW_S, prepare
from asrserve.bench.gpu.clips import Clip
from asrserve.bench.wer import wer
from asrserve.engine.base import (
    FRAMES_PER_SECOND,
    SAMPLING_RATE,
    ChunkInput,
    Engine,
    RawSegment,
)
from asrserve.engine.registry import load_engines
from asrserve.settings import Settings
from asrserve.vocabulary import TranscriptionOptions

MAX_SECONDS = 600.0
REFERENCE_DTYPE = "float32"
KNOWN_CLIP = "jfk.flac"  # the pack's name for it ends so (clips.py)
SILENCE_S = 10.0


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
    break_decode: bool = False  # run --break-decode: a broken decode, for its test


@dataclass(frozen=True)
class Window:
    """One English recording as one full window, with what is said in it."""

    clip: str  # its file's name in the pack
    chunk: ChunkInput
    text: str


@dataclass(frozen=True)
class Decoder:
    """A loaded engine and the options every decode of the step takes."""

    engine: Engine
    options: TranscriptionOptions
    broken: bool = False

    def segments(self, chunks: Sequence[ChunkInput]) -> list[list[RawSegment]]:
        """Each chunk's segments, the chunks decoded as one batch (broken: each segment's
        words in reverse order)."""
        results = self.engine.transcribe_batch(list(chunks), self.options)
        if not self.broken:
            return results
        return [[reversed_words(segment) for segment in found] for found in results]

    def texts(self, chunks: Sequence[ChunkInput]) -> list[str]:
        """Each chunk's text, the chunks decoded as one batch."""
        return [text_of(found) for found in self.segments(chunks)]


def reversed_words(segment: RawSegment) -> RawSegment:
    return replace(segment, text=" ".join(reversed(segment.text.split())))


def text_of(segments: list[RawSegment]) -> str:
    return "".join(segment.text for segment in segments).strip()


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


def windows(engine: Engine, clips: list[Clip]) -> list[Window]:
    """Each English clip that is one window of speech, as a full window, with its text."""
    out = []
    for clip in clips:
        if clip.language != "en":
            continue
        prepared = prepare(
            clip.path, engine, max_seconds=MAX_SECONDS, vad=True, windows=(FULL_WINDOW_S,)
        )
        if len(prepared.chunks) == 1:
            out.append(Window(clip.path.name, prepared.chunks[0], clip.text))
    if not out:
        raise SystemExit("gpu check: no English recording makes one window")
    return out


def known_window(found: list[Window]) -> Window:
    """The known clip: jfk.flac where the pack carries it, else the first English one."""
    return next((w for w in found if w.clip.endswith(KNOWN_CLIP)), found[0])


def silence(engine: Engine) -> ChunkInput:
    """Ten seconds of zeros as a full window."""
    audio = np.zeros(round(SILENCE_S * SAMPLING_RATE), dtype=np.float32)
    frames = round(FULL_WINDOW_S * FRAMES_PER_SECOND)
    return ChunkInput(features=engine.features(audio, frames), offset=0.0, duration=SILENCE_S)


def memory(spec: CurveSpec) -> Memory:
    """PyTorch's allocator on a CUDA device; nothing counted elsewhere (CTranslate2 has its
    own allocator, the CPU none that PyTorch counts)."""
    if spec.engine != "transformers" or spec.device != "cuda":
        return UNCOUNTED
    from asrserve.engine.pytorch import devices

    return Memory(
        lambda: devices.reset_peak_memory("cuda:0"), lambda: devices.peak_memory("cuda:0")
    )


def batches(count: int, size: int) -> list[list[int]]:
    """Batches of ``size`` window indices that hold each of ``count`` windows at least once,
    the last filled from the first windows again."""
    order = [i % count for i in range(size * math.ceil(count / size))]
    return [order[start : start + size] for start in range(0, len(order), size)]


def batch_row(decoder: Decoder, found: list[Window], size: int, peak: Memory) -> dict[str, Any]:
    """Every window, ``size`` at a time: audio, wall time, peak memory, WER; each window's
    text as this row decoded it (``texts``, by window: the reference reads the first)."""
    planned = batches(len(found), size)
    texts: dict[int, str] = {}
    hypotheses, references = [], []
    peak.reset()
    start = time.perf_counter()
    for batch in planned:
        decoded = decoder.texts([found[i].chunk for i in batch])
        for index, text in zip(batch, decoded, strict=True):
            texts.setdefault(index, text)
            hypotheses.append(text)
            references.append(found[index].text)
    wall = time.perf_counter() - start
    audio = sum(found[i].chunk.duration for batch in planned for i in batch)
    return {
        "batch_size": size,
        "batches": len(planned),
        "audio_s": round(audio, 2),
        "wall_s": round(wall, 4),
        "audio_s_per_s": round(audio / wall, 2),
        "peak_bytes": peak.read(),
        "wer": round(wer(references, hypotheses), 4),
        "texts": [texts[i] for i in range(len(found))],
        "order": [i for batch in planned for i in batch],
    }


def load(spec: CurveSpec, dtype: str) -> tuple[Decoder, float]:
    start = time.perf_counter()
    engine = load_engines(settings(spec, dtype))[0][spec.model_id]
    options = TranscriptionOptions(model=spec.model_id, language="en", beam_size=spec.beam_size)
    return Decoder(engine, options, spec.break_decode), time.perf_counter() - start


def measure_dtype(spec: CurveSpec, dtype: str) -> tuple[dict[str, Any], list[Window]]:
    """One compute type's rows, known clip and silence; the windows it ran."""
    decoder, loaded = load(spec, dtype)
    peak = memory(spec)
    try:
        found = windows(decoder.engine, spec.clips)
        decoder.texts([found[0].chunk])  # the kernels' first start
        rows = [batch_row(decoder, found, size, peak) for size in spec.batch_sizes]
        known = known_window(found)
        [known_text] = decoder.texts([known.chunk])
        [silent] = decoder.segments([silence(decoder.engine)])
    finally:
        decoder.engine.unload()
    result = {
        "load_s": round(loaded, 2),
        "rows": rows,
        "known": {
            "clip": known.clip,
            "reference": known.text,
            "text": known_text,
            "wer": round(wer([known.text], [known_text]), 4),
        },
        "silence": {
            "seconds": SILENCE_S,
            "text": text_of(silent),
            "no_speech_prob": [round(segment.no_speech_prob, 4) for segment in silent],
        },
    }
    return result, found


def reference_pass(spec: CurveSpec) -> list[str]:
    """Each window decoded alone in float32, on a load of its own."""
    decoder, _ = load(spec, REFERENCE_DTYPE)
    try:
        return [decoder.texts([w.chunk])[0] for w in windows(decoder.engine, spec.clips)]
    finally:
        decoder.engine.unload()


def score_rows(measured: dict[str, dict[str, Any]], said: list[str], reference: list[str]) -> None:
    """Each row given the reference's WER on the same windows (``said``: what each window
    says; ``reference``: the float32 reference's text of each)."""
    for result in measured.values():
        for row in result["rows"]:
            order = row.pop("order")
            row.pop("texts")
            hypotheses = [reference[i] for i in order]
            row["float32_wer"] = round(wer([said[i] for i in order], hypotheses), 4)


def measure(spec: CurveSpec) -> dict[str, Any]:
    """Every compute type's rows, and the float32 reference; CTranslate2 on CUDA only where
    it can run there."""
    if spec.engine == "ctranslate2" and spec.device == "cuda":
        from asrserve.engine.choice import MACHINE

        why_not = MACHINE.ctranslate2_cuda()
        if why_not is not None:
            return {"skipped": why_not}
    measured: dict[str, dict[str, Any]] = {}
    for dtype in spec.dtypes:
        measured[dtype], found = measure_dtype(spec, dtype)
    said = [w.text for w in found]
    alone = [
        row for row in measured.get(REFERENCE_DTYPE, {}).get("rows", []) if row["batch_size"] == 1
    ]
    reference = alone[0]["texts"] if alone else reference_pass(spec)
    score_rows(measured, said, reference)
    return {
        "engine": spec.engine,
        "model": spec.model_id,
        "device": spec.device,
        "beam_size": spec.beam_size,
        "reference": {
            "dtype": REFERENCE_DTYPE,
            "batch_size": 1,
            "from": "the float32 row at batch size 1" if alone else "a float32 load of its own",
            "wer": round(wer(said, reference), 4),
        },
        "windows": [
            {"clip": w.clip, "reference": w.text, "float32": text}
            for w, text in zip(found, reference, strict=True)
        ],
        "dtypes": measured,
    }
