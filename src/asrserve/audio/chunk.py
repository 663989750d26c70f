"""Splitting a file into ≤30 s speech windows, and mapping results back to file time.

A file that fits one 30 s window is one chunk. For longer files Silero VAD (bundled with
faster-whisper, run over the stream by :mod:`asrserve.audio.vad`) finds speech; regions are
packed into windows of at most 30 s with the silence between them removed, as
faster-whisper's batched pipeline does, except the first, which closes at ``first_window_s``
(a short first window: a streamed answer's first text waits for its decode alone). A window
is a list of sample ranges, not samples. Each window's decoded timestamps live on that
speech-only timeline and are mapped back to the original file's time by :func:`restore`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from asrserve.engine.base import CHUNK_SECONDS, SAMPLING_RATE, RawSegment, segment_of
from asrserve.transcript import Segment, Transcript, Word
from asrserve.vocabulary import TranscriptionOptions


@dataclass(frozen=True)
class Span:
    """One ≤30 s window: the file's sample ranges it joins, and where it sits on the
    speech-only timeline. Its samples are read when it is about to run."""

    pieces: tuple[tuple[int, int], ...]
    offset: float  # seconds on the speech-only timeline
    duration: float


@dataclass(frozen=True)
class SpeechLayout:
    spans: list[Span]
    speech: list[dict[str, int]]  # speech regions in samples, for restoring timestamps
    duration: float


def fixed_regions(samples: int) -> list[dict[str, int]]:
    """Without VAD: the file cut into 30 s regions."""
    step = int(CHUNK_SECONDS * SAMPLING_RATE)
    return [{"start": at, "end": min(at + step, samples)} for at in range(0, samples, step)]


def layout(
    speech: list[dict[str, int]],
    samples: int,
    *,
    short_whole: bool = True,
    first_window_s: float = CHUNK_SECONDS,
) -> SpeechLayout:
    """The windows of a file of ``samples`` samples whose speech regions are ``speech``;
    ``short_whole=False``: the regions even of a file that one window holds (a request's
    own VAD settings, ``chunking_strategy``). A file longer than one window closes its
    first window at ``first_window_s`` (:func:`pack`)."""
    duration = samples / SAMPLING_RATE
    if speech and duration <= CHUNK_SECONDS and short_whole:
        # One window holds it all: decode it as it is, pauses included, like faster-whisper's
        # sequential path (removing the pauses measurably hurt accuracy).
        whole = [{"start": 0, "end": samples}]
        return SpeechLayout([Span(((0, samples),), 0.0, duration)], whole, duration)
    if not speech:
        return SpeechLayout([], [], duration)
    first = first_window_s if duration > CHUNK_SECONDS else CHUNK_SECONDS
    return SpeechLayout(pack(speech, first), speech, duration)


def pack(speech: list[dict[str, int]], first_window_s: float = CHUNK_SECONDS) -> list[Span]:
    """Regions packed in order into windows of at most 30 s, the silence between them
    removed (as faster-whisper's ``collect_chunks`` does); the first window of at most
    ``first_window_s``, or of its first region alone where that is longer (a region is
    never split)."""
    spans: list[Span] = []
    pieces: list[tuple[int, int]] = []
    length = before = 0

    def close() -> None:
        if pieces:
            spans.append(Span(tuple(pieces), before / SAMPLING_RATE, length / SAMPLING_RATE))

    for region in speech:
        size = region["end"] - region["start"]
        if pieces and length + size > window_limit(len(spans), first_window_s):
            close()
            before += length
            pieces, length = [], 0
        pieces.append((region["start"], region["end"]))
        length += size
    close()
    return spans


def window_limit(index: int, first_window_s: float = CHUNK_SECONDS) -> int:
    """The most samples :func:`pack` puts in window ``index`` (more than one region's)."""
    return round((first_window_s if index == 0 else CHUNK_SECONDS) * SAMPLING_RATE)


def assemble(
    per_chunk: Iterable[list[RawSegment]],
    speech: list[dict[str, int]],
    duration: float,
    options: TranscriptionOptions,
    *,
    multilingual: bool,
) -> Transcript:
    """A file's transcript from its windows' decoded segments, in window order: the one
    place the served path (``Transcriber``) and the local one (``asrserve transcribe``)
    put a transcript together, so they cannot disagree on times or the default language."""
    language = options.language or ("" if multilingual else "en")
    return Transcript(
        language=language,
        duration=round(duration, 3),
        segments=restore(per_chunk, speech, duration),
        task=options.task.value,
    )


def restore(
    per_chunk: Iterable[list[RawSegment]], speech: list[dict[str, int]], duration: float
) -> list[Segment]:
    """Number the segments of a file in order and put their times back on the file's clock."""
    timeline = Timeline(speech, duration)
    return [segment for chunk in per_chunk for segment in timeline.place(chunk)]


class Timeline:
    """A file's segments numbered and put back on its clock one window at a time, in window
    order: what :func:`restore` does at once, for a job whose windows finish one by one."""

    def __init__(
        self, speech: list[dict[str, int]], duration: float, *, complete: bool = True
    ) -> None:
        self._last_start = 0.0
        self._next_id = 0
        self.update(speech, duration, complete=complete)

    def update(
        self, speech: list[dict[str, int]], duration: float, *, complete: bool = True
    ) -> None:
        """More of the file known (a file still being decoded): ``speech`` the first of its
        regions, all of them once ``complete``; ``duration`` the seconds decoded so far."""
        from faster_whisper.vad import SpeechTimestampsMap

        self._map = SpeechTimestampsMap(speech, SAMPLING_RATE) if speech else None
        self._duration = duration
        self._complete = complete

    def covers(self, raw_segments: Iterable[RawSegment]) -> bool:
        """Whether :meth:`place` puts these segments where it will once every region is
        known: a time within the regions known maps back the same, one past them not yet
        (it belongs to a region to come)."""
        if self._complete:
            return True
        if self._map is None:
            return False
        end = self._map.chunk_end_sample[-1]
        for raw in raw_segments:
            words = [time for word in raw.words or () for time in (word.start, word.end)]
            if any(int(time * SAMPLING_RATE) >= end for time in (raw.start, raw.end, *words)):
                return False
        return True

    def _clamp(self, value: float) -> float:
        return round(min(max(value, 0.0), self._duration), 3)

    def place(self, raw_segments: Iterable[RawSegment]) -> list[Segment]:
        """The next window's segments, numbered after the previous window's."""
        out: list[Segment] = []
        for raw in raw_segments:
            words, start, end = self._times(raw)
            start = max(start, self._last_start)  # keep segment starts monotonic
            end = max(end, start)
            self._last_start = start
            out.append(segment_of(raw, self._next_id, start, end, words))
            self._next_id += 1
        return out

    def _times(self, raw: RawSegment) -> tuple[list[Word] | None, float, float]:
        """The segment's words and start and end on the file's clock."""
        ts_map, clamp = self._map, self._clamp
        if ts_map is not None and raw.words:
            words: list[Word] = []
            for w in raw.words:
                index = ts_map.get_chunk_index((w.start + w.end) / 2)
                ws = clamp(ts_map.get_original_time(w.start, index))
                we = clamp(ts_map.get_original_time(w.end, index))
                words.append(
                    Word(word=w.word, start=ws, end=max(ws, we), probability=w.probability)
                )
            return words, words[0].start, words[-1].end
        if ts_map is not None:
            start = clamp(ts_map.get_original_time(raw.start))
            end = clamp(ts_map.get_original_time(raw.end, is_end=True))
            return ([] if raw.words is not None else None), start, end
        return None, clamp(raw.start), clamp(raw.end)
