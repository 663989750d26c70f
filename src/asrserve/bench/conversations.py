"""Conversations built from real recordings of different people, with the truth of who
spoke when: the judge of diarization in tests and in ``asrserve bench diarize``.

A conversation takes 2-6 voices of a pool (``bench/voices.py``: by default the gating
LibriSpeech speakers, one language and channel; half the conversations take voices of one
pitch group only, alike as same-gender voices are) and plays 2-4 turns of one recording of
each (as many as it has, if fewer): each speaks first once, in random order, then nobody
follows themself. A turn starts 0.2-1.2 s after the last one's speech ends or, in a
conversation ``with_overlap``, one turn change in four, 0.3-1.5 s before it ends (never
more than half of either turn). Each voice has its own level (0 to -9 dB), and pink noise
runs under the whole conversation 15-35 dB below its speech. A turn's reference is where
its recording is louder than 1/30 of its peak over 20 ms frames, pauses under half a second
bridged (``voices.speech_runs``); where two turns overlap, both speakers are in the
reference. Deterministic from a seed and the pool.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from asrserve.bench.der import Labelled
from asrserve.bench.voices import SAMPLE_RATE, Voice, gating, speech_runs

Floats = npt.NDArray[np.float32]
SPEAKERS = (2, 3, 4, 5, 6)
SPEAKER_WEIGHTS = (3, 3, 2, 1, 1)
TURNS_EACH = (2, 4)
PAUSE_S = (0.2, 1.2)
OVERLAP_S = (0.3, 1.5)
OVERLAP_SHARE = 0.25  # of turn changes, in a conversation with overlap
LEVEL_DB = (-9.0, 0.0)
SNR_DB = (15.0, 35.0)
SPEECH_RMS = 0.08  # a voice at 0 dB

__all__ = ["SAMPLE_RATE", "Conversation", "build", "build_long", "reference"]


@dataclass(frozen=True)
class Conversation:
    samples: Floats  # 16 kHz mono
    turns: list[Labelled]  # who spoke when, in time order (overlapping where they overlap)
    speakers: list[str]
    voices: tuple[Voice, ...]
    overlap_s: float  # seconds where two speak at once


def _choose(rng: random.Random, pool: Sequence[Voice], count: int) -> list[Voice]:
    usable = [v for v in pool if v.turns]
    if rng.random() < 0.5:  # voices alike: one pitch group
        group = rng.choice(sorted({v.group for v in usable}))
        alike = [v for v in usable if v.group == group]
        if len(alike) >= count:
            return rng.sample(alike, count)
    return rng.sample(usable, count)


def _order(rng: random.Random, counts: dict[str, int]) -> list[str]:
    """Who speaks each turn: each once first, then nobody twice in a row (as far as the
    turns left allow)."""
    names = list(counts)
    order = rng.sample(names, len(names))
    left = {name: count - 1 for name, count in counts.items()}
    while any(left.values()):
        choices = [n for n, c in left.items() if c and n != order[-1]] or [
            n for n, c in left.items() if c
        ]
        order.append(rng.choice(choices))
        left[order[-1]] -= 1
    return order


def _pink(rng: random.Random, length: int) -> Floats:
    white = np.random.default_rng(rng.getrandbits(32)).standard_normal(length)
    spectrum = np.fft.rfft(white)
    spectrum /= np.sqrt(np.maximum(np.arange(len(spectrum)), 1))
    noise = np.fft.irfft(spectrum, length)
    return (noise / max(float(np.sqrt(np.mean(noise**2))), 1e-12)).astype(np.float32)


def build(
    seed: int,
    pool: Sequence[Voice] | None = None,
    *,
    with_overlap: bool = False,
    speakers: int | None = None,
    voices: Sequence[str] = (),
) -> Conversation:
    """One conversation of ``pool``'s voices (the gating set's by default): those named in
    ``voices``, else ``speakers`` of them (else 2-6, fewer more often)."""
    rng = random.Random(seed)
    pool = gating() if pool is None else pool
    count = speakers or rng.choices(SPEAKERS, SPEAKER_WEIGHTS)[0]
    chosen = [v for name in voices for v in pool if v.name == name] or _choose(rng, pool, count)
    played = {v.name: list(rng.choice([r for r in v.recordings if r])) for v in chosen}
    counts = {
        name: rng.randint(min(TURNS_EACH[0], len(turns)), min(TURNS_EACH[1], len(turns)))
        for name, turns in played.items()
    }
    gains = {v.name: SPEECH_RMS * 10 ** (rng.uniform(*LEVEL_DB) / 20) for v in chosen}
    for turns in played.values():
        rng.shuffle(turns)
    pieces: list[tuple[int, Floats]] = []
    truth: list[Labelled] = []
    cursor = SAMPLE_RATE // 2
    last_length = 0
    for index, name in enumerate(_order(rng, counts)):
        clip = played[name].pop()
        clip = clip * (gains[name] / max(float(np.sqrt(np.mean(clip**2))), 1e-9))
        gap = int(rng.uniform(*PAUSE_S) * SAMPLE_RATE)
        if index and with_overlap and rng.random() < OVERLAP_SHARE:
            bound = min(OVERLAP_S[1] * SAMPLE_RATE, (min(last_length, len(clip)) // 2))
            if bound >= OVERLAP_S[0] * SAMPLE_RATE:
                gap = -int(rng.uniform(OVERLAP_S[0] * SAMPLE_RATE, bound))
        start = cursor + gap if index else cursor
        pieces.append((start, clip.astype(np.float32)))
        truth += [
            Labelled((start + a) / SAMPLE_RATE, (start + b) / SAMPLE_RATE, name)
            for a, b in speech_runs(clip)
        ]
        cursor, last_length = max(cursor, start + len(clip)), len(clip)
    samples = np.zeros(cursor + SAMPLE_RATE // 2, dtype=np.float32)
    for start, clip in pieces:
        samples[start : start + len(clip)] += clip
    speech_rms = float(np.sqrt(np.mean(np.concatenate([c for _, c in pieces]) ** 2)))
    noise = _pink(rng, len(samples)) * speech_rms * 10 ** (-rng.uniform(*SNR_DB) / 20)
    truth.sort(key=lambda t: (t.start, t.end))
    return Conversation(
        np.clip(samples + noise, -1.0, 1.0),
        truth,
        [v.name for v in chosen],
        tuple(chosen),
        _overlap_seconds(truth),
    )


def build_long(
    seed: int, seconds: float, speakers: int = 4, pool: Sequence[Voice] | None = None
) -> Conversation:
    """A conversation of ``speakers`` of ``pool``'s voices (the gating set's by default) at
    least ``seconds`` long: their turns played again and again (a long meeting, for what a
    long file costs: its truth is as :func:`build`'s, its voices each heard many times)."""
    rng = random.Random(seed)
    voices = _choose(rng, gating() if pool is None else pool, speakers)
    gains = {v.name: SPEECH_RMS * 10 ** (rng.uniform(*LEVEL_DB) / 20) for v in voices}
    pieces: list[tuple[int, Floats]] = []
    truth: list[Labelled] = []
    cursor, last = SAMPLE_RATE // 2, ""
    while cursor < seconds * SAMPLE_RATE:
        voice = rng.choice([v for v in voices if v.name != last])
        clip = rng.choice(voice.turns)
        clip = clip * (gains[voice.name] / max(float(np.sqrt(np.mean(clip**2))), 1e-9))
        start = cursor + int(rng.uniform(*PAUSE_S) * SAMPLE_RATE)
        pieces.append((start, clip.astype(np.float32)))
        truth += [
            Labelled((start + a) / SAMPLE_RATE, (start + b) / SAMPLE_RATE, voice.name)
            for a, b in speech_runs(clip)
        ]
        cursor, last = start + len(clip), voice.name
    samples = np.zeros(cursor + SAMPLE_RATE // 2, dtype=np.float32)
    for start, clip in pieces:
        samples[start : start + len(clip)] += clip
    return Conversation(
        np.clip(samples, -1.0, 1.0), truth, [v.name for v in voices], tuple(voices), 0.0
    )


def _overlap_seconds(turns: Sequence[Labelled]) -> float:
    frames = np.zeros(int(max((t.end for t in turns), default=0) * 100) + 1, dtype=np.int32)
    for turn in turns:
        frames[round(turn.start * 100) : round(turn.end * 100)] += 1
    return float((frames >= 2).sum()) / 100


def reference(voice: str, conversation: Conversation) -> Floats:
    """A known speaker's reference for ``voice`` in ``conversation``: another stretch of
    the person's speech, which no turn plays, 16 kHz mono."""
    return next(v.reference for v in conversation.voices if v.name == voice)
