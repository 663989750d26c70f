"""Speech detection over a stream: Silero VAD (the model faster-whisper bundles) fed a block
at a time, with memory bounded by one block however long the audio.

faster-whisper's ``get_speech_timestamps`` takes the whole file as one array and computes
every window's speech probability before it looks at any. :class:`SpeechDetector` runs the
same model over the same 512-sample windows (each with the 64 samples before it as
context, the LSTM state carried from window to window), and turns probabilities into
speech regions as they come, with the same rules (thresholds with hysteresis, minimum
silence, longest region, padding), so its regions are the same as faster-whisper's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asrserve.engine.base import SAMPLING_RATE

WINDOW = 512  # samples per speech probability (32 ms)
CONTEXT = 64  # samples of the previous window the model sees with each window
BLOCK_WINDOWS = 2048  # windows per model call (65 s of audio, 4.7 MB of input)
FEED_SAMPLES = 32 * WINDOW  # a file's speech detector runs the model once per ~1 s of audio
SHORT_SILENCE_S = 0.098  # a pause this long is where an overlong region may be cut


@dataclass(frozen=True)
class VadConfig:
    threshold: float = 0.5
    min_speech_ms: int = 0
    max_speech_s: float = float("inf")
    min_silence_ms: int = 2000
    pad_ms: int = 400

    @property
    def neg_threshold(self) -> float:
        return max(self.threshold - 0.15, 0.01)


@dataclass
class _Regions:
    """Probabilities → raw speech regions (in samples), one window at a time."""

    config: VadConfig
    found: list[dict[str, int]] = field(default_factory=list)
    index: int = 0
    triggered: bool = False
    start: int = 0
    temp_end: int = 0
    prev_end: int = 0
    next_start: int = 0

    def __post_init__(self) -> None:
        rate, c = SAMPLING_RATE, self.config
        pad = rate * c.pad_ms / 1000
        self.max_speech = rate * c.max_speech_s - WINDOW - 2 * pad
        self.min_silence = rate * c.min_silence_ms / 1000
        self.min_speech = rate * c.min_speech_ms / 1000
        self.short_silence = rate * SHORT_SILENCE_S

    def push(self, probability: float) -> None:
        at = WINDOW * self.index
        self.index += 1
        speech = probability >= self.config.threshold
        if speech and self.temp_end:
            self.temp_end = 0
            if self.next_start < self.prev_end:
                self.next_start = at
        if speech and not self.triggered:
            self.triggered, self.start = True, at
            return
        if self.triggered and at - self.start > self.max_speech and self._cut(at):
            return
        if probability < self.config.neg_threshold and self.triggered:
            self._silence(at)

    def _cut(self, at: int) -> bool:
        """An overlong region ends at its last short pause, or here; True: done with ``at``."""
        if self.prev_end:
            self.found.append({"start": self.start, "end": self.prev_end})
            restart = self.next_start >= self.prev_end
            self.triggered, self.start = restart, self.next_start
            self.prev_end = self.next_start = self.temp_end = 0
            return False
        self.found.append({"start": self.start, "end": at})
        self.prev_end = self.next_start = self.temp_end = 0
        self.triggered = False
        return True

    def _silence(self, at: int) -> None:
        if not self.temp_end:
            self.temp_end = at
        if at - self.temp_end > self.short_silence:
            self.prev_end = self.temp_end
        if at - self.temp_end < self.min_silence:
            return
        if self.temp_end - self.start > self.min_speech:
            self.found.append({"start": self.start, "end": self.temp_end})
        self.prev_end = self.next_start = self.temp_end = 0
        self.triggered = False

    def finish(self, length: int) -> list[dict[str, int]]:
        """The regions, padded, once ``length`` samples were seen."""
        regions = list(self.found)
        if self.triggered and length - self.start > self.min_speech:
            regions.append({"start": self.start, "end": length})
        return _padded(regions, length, SAMPLING_RATE * self.config.pad_ms / 1000)


def _padded(regions: list[dict[str, int]], length: int, pad: float) -> list[dict[str, int]]:
    """Each region widened by ``pad`` each side, or by half the pause to its neighbour."""
    for i, region in enumerate(regions):
        if i == 0:
            region["start"] = int(max(0, region["start"] - pad))
        if i == len(regions) - 1:
            region["end"] = int(min(length, region["end"] + pad))
            continue
        following = regions[i + 1]
        silence = following["start"] - region["end"]
        if silence < 2 * pad:
            region["end"] += int(silence // 2)
            following["start"] = int(max(0, following["start"] - silence // 2))
        else:
            region["end"] = int(min(length, region["end"] + pad))
            following["start"] = int(max(0, following["start"] - pad))
    return regions


class SileroStream:
    """Silero VAD's speech probability of each 512-sample window of 16 kHz float32 audio fed
    in blocks of any size (samples short of a window wait for the next block)."""

    def __init__(self) -> None:
        from faster_whisper.vad import get_vad_model

        self._session: Any = get_vad_model().session
        self._h = np.zeros((1, 1, 128), dtype=np.float32)
        self._c = np.zeros((1, 1, 128), dtype=np.float32)
        self._context = np.zeros(CONTEXT, dtype=np.float32)
        self._tail = np.zeros(0, dtype=np.float32)  # samples short of a whole window
        self.samples = 0

    def feed(self, audio: np.ndarray) -> np.ndarray:
        """The probabilities of the windows completed by ``audio``, in order."""
        self.samples += audio.shape[0]
        data = np.concatenate([self._tail, audio]) if self._tail.size else audio
        whole = data.shape[0] - data.shape[0] % WINDOW
        self._tail = np.array(data[whole:], dtype=np.float32)
        found = [
            self._run(data[start : min(start + BLOCK_WINDOWS * WINDOW, whole)])
            for start in range(0, whole, BLOCK_WINDOWS * WINDOW)
        ]
        return np.concatenate(found) if found else np.zeros(0, dtype=np.float32)

    def flush(self) -> np.ndarray:
        """One more window: the samples short of a window, padded with silence (a whole
        window of it if none are left, as faster-whisper pads the end of a file)."""
        probabilities = self._run(np.pad(self._tail, (0, WINDOW - self._tail.shape[0])))
        self._tail = np.zeros(0, dtype=np.float32)
        return probabilities

    def _run(self, audio: np.ndarray) -> np.ndarray:
        windows = audio.reshape(-1, WINDOW).astype(np.float32, copy=False)
        context = np.concatenate([self._context[None, :], windows[:-1, -CONTEXT:]])
        batch = np.concatenate([context, windows], axis=1)
        self._context = windows[-1, -CONTEXT:].copy()
        output, self._h, self._c = self._session.run(
            None, {"input": batch, "h": self._h, "c": self._c}
        )
        return np.asarray(output, dtype=np.float32).reshape(-1)


class SpeechDetector:
    """Feed 16 kHz float32 audio in blocks of any size; :meth:`finish` gives the regions."""

    def __init__(self, config: VadConfig) -> None:
        self._stream = SileroStream()
        self._regions = _Regions(config)
        self._held: list[np.ndarray] = []  # fed, not yet run through the model
        self._held_samples = 0

    @property
    def samples(self) -> int:
        """Samples fed so far (the model may not have seen the last ``FEED_SAMPLES``)."""
        return self._stream.samples + self._held_samples

    def feed(self, audio: np.ndarray) -> None:
        """Decoders hand blocks of a few hundred samples, and a model call costs about as much
        as dozens of windows: the blocks are held until ``FEED_SAMPLES`` are, then run at
        once (the probabilities are the same however the audio is split)."""
        self._held.append(audio)
        self._held_samples += audio.shape[0]
        if self._held_samples >= FEED_SAMPLES:
            self._run_held()

    def _run_held(self) -> None:
        if not self._held:
            return
        audio = np.concatenate(self._held) if len(self._held) > 1 else self._held[0]
        self._held, self._held_samples = [], 0
        for probability in self._stream.feed(audio):
            self._regions.push(float(probability))

    @property
    def closed(self) -> int:
        """How many speech regions have ended so far (the count only grows)."""
        return len(self._regions.found)

    def settled(self) -> list[dict[str, int]]:
        """The regions (padded, in samples) that no audio fed later can change: those
        :meth:`finish` will return first. A region's padding reaches halfway to the next
        one, so every region that has ended is settled but the last, whose end waits for
        the next region's start (or the end of the audio)."""
        ended = [dict(region) for region in self._regions.found]  # _padded changes them
        pad = SAMPLING_RATE * self._regions.config.pad_ms / 1000
        return _padded(ended, self.samples, pad)[:-1]

    def finish(self) -> list[dict[str, int]]:
        """The speech regions of all the audio fed (in samples), as faster-whisper finds them
        (which pads the audio with up to one window of silence at the end)."""
        self._run_held()
        for probability in self._stream.flush():
            self._regions.push(float(probability))
        return self._regions.finish(self.samples)
