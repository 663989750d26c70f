"""A window's decoded tokens cut into segments at Whisper's timestamp tokens (engine-neutral).

Whisper writes ``<|t0|> text <|t1|><|t1|> text <|t2|>``: a pair of timestamps closes one
segment and opens the next. A decode that ends on a single timestamp says the rest of the
window is silence (it *finished* the window); one that ends on a pair, or on text, left the
rest undecoded, and its last unclosed text is dropped, as sequential decoding drops it
before seeking there. A decode with no pair is one segment, ending at its last timestamp (or
the window's end).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

SECONDS_PER_TIMESTAMP = 0.02


@dataclass(frozen=True)
class Piece:
    """One segment's tokens and its times on the job's timeline."""

    start: float
    end: float
    tokens: list[int]


def finished(tokens: Sequence[int], timestamp_begin: int) -> bool:
    """The decode ended on a single timestamp: nothing more to say in this window."""
    return len(tokens) >= 2 and tokens[-2] < timestamp_begin <= tokens[-1]


def split(
    tokens: Sequence[int], timestamp_begin: int, offset: float, duration: float
) -> list[Piece]:
    """The segments of one window's decode, timed from ``offset``; ``duration`` is the
    window's length of real audio (the end of a decode without timestamps)."""
    tokens = list(tokens)
    pairs = [
        i
        for i in range(1, len(tokens))
        if tokens[i] >= timestamp_begin and tokens[i - 1] >= timestamp_begin
    ]
    if not pairs:
        times = [t for t in tokens if t >= timestamp_begin]
        end = duration
        if times and times[-1] != timestamp_begin:
            end = (times[-1] - timestamp_begin) * SECONDS_PER_TIMESTAMP
        return [Piece(offset, offset + end, tokens)]
    cuts = [*pairs, len(tokens)] if finished(tokens, timestamp_begin) else pairs
    pieces, first = [], 0
    for cut in cuts:
        sliced = tokens[first:cut]
        start = (sliced[0] - timestamp_begin) * SECONDS_PER_TIMESTAMP
        end = (sliced[-1] - timestamp_begin) * SECONDS_PER_TIMESTAMP
        pieces.append(Piece(offset + start, offset + end, sliced))
        first = cut
    return pieces
