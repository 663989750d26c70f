"""Whisper's forward passes over transformers' ``WhisperForConditionalGeneration`` weights:
the encoder on windows of any length up to 30 s, and an incremental decoder with its own
key/value cache, so that a batch's windows may each have a prompt of its own length.

transformers' own ``generate`` gives one prompt length per batch and its encoder takes only
full 30 s windows; Whisper's decoding here (``search.py``) needs neither limit, so the
passes run the model's modules directly. Prompts are left-padded: a row's first real token
sits at position 0 of its own, padding is masked out of every attention.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

Tensor = torch.Tensor


Cross = list[tuple[Tensor, Tensor]]
"""Each decoder layer's cross-attention keys and values, (windows, heads, frames, head size)."""


@dataclass
class Cache:
    """A batch's decoder state: each layer's self-attention keys and values (room for
    ``capacity`` positions), which of those positions are real tokens, and each layer's
    cross-attention keys and values over each window's encoder output. A window takes
    ``width`` consecutive rows (its beams or samples), which share its cross-attention."""

    keys: list[Tensor]  # per layer (rows, heads, capacity, head size)
    values: list[Tensor]
    real: Tensor  # (rows, capacity) bool: a real token at that position
    cross: Cross  # a window each, not a row each
    width: int = 1
    length: int = 0  # positions filled

    def room(self, end: int) -> None:
        """Make room for positions up to ``end``: doubled each time, so that a decode of a
        few tokens copies a few tokens' keys when its beams are reordered, not 448."""
        capacity = self.real.shape[1]
        if end <= capacity:
            return
        grown = max(end, 2 * capacity)

        def wider(x: Tensor) -> Tensor:
            extra = torch.zeros(
                (*x.shape[:2], grown - capacity, *x.shape[3:]), dtype=x.dtype, device=x.device
            )
            return torch.cat([x, extra], dim=2)

        self.keys = [wider(k) for k in self.keys]
        self.values = [wider(v) for v in self.values]
        padding = torch.zeros(
            (self.real.shape[0], grown - capacity), dtype=torch.bool, device=self.real.device
        )
        self.real = torch.cat([self.real, padding], dim=1)

    def select(self, rows: Tensor, windows: Tensor | None = None) -> None:
        """Keep ``rows`` (in that order): the beams that live on; ``windows``: the windows
        they belong to, when some windows left (None: every window stays)."""
        self.keys = [k.index_select(0, rows) for k in self.keys]
        self.values = [v.index_select(0, rows) for v in self.values]
        self.real = self.real.index_select(0, rows)
        if windows is not None:
            self.cross = [
                (k.index_select(0, windows), v.index_select(0, windows)) for k, v in self.cross
            ]


class WhisperNet:
    """The model's modules on one device, in one dtype, run without autograd."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.encoder = model.model.encoder
        self.decoder = model.model.decoder
        self.layers = list(self.decoder.layers)
        config = model.config
        self.heads = int(config.decoder_attention_heads)
        self.width = int(config.d_model)
        self.head_size = self.width // self.heads
        self.max_positions = int(config.max_target_positions)
        self.device = next(model.parameters()).device
        self.dtype = next(model.parameters()).dtype

    @torch.inference_mode()
    def encode(self, features: Tensor) -> Tensor:
        """The encoder over (batch, mels, frames) features, frames ≤ 3000 and even: the
        convolutions, the first frames/2 positions, the layers (each takes any length)."""
        x = features.to(self.device, self.dtype)
        x = F.gelu(self.encoder.conv1(x))
        x = F.gelu(self.encoder.conv2(x)).permute(0, 2, 1)
        x = x + self.encoder.embed_positions.weight[: x.shape[1]]
        for layer in self.encoder.layers:
            x = _encoder_layer(layer, x)
        out: Tensor = self.encoder.layer_norm(x)
        return out

    @torch.inference_mode()
    def cross(self, encoded: Tensor) -> Cross:
        """Each decoder layer's cross-attention keys and values over ``encoded``: computed
        once per batch, shared by every pass over it."""
        out = []
        for layer in self.layers:
            attention = layer.encoder_attn
            keys, values = attention.k_proj(encoded), attention.v_proj(encoded)
            out.append((self._heads(keys), self._heads(values)))
        return out

    def start(self, cross: Cross, capacity: int, width: int = 1) -> Cache:
        """An empty cache of ``width`` rows for each window of ``cross``, with room for
        ``capacity`` tokens to begin with (it grows)."""
        rows = cross[0][0].shape[0] * width
        shape = (rows, self.heads, capacity, self.head_size)
        return Cache(
            keys=[torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers],
            values=[torch.zeros(shape, device=self.device, dtype=self.dtype) for _ in self.layers],
            real=torch.zeros((rows, capacity), dtype=torch.bool, device=self.device),
            cross=cross,
            width=width,
        )

    def _heads(self, x: Tensor) -> Tensor:
        return x.view(x.shape[0], x.shape[1], self.heads, self.head_size).transpose(1, 2)

    @torch.inference_mode()
    def step(
        self,
        cache: Cache,
        tokens: Tensor,
        positions: Tensor,
        real: Tensor,
        alignment: list[tuple[int, int]] | None = None,
    ) -> tuple[Tensor, Tensor | None]:
        """Decode ``tokens`` (rows, n) at the rows' ``positions`` (rows, n), ``real`` saying
        which of them are not padding, appended to the cache. The float32 logits of every
        new token (rows, n, vocabulary), and with ``alignment`` (layer, head) pairs, those
        heads' cross-attention scores before their softmax (rows, heads, n, frames)."""
        start, count = cache.length, tokens.shape[1]
        end = start + count
        cache.room(end)
        cache.real[:, start:end] = real
        allowed = cache.real[:, None, :end].expand(-1, count, -1).clone()
        allowed &= torch.ones(count, end, dtype=torch.bool, device=self.device).tril(start)
        diagonal = torch.arange(count, device=self.device)
        allowed[:, diagonal, diagonal + start] = True  # padding sees itself
        mask = allowed[:, None]
        x = self.decoder.embed_tokens(tokens) + self.decoder.embed_positions.weight[positions]
        scores: list[Tensor] = []
        wanted = alignment or []
        for index, layer in enumerate(self.layers):
            heads = [head for at, head in wanted if at == index]
            x, qk = self._layer(index, layer, x, cache, mask, heads)
            if qk is not None:
                scores.append(qk)
        cache.length = end
        x = self.decoder.layer_norm(x)
        logits = self.model.proj_out(x).float()
        return logits, torch.cat(scores, dim=1) if scores else None

    def _layer(
        self, index: int, layer: Any, x: Tensor, cache: Cache, mask: Tensor, heads: list[int]
    ) -> tuple[Tensor, Tensor | None]:
        start, count = cache.length, x.shape[1]
        h = layer.self_attn_layer_norm(x)
        attention = layer.self_attn
        q = self._heads(attention.q_proj(h) * attention.scaling)
        cache.keys[index][:, :, start : start + count] = self._heads(attention.k_proj(h))
        cache.values[index][:, :, start : start + count] = self._heads(attention.v_proj(h))
        keys = cache.keys[index][:, :, : start + count]
        values = cache.values[index][:, :, : start + count]
        out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, scale=1.0)
        x = x + attention.out_proj(self._merge(out))
        h = layer.encoder_attn_layer_norm(x)
        attention = layer.encoder_attn
        q = self._heads(attention.q_proj(h) * attention.scaling)
        cross_keys, cross_values = cache.cross[index]
        qk = None
        if heads:  # (alignment passes have one row a window)
            qk = (q[:, heads] @ cross_keys[:, heads].transpose(-1, -2)).float()
        out = self._cross_attention(q, cross_keys, cross_values, cache.width)
        x = x + attention.out_proj(self._merge(out))
        h = layer.final_layer_norm(x)
        x = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
        return x, qk

    def _cross_attention(self, q: Tensor, keys: Tensor, values: Tensor, width: int) -> Tensor:
        """Each row's queries against its window's keys: a window's ``width`` rows are
        stacked as one window's queries, so that beams share the window's keys."""
        if width == 1:
            return F.scaled_dot_product_attention(q, keys, values, scale=1.0)
        rows, heads, count, size = q.shape
        windows = rows // width
        grouped = q.view(windows, width, heads, count, size).transpose(1, 2)
        grouped = grouped.reshape(windows, heads, width * count, size)
        out = F.scaled_dot_product_attention(grouped, keys, values, scale=1.0)
        out = out.view(windows, heads, width, count, size).transpose(1, 2)
        return out.reshape(rows, heads, count, size)

    def _merge(self, x: Tensor) -> Tensor:
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], self.width)


def _encoder_layer(layer: Any, x: Tensor) -> Tensor:
    h = layer.self_attn_layer_norm(x)
    attention = layer.self_attn
    rows, frames = h.shape[0], h.shape[1]
    heads = attention.num_heads
    split = (rows, frames, heads, attention.head_dim)
    q = (attention.q_proj(h) * attention.scaling).view(split).transpose(1, 2)
    k = attention.k_proj(h).view(split).transpose(1, 2)
    v = attention.v_proj(h).view(split).transpose(1, 2)
    out = F.scaled_dot_product_attention(q, k, v, scale=1.0)
    x = x + attention.out_proj(out.transpose(1, 2).reshape(rows, frames, -1))
    h = layer.final_layer_norm(x)
    out_x: Tensor = x + layer.fc2(layer.activation_fn(layer.fc1(h)))
    return out_x
