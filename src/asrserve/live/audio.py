"""A live session's input audio: little-endian PCM16 mono at 24 kHz (what OpenAI's realtime
API sends) or 16 kHz, converted frame by frame to the model's 16 kHz float32."""

from __future__ import annotations

import av
import numpy as np

from asrserve.engine.base import SAMPLING_RATE
from asrserve.live.errors import LiveError

INPUT_RATES = (16000, 24000)


class PcmInput:
    def __init__(self, rate: int) -> None:
        if rate not in INPUT_RATES:
            rates = " or ".join(map(str, INPUT_RATES))
            raise LiveError(f"input audio rate must be {rates} Hz", code="invalid_audio_format")
        self.rate = rate
        self._resampler = (
            None
            if rate == SAMPLING_RATE
            else av.AudioResampler(format="flt", layout="mono", rate=SAMPLING_RATE)
        )

    def convert(self, data: bytes) -> np.ndarray:
        """16 kHz float32 samples of ``data`` (a resampler keeps a few samples back)."""
        if len(data) % 2:
            raise LiveError("PCM16 audio has an even number of bytes", code="invalid_audio")
        samples = np.frombuffer(data, dtype="<i2")
        if self._resampler is None:
            return samples.astype(np.float32) / 32768.0
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.sample_rate = self.rate
        out = [f.to_ndarray().reshape(-1) for f in self._resampler.resample(frame)]
        return np.concatenate(out) if out else np.zeros(0, dtype=np.float32)
