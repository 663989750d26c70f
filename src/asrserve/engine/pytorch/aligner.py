"""Word timestamps on the PyTorch engine: one more decoder pass over each window's text,
reading the alignment heads' cross-attention (``engine/alignment.py`` turns it into token
times, ``engine/words.py`` into words), for every window of a batch at once."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from asrserve.engine.alignment import attention_matrix, token_starts
from asrserve.engine.base import FRAMES_PER_SECOND, ChunkInput, RawSegment
from asrserve.engine.decoding import WindowOutput
from asrserve.engine.pytorch.model import ModelMeta
from asrserve.engine.pytorch.network import WhisperNet
from asrserve.engine.words import place, timed_words


def align(
    net: WhisperNet,
    meta: ModelMeta,
    tokenizer: Any,
    cross: list[tuple[torch.Tensor, torch.Tensor]],
    windows: list[ChunkInput],
    languages: list[int | None],
    outputs: list[WindowOutput],
) -> list[WindowOutput]:
    """``outputs`` with each segment's words, and its times reconciled with them."""
    eot = tokenizer.eot
    texts = [[t for s in out.segments for t in s.tokens if t < eot] for out in outputs]
    rows = [i for i, text in enumerate(texts) if text]
    if not rows:
        return outputs
    starts = [_start(tokenizer, languages[i], meta.multilingual) for i in rows]
    sequences = [
        [*start, tokenizer.no_timestamps, *texts[i], eot]
        for start, i in zip(starts, rows, strict=True)
    ]
    length = max(map(len, sequences))
    tokens = torch.full((len(rows), length), eot, dtype=torch.long, device=net.device)
    real = torch.zeros((len(rows), length), dtype=torch.bool, device=net.device)
    for row, sequence in enumerate(sequences):
        tokens[row, : len(sequence)] = torch.tensor(sequence, device=net.device)
        real[row, : len(sequence)] = True
    positions = torch.arange(length, device=net.device).expand(len(rows), -1)
    index = torch.tensor(rows, device=net.device)
    cache = net.start(
        [(k.index_select(0, index), v.index_select(0, index)) for k, v in cross], length
    )
    logits, scores = net.step(cache, tokens, positions, real, list(meta.alignment_heads))
    assert scores is not None
    text_probs = torch.softmax(logits[:, :, :eot], dim=-1)
    out = list(outputs)
    for row, i in enumerate(rows):
        offset, text = len(starts[row]), texts[i]
        positions_of_text = torch.arange(offset, offset + len(text), device=net.device)
        picked = text_probs[row, positions_of_text, torch.tensor(text, device=net.device)]
        frames = min(_frames(windows[i].duration), windows[i].features.shape[-1]) // 2
        head_scores = scores[row, :, offset : offset + len(text) + 1].cpu().numpy()
        times = token_starts(attention_matrix(head_scores, frames))
        words = timed_words(text, times, picked.tolist(), eot, tokenizer.split_to_word_tokens)
        out[i] = _with_words(outputs[i], words, windows[i].offset, eot)
    return out


def _with_words(output: WindowOutput, words: Any, offset: float, eot: int) -> WindowOutput:
    counts = [(s.start, s.end, sum(t < eot for t in s.tokens)) for s in output.segments]
    placed, _ = place(counts, words, offset, offset)
    segments: list[RawSegment] = [
        replace(segment, start=p.start, end=p.end, words=p.words)
        for segment, p in zip(output.segments, placed, strict=True)
    ]
    return replace(output, segments=segments)


def _start(tokenizer: Any, language: int | None, multilingual: bool) -> list[int]:
    sequence = list(tokenizer.sot_sequence)
    if multilingual and language is not None:
        sequence[1] = language
    return sequence


def _frames(duration: float) -> int:
    return int(math.ceil(duration) * FRAMES_PER_SECOND)
