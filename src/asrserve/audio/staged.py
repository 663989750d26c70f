"""A file decoded a stage at a time, so that its first windows can run before its end is read.

:func:`~asrserve.audio.features.decode_audio` reads the whole file before any window is
known: on a long file its first text waits for the decode and speech search of all of it.
:class:`StagedDecode` reads the same blocks through the same speech detector, a stage at a
time, and says after each stage which windows no later audio can change. Those are the first
windows :func:`decode_audio` finds for the whole file, the same to the sample: the detector
sees the same blocks in the same order, a speech region is final once the next one has
ended (its padding reaches halfway to it), and a window once a later final region did not
fit in it or it is full (windows are packed in order, greedily; the first to
``first_window_s``). A file of up to one window (30 s) is one
window of the whole file, known only at its end.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asrserve.audio.chunk import Span, fixed_regions, layout, pack, window_limit
from asrserve.audio.decode import stream
from asrserve.audio.errors import empty_audio
from asrserve.audio.features import VAD, DecodedAudio, pcm_inputs
from asrserve.audio.pcm import Pcm
from asrserve.audio.vad import SpeechDetector, VadConfig
from asrserve.engine.base import CHUNK_SECONDS, SAMPLING_RATE, ChunkInput, Engine


@dataclass(frozen=True)
class Known:
    """What a staged decode knows so far: the windows and speech regions no later audio
    changes (all of them once ``complete``), and the seconds decoded."""

    spans: list[Span]
    speech: list[dict[str, int]]
    duration: float
    complete: bool


class StagedDecode:
    """``path`` decoded into 16 kHz samples (spilled to ``folder`` past a few minutes) as
    :meth:`advance` asks, finding speech on the way. Its steps block: they run in the
    preprocessing pool, one at a time; :meth:`close` may come from another thread."""

    def __init__(
        self,
        path: Path,
        *,
        max_seconds: float,
        vad: bool,
        folder: Path | None = None,
        config: VadConfig = VAD,
        first_window_s: float = CHUNK_SECONDS,
    ) -> None:
        self._pcm = Pcm(folder)
        self._first_window_s = first_window_s
        self._config = config  # a request's own (chunking_strategy) splits even a short file
        self._detector = SpeechDetector(config) if vad else None
        self._blocks = stream(path, max_seconds)
        self._known = Known([], [], 0.0, complete=False)
        self._seen = -1  # regions ended when the known windows were last worked out
        self._lock = threading.Lock()
        self._busy = self._closed = False
        self.decoded: DecodedAudio | None = None  # the whole file's, once its end is read

    @property
    def known(self) -> Known:
        return self._known

    def advance(self, windows: int) -> Known:
        """Read on until ``windows`` windows are known, or to the end of the file (then
        every window is); raises :class:`AudioError` as ``stream`` does."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the staged decode is closed")
            self._busy = True
        try:
            if self.decoded is None and len(self._known.spans) < windows:
                self._read(windows)
            return self._known
        finally:
            with self._lock:
                self._busy = False
                if self._closed:
                    self._release()

    def inputs(
        self, spans: Sequence[Span], engine: Engine, windows: tuple[float, ...]
    ) -> list[ChunkInput]:
        """The model inputs of known ``spans`` (as :func:`chunk_inputs` makes them)."""
        return pcm_inputs(self._pcm, spans, engine, windows)

    def close(self) -> None:
        """Release the samples and the file; a step under way releases them when it ends."""
        with self._lock:
            self._closed = True
            if not self._busy:
                self._release()

    def _read(self, windows: int) -> None:
        for block in self._blocks:
            self._pcm.append(block)
            if self._detector is not None:
                self._detector.feed(block.astype(np.float32) / 32768.0)
            if len(self._update().spans) >= windows:
                return
        self._finish()

    def _update(self) -> Known:
        """The windows known now (worked out again only when a region has ended)."""
        samples = self._pcm.samples
        if samples <= CHUNK_SECONDS * SAMPLING_RATE:
            return self._known  # the file may yet be one window of all of it
        ended = self._detector.closed if self._detector is not None else samples // _STEP
        if ended != self._seen:
            self._seen = ended
            if self._detector is not None:
                speech = self._detector.settled()
            else:  # fixed 30 s regions: each whole one is final
                speech = [region for region in fixed_regions(samples) if _whole(region)]
            spans = pack(speech, self._first_window_s)
            if spans and _length(spans[-1]) < window_limit(len(spans) - 1, self._first_window_s):
                spans.pop()  # the last window may take more regions (a full one cannot)
            self._known = Known(spans, speech, samples / SAMPLING_RATE, complete=False)
        return self._known

    def _finish(self) -> None:
        samples = self._pcm.samples
        if samples == 0:
            raise empty_audio()
        detector = self._detector
        speech = detector.finish() if detector is not None else fixed_regions(samples)
        short_whole = self._config is VAD
        found = layout(
            speech, samples, short_whole=short_whole, first_window_s=self._first_window_s
        )
        self.decoded = DecodedAudio(self._pcm, found)
        if found.spans[: len(self._known.spans)] != self._known.spans:
            raise RuntimeError("a staged decode's early windows differ from the file's")
        self._known = Known(found.spans, found.speech, found.duration, complete=True)

    def _release(self) -> None:
        self._blocks.close()
        self._pcm.close()


_STEP = int(CHUNK_SECONDS * SAMPLING_RATE)


def _length(span: Span) -> int:
    return sum(end - start for start, end in span.pieces)


def _whole(region: dict[str, int]) -> bool:
    return region["end"] - region["start"] == _STEP
