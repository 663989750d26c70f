"""Real voices to build conversations from: LibriSpeech readers (one language, one channel:
the hard case), split into a tuning set and a gating set that share no speaker, and the
Debian packages' recorded voices (five people over two channels: the cross-channel case).

A :class:`Voice` is its recordings' turns (pieces of each recording, cut at a pause and
trimmed to its speech: a conversation plays turns of one recording of each voice, as a
person in a conversation is one session) and a reference: another stretch of the person's
speech that no turn plays, of 2-10 s, as a known speaker's reference is. A LibriSpeech
train-clean speaker has one utterance: its first pieces make the reference, the rest the
turns. A test-other speaker has four: the one nearest 6 s is the reference (another
recording of the person), the other three are cut into turns. The
gating speakers' recordings are in ``voices/`` (``scripts/librispeech_voices.py`` copied
them, and wrote ``voices.json``: every speaker of both sets); the tuning speakers' are read
from the folder they were copied from (``--tuning-source``), never from here.
"""

from __future__ import annotations

import json
import wave
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.audio.decode import decode

SAMPLE_RATE = 16000
VOICES = Path(__file__).parent / "voices"
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
SOUNDS = Path("/usr/share/asterisk/sounds")
DEBIAN = {
    "reader": None,  # LibriVox, 16 kHz
    "allison": "en_US_f_Allison",  # Asterisk's prompt voices, 8 kHz
    "june": "fr_CA_f_June",
    "carlo": "it_IT_m_Carlo",
    "irina": "ru_RU_f_IvrvoiceRU",
}
SPEECH_LEVEL = 1 / 30  # of a recording's peak, over 20 ms frames
BRIDGE_S = 0.5  # pauses shorter than this inside a turn are speech (the reference's rule)
CUT_PAUSE_S = 0.12  # a turn ends at a pause at least this long ...
TURN_S = (1.5, 6.0)  # ... once it is this long, and is never longer
TARGET_S = 2.5
REFERENCE_S = (2.5, 8.0)  # a one-utterance speaker's reference, from its first pieces
MAX_S = 60.0

Floats = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Voice:
    name: str
    group: str  # "low" or "high": the median pitch's side of 165 Hz
    recordings: tuple[tuple[Floats, ...], ...]  # each recording's turns: 16 kHz, trimmed
    reference: Floats  # 16 kHz, 2-10 s, played by no turn

    @property
    def turns(self) -> tuple[Floats, ...]:
        """Every turn of every recording."""
        return tuple(turn for recording in self.recordings for turn in recording)


def speech_runs(samples: Floats, bridge_s: float = BRIDGE_S) -> list[tuple[int, int]]:
    """The runs of 20 ms frames louder than SPEECH_LEVEL of the peak, as sample ranges, with
    pauses shorter than ``bridge_s`` bridged."""
    frame = SAMPLE_RATE // 50
    count = max(len(samples) // frame, 1)
    levels = np.abs(samples[: count * frame]).reshape(count, -1).max(axis=1)
    loud = np.flatnonzero(levels >= SPEECH_LEVEL * max(float(levels.max()), 1e-9)).tolist()
    runs: list[tuple[int, int]] = []
    for index in loud:
        if runs and index * frame - runs[-1][1] < bridge_s * SAMPLE_RATE:
            runs[-1] = (runs[-1][0], (index + 1) * frame)
        else:
            runs.append((index * frame, (index + 1) * frame))
    return runs


def pieces(samples: Floats) -> list[Floats]:
    """``samples`` cut at pauses of CUT_PAUSE_S into turns, each trimmed to its speech: a
    turn ends at the first such pause past TURN_S[0] once it is TARGET_S long or the next
    stretch of speech would take it past TURN_S[1] (a stretch with no such pause is one
    turn, however long). Pieces under half a second are dropped."""
    runs = speech_runs(samples, CUT_PAUSE_S)
    out: list[Floats] = []
    start: int | None = None
    for index, (a, b) in enumerate(runs):
        start = a if start is None else start
        length = (b - start) / SAMPLE_RATE
        following = runs[index + 1][1] if index + 1 < len(runs) else None
        long_enough = length >= TURN_S[0]
        too_long_next = following is not None and (following - start) / SAMPLE_RATE > TURN_S[1]
        if following is None or (long_enough and (length >= TARGET_S or too_long_next)):
            out.append(samples[start:b])
            start = None
    return [piece for piece in out if len(piece) >= SAMPLE_RATE // 2]


def _read(path: Path) -> Floats:
    samples: Floats = decode(path, MAX_S).astype(np.float32)
    return samples


def _one_utterance(name: str, group: str, path: Path) -> Voice:
    cut = pieces(_read(path))
    taken: list[Floats] = []
    while cut and sum(len(p) for p in taken) < REFERENCE_S[0] * SAMPLE_RATE:
        taken.append(cut.pop(0))
    reference = np.concatenate(taken)[: int(REFERENCE_S[1] * SAMPLE_RATE)]
    return Voice(name, group, (tuple(cut),), reference)


def _many_utterances(name: str, group: str, paths: Sequence[Path]) -> Voice:
    recordings = [_read(path) for path in paths]
    nearest = min(range(len(recordings)), key=lambda i: abs(len(recordings[i]) - 6 * SAMPLE_RATE))
    cut = tuple(tuple(pieces(r)) for i, r in enumerate(recordings) if i != nearest)
    return Voice(name, group, cut, recordings[nearest][: 10 * SAMPLE_RATE])


def _manifest() -> list[dict[str, object]]:
    speakers: list[dict[str, object]] = json.loads((VOICES / "voices.json").read_text())["speakers"]
    return speakers


def _voice(speaker: dict[str, object], root: Path) -> Voice:
    corpus, files = str(speaker["corpus"]), [str(f) for f in speaker["files"]]  # type: ignore[attr-defined]
    name, group = f"ls-{speaker['id']}", str(speaker["group"])
    paths = [root / corpus / f for f in files]
    missing = [p for p in paths if not p.is_file()]
    if missing:
        raise FileNotFoundError(f"{missing[0]} is not there (scripts/librispeech_voices.py)")
    if len(paths) == 1:
        return _one_utterance(name, group, paths[0])
    return _many_utterances(name, group, paths)


@cache
def gating() -> tuple[Voice, ...]:
    """The gating speakers (never used to choose a threshold), from ``voices/``."""
    return tuple(_voice(s, VOICES) for s in _manifest() if s["set"] == "gating")


@cache
def tuning(source: Path) -> tuple[Voice, ...]:
    """The tuning speakers, read from ``source`` (Resemblyzer's ``audio_data``)."""
    return tuple(_voice(s, source) for s in _manifest() if s["set"] == "tuning")


def _wav(path: Path) -> Floats:
    with wave.open(str(path)) as audio:
        frames, rate = audio.getnframes(), audio.getframerate()
    return _read(path) if 1.5 <= frames / rate <= 9.0 else np.zeros(0, np.float32)


@cache
def debian() -> tuple[Voice, ...]:
    """The Debian packages' five voices (one LibriVox reader at 16 kHz, four 8 kHz prompt
    voices in four languages): each recording of 1.5-9 s a turn, the first 2.5-9.5 s one
    the reference (dropped from the turns)."""
    out = []
    for name, folder in DEBIAN.items():
        paths = sorted((LIBRIVOX if folder is None else SOUNDS / folder).glob("*.wav"))
        recordings = [r for r in (_wav(p) for p in paths) if len(r)]
        trimmed = [r[runs[0][0] : runs[-1][1]] for r in recordings for runs in [speech_runs(r)]]
        first = next(i for i, r in enumerate(recordings) if 2.5 <= len(r) / SAMPLE_RATE <= 9.5)
        turns = tuple(t for i, t in enumerate(trimmed) if i != first)
        out.append(Voice(name, "debian", (turns,), recordings[first]))  # one speaker, one channel
    return tuple(out)
