"""Subtitle cues people can read: a transcript's words cut into cues of a few short lines.

Batched decoding makes paragraph-sized segments; a cue per segment is unreadable. Cues are
re-cut here from the words' timestamps. A cue grows word by word while it fits the limits
(its lines wrapped at word boundaries within ``max_line_width``, at most ``max_line_count``
lines, ``max_words_per_cue`` words and ``max_cue_seconds`` seconds); when the next word does
not fit, the cue ends after the last sentence end (``.?!``) in it, else at its longest pause
between words (of at least :data:`MIN_PAUSE_S`), else after its last comma, else full. A pause
of :data:`FORCED_PAUSE_S` or more always ends a cue, so that no text shows long before it is
said. A single word longer than a line is a line of its own (a word is never split), and one
lasting longer than ``max_cue_seconds`` is shown for ``max_cue_seconds``. Segments without
words (a job transcribed without word timestamps) are split into words at whitespace, each
timed by its share of the segment's characters. Cue starts never go back, a cue ends before
the next starts, and all end within the audio.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from asrserve.transcript import Segment, Transcript

MIN_PAUSE_S = 0.3
"""A shorter gap between two words is not a pause to break at."""
FORCED_PAUSE_S = 2.0
"""A gap this long between two words always ends a cue."""
KARAOKE_MAX_WORDS = 24
"""Words in a ``highlight_words`` cue at most: such a cue is written once per word, so its
size grows with the square of its words (with the widest limits, a cue of 300 words made
~3 KB of output per word of the transcript)."""
SENTENCE_END = frozenset(".?!。？！")
CLAUSE_END = frozenset(",;:，、；：")
_CLOSERS = "\"')]}»”’"
_PIECES = re.compile(r"\s*\S+")

LIMITS: dict[str, tuple[float, float]] = {
    "max_line_width": (10, 200),
    "max_line_count": (1, 10),
    "max_words_per_cue": (1, 100),
    "max_cue_seconds": (1.0, 60.0),
}
"""Each cue-shaping limit's bounds (inclusive), as requests are checked against them."""


@dataclass(frozen=True)
class CueLimits:
    """How cues are cut. The defaults: at most two lines of 42 characters (the common
    broadcast guideline), 7 seconds a cue, no limit on words."""

    max_line_width: int = 42
    max_line_count: int = 2
    max_words_per_cue: int | None = None
    max_cue_seconds: float = 7.0
    highlight_words: bool = False  # karaoke: a cue per word, the word spoken underlined


@dataclass(frozen=True)
class TimedWord:
    text: str  # as in the transcript's text: its leading space, if it has one
    start: float
    end: float
    speaker: str | None = None  # its segment's (diarized transcripts)

    @property
    def shown(self) -> str:
        """The word with any leading whitespace as one space (none for scripts without)."""
        return (" " if self.text[:1].isspace() else "") + self.text.strip()


@dataclass(frozen=True)
class Cue:
    start: float
    end: float
    lines: tuple[tuple[TimedWord, ...], ...]

    @property
    def words(self) -> list[TimedWord]:
        return [word for line in self.lines for word in line]

    def text(self, highlight: TimedWord | None = None) -> str:
        """The cue's lines, one a line; ``highlight``'s word wrapped in ``<u>...</u>``."""
        return "\n".join(_line_text(line, highlight) for line in self.lines)


def _line_text(line: Sequence[TimedWord], highlight: TimedWord | None = None) -> str:
    parts = []
    for word in line:
        shown = word.shown
        if word is highlight:
            bare = shown.lstrip()
            shown = f"{shown[: len(shown) - len(bare)]}<u>{bare}</u>"
        parts.append(shown)
    return "".join(parts).strip()


def wrap(words: Sequence[TimedWord], width: int) -> list[list[TimedWord]]:
    """Words into lines of at most ``width`` characters, broken only between words; a word
    longer than a line is a line of its own."""
    lines: list[list[TimedWord]] = []
    size = 0
    for word in words:
        if lines and size + len(word.shown) <= width:
            lines[-1].append(word)
            size += len(word.shown)
        else:
            lines.append([word])
            size = len(word.shown.lstrip())
    return lines


def balance(words: Sequence[TimedWord], width: int) -> list[list[TimedWord]]:
    """Words into as few lines as :func:`wrap` makes, as even as they can be: wrapped at the
    narrowest width that needs no more lines (the longest line as short as it can be)."""
    count = len(wrap(words, width))
    low, high = 1, width
    while low < high:
        middle = (low + high) // 2
        if len(wrap(words, middle)) <= count:
            high = middle
        else:
            low = middle + 1
    return wrap(words, low)


def timed_words(transcript: Transcript) -> list[TimedWord]:
    """Every word of the transcript, in order: a segment's own words, or its text split at
    whitespace with times interpolated by character share when it has none."""
    words: list[TimedWord] = []
    for segment in transcript.segments:
        given = [TimedWord(w.word, w.start, w.end, segment.speaker) for w in segment.words or ()]
        words.extend(given if given else _interpolated(segment))
    return [word for word in words if word.text.strip()]


def _interpolated(segment: Segment) -> list[TimedWord]:
    pieces = _PIECES.findall(segment.text)
    total = sum(len(piece.strip()) for piece in pieces)
    span = max(0.0, segment.end - segment.start)
    words, done = [], 0
    for piece in pieces:
        start = segment.start + span * done / total
        done += len(piece.strip())
        end = segment.start + span * done / total
        words.append(TimedWord(piece, start, end, segment.speaker))
    return words


def cues(transcript: Transcript, limits: CueLimits) -> list[Cue]:
    """The transcript's words cut into cues within ``limits`` (see the module's doc)."""
    words = timed_words(transcript)
    groups: list[list[TimedWord]] = []
    first = 0
    while first < len(words):
        last = _fill(words, first, limits)
        if last + 1 < len(words) and not _forced(words, last):
            last = _best_break(words, first, last)
        groups.append(words[first : last + 1])
        first = last + 1
    return _timeline(groups, limits, transcript.duration)


def _fill(words: Sequence[TimedWord], first: int, limits: CueLimits) -> int:
    """The last word of the longest cue from ``first`` within the limits (at least one word).
    Its lines are wrapped as :func:`wrap` does, a word at a time. A karaoke cue is written
    once for each of its words: it holds at most :data:`KARAOKE_MAX_WORDS`."""
    width, most = limits.max_line_width, limits.max_words_per_cue
    if limits.highlight_words:
        most = min(most or KARAOKE_MAX_WORDS, KARAOKE_MAX_WORDS)
    lines, line = 1, len(words[first].shown.lstrip())
    last = first
    while last + 1 < len(words) and not _forced(words, last):
        word = words[last + 1]
        if most is not None and last + 2 - first > most:
            break
        if word.end - words[first].start > limits.max_cue_seconds:
            break
        if line + len(word.shown) <= width:
            line += len(word.shown)
        else:
            lines, line = lines + 1, len(word.shown.lstrip())
        if lines > limits.max_line_count:
            break
        last += 1
    return last


def _gap(words: Sequence[TimedWord], index: int) -> float:
    """The pause after word ``index`` (0 after the last)."""
    if index + 1 >= len(words):
        return 0.0
    return words[index + 1].start - words[index].end


def _forced(words: Sequence[TimedWord], index: int) -> bool:
    """A cue must end after word ``index``: a long pause follows, or another speaker."""
    if index + 1 < len(words) and words[index + 1].speaker != words[index].speaker:
        return True
    return _gap(words, index) >= FORCED_PAUSE_S


def _ends_with(word: TimedWord, marks: frozenset[str]) -> bool:
    text = word.text.strip().rstrip(_CLOSERS)
    return bool(text) and text[-1] in marks


def _best_break(words: Sequence[TimedWord], first: int, last: int) -> int:
    """Where a full cue from ``first`` to ``last`` ends best: after its last sentence end,
    else at its longest pause, else after its last comma, else at ``last``."""
    span = range(first, last + 1)
    sentence = [i for i in span if _ends_with(words[i], SENTENCE_END)]
    if sentence:
        return sentence[-1]
    pause = max(span, key=lambda i: (_gap(words, i), i))
    if _gap(words, pause) >= MIN_PAUSE_S:
        return pause
    clause = [i for i in span if _ends_with(words[i], CLAUSE_END)]
    return clause[-1] if clause else last


def _timeline(
    groups: Sequence[Sequence[TimedWord]], limits: CueLimits, duration: float
) -> list[Cue]:
    """Cues with times that never go back, end before the next cue starts, last at most
    ``max_cue_seconds`` and end within the audio."""
    starts: list[float] = []
    for group in groups:
        start = min(max(group[0].start, starts[-1] if starts else 0.0), duration)
        starts.append(max(0.0, start))
    out = []
    for index, group in enumerate(groups):
        start = starts[index]
        end = min(max(w.end for w in group), start + limits.max_cue_seconds, duration)
        if index + 1 < len(groups):
            end = min(end, starts[index + 1])
        lines = balance(group, limits.max_line_width)
        out.append(Cue(start, max(start, end), tuple(tuple(line) for line in lines)))
    return out


class TimedText(NamedTuple):
    start: float
    end: float
    text: str
    speaker: str | None  # who says it (a cue never holds two speakers)


def timed_texts(transcript: Transcript, limits: CueLimits) -> list[TimedText]:
    """Each cue to write; with ``highlight_words``, a cue for each word's time with that
    word underlined, and the cue's text plain in the gaps between (as Whisper's and
    whisperX's subtitle writers make them)."""
    out: list[TimedText] = []
    for cue in cues(transcript, limits):
        speaker = cue.words[0].speaker
        if not limits.highlight_words:
            out.append(TimedText(cue.start, cue.end, cue.text(), speaker))
            continue
        shown = cue.start
        for word in cue.words:
            start = min(max(word.start, shown), cue.end)
            end = min(max(word.end, start), cue.end)
            if start > shown:
                out.append(TimedText(shown, start, cue.text(), speaker))
            out.append(TimedText(start, end, cue.text(highlight=word), speaker))
            shown = end
        if shown < cue.end:
            out.append(TimedText(shown, cue.end, cue.text(), speaker))
    return out
