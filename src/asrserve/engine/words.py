"""Word timestamps from a window's token alignment, by Whisper's rules (engine-neutral).

Given where each text token of a window starts (``alignment.token_starts``) and how likely
it was, the tokens are grouped into words (at spaces, or at characters for the languages
written without them), each word timed from its first token's start to the next word's,
with the probability the mean of its tokens'. Then Whisper's clean-ups, as openai-whisper
and faster-whisper apply them: a word at a sentence end held to twice the median word
length, punctuation joined to its word, a first word after a pause clipped, and a segment's
first and last word reconciled with the segment's own timestamps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from asrserve.engine.base import RawWord

SENTENCE_ENDS = ".。!！?？"
PREPENDED = "\"'“¿([{-"
APPENDED = "\"'.。,，!！?？:：”)]}、"
MAX_MEDIAN_S = 0.7

SplitWords = Callable[[list[int]], tuple[list[str], list[list[int]]]]
"""The tokenizer's split of tokens (end-of-text last) into words and each word's tokens."""


@dataclass(frozen=True)
class Timed:
    """One word of a window, on the window's own clock."""

    word: str
    tokens: list[int]
    start: float
    end: float
    probability: float


def timed_words(
    text_tokens: list[int],
    starts: np.ndarray,
    probabilities: Sequence[float],
    eot: int,
    split_words: SplitWords,
) -> list[Timed]:
    """The window's words: ``starts`` holds each text token's start and then the end-of-
    text's, ``probabilities`` each text token's."""
    words, groups = split_words([*text_tokens, eot])
    if len(groups) <= 1:
        return []
    bounds = np.pad(np.cumsum([len(group) for group in groups[:-1]]), (1, 0))
    out = []
    for index, (word, group) in enumerate(zip(words, groups, strict=False)):
        if index + 1 >= len(bounds):
            break
        first, after = int(bounds[index]), int(bounds[index + 1])
        probability = float(np.mean(probabilities[first:after])) if after > first else 0.0
        out.append(Timed(word, group, float(starts[first]), float(starts[after]), probability))
    return out


def median_limits(words: list[Timed]) -> tuple[float, float]:
    """The window's median word length (at most 0.7 s) and twice it."""
    lengths = np.array([w.end - w.start for w in words])
    lengths = lengths[lengths.nonzero()]
    median = min(MAX_MEDIAN_S, float(np.median(lengths))) if len(lengths) else 0.0
    return median, median * 2


def clip_sentence_ends(words: list[Timed], longest: float) -> list[Timed]:
    """A word that is a sentence's end mark, or follows one, held to ``longest``."""
    out = list(words)
    for i in range(1, len(out)):
        if out[i].end - out[i].start <= longest:
            continue
        if out[i].word in SENTENCE_ENDS:
            out[i] = replace(out[i], end=out[i].start + longest)
        elif out[i - 1].word in SENTENCE_ENDS:
            out[i] = replace(out[i], start=out[i].end - longest)
    return out


def join_punctuation(words: list[Timed]) -> list[Timed]:
    """Opening marks joined to the word after them, closing marks to the word before (a
    run of marks all to the same word); a mark joined leaves an empty word behind."""
    out = list(words)
    into = len(out) - 1
    for i in range(len(out) - 2, -1, -1):  # opening marks, from the end
        mark = out[i]
        if mark.word.startswith(" ") and mark.word.strip() in PREPENDED:
            word = out[into]
            out[into] = replace(word, word=mark.word + word.word, tokens=mark.tokens + word.tokens)
            out[i] = replace(mark, word="", tokens=[])
        else:
            into = i
    into = 0
    for i in range(1, len(out)):  # closing marks, from the start
        word, mark = out[into], out[i]
        if not word.word.endswith(" ") and mark.word in APPENDED:
            out[into] = replace(word, word=word.word + mark.word, tokens=word.tokens + mark.tokens)
            out[i] = replace(mark, word="", tokens=[])
        else:
            into = i
    return out


@dataclass(frozen=True)
class Placed:
    """A segment's words and its times once reconciled with them."""

    start: float
    end: float
    words: list[RawWord]


def place(
    segments: Sequence[tuple[float, float, int]],
    words: list[Timed],
    offset: float,
    last_speech: float,
) -> tuple[list[Placed], float]:
    """Deal a window's words (its clock) out to its segments ((start, end, text tokens) on
    the job's clock, the window starting at ``offset``), with the clean-ups that compare a
    segment's words to its timestamps. Also the end of the last speech placed, which the
    next window's first-word rule reads."""
    median, longest = median_limits(words) if words else (0.0, 0.0)
    words = join_punctuation(clip_sentence_ends(words, longest))
    out, at = [], 0
    for start, end, token_count in segments:
        chosen, taken = [], 0
        while at < len(words) and taken < token_count:
            word = words[at]
            if word.word:
                chosen.append(
                    RawWord(
                        word.word,
                        round(offset + word.start, 2),
                        round(offset + word.end, 2),
                        word.probability,
                    )
                )
            taken += len(word.tokens)
            at += 1
        if chosen:
            chosen = _clip_after_pause(chosen, last_speech, median, longest)
            start, end, chosen = _reconcile(start, end, chosen, median)
            last_speech = end
        out.append(Placed(start, end, chosen))
    return out, last_speech


def _clip_after_pause(
    words: list[RawWord], last_speech: float, median: float, longest: float
) -> list[RawWord]:
    """The first word after a pause (4 median words of silence) held to ``longest``, and
    the second's start moved to meet it where that is long too."""
    first = words[0]
    too_long = first.end - first.start > longest or (
        len(words) > 1 and words[1].end - first.start > longest * 2
    )
    if not (first.end - last_speech > median * 4 and too_long):
        return words
    out = list(words)
    if len(out) > 1 and out[1].end - out[1].start > longest:
        boundary = max(out[1].end / 2, out[1].end - longest)
        out[0] = replace(out[0], end=boundary)
        out[1] = replace(out[1], start=boundary)
    out[0] = replace(out[0], start=max(0.0, out[0].end - longest))
    return out


def _reconcile(
    start: float, end: float, words: list[RawWord], median: float
) -> tuple[float, float, list[RawWord]]:
    """The segment's start and end from its first and last word, unless a word runs over a
    timestamp by more than half a second: then the word is cut at the timestamp."""
    out = list(words)
    first, last = out[0], out[-1]
    if start < first.end and start - 0.5 > first.start:
        out[0] = replace(first, start=max(0.0, min(first.end - median, start)))
    else:
        start = first.start
    if end > last.start and end + 0.5 < last.end:
        out[-1] = replace(out[-1], end=max(out[-1].start + median, end))
    else:
        end = out[-1].end
    return start, end, out
