"""Whisper's temperature fallback, as rules on one window's decodes (engine-neutral).

A window is decoded at temperature 0 first; a decode that fails the thresholds is tried
again at the next temperature of :data:`TEMPERATURES` (OpenAI's ``temperature=0``: "the
model will use log probability to automatically increase the temperature until certain
thresholds are hit"; faster-whisper's defaults). A decode fails when its text compresses too
well (over 2.4) or its average log probability is below -1.0 (faster-whisper's rules), or,
by asrserve's own loop rules, repeats a phrase or ran to its token limit — unless its
no-speech probability says the window is silence. When every try fails, the one kept is the
best by Whisper's rule: the highest average log probability among the tries that do not
loop, else among all.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from asrserve.engine.base import NEVER, ChunkInput, Pause, RawSegment, Settled, unheard

TEMPERATURES = (0.0, 0.2, 0.4, 0.6, 0.8, 1.0)
PROMPT_RESET_TEMPERATURE = 0.5  # past it, a try is not conditioned on the text before it
BEST_OF = 5  # samples drawn per try above temperature 0, the best kept
NO_SPEECH_THRESHOLD = 0.6
LOG_PROB_THRESHOLD = -1.0
COMPRESSION_RATIO_THRESHOLD = 2.4
# asrserve's own loop rules, beyond faster-whisper's: a sentence of this many words or more
# said twice in a row, or a phrase of as many words said twice back to back, is a loop
# ("which are an exact imitation, which are an exact imitation, ..."); so is a shorter
# phrase of two or more words said four times. People repeat short phrases ("I know, I
# know, I know", "Thank you. Thank you.") where Whisper's loops of them run on.
TWICE_WORDS = 4
SHORT_WORDS = 2
SHORT_COPIES = 4
LONGEST_PHRASE = 24  # longer repeats compress well enough for the ratio to catch them


def temperatures(requested: float, ladder: tuple[float, ...] = TEMPERATURES) -> tuple[float, ...]:
    """The temperatures a window may be tried at: the fallback ladder for 0 (the default),
    else the one asked for (OpenAI's meaning: sample at it, no fallback)."""
    return ladder if requested == 0.0 else (requested,)


def silent(no_speech_prob: float, avg_logprob: float) -> bool:
    """Whisper's silence test: the model thinks the window holds no speech, and what it
    wrote is unlikely."""
    return no_speech_prob > NO_SPEECH_THRESHOLD and avg_logprob < LOG_PROB_THRESHOLD


def compression_ratio(text: str) -> float:
    from faster_whisper.transcribe import get_compression_ratio

    return float(get_compression_ratio(text)) if text else 0.0


def _words(text: str) -> list[str]:
    return "".join(c for c in text.lower() if c.isalnum() or c.isspace()).split()


def repeats_phrase(text: str) -> bool:
    """The text says one sentence of :data:`TWICE_WORDS` or more words twice in a row, or
    repeats a phrase back to back (:data:`TWICE_WORDS` or more words twice,
    :data:`SHORT_WORDS` or more :data:`SHORT_COPIES` times)."""
    sentences = [_words(s) for s in re.split(r"[.!?。！？]+", text) if _words(s)]
    if any(a == b and len(a) >= TWICE_WORDS for a, b in itertools.pairwise(sentences)):
        return True
    words = _words(text)
    for size in range(SHORT_WORDS, min(LONGEST_PHRASE, len(words) // 2) + 1):
        copies = 2 if size >= TWICE_WORDS else SHORT_COPIES
        for start in range(len(words) - size * copies + 1):
            phrase = words[start : start + size]
            if all(
                words[start + k * size : start + (k + 1) * size] == phrase for k in range(1, copies)
            ):
                return True
    return False


@dataclass(frozen=True)
class Attempt:
    """One decode of one window at one temperature, with the scores Whisper judges it by."""

    segments: list[RawSegment]
    temperature: float
    truncated: bool = False  # ran to its token limit without finishing

    @property
    def text(self) -> str:
        return "".join(segment.text for segment in self.segments).strip()

    @property
    def avg_logprob(self) -> float:
        """The decode's average log probability (its passes weighted by their tokens)."""
        weights = [max(len(s.tokens), 1) for s in self.segments]
        if not weights:
            return 0.0
        total = sum(s.avg_logprob * w for s, w in zip(self.segments, weights, strict=True))
        return total / sum(weights)

    @property
    def compression_ratio(self) -> float:
        return compression_ratio(self.text)

    @property
    def no_speech_prob(self) -> float:
        return self.segments[0].no_speech_prob if self.segments else 0.0

    @property
    def loops(self) -> bool:
        """Repetitive text: compresses too well, repeats a phrase, or never stopped."""
        return (
            self.truncated
            or self.compression_ratio > COMPRESSION_RATIO_THRESHOLD
            or repeats_phrase(self.text)
        )

    @property
    def failed(self) -> bool:
        """Worth another try at the next temperature."""
        if not self.segments:
            return False
        if silent(self.no_speech_prob, self.avg_logprob):
            return False
        return self.loops or self.avg_logprob < LOG_PROB_THRESHOLD

    def scored(self) -> list[RawSegment]:
        """The segments, each carrying the decode's temperature and scores, as OpenAI's
        ``verbose_json`` reports the choice a window ended at."""
        logprob, ratio = self.avg_logprob, self.compression_ratio
        return [
            replace(s, temperature=self.temperature, avg_logprob=logprob, compression_ratio=ratio)
            for s in self.segments
        ]


def best(attempts: Sequence[Attempt]) -> Attempt:
    """The try kept: the first that passes, else Whisper's best of them all."""
    for attempt in attempts:
        if not attempt.failed:
            return attempt
    candidates = [a for a in attempts if not a.loops] or list(attempts)
    return max(candidates, key=lambda a: a.avg_logprob)


Decode = Callable[[list[ChunkInput], float], list[Attempt]]


@dataclass
class FallbackCounts:
    """What the fallback did on one replica: windows decoded, windows decoded more than
    once, and decodes at each temperature (a window's tries on a short and on the full
    window at one temperature count twice there)."""

    windows: int = 0
    retried: int = 0
    decodes: dict[float, int] = field(default_factory=dict)

    def add(self, other: FallbackCounts) -> None:
        self.windows += other.windows
        self.retried += other.retried
        for temperature, count in other.decodes.items():
            self.decodes[temperature] = self.decodes.get(temperature, 0) + count


def decode_all(
    chunks: Sequence[ChunkInput],
    ladder: Sequence[float],
    decode: Decode,
    widen: Callable[[ChunkInput], ChunkInput | None],
    counts: FallbackCounts | None = None,
    settled: Settled = unheard,
    pause: Pause = NEVER,
) -> list[list[RawSegment]]:
    """Every chunk decoded with the fallback: all at ``ladder[0]`` in one ``decode`` call;
    then the chunks whose try failed, and only those, together at the next temperature,
    until each passes or the ladder ends (the best try is kept). A failed chunk that
    ``widen`` can put on a longer window (a short one on the full 30 s) is first tried
    again at the same temperature there: on a short window Whisper sometimes loops on its
    first sentence. A chunk that asks for no rescue (a live interim) gets one try, and comes
    back without segments if it loops. ``counts`` adds up what it did; ``settled`` hears
    each chunk's result once its tries are over, before the slower ones' end.

    Between passes, ``pause`` may say the device is wanted: each chunk still being tried
    then goes to ``pause.keep`` as a chunk that resumes at its next rung with its tries so
    far (a chunk's ``rung`` and ``tries``, where this call starts it), and comes back empty."""
    counts = FallbackCounts() if counts is None else counts
    tries: list[list[Attempt]] = [_earlier(chunk) for chunk in chunks]
    results: list[list[RawSegment]] = [[] for _ in chunks]
    windows = list(chunks)
    step = {index: chunk.rung for index, chunk in enumerate(chunks)}  # its next rung
    done: list[int] = []  # the chunks whose tries are over
    ran = False
    while step:
        if ran and pause.due():
            for index, rung in step.items():
                pause.keep(index, replace(windows[index], rung=rung, tries=tuple(tries[index])))
            break
        rung = min(step.values())
        todo = [index for index, at in step.items() if at == rung]
        decoded = decode([windows[i] for i in todo], ladder[rung])
        counts.decodes[ladder[rung]] = counts.decodes.get(ladder[rung], 0) + len(todo)
        for index, attempt in zip(todo, decoded, strict=True):
            tries[index].append(attempt)
            del step[index]
            if attempt.failed and chunks[index].rescue_loops:
                wider = widen(windows[index])
                if wider is not None:
                    windows[index] = wider
                    step[index] = rung
                elif rung + 1 < len(ladder):
                    step[index] = rung + 1
            if index not in step:
                done.append(index)
                results[index] = _kept(chunks[index], tries[index])
                if step:  # others go on: this one need not wait for them
                    settled(index, results[index])
        ran = True  # from here on, the device may be given up between passes
    counts.windows += len(done)
    counts.retried += sum(len(tries[index]) > 1 for index in done)
    return results


def _earlier(chunk: ChunkInput) -> list[Attempt]:
    """A resumed chunk's tries so far (those of the passes before it paused)."""
    return [attempt for attempt in chunk.tries if isinstance(attempt, Attempt)]


def _kept(chunk: ChunkInput, attempts: Sequence[Attempt]) -> list[RawSegment]:
    kept = best(attempts)
    return [] if not chunk.rescue_loops and kept.loops else kept.scored()
