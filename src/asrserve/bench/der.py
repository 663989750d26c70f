"""Diarization error rate: how much of the reference's speech a diarization gets wrong.

DER = (missed speech + false alarm + speaker confusion) / reference speech, counted on
10 ms frames, with the hypothesis's speakers mapped one-to-one onto the reference's so that
they overlap most (every mapping is tried: conversations here have few speakers), and no
frame within ``collar`` of a reference turn's start or end scored (pyannote.metrics' and
NIST's convention; 0.25 s is usual).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from itertools import permutations

import numpy as np
import numpy.typing as npt

FRAME_S = 0.01


@dataclass(frozen=True)
class Labelled:
    start: float
    end: float
    speaker: Hashable


@dataclass(frozen=True)
class Score:
    der: float
    missed: float  # seconds
    false_alarm: float
    confusion: float
    speech: float  # the reference's scored speech, seconds
    mapping: dict[Hashable, Hashable]  # hypothesis speaker -> reference speaker


def _grid(
    turns: Sequence[Labelled], speakers: list[Hashable], frames: int
) -> npt.NDArray[np.bool_]:
    grid = np.zeros((len(speakers), frames), dtype=bool)
    for turn in turns:
        grid[
            speakers.index(turn.speaker), round(turn.start / FRAME_S) : round(turn.end / FRAME_S)
        ] = True
    return grid


def score(
    reference: Sequence[Labelled], hypothesis: Sequence[Labelled], collar: float = 0.25
) -> Score:
    """The DER of ``hypothesis`` against ``reference``."""
    end = max([t.end for t in [*reference, *hypothesis]], default=0.0)
    frames = round(end / FRAME_S) + 1
    refs = sorted({t.speaker for t in reference}, key=str)
    hyps = sorted({t.speaker for t in hypothesis}, key=str)
    ref = _grid(reference, refs, frames)
    hyp = _grid(hypothesis, hyps, frames)
    scored = np.ones(frames, dtype=bool)
    margin = round(collar / FRAME_S)
    for turn in reference:
        for edge in (round(turn.start / FRAME_S), round(turn.end / FRAME_S)):
            scored[max(edge - margin, 0) : edge + margin] = False
    ref, hyp = ref[:, scored], hyp[:, scored]
    overlap = ref.astype(np.int64) @ hyp.T.astype(np.int64)  # (refs, hyps) frames together
    best: tuple[int, dict[Hashable, Hashable]] = (-1, {})
    size = max(len(refs), len(hyps))
    for order in permutations(range(size), len(hyps)) if hyps else [()]:
        pairs = [(r, h) for h, r in enumerate(order) if r < len(refs)]
        total = sum(int(overlap[r, h]) for r, h in pairs)
        if total > best[0]:
            best = (total, {hyps[h]: refs[r] for r, h in pairs})
    count_ref, count_hyp = ref.sum(axis=0), hyp.sum(axis=0)
    missed = np.maximum(count_ref - count_hyp, 0).sum()
    false_alarm = np.maximum(count_hyp - count_ref, 0).sum()
    correct = sum(int((ref[refs.index(r)] & hyp[hyps.index(h)]).sum()) for h, r in best[1].items())
    confusion = np.minimum(count_ref, count_hyp).sum() - correct
    speech = count_ref.sum()
    errors = missed + false_alarm + confusion
    return Score(
        der=float(errors / speech) if speech else 0.0,
        missed=float(missed) * FRAME_S,
        false_alarm=float(false_alarm) * FRAME_S,
        confusion=float(confusion) * FRAME_S,
        speech=float(speech) * FRAME_S,
        mapping=best[1],
    )


def named_seconds(
    reference: Sequence[Labelled], hypothesis: Sequence[Labelled]
) -> tuple[float, float]:
    """Seconds of the reference's speech that the hypothesis gives its speaker's name (its
    speakers are names: the reference's speakers, or others), and of the reference's
    speech; overlap, no collar."""
    right = total = 0.0
    for turn in reference:
        total += turn.end - turn.start
        for found in hypothesis:
            if found.speaker == turn.speaker:
                right += max(0.0, min(turn.end, found.end) - max(turn.start, found.start))
    return right, total
