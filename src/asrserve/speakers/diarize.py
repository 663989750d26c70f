"""Who spoke when in one file: speech regions, overlapped speech, a voice embedding per
clip of one voice, one clustering over the whole file, turns.

The speech regions come from the Silero model the transcription uses, with diarization's
own settings (``VAD``: pauses of 100 ms end a region, as a change of speaker often leaves
no longer one); the overlaps from the segmentation model, 10 s at a time (``overlap.py``).
The embedding passes are the costly step; ``embed`` runs them in batches of clips with the
same number of frames (a clip's statistics pooling must not see another's padding).
:func:`diarize` is the whole of it in one call (the bench and the tests); the service runs
the same steps through the scheduler (``inference/diarizing.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

from asrserve.audio.pcm import Pcm, Samples, read
from asrserve.audio.vad import SpeechDetector, VadConfig
from asrserve.speakers.campplus import DIMENSION
from asrserve.speakers.cluster import Labels, cluster
from asrserve.speakers.fbank import SAMPLE_RATE, fbank
from asrserve.speakers.models import SpeakerModel
from asrserve.speakers.overlap import chunk, chunk_starts, overlaps, with_overlaps, without
from asrserve.speakers.turns import Span, Turn, clips, turns

VAD = VadConfig(threshold=0.5, min_speech_ms=250, min_silence_ms=100, pad_ms=30)
BATCH = 32  # clips per embedding pass
SEGMENT_BATCH = 16  # chunks per segmentation pass

Floats = npt.NDArray[np.float32]


class Listening:
    """A file's audio as it is decoded, a block at a time: kept as 16-bit samples, spilled
    to a file of ``folder`` past a few minutes (``audio/pcm.py``: a diarization's memory
    does not grow with its file's length), its speech found as it comes."""

    def __init__(self, folder: Path | None) -> None:
        self._detector = SpeechDetector(VAD)
        self._pcm = Pcm(folder)

    def feed(self, block: npt.NDArray[np.int16]) -> None:
        self._pcm.append(block)
        self._detector.feed(block.astype(np.float32) / 32768.0)

    def finish(self) -> tuple[Pcm, list[Span]]:
        """The samples (the caller closes them), and the regions of speech (in seconds)."""
        return self._pcm, _seconds(self._detector.finish())


def regions(samples: Floats) -> list[Span]:
    """Where ``samples`` (16 kHz) hold speech, in seconds."""
    detector = SpeechDetector(VAD)
    detector.feed(samples)
    return _seconds(detector.finish())


def _seconds(found: Sequence[Mapping[str, int]]) -> list[Span]:
    """The detector's regions (in samples) as spans in seconds."""
    return [Span(r["start"] / SAMPLE_RATE, r["end"] / SAMPLE_RATE) for r in found]


def features(samples: Samples, spans: Sequence[Span]) -> list[Floats]:
    """Each clip's mean-normalised filterbank."""
    return [
        fbank(read(samples, round(s.start * SAMPLE_RATE), round(s.end * SAMPLE_RATE)))
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


@dataclass(frozen=True)
class Diarized:
    """A file's turns, and the clips, embeddings and labels they were found from."""

    turns: list[Turn]
    spans: list[Span]
    embeddings: Floats
    labels: Labels


def diarize(
    model: SpeakerModel, samples: Floats, min_speakers: int = 1, max_speakers: int = 15
) -> Diarized:
    """The speaker turns of ``samples`` (16 kHz mono), speakers numbered from 0 in order of
    first speech; where two speak at once, both have a turn."""
    starts = chunk_starts(len(samples))
    activity = [
        model.segment(np.stack([chunk(samples, s) for s in starts[first : first + SEGMENT_BATCH]]))
        for first in range(0, len(starts), SEGMENT_BATCH)
    ]
    both = overlaps(starts, list(np.concatenate(activity)))
    spans = clips(without(regions(samples), both))
    if not spans:
        return Diarized([], [], np.zeros((0, model.dimension), np.float32), np.zeros(0, np.int64))
    embeddings = embed(model.embed, features(samples, spans))
    labels = cluster(embeddings, min_speakers, max_speakers)
    return Diarized(with_overlaps(turns(spans, labels.tolist()), both), spans, embeddings, labels)
