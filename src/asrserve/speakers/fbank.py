"""Kaldi's log mel filterbank, the input the speaker embedding model was trained on.

80 bins over 20 Hz .. 8 kHz, frames of 25 ms every 10 ms (only whole frames), each frame's
DC removed, pre-emphasis 0.97, Povey's window, a 512-point power spectrum, no dither; the
log floored at float32's epsilon. ``fbank`` of a clip subtracts the clip's mean of each bin
(cepstral mean normalisation), as the model's training did. Pure numpy.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np
import numpy.typing as npt

SAMPLE_RATE = 16000
FRAME = 400  # 25 ms
SHIFT = 160  # 10 ms
FFT = 512
BINS = 80
LOW_HZ = 20.0
PREEMPHASIS = 0.97
EPSILON = float(np.finfo(np.float32).eps)

Floats = npt.NDArray[np.float32]


def _mel(hz: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
    return 1127.0 * np.log1p(hz / 700.0)


@lru_cache(maxsize=1)
def _banks() -> npt.NDArray[np.float32]:
    """Triangular filters, equally spaced in mel, over the spectrum's bins (FFT/2 + 1)."""
    low, high = _mel(np.array(LOW_HZ)), _mel(np.array(SAMPLE_RATE / 2))
    edges = low + (high - low) * np.arange(BINS + 2) / (BINS + 1)
    freqs = _mel(np.arange(FFT // 2) * SAMPLE_RATE / FFT)
    left, centre, right = edges[:-2, None], edges[1:-1, None], edges[2:, None]
    rising = (freqs - left) / (centre - left)
    falling = (right - freqs) / (right - centre)
    banks = np.maximum(0.0, np.minimum(rising, falling))
    return np.pad(banks, ((0, 0), (0, 1))).astype(np.float32)  # Nyquist's bin weighs 0


@lru_cache(maxsize=1)
def _window() -> npt.NDArray[np.float32]:
    n = np.arange(FRAME)
    return ((0.5 - 0.5 * np.cos(2 * np.pi * n / (FRAME - 1))) ** 0.85).astype(np.float32)


def frames(samples: Floats) -> int:
    """How many frames ``fbank`` gives for ``samples``."""
    return 0 if len(samples) < FRAME else 1 + (len(samples) - FRAME) // SHIFT


def log_mel(samples: Floats) -> Floats:
    """The log mel energies of each whole frame of 16 kHz ``samples``: (frames, 80)."""
    count = frames(samples)
    if count == 0:
        return np.zeros((0, BINS), dtype=np.float32)
    index = np.arange(FRAME)[None, :] + SHIFT * np.arange(count)[:, None]
    framed = samples.astype(np.float32)[index]
    framed = framed - framed.mean(axis=1, keepdims=True)
    shifted = np.concatenate([framed[:, :1], framed[:, :-1]], axis=1)
    framed = (framed - PREEMPHASIS * shifted) * _window()
    power = np.abs(np.fft.rfft(framed, n=FFT, axis=1)) ** 2
    energies = power.astype(np.float32) @ _banks().T
    logs: Floats = np.log(np.maximum(energies, EPSILON)).astype(np.float32)
    return logs


def fbank(samples: Floats) -> Floats:
    """``log_mel`` with each bin's mean over the clip subtracted."""
    features = log_mel(samples)
    return features - features.mean(axis=0, keepdims=True) if len(features) else features
