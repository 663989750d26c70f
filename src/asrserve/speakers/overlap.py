"""Overlapped speech: where two people speak at once, found by the segmentation model, kept
out of the clips that voices are embedded from, and given both speakers.

The file is cut into 10 s chunks, one after another (the last zero-padded); each chunk's
frames say which of up to three local speakers speak (``segmentation.py``). A run of frames
where two speak, at least ``MIN_OVERLAP_S`` long, is overlap. Clips are cut from the speech
regions less the overlaps, so that no voice embedding hears two people; an overlap then goes
to the two speakers nearest it in time (the one whose turn it ends and the one whose turn it
starts, where turns change: how conversations overlap). Last, a speaker's turns closer than
``BRIDGE_S`` are joined, as pauses inside a turn are not a change of speaker.
Pure: no model, no clock.

Chosen on the tuning speakers' conversations, as ``cluster.LINK`` was (docs/logs/
diarization-tuning.log): with LINK 0.35, clips kept out of the overlaps cut the DER of the
conversations with overlap at collar 0 from 0.067 to 0.055 and got their count right in
39 of 40 against 37; a bridge of 0.4 s did better at collar 0 than 0.3, 0.5 and 0.7.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from asrserve.audio.pcm import Samples, read
from asrserve.speakers.segmentation import CHUNK_SAMPLES, FRAME_SPAN_S, FRAME_STEP_S, SAMPLE_RATE
from asrserve.speakers.turns import Span, Turn

MIN_OVERLAP_S = 0.1
BRIDGE_S = 0.4
EDGE_S = 0.1  # runs of two chunks this close at their edge are one

Activity = npt.NDArray[np.bool_]  # (frames, local speakers) of one chunk


def chunk_starts(samples: int) -> list[int]:
    """Where each 10 s chunk of a file of ``samples`` starts (one at least)."""
    return list(range(0, max(samples, 1), CHUNK_SAMPLES))


def chunk(samples: Samples, start: int) -> npt.NDArray[np.float32]:
    """The 10 s at ``start``, as floats, zero-padded past the end."""
    out = np.zeros(CHUNK_SAMPLES, np.float32)
    piece = read(samples, start, start + CHUNK_SAMPLES)
    out[: len(piece)] = piece
    return out


def _runs(mask: npt.NDArray[np.bool_], offset: float) -> list[Span]:
    """The runs of true frames, in seconds from ``offset`` (a chunk's start)."""
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    first = offset + FRAME_SPAN_S / 2 - FRAME_STEP_S / 2
    return [
        Span(first + a * FRAME_STEP_S, first + b * FRAME_STEP_S)
        for a, b in zip(edges[::2], edges[1::2], strict=True)
    ]


def overlaps(starts: Sequence[int], activity: Sequence[Activity]) -> list[Span]:
    """Where two speak at once, from each chunk's frames (runs joined across a chunk's
    edge), the runs under ``MIN_OVERLAP_S`` left out."""
    found: list[Span] = []
    for start, frames in zip(starts, activity, strict=True):
        for run in _runs(frames.sum(axis=1) >= 2, start / SAMPLE_RATE):
            if found and run.start - found[-1].end < EDGE_S:
                found[-1] = Span(found[-1].start, run.end)
            else:
                found.append(run)
    return [run for run in found if run.end - run.start >= MIN_OVERLAP_S]


def without(regions: Sequence[Span], holes: Sequence[Span]) -> list[Span]:
    """``regions`` less ``holes`` (both in time order)."""
    out = []
    for region in regions:
        start = region.start
        for hole in holes:
            if hole.end <= start or hole.start >= region.end:
                continue
            if hole.start > start:
                out.append(Span(start, hole.start))
            start = max(start, hole.end)
        if start < region.end:
            out.append(Span(start, region.end))
    return out


def _distance(turn: Turn, span: Span) -> float:
    return max(turn.start - span.end, span.start - turn.end, 0.0)


def with_overlaps(
    turns: Sequence[Turn], found: Sequence[Span], gap: float = BRIDGE_S
) -> list[Turn]:
    """``turns`` with each overlap given to the two speakers whose turns are nearest it
    (one, if only one speaks), a speaker's turns then joined across pauses under ``gap``."""
    out = list(turns)
    for span in found:
        nearest: list[int] = []
        for turn in sorted(turns, key=lambda t: _distance(t, span)):
            if turn.speaker not in nearest:
                nearest.append(turn.speaker)
            if len(nearest) == 2:
                break
        out += [Turn(span.start, span.end, speaker) for speaker in nearest]
    return bridged(out, gap)


def bridged(turns: Sequence[Turn], gap: float = BRIDGE_S) -> list[Turn]:
    """Each speaker's turns joined where they overlap or are under ``gap`` apart; in time
    order."""
    joined: list[Turn] = []
    for turn in sorted(turns, key=lambda t: (t.speaker, t.start)):
        last = joined[-1] if joined else None
        if last is not None and last.speaker == turn.speaker and turn.start - last.end < gap:
            joined[-1] = Turn(last.start, max(last.end, turn.end), turn.speaker)
        else:
            joined.append(turn)
    return sorted(joined, key=lambda t: (t.start, t.end))
