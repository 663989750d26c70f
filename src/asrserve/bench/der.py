"""Diarization error rate and Jaccard error rate, as pyannote.metrics defines them.

DER = (missed speech + false alarm + speaker confusion) / reference speech. Time is cut at
every turn's start and end; on each piece, with r reference and h hypothesis speakers
speaking and c of them paired by the mapping, missed is max(r - h, 0), false alarm
max(h - r, 0) and confusion min(r, h) - c, weighted by its length: overlapped speech is
scored, each voice in it counted. The hypothesis's speakers are paired one-to-one with the
reference's so that they speak together longest (the Hungarian algorithm). ``collar``
seconds on each side of every reference turn's start and end are not scored: NIST md-eval's
``-c``, which is pyannote.metrics' ``collar`` of twice as much (a 0.25 s collar here is
``DiarizationErrorRate(collar=0.5)`` there); 0 scores every instant.
``tests/unit/test_der.py`` holds both to pyannote.metrics on random diarizations.

JER is the mean over reference speakers of 1 - |ref ∩ hyp| / |ref ∪ hyp| with the speaker
paired to it (1 for a speaker paired with none), no collar.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from scipy.optimize import linear_sum_assignment


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
    speech: float  # the reference's scored speech, seconds (each voice of an overlap)
    mapping: dict[Hashable, Hashable]  # hypothesis speaker -> reference speaker


@dataclass(frozen=True)
class _Piece:
    length: float
    refs: frozenset[int]
    hyps: frozenset[int]


def _pieces(
    reference: Sequence[Labelled],
    hypothesis: Sequence[Labelled],
    refs: list[Hashable],
    hyps: list[Hashable],
    collar: float,
) -> list[_Piece]:
    """Time cut at every edge, each piece with who speaks in it; pieces within ``collar``
    of a reference edge left out."""
    edges = {t for turn in [*reference, *hypothesis] for t in (turn.start, turn.end)}
    holes = [
        (edge - collar, edge + collar)
        for turn in reference
        for edge in (turn.start, turn.end)
        if collar > 0
    ]
    edges |= {t for hole in holes for t in hole}
    times = sorted(edges)
    out = []
    for a, b in itertools.pairwise(times):
        middle = (a + b) / 2
        if b <= a or any(lo < middle < hi for lo, hi in holes):
            continue
        active_refs = frozenset(
            refs.index(t.speaker) for t in reference if t.start <= middle < t.end
        )
        active_hyps = frozenset(
            hyps.index(t.speaker) for t in hypothesis if t.start <= middle < t.end
        )
        if active_refs or active_hyps:
            out.append(_Piece(b - a, active_refs, active_hyps))
    return out


def _mapping(together: npt.NDArray[np.float64]) -> list[tuple[int, int]]:
    """(reference, hypothesis) pairs that speak together longest, one-to-one."""
    if together.size == 0:
        return []
    rows, cols = linear_sum_assignment(-together)
    return [(int(r), int(c)) for r, c in zip(rows, cols, strict=True) if together[r, c] > 0]


def score(
    reference: Sequence[Labelled], hypothesis: Sequence[Labelled], collar: float = 0.25
) -> Score:
    """The DER of ``hypothesis`` against ``reference``."""
    refs = sorted({t.speaker for t in reference}, key=str)
    hyps = sorted({t.speaker for t in hypothesis}, key=str)
    pieces = _pieces(reference, hypothesis, refs, hyps, collar)
    together = np.zeros((len(refs), len(hyps)))
    for piece in pieces:
        for r in piece.refs:
            for h in piece.hyps:
                together[r, h] += piece.length
    pairs = _mapping(together)
    paired = set(pairs)
    missed = false_alarm = confusion = speech = 0.0
    for piece in pieces:
        r, h = len(piece.refs), len(piece.hyps)
        correct = sum(1 for a in piece.refs for b in piece.hyps if (a, b) in paired)
        missed += piece.length * max(r - h, 0)
        false_alarm += piece.length * max(h - r, 0)
        confusion += piece.length * (min(r, h) - correct)
        speech += piece.length * r
    errors = missed + false_alarm + confusion
    return Score(
        der=errors / speech if speech else float(errors > 0),  # pyannote's convention
        missed=missed,
        false_alarm=false_alarm,
        confusion=confusion,
        speech=speech,
        mapping={hyps[h]: refs[r] for r, h in pairs},
    )


def jer(reference: Sequence[Labelled], hypothesis: Sequence[Labelled]) -> float:
    """The Jaccard error rate of ``hypothesis`` against ``reference`` (no collar)."""
    refs = sorted({t.speaker for t in reference}, key=str)
    hyps = sorted({t.speaker for t in hypothesis}, key=str)
    if not refs:
        return 0.0
    pieces = _pieces(reference, hypothesis, refs, hyps, 0.0)
    together = np.zeros((len(refs), len(hyps)))
    for piece in pieces:
        for r in piece.refs:
            for h in piece.hyps:
                together[r, h] += piece.length
    partner = {r: h for r, h in _mapping(together)}
    errors = []
    for r in range(len(refs)):
        if r not in partner:
            errors.append(1.0)
            continue
        h = partner[r]
        union = sum(p.length for p in pieces if r in p.refs or h in p.hyps)
        errors.append(1.0 - together[r, h] / union)
    return float(np.mean(errors))


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
