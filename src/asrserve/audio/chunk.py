"""Splitting a file into ≤30 s speech windows, and mapping results back to file time.

A file that fits one 30 s window is one chunk. For longer files Silero VAD (bundled with
faster-whisper) finds speech; regions are packed into windows of at most 30 s with the
silence between them removed, exactly as faster-whisper's batched pipeline does. Each
window's decoded timestamps live on that speech-only timeline and are
mapped back to the original file's time by :func:`restore`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from asrserve.engine.base import CHUNK_SECONDS, SAMPLING_RATE, RawSegment
from asrserve.transcript import Segment, Word


@dataclass(frozen=True)
class ChunkPlan:
    audio: np.ndarray
    offset: float  # seconds on the speech-only timeline
    duration: float


@dataclass(frozen=True)
class AudioPlan:
    chunks: list[ChunkPlan]
    speech: list[dict[str, int]]  # speech regions in samples, for restoring timestamps
    duration: float


def plan(audio: np.ndarray, *, vad: bool) -> AudioPlan:
    from faster_whisper.vad import VadOptions, collect_chunks, get_speech_timestamps

    duration = audio.shape[0] / SAMPLING_RATE
    if vad:
        options = VadOptions(max_speech_duration_s=CHUNK_SECONDS, min_silence_duration_ms=160)
        speech = get_speech_timestamps(audio, options)
    else:
        step = int(CHUNK_SECONDS * SAMPLING_RATE)
        speech = [
            {"start": start, "end": min(start + step, audio.shape[0])}
            for start in range(0, audio.shape[0], step)
        ]
    if speech and duration <= CHUNK_SECONDS:
        # One window holds it all: decode it as it is, pauses included, like faster-whisper's
        # sequential path (removing the pauses measurably hurt accuracy).
        whole = [{"start": 0, "end": audio.shape[0]}]
        return AudioPlan([ChunkPlan(audio, 0.0, duration)], whole, duration)
    if not speech:
        return AudioPlan(chunks=[], speech=[], duration=duration)
    pieces, metadata = collect_chunks(audio, speech, max_duration=CHUNK_SECONDS)
    chunks = [
        ChunkPlan(audio=piece, offset=float(meta["offset"]), duration=float(meta["duration"]))
        for piece, meta in zip(pieces, metadata, strict=True)
        if piece.size
    ]
    return AudioPlan(chunks=chunks, speech=speech, duration=duration)


def restore(
    per_chunk: Iterable[list[RawSegment]], speech: list[dict[str, int]], duration: float
) -> list[Segment]:
    """Number the segments of a file in order and put their times back on the file's clock."""
    from faster_whisper.vad import SpeechTimestampsMap

    ts_map = SpeechTimestampsMap(speech, SAMPLING_RATE) if speech else None
    out: list[Segment] = []
    last_start = 0.0

    def clamp(value: float) -> float:
        return round(min(max(value, 0.0), duration), 3)

    for raw in (segment for chunk in per_chunk for segment in chunk):
        words: list[Word] | None = None
        start, end = raw.start, raw.end
        if ts_map is not None and raw.words:
            words = []
            for w in raw.words:
                index = ts_map.get_chunk_index((w.start + w.end) / 2)
                ws = clamp(ts_map.get_original_time(w.start, index))
                we = clamp(ts_map.get_original_time(w.end, index))
                words.append(
                    Word(word=w.word, start=ws, end=max(ws, we), probability=w.probability)
                )
            start, end = words[0].start, words[-1].end
        elif ts_map is not None:
            start = ts_map.get_original_time(start)
            end = ts_map.get_original_time(end, is_end=True)
            words = [] if raw.words is not None else None
        start = max(clamp(start), last_start)  # keep segment starts monotonic
        end = max(clamp(end), start)
        last_start = start
        out.append(
            Segment(
                id=len(out),
                seek=raw.seek,
                start=start,
                end=end,
                text=raw.text,
                tokens=raw.tokens,
                temperature=raw.temperature,
                avg_logprob=raw.avg_logprob,
                compression_ratio=raw.compression_ratio,
                no_speech_prob=raw.no_speech_prob,
                words=words,
            )
        )
    return out
