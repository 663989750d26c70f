"""From a stored upload to model-ready chunks: decode, VAD, windows, log-mel.

:func:`decode_audio` reads the file once, a frame at a time, into a :class:`Pcm` (in memory
for a few minutes of audio, a temporary file past that) while the speech detector runs over
the same blocks; :func:`chunk_inputs` makes a window's features when it is about to run.
Memory per job is bounded by a frame, a detector block and the windows in flight, not by
the length of the file. Both block: they run in the preprocessing pool.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrserve.audio.chunk import Span, SpeechLayout, fixed_regions, layout
from asrserve.audio.decode import stream
from asrserve.audio.errors import empty_audio
from asrserve.audio.pcm import Pcm
from asrserve.audio.vad import SpeechDetector, VadConfig
from asrserve.engine.base import CHUNK_SECONDS, FRAMES_PER_SECOND, ChunkInput, Engine
from asrserve.vocabulary import Chunking

# Regions of at most one window; pauses of 160 ms split them (faster-whisper's batched
# pipeline uses the same).
VAD = VadConfig(max_speech_s=CHUNK_SECONDS, min_silence_ms=160)


def vad_config(chunking: Chunking | None) -> VadConfig:
    """The VAD a request's ``chunking_strategy`` asks for: its speech threshold, the pause
    that ends a region (``silence_duration_ms``) and the padding each side of a region
    (``prefix_padding_ms``); None (``auto``) is :data:`VAD`."""
    if chunking is None:
        return VAD
    return VadConfig(
        threshold=chunking.threshold,
        max_speech_s=CHUNK_SECONDS,
        min_silence_ms=chunking.silence_duration_ms,
        pad_ms=chunking.prefix_padding_ms,
    )


@dataclass(frozen=True)
class DecodedAudio:
    """A job's audio decoded once: its samples, speech regions and ≤30 s windows."""

    pcm: Pcm
    layout: SpeechLayout

    @property
    def duration(self) -> float:
        return self.layout.duration

    def close(self) -> None:
        self.pcm.close()


@dataclass(frozen=True)
class PreparedAudio:
    """Every window's features at once (tools: the bench, ``asrserve transcribe``)."""

    layout: SpeechLayout
    chunks: list[ChunkInput]

    @property
    def duration(self) -> float:
        return self.layout.duration


FULL_WINDOW_S = CHUNK_SECONDS
# Whisper needs a little room after the last word to close the segment with a timestamp.
WINDOW_MARGIN_S = 0.5


def window_frames(duration: float, windows: Sequence[float]) -> int:
    """Encoder frames for a chunk: the smallest window (s) that holds it with a margin."""
    for window in sorted(windows):
        if duration <= window - WINDOW_MARGIN_S:
            return round(window * FRAMES_PER_SECOND)
    return round(FULL_WINDOW_S * FRAMES_PER_SECOND)


def decode_audio(
    path: Path,
    *,
    max_seconds: float,
    vad: bool,
    folder: Path | None = None,
    config: VadConfig = VAD,
    first_window_s: float = CHUNK_SECONDS,
) -> DecodedAudio:
    """Decode ``path`` once into 16 kHz samples (spilled to ``folder`` past a few minutes),
    finding speech on the way with ``config`` (if ``vad``); raises :class:`AudioError` as
    :func:`stream` does. A file one window holds is decoded whole, pauses included, with
    the default :data:`VAD`; with a request's own, where that finds speech. A longer file's
    first window closes at ``first_window_s`` (:func:`~asrserve.audio.chunk.pack`)."""
    pcm = Pcm(folder)
    try:
        detector = SpeechDetector(config) if vad else None
        for block in stream(path, max_seconds):
            pcm.append(block)
            if detector is not None:
                detector.feed(block.astype(np.float32) / 32768.0)
        if pcm.samples == 0:
            raise empty_audio()
        speech = detector.finish() if detector is not None else fixed_regions(pcm.samples)
        found = layout(
            speech, pcm.samples, short_whole=config is VAD, first_window_s=first_window_s
        )
        return DecodedAudio(pcm, found)
    except BaseException:
        pcm.close()
        raise


def chunk_inputs(
    decoded: DecodedAudio, spans: Sequence[Span], engine: Engine, windows: tuple[float, ...]
) -> list[ChunkInput]:
    """The model inputs of ``spans``: their samples read back, log-mel features padded to the
    smallest encoder window that holds each (``windows``, seconds)."""
    return pcm_inputs(decoded.pcm, spans, engine, windows)


def pcm_inputs(
    pcm: Pcm, spans: Sequence[Span], engine: Engine, windows: tuple[float, ...]
) -> list[ChunkInput]:
    """:func:`chunk_inputs` from the samples alone (a file still being decoded)."""
    chunks = []
    for span in spans:
        audio = np.concatenate([pcm.read(start, end) for start, end in span.pieces])
        features = engine.features(audio, window_frames(span.duration, windows))
        chunks.append(ChunkInput(features=features, offset=span.offset, duration=span.duration))
    return chunks


def prepare(
    path: Path,
    engine: Engine,
    *,
    max_seconds: float,
    vad: bool,
    windows: tuple[float, ...] = (FULL_WINDOW_S,),
    first_window_s: float = CHUNK_SECONDS,
) -> PreparedAudio:
    """Every window of a file with its features (blocking; for tools, which hold them all)."""
    decoded = decode_audio(path, max_seconds=max_seconds, vad=vad, first_window_s=first_window_s)
    try:
        chunks = chunk_inputs(decoded, decoded.layout.spans, engine, windows)
    finally:
        decoded.close()
    return PreparedAudio(decoded.layout, chunks)
