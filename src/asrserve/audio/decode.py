"""Decoding any container PyAV (FFmpeg) reads into 16 kHz mono float32, with limits."""

from __future__ import annotations

from pathlib import Path

import av
import numpy as np

from asrserve.audio.errors import AudioError, describe, too_long, undecodable
from asrserve.engine.base import SAMPLING_RATE


def probe(path: Path, max_seconds: float) -> float | None:
    """Cheap header check: is there an audio stream, and is it within the duration limit?

    Returns the duration when the container states one (None when it does not).
    """
    try:
        with av.open(str(path), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioError(415, "unsupported_audio", "the file has no audio stream")
            stream = container.streams.audio[0]
            duration: float | None = None
            if stream.duration is not None and stream.time_base is not None:
                duration = float(stream.duration * stream.time_base)
            elif container.duration is not None:
                duration = container.duration / 1_000_000
    except AudioError:
        raise
    except (av.error.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        raise undecodable(describe(exc)) from exc
    if duration is not None and duration > max_seconds:
        raise too_long(duration, max_seconds)
    return duration


def decode(path: Path, max_seconds: float, *, channel: int | None = None) -> np.ndarray:
    """Whole file as float32 at 16 kHz; stops reading as soon as the limit is passed.

    ``channel`` picks one channel of a multi-channel file instead of the mono mix.
    """
    layout = "mono" if channel is None else "stereo"
    resampler = av.AudioResampler(format="s16", layout=layout, rate=SAMPLING_RATE)
    limit = int(max_seconds * SAMPLING_RATE) * (1 if channel is None else 2)
    parts: list[np.ndarray] = []
    total = 0
    try:
        with av.open(str(path), mode="r", metadata_errors="ignore") as container:
            if not container.streams.audio:
                raise AudioError(415, "unsupported_audio", "the file has no audio stream")
            for frame in container.decode(audio=0):
                for out in resampler.resample(frame):
                    array = out.to_ndarray().reshape(-1)
                    parts.append(array)
                    total += array.size
                if total > limit:
                    raise too_long(None, max_seconds)
            for out in resampler.resample(None):
                parts.append(out.to_ndarray().reshape(-1))
    except AudioError:
        raise
    except (av.error.FFmpegError, UnicodeDecodeError, ValueError) as exc:
        raise undecodable(describe(exc)) from exc
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
    if channel is not None:
        samples = samples[channel::2]
    if samples.size == 0:
        raise AudioError(415, "unsupported_audio", "the file contains no audio samples")
    return samples.astype(np.float32) / 32768.0
