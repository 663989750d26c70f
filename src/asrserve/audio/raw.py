"""Headerless audio made readable: raw PCM (16-bit little-endian, 16 kHz, mono) given a WAV
header in place, so the one decode path (FFmpeg through PyAV) reads it like any upload.

whisper-asr-webservice's ``encode=false`` sends audio this way: samples ready for the model,
with nothing that says what they are.
"""

from __future__ import annotations

import os
import wave
from pathlib import Path
from typing import BinaryIO

from asrserve.engine.base import SAMPLING_RATE

SAMPLE_BYTES = 2
COPY_BYTES = 1024 * 1024


def wrap_raw_pcm(path: Path) -> int:
    """Rewrite ``path`` (raw s16le 16 kHz mono) as a WAV file; its new size in bytes. A
    trailing odd byte (half a sample) is dropped; no samples at all stay no samples."""
    size = path.stat().st_size
    frames = size // SAMPLE_BYTES
    part = path.with_name(f"{path.name}.wav")
    try:
        with path.open("rb") as source, wave.open(str(part), "wb") as target:
            target.setnchannels(1)
            target.setsampwidth(SAMPLE_BYTES)
            target.setframerate(SAMPLING_RATE)
            target.setnframes(frames)  # the header is right first time: no seek back
            _copy(source, target, frames * SAMPLE_BYTES)
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return path.stat().st_size


def _copy(source: BinaryIO, target: wave.Wave_write, count: int) -> None:
    left = count
    while left:
        block = source.read(min(COPY_BYTES, left))
        if not block:
            return
        target.writeframesraw(block)
        left -= len(block)
