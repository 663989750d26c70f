"""Audio payloads the tests build: WAV bytes (honest or lying headers), PyAV-encoded files,
and variants of one corpus clip."""

from __future__ import annotations

import io
import struct
from functools import cached_property
from typing import Any

import av
import numpy as np

from asrserve.bench.corpus import Clip, encode


def wav_bytes(
    samples: np.ndarray, rate: int, *, float32: bool = False, data_size: int | None = None
) -> bytes:
    """A canonical 44-byte-header WAV of ``samples`` (frames × channels, or mono; floats in
    [-1, 1]): PCM s16 (format tag 1) or IEEE float (tag 3). ``data_size`` overrides the
    data chunk's stated length (a header that lies)."""
    frames = samples if samples.ndim == 2 else samples[:, None]
    channels = frames.shape[1]
    if float32:
        tag, width, data = 3, 4, frames.astype("<f4").tobytes()
    else:
        tag, width, data = 1, 2, (np.clip(frames, -1, 1) * 32767).astype("<i2").tobytes()
    fmt = struct.pack("<HHIIH", tag, channels, rate, rate * channels * width, channels * width)
    fmt += struct.pack("<H", width * 8)
    stated = len(data) if data_size is None else data_size
    body = b"WAVEfmt " + struct.pack("<I", len(fmt)) + fmt + b"data"
    body += struct.pack("<I", stated) + data
    return b"RIFF" + struct.pack("<I", len(body)) + body


def encode_bytes(
    samples: np.ndarray, rate: int, fmt: str, codec: str, sample_fmt: str, out_rate: int
) -> bytes:
    """Mono float ``samples`` at ``rate`` encoded with PyAV (container ``fmt``, ``codec``)."""
    frame = av.AudioFrame.from_ndarray(
        np.ascontiguousarray(samples, dtype=np.float32)[None, :], format="flt", layout="mono"
    )
    frame.sample_rate = rate
    frame.pts = 0
    buffer = io.BytesIO()
    encode([frame] if samples.size else [], buffer, fmt, codec, sample_fmt, out_rate)
    return buffer.getvalue()


class Speech:
    """Variants of one speech clip; each built once, on first use."""

    def __init__(self, clip: Clip) -> None:
        self.clip = clip

    def samples(self, rate: int) -> np.ndarray:
        with av.open(str(self.clip.path)) as container:
            resampler = av.AudioResampler(format="flt", layout="mono", rate=rate)
            frames = [*container.decode(audio=0), None]
            parts = [out.to_ndarray().reshape(-1) for f in frames for out in resampler.resample(f)]
        return np.concatenate(parts)

    @cached_property
    def mono16k(self) -> np.ndarray:
        return self.samples(16_000)

    @cached_property
    def wav(self) -> bytes:
        return wav_bytes(self.mono16k, 16_000)

    @cached_property
    def mp3(self) -> bytes:
        return encode_bytes(self.mono16k, 16_000, "mp3", "libmp3lame", "s16p", 16_000)

    @cached_property
    def ogg(self) -> bytes:
        return encode_bytes(self.mono16k, 16_000, "ogg", "libopus", "s16", 48_000)

    @cached_property
    def flac(self) -> bytes:
        return encode_bytes(self.mono16k, 16_000, "flac", "flac", "s16", 16_000)

    def long_flac(self) -> bytes:
        """21.6 s: over the limit."""
        return encode_bytes(np.tile(self.mono16k, 4), 16_000, "flac", "flac", "s16", 16_000)

    def nan_inf_wav(self) -> bytes:
        samples = self.mono16k.copy()
        samples[:800] = np.nan  # 50 ms of NaN at the start, Inf and -Inf in the pauses
        samples[-1600:-800] = np.inf
        samples[-800:] = -np.inf
        samples[::997] = np.nan  # and a NaN every 62 ms throughout
        return wav_bytes(samples, 16_000, float32=True)


def flac_total_samples(flac: bytes, total: int) -> bytes:
    """Overwrite STREAMINFO's 36-bit total-samples field (0 means "unknown")."""
    assert flac[:4] == b"fLaC"
    data = bytearray(flac)
    packed = int.from_bytes(data[18:26], "big")
    packed = (packed & ~((1 << 36) - 1)) | total
    data[18:26] = packed.to_bytes(8, "big")
    return bytes(data)


def mux_audio(out: Any, stream: Any, samples: np.ndarray) -> None:
    """16 kHz mono float ``samples`` encoded into ``stream`` of the open container ``out``."""
    resampler = av.AudioResampler(
        format=stream.format.name,
        layout="mono",
        rate=stream.rate,
        frame_size=stream.codec_context.frame_size or None,
    )
    step = 10 * 16_000  # 10 s frames: a process that serves caps FFmpeg's allocations
    pieces: list[Any] = []
    for start in range(0, samples.shape[0], step):
        block = np.ascontiguousarray(samples[start : start + step], dtype=np.float32)
        frame = av.AudioFrame.from_ndarray(block[None, :], format="flt", layout="mono")
        frame.sample_rate = 16_000
        frame.pts = start
        pieces.append(frame)
    for piece in (*pieces, None):
        for resampled in resampler.resample(piece):
            out.mux(stream.encode(resampled))
    out.mux(stream.encode(None))


def opus(samples: np.ndarray, container: str) -> bytes:
    """``samples`` as Opus in ``container`` (``webm``, ``ogg``), written seekable, so that
    the header states the duration."""
    sink = io.BytesIO()
    with av.open(sink, "w", format=container) as out:
        stream = out.add_stream("libopus", rate=48_000)
        stream.layout = "mono"
        mux_audio(out, stream, samples)
    return sink.getvalue()


def by_name(corpus: list[Clip]) -> dict[str, Clip]:
    """The corpus's clips by file name."""
    return {clip.path.name: clip for clip in corpus}
