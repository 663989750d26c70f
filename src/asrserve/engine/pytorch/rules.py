"""Whisper's rules on the next token's logits, for every row of a batch at once.

What CTranslate2's Whisper decoding applies (``src/models/whisper.cc``) and openai-whisper's
``ApplyTimestampRules`` before it: the suppressed tokens always; blank and end-of-text at
the first step; ``<|notimestamps|>`` never; the first token a timestamp no later than 1 s;
timestamps in pairs (after a lone timestamp only another timestamp or text's end; after a
pair, text); timestamps never going back; and a timestamp forced where the timestamps
together are more likely than any one text token.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

Tensor = torch.Tensor
MAX_INITIAL_TIMESTAMP_INDEX = 50  # the first timestamp at most 1 s into the window


@dataclass(frozen=True)
class Vocabulary:
    """The special tokens the rules need, for one model's tokenizer."""

    size: int
    eot: int
    no_timestamps: int
    timestamp_begin: int
    no_speech: int
    suppress: tuple[int, ...]  # always
    suppress_begin: tuple[int, ...]  # at the first step (blank and end-of-text)


class TimestampRules:
    """The rules as column masks over the vocabulary, on one device."""

    def __init__(self, vocabulary: Vocabulary, device: torch.device) -> None:
        self.vocabulary = vocabulary
        columns = torch.arange(vocabulary.size, device=device)
        self.columns = columns
        self.timestamp = columns >= vocabulary.timestamp_begin
        self.before_timestamps = ~self.timestamp  # text, end-of-text and the specials
        self.text = columns < vocabulary.eot
        self.always = torch.zeros(vocabulary.size, dtype=torch.bool, device=device)
        self.always[list(vocabulary.suppress)] = True
        self.always[vocabulary.no_timestamps] = True
        self.begin = torch.zeros_like(self.always)
        self.begin[list(vocabulary.suppress_begin)] = True
        latest = vocabulary.timestamp_begin + MAX_INITIAL_TIMESTAMP_INDEX
        self.first = self.before_timestamps | (columns > latest) | self.begin

    def apply(self, logits: Tensor, history: Sequence[Sequence[int]]) -> Tensor:
        """``logits`` (rows, vocabulary) with the disallowed tokens at -inf; ``history``:
        each row's tokens generated so far (all rows the same number of steps)."""
        if not history or not history[0]:
            return logits.masked_fill(self.always | self.first, float("-inf"))
        begin = self.vocabulary.timestamp_begin
        rows = len(history)
        device = logits.device
        state = torch.tensor(  # one copy onto the device a step
            [
                [h[-1] >= begin for h in history],
                [len(h) < 2 or h[-2] >= begin for h in history],
                [_last_timestamp(h, begin) for h in history],
            ],
            device=device,
        )
        last_is_time, pair, latest = state[0].bool(), state[1].bool(), state[2]
        disabled = self.always.expand(rows, -1).clone()
        disabled |= (last_is_time & pair)[:, None] & self.timestamp  # after a pair: text
        disabled |= (last_is_time & ~pair)[:, None] & self.text  # after one: its pair or end
        disabled |= self.timestamp & (self.columns[None, :] < latest[:, None])
        logits = logits.masked_fill(disabled, float("-inf"))
        check = ~(last_is_time & pair)
        logprobs = torch.log_softmax(logits, dim=-1)
        timestamps = torch.logsumexp(logprobs[:, begin:], dim=-1)
        best_text = logprobs[:, :begin].max(dim=-1).values
        force = check & (timestamps > best_text)
        return logits.masked_fill(force[:, None] & self.before_timestamps, float("-inf"))


def _last_timestamp(tokens: Sequence[int], begin: int) -> int:
    for token in reversed(tokens):
        if token >= begin:
            return token
    return begin
