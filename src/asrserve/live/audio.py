"""A live session's input audio, converted frame by frame to the model's 16 kHz float32:
little-endian PCM16 mono at 24 kHz (what OpenAI's realtime API sends) or 16 kHz, or G.711
μ-law (``audio/pcmu``) or A-law (``audio/pcma``) at 8 kHz, telephony's formats, decoded
through a table of their 256 code points (ITU-T G.711; not ``audioop``, which Python 3.13
removed)."""

from __future__ import annotations

import av
import numpy as np

from asrserve.engine.base import SAMPLING_RATE
from asrserve.live.errors import LiveError

INPUT_RATES = (16000, 24000)
G711_RATE = 8000
PCM16, PCMU, PCMA = "pcm16", "pcmu", "pcma"
ENCODINGS = (PCM16, PCMU, PCMA)


def _ulaw_table() -> np.ndarray:
    code = ~np.arange(256, dtype=np.int32) & 0xFF
    exponent, mantissa = (code >> 4) & 0x07, code & 0x0F
    magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84
    return np.where(code & 0x80, -magnitude, magnitude).astype("<i2")


def _alaw_table() -> np.ndarray:
    code = np.arange(256, dtype=np.int32) ^ 0x55
    exponent, mantissa = (code >> 4) & 0x07, code & 0x0F
    magnitude = np.where(
        exponent == 0,
        (mantissa << 4) + 8,
        ((mantissa << 4) + 0x108) << np.maximum(exponent - 1, 0),
    )
    return np.where(code & 0x80, magnitude, -magnitude).astype("<i2")


ULAW = _ulaw_table()  # code point -> PCM16 sample
ALAW = _alaw_table()
_TABLES = {PCMU: ULAW, PCMA: ALAW}


class PcmInput:
    def __init__(self, rate: int, encoding: str = PCM16) -> None:
        if encoding not in ENCODINGS:
            message = f"unknown input audio encoding {encoding!r}"
            raise LiveError(message, code="invalid_audio_format")
        if encoding == PCM16 and rate not in INPUT_RATES:
            rates = " or ".join(map(str, INPUT_RATES))
            raise LiveError(f"input audio rate must be {rates} Hz", code="invalid_audio_format")
        if encoding != PCM16 and rate != G711_RATE:
            raise LiveError(f"G.711 audio is {G711_RATE} Hz", code="invalid_audio_format")
        self.rate = rate
        self.encoding = encoding
        self.sample_bytes = 2 if encoding == PCM16 else 1
        self._resampler = (
            None
            if rate == SAMPLING_RATE
            else av.AudioResampler(format="flt", layout="mono", rate=SAMPLING_RATE)
        )

    def seconds(self, size: int) -> float:
        """How long ``size`` bytes of this input last."""
        return size / self.sample_bytes / self.rate

    def convert(self, data: bytes) -> np.ndarray:
        """16 kHz float32 samples of ``data`` (a resampler keeps a few samples back)."""
        table = _TABLES.get(self.encoding)
        if table is not None:
            samples = table[np.frombuffer(data, dtype=np.uint8)]
        elif len(data) % 2:
            raise LiveError("PCM16 audio has an even number of bytes", code="invalid_audio")
        else:
            samples = np.frombuffer(data, dtype="<i2")
        if self._resampler is None:
            return samples.astype(np.float32) / 32768.0
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        out = [f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
