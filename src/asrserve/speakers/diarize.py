"""Who spoke when in one file: speech regions, a voice embedding per clip, one clustering
over the whole file, turns.

The speech regions come from the Silero model the transcription uses, with diarization's
own settings (``VAD``: pauses of 100 ms end a region, as a change of speaker often leaves
no longer one). The embedding passes are the costly step; ``embed`` runs them in batches
of clips with the same number of frames (a clip's statistics pooling must not see another's
padding).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from asrserve.audio.vad import SpeechDetector, VadConfig
from asrserve.speakers.campplus import DIMENSION
from asrserve.speakers.cluster import cluster
from asrserve.speakers.fbank import SAMPLE_RATE, fbank
from asrserve.speakers.turns import Span, Turn, clips, turns

VAD = VadConfig(threshold=0.5, min_speech_ms=250, min_silence_ms=100, pad_ms=30)
BATCH = 32  # clips per embedding pass

Floats = npt.NDArray[np.float32]


class Listening:
    """A file's audio as it is decoded, a block at a time: kept as 16-bit samples (2 bytes a
    sample, half a float's), its speech found as it comes."""

    def __init__(self) -> None:
        self._detector = SpeechDetector(VAD)
        self._blocks: list[npt.NDArray[np.int16]] = []

    def feed(self, block: npt.NDArray[np.int16]) -> None:
        self._blocks.append(block)
        self._detector.feed(block.astype(np.float32) / 32768.0)

    def finish(self) -> tuple[npt.NDArray[np.int16], list[Span]]:
        """The samples, and the clips to embed (in seconds)."""
        spans = _seconds(self._detector.finish())
        samples = np.concatenate(self._blocks) if self._blocks else np.zeros(0, np.int16)
        return samples, clips(spans)


def regions(samples: Floats) -> list[Span]:
    """Where ``samples`` (16 kHz) hold speech, in seconds."""
    detector = SpeechDetector(VAD)
    detector.feed(samples)
    return _seconds(detector.finish())


def _seconds(found: Sequence[Mapping[str, int]]) -> list[Span]:
    """The detector's regions (in samples) as spans in seconds."""
    return [Span(r["start"] / SAMPLE_RATE, r["end"] / SAMPLE_RATE) for r in found]


def features(samples: npt.NDArray[np.floating | np.integer], spans: Sequence[Span]) -> list[Floats]:
    """Each clip's mean-normalised filterbank (16-bit samples are scaled to floats)."""
    scale = 1 / 32768.0 if samples.dtype == np.int16 else 1.0
    return [
        fbank(
            samples[round(s.start * SAMPLE_RATE) : round(s.end * SAMPLE_RATE)] * np.float32(scale)
        )
        for s in spans
    ]


def embed(model: Callable[[Floats], Floats], banks: Sequence[Floats], batch: int = BATCH) -> Floats:
    """One embedding per filterbank, ``model`` run on batches of equal length."""
    out = np.zeros((len(banks), DIMENSION), dtype=np.float32)
    by_length: dict[int, list[int]] = {}
    for index, bank in enumerate(banks):
        by_length.setdefault(len(bank), []).append(index)
    for indices in by_length.values():
        for first in range(0, len(indices), batch):
            group = indices[first : first + batch]
            out[group] = model(np.stack([banks[i] for i in group]))
    return out


def diarize(model: Callable[[Floats], Floats], samples: Floats) -> list[Turn]:
    """The speaker turns of ``samples`` (16 kHz mono), speakers numbered from 0 in order of
    first speech."""
    spans = clips(regions(samples))
    if not spans:
        return []
    embeddings = embed(model, features(samples, spans))
    return turns(spans, cluster(embeddings).tolist())
