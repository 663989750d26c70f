"""From speech regions to speaker turns: the clips a file's voices are embedded from, and
the turns their clusters make.

Each region of speech is cut into clips of ``CLIP_S`` every ``HOP_S`` (the last one ends
with the region; a region shorter than a clip is one clip), long enough for a voice
embedding and short enough to rarely hold two people. Consecutive clips of one speaker make
a turn; where clips of two speakers overlap, the turn changes at the middle of the overlap.
Pure: no model, no clock.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

CLIP_S = 1.5
HOP_S = 1.0
MIN_REGION_S = 0.3  # shorter speech carries too little voice to embed


@dataclass(frozen=True)
class Span:
    start: float
    end: float


@dataclass(frozen=True)
class Turn:
    start: float
    end: float
    speaker: int


def clips(regions: Sequence[Span]) -> list[Span]:
    """The clips to embed, in time order."""
    out = []
    for region in regions:
        if region.end - region.start < MIN_REGION_S:
            continue
        start = region.start
        while start + CLIP_S < region.end:
            out.append(Span(start, start + CLIP_S))
            start += HOP_S
        out.append(Span(max(region.start, region.end - CLIP_S), region.end))
    return out


def turns(spans: Sequence[Span], speakers: Sequence[int]) -> list[Turn]:
    """The turns that clips labelled with ``speakers`` make, in time order."""
    out: list[Turn] = []
    for span, speaker in zip(spans, speakers, strict=True):
        start = span.start
        if out and out[-1].end > start:  # overlapping clips
            last = out[-1]
            if last.speaker == speaker:
                out[-1] = Turn(last.start, max(last.end, span.end), speaker)
                continue
            middle = (start + last.end) / 2
            out[-1] = Turn(last.start, middle, last.speaker)
            start = middle
        if out and out[-1].speaker == speaker and out[-1].end >= start:
            out[-1] = Turn(out[-1].start, span.end, speaker)
        else:
            out.append(Turn(start, span.end, speaker))
    return out
