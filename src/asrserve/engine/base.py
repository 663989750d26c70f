"""The engine seam: what the scheduler needs from a speech model, nothing more."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from asrserve.errors import NotFound
from asrserve.transcript import Segment, TokenLogprob, Transcript, Word
from asrserve.vocabulary import TranscriptionOptions

SAMPLING_RATE = 16_000
CHUNK_SECONDS = 30.0
FRAMES_PER_SECOND = 100  # log-mel frames (hop of 160 samples)


class ModelNotFoundError(NotFound):
    """The configured model directory is missing or is not a CTranslate2 Whisper model."""

    default_code = "model_not_found"


@dataclass(frozen=True)
class ModelInfo:
    """What requests are validated against: known before (or without) loading the model."""

    id: str
    multilingual: bool
    default_beam_size: int
    weights_bytes: int = 0  # model.bin on disk: about what one replica holds in memory
    keep_alive: float | None = None  # its own default keep_alive (s; -1: forever), if named


@dataclass(frozen=True)
class Capabilities:
    """What a loaded model on its engine supports. The service asks; it does not decide
    from the model's name or the settings what an engine can do."""

    languages: tuple[str, ...]  # the codes it transcribes ("en" alone: English-only)
    short_windows: bool  # encoder windows under 30 s keep its accuracy
    prompts_per_window: bool  # each window of a batch conditioned on its own text
    word_timestamps: bool
    devices: tuple[str, ...]  # the device kinds its engine runs on

    def windows(self, configured: tuple[float, ...]) -> tuple[float, ...]:
        """The encoder windows its chunks are padded to: the configured ones if it takes
        short windows, else the full 30 s."""
        return configured if self.short_windows else (CHUNK_SECONDS,)

    def view(self) -> dict[str, object]:
        return {
            "languages": len(self.languages),
            "short_windows": self.short_windows,
            "prompts_per_window": self.prompts_per_window,
            "word_timestamps": self.word_timestamps,
            "devices": list(self.devices),
        }


@dataclass(frozen=True)
class ChunkInput:
    """One ≤30 s window of one job: log-mel features plus where it sits in the job's timeline."""

    features: np.ndarray  # (n_mels, frames), padded to the encoder window
    offset: float  # seconds, on the job's speech-only timeline
    duration: float  # seconds of real (unpadded) audio
    # Text said just before the window (a live session's previous turn): Whisper is
    # conditioned on it, as on a file's previous window with condition_on_previous_text.
    context: str = ""
    # A window whose text loops on itself is decoded again on a full 30 s window (the
    # engine's rescue); False: it comes back empty instead, for a live interim that a newer
    # window soon replaces, where the rescue would cost more than the interim is worth.
    rescue_loops: bool = True
    # Where a window paused between fallback passes resumes (``Pause``): the rung of the
    # temperature ladder it is tried at next, and its tries so far (the engine's own).
    rung: int = 0
    tries: tuple[object, ...] = ()


@dataclass(frozen=True)
class RawWord:
    word: str
    start: float
    end: float
    probability: float


@dataclass(frozen=True)
class RawSegment:
    """A decoded segment before per-job timestamp restoration and numbering."""

    seek: int
    start: float
    end: float
    text: str
    tokens: list[int]
    avg_logprob: float
    compression_ratio: float
    no_speech_prob: float
    temperature: float
    words: list[RawWord] | None
    logprobs: list[TokenLogprob] | None = None  # its text tokens' (options.logprobs)


def segment_of(
    raw: RawSegment, index: int, start: float, end: float, words: list[Word] | None
) -> Segment:
    """A decoded segment as a transcript holds it: numbered ``index``, at ``start`` to
    ``end`` on the file's clock, with its words there."""
    return Segment(
        id=index,
        seek=raw.seek,
        start=start,
        end=end,
        text=raw.text,
        tokens=raw.tokens,
        temperature=raw.temperature,
        avg_logprob=raw.avg_logprob,
        compression_ratio=raw.compression_ratio,
        no_speech_prob=raw.no_speech_prob,
        words=words,
        logprobs=raw.logprobs,
    )


Settled = Callable[[int, list["RawSegment"]], None]
"""Told a chunk's result (its index in the batch, its segments) once it is final."""


def unheard(index: int, segments: list[RawSegment]) -> None:
    """A :data:`Settled` that nobody listens to."""


class Pause:
    """Asked between a batch's fallback passes whether the batch should give its device up
    (work that ranks before it is waiting); this one never asks it to. A scheduler's own
    :meth:`due` may say yes: the engine then hands each unfinished chunk to :meth:`keep`, as
    a chunk that resumes where it stopped, and returns it without segments."""

    def due(self) -> bool:
        return False

    def keep(self, index: int, chunk: ChunkInput) -> None:
        """The ``index``-th chunk of the batch paused; ``chunk`` resumes it in a later pass."""
        raise NotImplementedError("a pause that is never due keeps nothing")


NEVER = Pause()


class Engine(ABC):
    """A loaded model replica on one device. Methods block; callers run them off the loop."""

    model_id: str
    multilingual: bool
    weights_bytes: int = 0  # the model's weights on disk: about what a replica holds
    keep_alive: float | None = None  # its model's own default keep_alive, if configured

    @property
    @abstractmethod
    def capabilities(self) -> Capabilities:
        """What this replica's model supports on this engine."""

    @abstractmethod
    def features(self, audio: np.ndarray, frames: int = 3000) -> np.ndarray:
        """Log-mel features of ≤30 s of 16 kHz mono audio, zero-padded to ``frames``
        (100 per second; 3000 is Whisper's full 30 s encoder window).

        Thread-safe and model-free, so it can run in the preprocessing pool.
        """

    @abstractmethod
    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        """One batched encode + generate over chunks that share decoding options. An engine
        may tell ``settled`` a chunk's result as soon as it is final, while others of the
        batch are still being decoded (again); the list returned is every chunk's. Between
        fallback passes it asks ``pause`` whether to stop; a chunk it hands to
        ``pause.keep`` comes back without segments (its result is a later pass's)."""

    @abstractmethod
    def transcribe(self, audio: np.ndarray, options: TranscriptionOptions) -> Transcript:
        """The plain, unbatched path over a whole file (the baseline policy)."""

    @abstractmethod
    def detect_language(
        self, features: Sequence[np.ndarray], among: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        """The spoken language of each window (its code, its probability): one batched
        encode. Only a multilingual model can tell. ``among``: the most probable of these
        codes, its probability renormalised over them (``engine.languages.restricted``);
        empty: of all."""

    @property
    @abstractmethod
    def loaded(self) -> bool:
        """Whether the weights are in memory."""

    @abstractmethod
    def unload(self) -> None:
        """Release the weights (an idle replica); :meth:`load` brings them back."""

    @abstractmethod
    def load(self) -> None:
        """Load the weights released by :meth:`unload`."""

    def ensure_loaded(self) -> None:
        if not self.loaded:
            self.load()
