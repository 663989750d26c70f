"""Token log probabilities of a decode (OpenAI's ``include[]=logprobs``), engine-neutral.

An engine hands over, for each window, the tokens its decode chose and each one's log
probability under the model at that step (CTranslate2: the step's logits from
``return_logits_vocab``, which it gives for greedy and sampled decodes, not for a beam).
These rules make each segment's share of them: its text tokens only (no timestamps, no
special tokens), each with the text it adds to the segment and its own UTF-8 bytes, so the
tokens' texts joined are the segment's text.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from asrserve.transcript import TokenLogprob

TokenBytes = Callable[[int], bytes]
"""A token id's bytes (for a byte-level BPE vocabulary such as Whisper's)."""


def chosen_logprobs(logits: Iterable[Any], tokens: Sequence[int]) -> list[float]:
    """Each chosen token's log probability: ``logits`` gives one row a step (the steps after
    the prompt; a last row for the end-of-text step may follow), over the vocabulary, each
    anything NumPy reads as an array. A step at a time, in float32: the work memory is one
    row, never a copy of every step's (a window's steps are ~45 MB of float32)."""
    chosen = []
    for step, token in zip(logits, tokens, strict=False):
        row = np.asarray(step, dtype=np.float32).reshape(-1)
        peak = row.max()
        norm = peak + np.log(np.exp(row - peak).sum(dtype=np.float32))
        chosen.append(float(row[token] - norm))
    if len(chosen) < len(tokens):
        raise ValueError(f"{len(chosen)} steps of logits for {len(tokens)} tokens")
    return chosen


@functools.cache
def _byte_decoder() -> dict[str, int]:
    """GPT-2's byte-level BPE alphabet (Whisper's tokenizer): character → the byte it stands
    for."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1)]
    printable += range(ord("®"), ord("ÿ") + 1)
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[chr(byte)] = byte
        else:
            chars[chr(256 + extra)] = byte
            extra += 1
    return chars


def byte_level(token_to_string: Callable[[int], str | None]) -> TokenBytes:
    """A :data:`TokenBytes` for a byte-level BPE vocabulary, given its id → token string."""
    decoder = _byte_decoder()

    def of(token: int) -> bytes:
        return bytes(decoder[char] for char in token_to_string(token) or "")

    return of


def text_tokens(
    tokens: Sequence[int], logprobs: Sequence[float], text_end: int, token_bytes: TokenBytes
) -> list[TokenLogprob]:
    """A segment's text tokens (ids below ``text_end``, Whisper's end-of-text) with their log
    probabilities; each token's ``token`` is the text its bytes complete (a character split
    over tokens comes with its last one; bytes that never complete one read as U+FFFD, as
    the segment's text decodes them)."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    out: list[TokenLogprob] = []
    for token, logprob in zip(tokens, logprobs, strict=True):
        if token >= text_end:
            continue
        raw = token_bytes(token)
        out.append(TokenLogprob(token=decoder.decode(raw), logprob=logprob, bytes=list(raw)))
    rest = decoder.decode(b"", final=True)
    if rest and out:
        last = out[-1]
        out[-1] = last.model_copy(update={"token": last.token + rest})
    return out


def split_by_segment(
    window: Sequence[int], logprobs: Sequence[float], segments: Sequence[Sequence[int]]
) -> list[list[float]]:
    """The log probabilities of each segment's tokens: the segments' tokens are the
    window's, cut in order (Whisper splits a window at its timestamp pairs)."""
    out, at = [], 0
    for tokens in segments:
        if list(window[at : at + len(tokens)]) != list(tokens):
            raise ValueError("a segment's tokens are not the next tokens of its window")
        out.append(list(logprobs[at : at + len(tokens)]))
        at += len(tokens)
    return out
