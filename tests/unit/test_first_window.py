"""The first window of a file longer than one window closes at ``first_window_s``; the rest
pack to 30 s as before, and a file one window holds stays whole."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from asrserve.audio.chunk import layout, pack
from asrserve.engine.base import SAMPLING_RATE
from asrserve.settings import Settings

RATE = SAMPLING_RATE


def regions(*seconds: float, gap: float = 1.0) -> list[dict[str, int]]:
    """Speech regions of these lengths (s), ``gap`` seconds apart."""
    out, at = [], 0
    for length in seconds:
        out.append({"start": at, "end": at + round(length * RATE)})
        at += round((length + gap) * RATE)
    return out


def lengths(speech: list[dict[str, int]], first_window_s: float) -> list[list[float]]:
    """Each window's region lengths (s)."""
    return [
        [(end - start) / RATE for start, end in span.pieces]
        for span in pack(speech, first_window_s)
    ]


def test_the_first_window_closes_before_the_region_that_would_pass_first_window_s() -> None:
    speech = regions(3, 4, 2, 5, 10, 12, 9, 20)
    assert lengths(speech, 8) == [[3, 4], [2, 5, 10, 12], [9, 20]]
    assert lengths(speech, 9) == [[3, 4, 2], [5, 10, 12], [9, 20]]  # 9 s exactly fits


def test_a_first_region_longer_than_first_window_s_is_the_first_window_alone() -> None:
    assert lengths(regions(12, 1, 2, 25), 8) == [[12], [1, 2, 25]]


def test_later_windows_pack_to_30_s_as_with_first_window_s_30() -> None:
    speech = regions(3, 4, 2, 5, 10, 12, 9, 20)
    assert lengths(speech, 30) == [[3, 4, 2, 5, 10], [12, 9], [20]]
    later = speech[2:]  # after an 8 s first window the rest packs as a file of its own
    assert lengths(speech, 8)[1:] == lengths(later, 30)


def test_offsets_run_on_the_speech_only_timeline() -> None:
    spans = pack(regions(3, 4, 2, 5), 8)
    assert [(span.offset, span.duration) for span in spans] == [(0.0, 7.0), (7.0, 7.0)]


def test_a_file_one_window_holds_stays_whole_and_unsplit() -> None:
    speech = regions(3, 4, 2, 5)
    samples = 28 * RATE
    whole = layout(speech, samples, first_window_s=5)
    assert [span.pieces for span in whole.spans] == [((0, samples),)]
    # a request's own VAD (short_whole=False) splits at pauses, but only to 30 s windows
    split = layout(speech, samples, short_whole=False, first_window_s=5)
    assert [len(span.pieces) for span in split.spans] == [4]


def test_a_longer_file_gets_the_first_window_rule() -> None:
    speech = regions(3, 4, 2, 5, 10, 12)
    found = layout(speech, 45 * RATE, first_window_s=8)
    assert [span.duration for span in found.spans] == [7.0, 29.0]


def test_the_setting_is_validated_between_1_and_30_s() -> None:
    assert Settings(first_window_s=8).first_window_s == 8.0
    with pytest.raises(ValidationError, match="first_window_s"):
        Settings(first_window_s=31)
