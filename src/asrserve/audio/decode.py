"""Decoding any container PyAV (FFmpeg) reads into 16 kHz mono float32, with limits."""

from __future__ import annotations

import itertools
import math
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import av
import numpy as np

from asrserve.audio.errors import (
    AudioError,
    AudioMetadataTooLarge,
    UnsupportedAudio,
    describe,
    empty_audio,
    too_long,
    undecodable,
)
from asrserve.engine.base import SAMPLING_RATE

# What FFmpeg and PyAV raise on bad input (PyAV's errors subclass these too).
DECODE_ERRORS = (av.error.FFmpegError, UnicodeDecodeError, ValueError)
# Input seconds past the limit before the (exact) check on the 16 kHz output must have failed.
INPUT_SLACK_S = 0.01
# The highest sample rate of real audio hardware. FFmpeg's resampler builds a filter that
# grows with the input rate: a header claiming 2 GHz costs over 600 MB and seconds of CPU.
MAX_SAMPLE_RATE = 768_000
# The most audio one resampling step may turn into 16 kHz samples (a frame at 1 Hz holding
# thousands of samples would otherwise become hundreds of megabytes in one go).
MAX_FRAME_S = 10.0
# Packets the intake probe decodes at most looking for the first samples.
PROBE_PACKETS = 64
# Bytes per second under which a stated duration is checked against the packets: 16 kbit/s,
# about the lowest rate speech is encoded at (silence in FLAC or Opus packs far denser).
PLAUSIBLE_BYTES_S = 2000
FLOAT_FORMATS = frozenset({"flt", "fltp", "dbl", "dblp"})
# Codecs that store float samples as they are, NaN and infinities included (lossy decoders
# output floats too, but their own: not checked, which would slow them down by a third).
VERBATIM_FLOAT_CODECS = ("pcm_f", "wavpack")


def probe(path: Path, max_seconds: float) -> float | None:
    """Cheap intake check: an audio stream with a decoder, within the duration limit, that
    decodes at the start.

    Returns the duration when the container states one (None when it does not); one over
    the limit is refused from the header alone. Then the stream is decoded up to its first
    samples (at most :data:`PROBE_PACKETS` packets): bytes that only look like audio to
    FFmpeg's format sniffing (a text file passes for raw AMR) fail there, and a stream that
    ends before any sample is empty audio.

    A stated duration the file's size can hardly hold (under :data:`PLAUSIBLE_BYTES_S` per
    second: a 0.9 MB file claiming four hours) is checked against the packets themselves:
    the duration returned is then what they cover, if less. Such a file is small for its
    claim, so reading its packets (without decoding them) is cheap.
    """
    try:
        with _open(path) as container:
            stream = _audio_stream(container)
            if stream.codec_context.sample_rate:  # 0: not stated; decode checks each frame
                _check_rate(stream.codec_context.sample_rate)
            duration = _stated_duration(container, stream)
            if duration is not None and duration > max_seconds:
                raise too_long(duration, max_seconds)
            doubtful = duration is not None and path.stat().st_size < duration * PLAUSIBLE_BYTES_S
            heard, covered = _scan(container, stream, measure=doubtful)
            if heard is False:
                raise empty_audio()
            if duration is not None and covered is not None:
                duration = min(duration, covered)
    except AudioError:
        raise
    except MemoryError as exc:  # FFmpeg's ENOMEM (PyAV's MemoryError is both) or Python's
        message = "opening the file needs more memory than an upload may use (its index"
        raise AudioMetadataTooLarge(message + " tables or tags are out of proportion)") from exc
    except DECODE_ERRORS as exc:
        raise undecodable(describe(exc)) from exc
    return duration


def _open(path: Path) -> Any:
    return av.open(str(path), mode="r", metadata_errors="ignore")


def _audio_stream(container: Any) -> Any:
    """The first audio stream, which decode reads; it must have a decoder."""
    if not container.streams.audio:
        raise UnsupportedAudio("the file has no audio stream")
    stream = container.streams.audio[0]
    if stream.codec_context is None:
        raise UnsupportedAudio("the audio codec is not supported")
    return stream


def _check_rate(rate: int) -> None:
    if not 0 < rate <= MAX_SAMPLE_RATE:
        raise UnsupportedAudio(f"unsupported sample rate: {rate} Hz")


def _stated_duration(container: Any, stream: Any) -> float | None:
    """The audio stream's duration, else the container's; None unless positive and finite."""
    seconds: float | None = None
    if stream.duration is not None and stream.time_base is not None:
        seconds = float(stream.duration * stream.time_base)
    elif container.duration is not None:
        seconds = container.duration / 1_000_000
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        return None
    return seconds


def _scan(container: Any, stream: Any, *, measure: bool) -> tuple[bool | None, float | None]:
    """Decode from the start: True at the first samples, False if the stream ends without
    any, None if :data:`PROBE_PACKETS` packets did not tell. With ``measure``, then read
    every packet without decoding it for the seconds they cover (None if they carry no
    timestamps)."""
    heard: bool | None = False
    looking = True
    end: float | None = None
    for count, packet in enumerate(container.demux(stream)):
        if looking:
            if any(frame.samples for frame in packet.decode()):
                heard, looking = True, False
            elif count >= PROBE_PACKETS:
                heard, looking = None, False
        if measure and packet.pts is not None and packet.time_base is not None:
            ends = float((packet.pts + (packet.duration or 0)) * packet.time_base)
            end = ends if end is None else max(end, ends)
        elif not looking:
            break
    if end is None:
        return heard, None
    start = stream.start_time * stream.time_base if stream.start_time is not None else 0
    return heard, max(end - float(start), 0.0)


def decode(path: Path, max_seconds: float, *, channel: int | None = None) -> np.ndarray:
    """Whole file as float32 at 16 kHz; stops reading as soon as the limit is passed.

    Holds the whole file in memory: for tools and the sequential baseline (policy ``none``).
    The service's batched path reads :func:`stream` a block at a time instead.
    ``channel`` picks one channel of a multi-channel file instead of the mono mix.
    """
    parts = list(stream(path, max_seconds, channel=channel))
    samples = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int16)
    if samples.size == 0:
        raise empty_audio()
    return samples.astype(np.float32) / 32768.0


def stream(
    path: Path, max_seconds: float, *, channel: int | None = None
) -> Generator[np.ndarray, None, None]:
    """The first audio stream as 16 kHz int16 blocks, a decoded frame at a time: memory
    stays bounded by one frame however long the file (or however low its sample rate).

    Raises :class:`AudioError` (too long past ``max_seconds``, or undecodable) while reading.
    ``channel`` picks one channel of a multi-channel file instead of the mono mix.
    """
    layout = "mono" if channel is None else "stereo"
    try:
        with _open(path) as container:
            stream = _audio_stream(container)
            for block in _read(container, stream, layout, max_seconds):
                yield block if channel is None else block[channel::2]
    except AudioError:
        raise
    except DECODE_ERRORS as exc:
        raise undecodable(describe(exc)) from exc


def _read(container: Any, stream: Any, layout: str, max_seconds: float) -> Iterator[np.ndarray]:
    """The first audio stream as interleaved s16 at 16 kHz, at most ``max_seconds`` of it.

    The input's length is checked before each frame is resampled, the output's after. A
    frame holding more than :data:`MAX_FRAME_S` of audio (a very low sample rate) is
    resampled in slices, so that no single step can produce more than that. Float samples
    stored verbatim are made finite first (:func:`_finite`).
    """
    verbatim_floats = stream.codec_context.name.startswith(VERBATIM_FLOAT_CODECS)
    resampler = av.AudioResampler(format="s16", layout=layout, rate=SAMPLING_RATE)
    limit = int(max_seconds * SAMPLING_RATE) * (1 if layout == "mono" else 2)
    total = 0
    seconds = 0.0
    for frame in itertools.chain(container.decode(stream), [None]):
        if frame is not None:
            _check_rate(frame.sample_rate)
            seconds += frame.samples / frame.sample_rate
            if seconds > max_seconds + INPUT_SLACK_S:
                raise too_long(None, max_seconds)
            if verbatim_floats:
                frame = _finite(frame)
        for piece in _slices(frame):
            for out in resampler.resample(piece):
                block = out.to_ndarray().reshape(-1)
                total += block.size
                if total > limit:
                    raise too_long(None, max_seconds)
                yield block


def _slices(frame: Any) -> list[Any]:
    """``frame`` cut into frames of at most :data:`MAX_FRAME_S` seconds (None: the flush)."""
    if frame is None or frame.samples <= MAX_FRAME_S * frame.sample_rate:
        return [frame]
    step = max(int(MAX_FRAME_S * frame.sample_rate), 1)
    samples = frame.to_ndarray()
    planar = frame.format.is_planar
    width = 1 if planar else len(frame.layout.channels)
    pieces = []
    for start in range(0, frame.samples, step):
        part = samples[:, start * width : (start + step) * width]
        piece = av.AudioFrame.from_ndarray(
            np.ascontiguousarray(part), format=frame.format.name, layout=frame.layout.name
        )
        piece.sample_rate = frame.sample_rate
        pieces.append(piece)
    return pieces


def _finite(frame: Any) -> Any:
    """A float frame with NaN or infinite samples made safe: NaN is silence, ±Inf full
    scale (converted as they are, NaN would become full-scale clicks). Others as they are."""
    if frame.format.name not in FLOAT_FORMATS:
        return frame
    samples = frame.to_ndarray()
    if np.isfinite(samples).all():
        return frame
    clean = np.clip(np.nan_to_num(samples, nan=0.0, posinf=1.0, neginf=-1.0), -1.0, 1.0)
    fixed = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(clean, dtype=samples.dtype),
        format=frame.format.name,
        layout=frame.layout.name,
    )
    fixed.sample_rate = frame.sample_rate
    fixed.pts = frame.pts
    fixed.time_base = frame.time_base
    return fixed
