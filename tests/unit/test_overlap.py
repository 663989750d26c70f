"""Overlapped speech from the segmentation's frames, kept out of the clips, given to the two
speakers nearest it; a speaker's turns bridged across short pauses (speakers/overlap.py)."""

from __future__ import annotations

import numpy as np
import pytest

from asrserve.speakers.overlap import (
    BRIDGE_S,
    bridged,
    chunk_starts,
    overlaps,
    with_overlaps,
    without,
)
from asrserve.speakers.segmentation import CHUNK_SAMPLES, FRAME_STEP_S, frames
from asrserve.speakers.turns import Span, Turn

FRAMES = frames(CHUNK_SAMPLES)


def chunk_of(*runs: tuple[int, int, int]) -> np.ndarray:
    """A chunk's frames: each (first frame, past the last, local speaker) speaking."""
    out = np.zeros((FRAMES, 3), dtype=bool)
    for first, last, speaker in runs:
        out[first:last, speaker] = True
    return out


def test_a_file_is_cut_into_ten_second_chunks_one_after_another() -> None:
    assert chunk_starts(0) == [0]
    assert chunk_starts(CHUNK_SAMPLES) == [0]
    assert chunk_starts(CHUNK_SAMPLES + 1) == [0, CHUNK_SAMPLES]


def test_two_voices_at_once_are_an_overlap_joined_across_a_chunks_edge() -> None:
    first = chunk_of((0, FRAMES, 0), (FRAMES - 12, FRAMES, 1))
    second = chunk_of((0, 12, 0), (0, 300, 1))
    found = overlaps([0, CHUNK_SAMPLES], [first, second])
    assert len(found) == 1
    (span,) = found
    assert span.start == pytest.approx(10.0 - 12 * FRAME_STEP_S, abs=0.05)
    assert span.end == pytest.approx(10.0 + 12 * FRAME_STEP_S, abs=0.05)


def test_overlap_shorter_than_a_tenth_of_a_second_is_none() -> None:
    blip = chunk_of((0, 100, 0), (50, 54, 1))  # 4 frames: 68 ms
    assert overlaps([0], [blip]) == []
    assert len(overlaps([0], [chunk_of((0, 100, 0), (50, 57, 1))])) == 1  # 7 frames: 118 ms


def test_clips_are_cut_from_speech_less_its_overlaps() -> None:
    speech = [Span(0.0, 5.0), Span(6.0, 9.0)]
    holes = [Span(4.0, 6.5), Span(7.0, 7.5)]
    assert without(speech, holes) == [Span(0.0, 4.0), Span(6.5, 7.0), Span(7.5, 9.0)]


def test_an_overlap_goes_to_the_two_speakers_nearest_it() -> None:
    """A turn change where B starts before A ends: the overlap is both of theirs (not C's,
    further away), and each one's turn runs through it."""
    turns = [Turn(0.0, 4.0, 0), Turn(5.0, 9.0, 1), Turn(12.0, 14.0, 2)]
    found = with_overlaps(turns, [Span(4.1, 4.9)])
    assert found == [Turn(0.0, 4.9, 0), Turn(4.1, 9.0, 1), Turn(12.0, 14.0, 2)]


def test_a_speakers_turns_are_joined_across_pauses_under_the_bridge_only() -> None:
    short, long = BRIDGE_S - 0.05, BRIDGE_S + 0.05
    turns = [Turn(0.0, 2.0, 0), Turn(2.0 + short, 3.0, 0), Turn(3.0 + long, 4.0, 0)]
    assert bridged(turns) == [Turn(0.0, 3.0, 0), Turn(3.0 + long, 4.0, 0)]
    other = [Turn(0.0, 2.0, 0), Turn(2.0 + short, 3.0, 1)]
    assert bridged(other) == other  # only one speaker's own turns are joined
