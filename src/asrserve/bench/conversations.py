"""Conversations built from real recordings of different people, with the truth of who
spoke when: the judge of diarization in tests and in ``asrserve bench diarize``.

The voices are five people recorded in Debian packages: the LibriVox reader of
``pocketsphinx-testdata`` (16 kHz) and Asterisk's prompt voices Allison (English), June
(French), Carlo (Italian) and the Russian prompt voice (8 kHz, brought to 16 kHz). A
conversation takes 2–4 of them and 8–14 turns, each one recording, speakers changing at
random (each speaks first once, in random order; then nobody follows themself); turns are
apart by pauses of 0.2–1.2 s or, one time in eight, overlap by up to 0.4 s; each voice has
its own level (0.35–1.0 of full scale). A turn's reference is where its recording is
louder than 1/30 of its peak, over 20 ms frames, pauses of under ``BRIDGE_S`` bridged: the
silence a recording starts and ends with, or pauses within it, are not counted as speech.
Deterministic from a seed.
"""

from __future__ import annotations

import random
import wave
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.bench.der import Labelled

SAMPLE_RATE = 16000
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
SOUNDS = Path("/usr/share/asterisk/sounds")
VOICES = {
    "reader": None,  # LibriVox
    "allison": "en_US_f_Allison",
    "june": "fr_CA_f_June",
    "carlo": "it_IT_m_Carlo",
    "irina": "ru_RU_f_IvrvoiceRU",
}
MIN_S, MAX_S = 1.5, 9.0  # recordings used as turns
SPEECH_LEVEL = 1 / 30
BRIDGE_S = 0.5
Floats = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Conversation:
    samples: Floats  # 16 kHz mono
    turns: list[Labelled]  # who spoke when, in time order
    speakers: list[str]
    sources: list[Path]  # the recording each turn plays, in order


def _read(path: Path) -> Floats:
    with wave.open(str(path)) as audio:
        rate = audio.getframerate()
        pcm = np.frombuffer(audio.readframes(audio.getnframes()), dtype=np.int16)
        if audio.getnchannels() > 1:
            pcm = pcm.reshape(-1, audio.getnchannels())[:, 0]
    samples = pcm.astype(np.float32) / 32768.0
    if rate != SAMPLE_RATE:
        times = np.arange(round(len(samples) * SAMPLE_RATE / rate)) / SAMPLE_RATE
        samples = np.interp(times, np.arange(len(samples)) / rate, samples).astype(np.float32)
    return samples


@cache
def recordings(voice: str) -> tuple[Path, ...]:
    """The recordings of ``voice`` between MIN_S and MAX_S long, sorted by name."""
    folder = VOICES[voice]
    paths = sorted((LIBRIVOX if folder is None else SOUNDS / folder).glob("*.wav"))
    out = []
    for path in paths:
        with wave.open(str(path)) as audio:
            if MIN_S <= audio.getnframes() / audio.getframerate() <= MAX_S:
                out.append(path)
    return tuple(out)


def speech_runs(samples: Floats) -> list[tuple[int, int]]:
    """The runs of 20 ms frames louder than SPEECH_LEVEL of the peak, as sample ranges, with
    pauses shorter than BRIDGE_S bridged."""
    frame = SAMPLE_RATE // 50
    count = max(len(samples) // frame, 1)
    levels = np.abs(samples[: count * frame]).reshape(count, -1).max(axis=1)
    loud = np.flatnonzero(levels >= SPEECH_LEVEL * max(float(levels.max()), 1e-9)).tolist()
    runs: list[tuple[int, int]] = []
    for index in loud:
        if runs and index * frame - runs[-1][1] < BRIDGE_S * SAMPLE_RATE:
            runs[-1] = (runs[-1][0], (index + 1) * frame)
        else:
            runs.append((index * frame, (index + 1) * frame))
    return runs


def build(seed: int, voices: list[str] | None = None) -> Conversation:
    """One conversation; ``voices`` picks its speakers (else 2–4 at random)."""
    rng = random.Random(seed)
    speakers = voices or rng.sample(sorted(VOICES), rng.randint(2, 4))
    levels = {voice: rng.uniform(0.35, 1.0) for voice in speakers}
    order = rng.sample(speakers, len(speakers))
    pieces: list[tuple[int, Floats]] = []
    turns: list[Labelled] = []
    sources: list[Path] = []
    cursor = int(0.5 * SAMPLE_RATE)
    for index in range(rng.randint(8, 14)):
        if index >= len(order):
            order.append(rng.choice([v for v in speakers if v != order[-1]]))
        voice = order[index]
        sources.append(rng.choice(recordings(voice)))
        clip = _read(sources[-1])
        runs = speech_runs(clip)
        clip = clip[runs[0][0] : runs[-1][1]]
        clip = clip * (levels[voice] / max(float(np.abs(clip).max()), 1e-9))
        if index and rng.random() < 1 / 8:
            cursor -= int(rng.uniform(0.1, 0.4) * SAMPLE_RATE)
        pieces.append((cursor, clip.astype(np.float32)))
        offset = cursor - runs[0][0]
        turns += [
            Labelled((offset + a) / SAMPLE_RATE, (offset + b) / SAMPLE_RATE, voice) for a, b in runs
        ]
        cursor += len(clip) + int(rng.uniform(0.2, 1.2) * SAMPLE_RATE)
    samples = np.zeros(cursor + SAMPLE_RATE // 2, dtype=np.float32)
    for start, clip in pieces:
        samples[start : start + len(clip)] += clip
    return Conversation(np.clip(samples, -1.0, 1.0), turns, speakers, sources)


def reference(voice: str, conversation: Conversation) -> Floats:
    """A known speaker's reference for ``voice`` in ``conversation``: the first of its
    recordings of 2.5–9.5 s that the conversation does not play (another recording of the
    same person), 16 kHz mono."""
    return next(
        samples
        for path in recordings(voice)
        if path not in conversation.sources
        for samples in [_read(path)]
        if 2.5 <= len(samples) / SAMPLE_RATE <= 9.5
    )
