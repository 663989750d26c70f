"""Whisper's decoding rules for a batch of windows, whatever engine runs the model.

An engine brings one forward pass (encode + generate over windows, each conditioned on its
own prompt tokens); these rules drive it as sequential Whisper decoding would: each window
conditioned on the text said before it (:func:`context_tokens`), a window whose first
segment is silence skipped, and a window Whisper left unfinished continued from where it
stopped (:func:`undecoded_tail`), up to :data:`MAX_PASSES` passes. The temperature fallback
over these decodes is :mod:`asrserve.engine.fallback`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from asrserve.engine.base import FRAMES_PER_SECOND, ChunkInput, RawSegment
from asrserve.engine.fallback import Attempt, silent

MIN_TAIL_S = 1.0  # undecoded audio at the end of a window worth another pass
MAX_PASSES = 4  # one pass, plus continuations of windows whisper left unfinished
FULL_WINDOW_FRAMES = 3000  # 30 s of log-mel frames
CONTEXT_TOKENS = 32  # of a window's context text, what it is conditioned on
PROMPT_TOKENS = 223  # Whisper conditions on at most this much text: half its context, less one


@dataclass(frozen=True)
class WindowOutput:
    """What one forward pass made of one window."""

    segments: list[RawSegment]
    finished: bool  # the model wrote its way to the window's end
    truncated: bool  # generation stopped at the token limit
    # Where the decode's own timestamps end its last segment (None: no segment). Word
    # alignment moves segments' ends, never this: where a window is continued does not
    # depend on whether its words were timed, so asking for words, speakers or subtitles
    # does not change which windows a request decodes.
    spoken_to: float | None


Forward = Callable[[list[ChunkInput], list[list[int]]], list[WindowOutput]]
"""One forward pass over windows, each conditioned on its prompt tokens (all one length)."""


def decode_windows(
    chunks: Sequence[ChunkInput],
    context: list[list[int]],
    forward: Forward,
    prompt_length: Callable[[list[int]], int],
    temperature: float,
) -> list[Attempt]:
    """One decode of each chunk at ``temperature``: a pass over every window, then passes
    over the tails Whisper left unfinished. ``context`` holds each chunk's prompt tokens;
    ``prompt_length`` is how many of a prompt the engine conditions on."""
    results: list[list[RawSegment]] = [[] for _ in chunks]
    truncated: set[int] = set()
    todo = list(enumerate(chunks))
    for _ in range(MAX_PASSES):
        # An engine may want one prompt length per forward pass (CTranslate2 does):
        # continuations (and windows with context) are conditioned on different amounts of
        # text, so they run grouped by that length.
        groups: dict[int, list[tuple[int, ChunkInput]]] = {}
        for item in todo:
            length = prompt_length(context[item[0]] + tokens_of(results[item[0]]))
            groups.setdefault(length, []).append(item)
        todo = [
            rest
            for group in groups.values()
            for rest in _pass(group, results, context, forward, truncated)
        ]
        if not todo:
            break
    return [
        Attempt(segments, temperature, index in truncated) for index, segments in enumerate(results)
    ]


def _pass(
    todo: list[tuple[int, ChunkInput]],
    results: list[list[RawSegment]],
    context: list[list[int]],
    forward: Forward,
    truncated: set[int],
) -> list[tuple[int, ChunkInput]]:
    prompts = [context[index] + tokens_of(results[index]) for index, _ in todo]
    outputs = forward([chunk for _, chunk in todo], prompts)
    resume = []
    for (index, chunk), output in zip(todo, outputs, strict=True):
        if output.truncated:
            truncated.add(index)
        segments = output.segments
        if segments and _silent(segments[0]):
            continue  # no speech: skip the window, as sequential decoding does
        results[index].extend(segments)
        rest = None if output.finished else undecoded_tail(chunk, output.spoken_to)
        if rest is not None:
            resume.append((index, rest))
    return resume


def context_tokens(encode: Callable[[str], Sequence[int]], text: str) -> list[int]:
    """The last :data:`CONTEXT_TOKENS` tokens of text said before a window, as Whisper
    conditions on previous text. One length for every window with that much context keeps
    them in one forward pass (each prompt length is a pass of its own)."""
    text = text.strip()
    return list(encode(" " + text))[-CONTEXT_TOKENS:] if text else []


def prompt_tokens(encode: Callable[[str], Sequence[int]], prompt: str | None) -> list[int]:
    """A request's prompt as faster-whisper's ``transcribe`` encodes it: stripped, after
    one space (its batched pipeline leaves the space out)."""
    text = (prompt or "").strip()
    return list(encode(" " + text)) if text else []


def conditioning(keywords: list[int], previous: list[int]) -> list[int]:
    """The text a window is conditioned on, after ``<|startofprev|>``: the request's keywords
    (:func:`prompt_tokens` of their joined text, as faster-whisper's ``hotwords``), then the
    last tokens of ``previous`` (the request's prompt and the text said before the window)
    that fit in :data:`PROMPT_TOKENS` with them. faster-whisper gives the previous text its
    own 223 tokens after the hotwords; here they share the 223, so that the prompt never
    takes more of the context than Whisper's, nor leaves less for the text decoded."""
    room = max(0, PROMPT_TOKENS - len(keywords))
    return [*keywords, *previous[len(previous) - min(room, len(previous)) :]]


def full_window(chunk: ChunkInput) -> ChunkInput | None:
    """The chunk's features padded to 30 s as ``features(audio)`` pads them (with zeros);
    None for a chunk on the full window already."""
    if chunk.features.shape[-1] >= FULL_WINDOW_FRAMES:
        return None
    padding = FULL_WINDOW_FRAMES - chunk.features.shape[-1]
    features = np.pad(chunk.features, ((0, 0), (0, padding)))
    return ChunkInput(
        features=features, offset=chunk.offset, duration=chunk.duration, context=chunk.context
    )


def undecoded_tail(chunk: ChunkInput, spoken_to: float | None) -> ChunkInput | None:
    """What is left of ``chunk`` after ``spoken_to`` (where its decode's last segment
    ended, on the file's clock), if that is ≥ MIN_TAIL_S.

    Whisper may stop before the end of a window and leave the rest "for the next window"
    (an unfinished last segment, which faster-whisper drops); sequential decoding seeks
    there, so a window decoded once would lose that speech. Decode it as a shifted window.
    """
    if spoken_to is None:
        return None
    done = spoken_to - chunk.offset
    if done <= 0 or chunk.duration - done < MIN_TAIL_S:
        return None
    frames = round(done * FRAMES_PER_SECOND)
    features = np.zeros_like(chunk.features)  # the same zero padding as pad_or_trim
    features[:, : features.shape[1] - frames] = chunk.features[:, frames:]
    return ChunkInput(features=features, offset=chunk.offset + done, duration=chunk.duration - done)


def stack_padded(features: list[np.ndarray]) -> np.ndarray:
    """One encoder batch: every item zero-padded to the longest window in the batch."""
    frames = max(f.shape[-1] for f in features)
    out = np.zeros((len(features), features[0].shape[0], frames), dtype=np.float32)
    for row, f in zip(out, features, strict=True):
        row[:, : f.shape[-1]] = f
    return out


def tokens_of(segments: list[RawSegment]) -> list[int]:
    return [token for segment in segments for token in segment.tokens]


def _silent(segment: RawSegment) -> bool:
    return silent(segment.no_speech_prob, segment.avg_logprob)
