"""Fakes for scheduler and store tests: an engine that records batches and can be held busy,
and a ready-made transcript."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from asrserve.engine.base import (
    NEVER,
    Capabilities,
    ChunkInput,
    Engine,
    Pause,
    RawSegment,
    RawWord,
    Settled,
    unheard,
)
from asrserve.transcript import Segment, Transcript
from asrserve.vocabulary import TranscriptionOptions

# an English-only model that takes short windows, as tiny.en on CTranslate2 does
FAKE_CAPABILITIES = Capabilities(
    languages=("en",),
    short_windows=True,
    prompts_per_window=True,
    word_timestamps=True,
    devices=("cpu",),
)


class FakeEngine(Engine):
    """Decodes a window to its duration; "detects" ``language``; can release its weights."""

    multilingual = False

    def __init__(
        self, fail_on: float | None = None, model_id: str = "fake", language: str = "en"
    ) -> None:
        self.model_id = model_id
        self.language = language
        self.batches: list[list[float]] = []  # chunk durations per batch
        self.contexts: list[str] = []  # each chunk's context text, in the order run
        self.options: list[TranscriptionOptions] = []  # each batch's options, in the order run
        self.detections: list[int] = []  # windows per detect_language call
        self.restrictions: list[tuple[str, ...]] = []  # the languages each call was among
        self.wholes = 0
        self.gate = threading.Event()
        self.entered = threading.Event()  # set when a call reaches the engine
        self.gate.set()
        self.fail_on = fail_on
        self.weights = True
        self.unloaded = threading.Event()
        self.loads = 0  # reloads after unload()

    @property
    def loaded(self) -> bool:
        return self.weights

    @property
    def capabilities(self) -> Capabilities:
        return FAKE_CAPABILITIES

    def unload(self) -> None:
        self.weights = False
        self.unloaded.set()

    def load(self) -> None:
        self.weights = True
        self.loads += 1

    def detect_language(
        self, features: Sequence[np.ndarray], among: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        self.detections.append(len(features))
        self.restrictions.append(tuple(among))
        return [(self.language, 0.9) for _ in features]

    def features(self, audio: np.ndarray, frames: int = 3000) -> np.ndarray:
        return np.zeros((80, frames), dtype=np.float32)

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        self.entered.set()
        self.gate.wait(10)
        self.batches.append([c.duration for c in chunks])
        self.contexts.extend(c.context for c in chunks)
        self.options.append(options)
        if self.fail_on is not None and any(abs(c.duration - self.fail_on) < 0.01 for c in chunks):
            raise RuntimeError("poison chunk")
        return [[segment(c)] for c in chunks]

    def transcribe(self, audio: np.ndarray, options: TranscriptionOptions) -> Transcript:
        self.entered.set()
        self.gate.wait(10)
        self.wholes += 1
        return Transcript(language="en", duration=audio.shape[0] / 16000, segments=[])


def raw_segment(
    start: float, end: float, text: str, words: list[RawWord] | None = None
) -> RawSegment:
    """A decoded segment as the engine returns it, with neutral scores."""
    return RawSegment(
        seek=0,
        start=start,
        end=end,
        text=text,
        tokens=[],
        avg_logprob=0.0,
        compression_ratio=1.0,
        no_speech_prob=0.0,
        temperature=0.0,
        words=words,
    )


def segment(chunk: ChunkInput) -> RawSegment:
    """What the fake engine decodes a chunk to: its duration as text, on the chunk's span."""
    return raw_segment(chunk.offset, chunk.offset + chunk.duration, f" {chunk.duration}")


def chunk(duration: float, offset: float = 0.0) -> ChunkInput:
    return ChunkInput(features=np.zeros((1, 1), dtype=np.float32), offset=offset, duration=duration)


def transcript() -> Transcript:
    """A one-segment transcript, for stores and output files."""
    seg = Segment(
        id=0,
        seek=0,
        start=0.0,
        end=1.0,
        text=" hi",
        tokens=[1],
        temperature=0.0,
        avg_logprob=-0.1,
        compression_ratio=1.0,
        no_speech_prob=0.0,
    )
    return Transcript(language="en", duration=1.0, segments=[seg])
