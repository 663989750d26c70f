"""Subtitles as the service writes them (SRT, WebVTT), parsed strictly, and the checks that
a timeline of segments, words or cues is well formed within its audio."""

from __future__ import annotations

import re
from dataclasses import dataclass

TOLERANCE_S = 0.05


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    text: str  # the lines joined by a space
    lines: tuple[str, ...] = ()


SRT_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2}),(\d{3}) --> (\d{2}):(\d{2}):(\d{2}),(\d{3})$")
VTT_TIME = re.compile(r"^(\d{2}):(\d{2}):(\d{2})\.(\d{3}) --> (\d{2}):(\d{2}):(\d{2})\.(\d{3})$")


def _seconds(parts: tuple[str, ...]) -> float:
    hours, minutes, secs, millis = (int(p) for p in parts)
    return hours * 3600 + minutes * 60 + secs + millis / 1000


def _timing(line: str, pattern: re.Pattern[str]) -> tuple[float, float]:
    match = pattern.match(line)
    assert match is not None, f"bad timing line {line!r}"
    groups = match.groups()
    return _seconds(groups[:4]), _seconds(groups[4:])


def _blocks(text: str) -> list[list[str]]:
    return [b.strip("\n").split("\n") for b in re.split(r"\n\s*\n", text.strip()) if b.strip()]


def parse_srt(text: str) -> list[Cue]:
    cues = []
    for number, block in enumerate(_blocks(text), start=1):
        assert len(block) >= 3, f"short SRT block {block!r}"
        assert block[0].strip() == str(number), f"SRT index {block[0]!r}, expected {number}"
        start, end = _timing(block[1], SRT_TIME)
        cues.append(Cue(start, end, " ".join(block[2:]).strip(), tuple(block[2:])))
    return cues


def parse_vtt(text: str) -> list[Cue]:
    blocks = _blocks(text)
    assert blocks and blocks[0][0] == "WEBVTT", f"no WEBVTT header: {text[:40]!r}"
    cues = []
    for block in blocks[1:]:
        lines = block[1:] if "-->" not in block[0] else block  # optional cue identifier
        assert len(lines) >= 2, f"short VTT block {block!r}"
        start, end = _timing(lines[0], VTT_TIME)
        cues.append(Cue(start, end, " ".join(lines[1:]).strip(), tuple(lines[1:])))
    return cues


def check_timeline(spans: list[tuple[float, float]], duration: float) -> None:
    """Starts never go back, no span ends before it starts, all within the audio."""
    assert spans, "no timed spans"
    previous = 0.0
    for start, end in spans:
        assert start >= 0.0 and start >= previous - 1e-9, (start, previous)
        assert end >= start, (start, end)
        assert end <= duration + TOLERANCE_S, (end, duration)
        previous = start


def check_cues(cues: list[Cue], duration: float) -> None:
    check_timeline([(c.start, c.end) for c in cues], duration)
    assert all(c.text for c in cues), cues
