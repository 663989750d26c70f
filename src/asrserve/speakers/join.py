"""Words to speakers: a transcript's segments cut where the speaker changes, each labelled.

A word belongs to the turn it overlaps most (the nearest turn if it overlaps none: a word
the speech regions missed). A segment whose words belong to more than one speaker is cut
between them, so no segment mixes two speakers; a segment without word timings goes whole
to the speaker of most of its span. Speakers are named ``A``, ``B``, … in order of first
speech in the answer, or by ``names`` (a known speaker's name for a clustered speaker).
Pure: no model.
"""

from __future__ import annotations

import string
from collections.abc import Mapping, Sequence

from asrserve.speakers.turns import Turn
from asrserve.transcript import Segment, Transcript, Word


def speaker_at(turns: Sequence[Turn], start: float, end: float) -> int:
    """The speaker of the span ``start``–``end``: most overlap, else the nearest turn."""
    best, most = -1, 0.0
    for turn in turns:
        overlap = min(end, turn.end) - max(start, turn.start)
        if overlap > most:
            best, most = turn.speaker, overlap
    if best >= 0:
        return best
    middle = (start + end) / 2
    return min(turns, key=lambda t: max(t.start - middle, middle - t.end, 0.0)).speaker


def _cut(segment: Segment, turns: Sequence[Turn]) -> list[tuple[int, Segment]]:
    words = segment.words or []
    if not words:
        return [(speaker_at(turns, segment.start, segment.end), segment)]
    runs: list[tuple[int, list[Word]]] = []
    for word in words:
        speaker = speaker_at(turns, word.start, word.end)
        if runs and runs[-1][0] == speaker:
            runs[-1][1].append(word)
        else:
            runs.append((speaker, [word]))
    if len(runs) == 1:
        return [(runs[0][0], segment)]
    parts = []
    for index, (speaker, run) in enumerate(runs):
        start = segment.start if index == 0 else run[0].start
        end = segment.end if index == len(runs) - 1 else run[-1].end
        text = "".join(word.word for word in run)
        part = segment.model_copy(
            update={
                "start": start,
                "end": end,
                "text": text,
                "words": run,
                "tokens": [],
                "logprobs": None,
            }
        )
        parts.append((speaker, part))
    return parts


def label(index: int) -> str:
    """``A`` … ``Z``, then ``AA``, ``AB``, …"""
    letters = string.ascii_uppercase
    return letters[index] if index < len(letters) else label(index // 26 - 1) + letters[index % 26]


def join(
    transcript: Transcript, turns: Sequence[Turn], names: Mapping[int, str] | None = None
) -> Transcript:
    """``transcript`` with each segment labelled with its speaker (cut where it changes)."""
    names = names or {}
    cut = [
        part for segment in transcript.segments for part in _cut(segment, turns or [Turn(0, 0, 0)])
    ]
    letters: dict[int, str] = {}
    segments = []
    for index, (speaker, segment) in enumerate(cut):
        if speaker not in names and speaker not in letters:
            letters[speaker] = label(len(letters))
        name = names.get(speaker) or letters[speaker]
        segments.append(segment.model_copy(update={"id": index, "speaker": name}))
    return transcript.model_copy(update={"segments": segments})
