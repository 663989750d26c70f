"""The ``transformers`` engine: Whisper on PyTorch, batched across windows of many jobs.

Each batch is one encoder pass over its windows (each padded to the batch's widest, 30 s at
most) and one search over all of them (``search.py``), each window after its own prompt:
the request's keywords and prompt and the text said before it, its language and task.
Whisper's rules for a batch of windows (``engine/decoding.py``) and its temperature fallback
(``engine/fallback.py``) drive it exactly as they drive the CTranslate2 engine; the
segments (``engine/timestamps.py``), word timestamps (``engine/alignment.py``,
``engine/words.py``) and token log probabilities (``engine/logprobs.py``) are the same
engine-neutral rules.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from asrserve.engine.base import (
    FRAMES_PER_SECOND,
    NEVER,
    Capabilities,
    ChunkInput,
    Engine,
    Pause,
    RawSegment,
    Settled,
    unheard,
)
from asrserve.engine.decoding import (
    WindowOutput,
    conditioning,
    context_tokens,
    decode_windows,
    full_window,
    prompt_tokens,
    stack_padded,
)
from asrserve.engine.fallback import (
    BEST_OF,
    PROMPT_RESET_TEMPERATURE,
    TEMPERATURES,
    Attempt,
    FallbackCounts,
    compression_ratio,
    decode_all,
    temperatures,
)
from asrserve.engine.keywords import keeps_keywords
from asrserve.engine.logprobs import byte_level, split_by_segment, text_tokens
from asrserve.engine.pytorch.aligner import align
from asrserve.engine.pytorch.model import ModelMeta, SharedModel
from asrserve.engine.pytorch.network import Cross, WhisperNet
from asrserve.engine.pytorch.rules import TimestampRules, Vocabulary
from asrserve.engine.pytorch.search import Decoded, Search, Searcher
from asrserve.engine.timestamps import finished, split
from asrserve.languages import LANGUAGE_NAMES, restricted
from asrserve.transcript import Transcript
from asrserve.vocabulary import TranscriptionOptions, keyword_text

log = logging.getLogger(__name__)

# A window's text is at most this many tokens per second of its length, as on CTranslate2
# (``engine/pipeline.py``): a short window that loops stops there, not at 448 tokens.
TOKENS_PER_SECOND = 15
MODEL_LENGTH = 448  # Whisper's decoder positions


@dataclass(frozen=True)
class TorchConfig:
    model_dir: Path  # a transformers-format Whisper directory
    model_id: str
    device: str  # "cpu", "cuda:N" or "mps"
    dtype: str  # "float32", "float16" or "bfloat16"
    threads: int = 1  # PyTorch's threads for this replica's work on the CPU
    fallback: tuple[float, ...] = TEMPERATURES
    keep_alive: float | None = None


def token_limit(prompt: int, frames: int) -> int:
    """Tokens a window after a ``prompt``-token prompt may generate, on a batch padded to
    ``frames``: CTranslate2's rule (half the total length, the prompt's tokens before the
    last counted), over a total of the prompt plus 15 tokens a second of window."""
    total = min(MODEL_LENGTH, prompt + -(-frames * TOKENS_PER_SECOND // FRAMES_PER_SECOND))
    return max(1, min(total // 2, total - (prompt - 1)))


@dataclass(frozen=True)
class _Setup:
    """What one decode of a batch reads."""

    tokenizer: Any
    rules: TimestampRules
    search: Search
    detect: bool  # each window's language found first (multilingual, none given)
    among: tuple[str, ...]
    initial: list[int]  # the request's prompt, as tokens
    keywords: list[int]  # the request's keywords, as tokens (faster-whisper's hotwords)
    options: TranscriptionOptions


class TransformersEngine(Engine):
    """One replica: its own decoding state, on a model it may share with other replicas."""

    def __init__(self, config: TorchConfig, shared: SharedModel | None = None) -> None:
        from faster_whisper.feature_extractor import FeatureExtractor
        from tokenizers import Tokenizer

        self.config = config
        self.model_id = config.model_id
        self.meta = ModelMeta.read(config.model_dir)
        self.shared = shared or SharedModel(config.model_dir, config.device, config.dtype)
        self.shared.hold(self)
        self.multilingual = self.meta.multilingual
        self.weights_bytes = self.meta.weights_bytes
        self.keep_alive = config.keep_alive
        self.fallback_counts = FallbackCounts()
        self._tokens = Tokenizer.from_file(str(config.model_dir / "tokenizer.json"))
        self._features = FeatureExtractor(feature_size=self.meta.mels)
        self._net: WhisperNet | None = None

    @classmethod
    def replicas(cls, config: TorchConfig, count: int) -> list[TransformersEngine]:
        shared = SharedModel(config.model_dir, config.device, config.dtype)
        return [cls(config, shared) for _ in range(count)]

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(
            languages=tuple(LANGUAGE_NAMES) if self.multilingual else ("en",),
            # gated as CTranslate2's: adaptive windows held to full ones' WER on English
            # (tests/test_transformers_engine.py); multilingual models take full windows
            short_windows=not self.multilingual,
            prompts_per_window=True,  # one search takes every prompt length
            word_timestamps=True,
            devices=("cpu", "cuda", "mps"),
        )

    @property
    def net(self) -> WhisperNet:
        """The model's passes, on the thread that asks: PyTorch's thread count is that
        thread's own (OpenMP's), so each replica sets its own before it computes."""
        import torch

        self.ensure_loaded()  # a replica that let go holds the weights again before it runs
        model = self.shared.model
        if self._net is None or self._net.model is not model:
            self._net = WhisperNet(model)
        if self.config.device == "cpu" and torch.get_num_threads() != self.config.threads:
            torch.set_num_threads(self.config.threads)
        return self._net

    def features(self, audio: np.ndarray, frames: int = 3000) -> np.ndarray:
        mel = self._features(audio)[..., :-1]
        out = np.zeros((mel.shape[0], frames), dtype=np.float32)
        out[:, : min(frames, mel.shape[1])] = mel[:, :frames]
        return out

    def transcribe_batch(
        self,
        chunks: Sequence[ChunkInput],
        options: TranscriptionOptions,
        settled: Settled = unheard,
        pause: Pause = NEVER,
    ) -> list[list[RawSegment]]:
        return decode_all(
            chunks,
            temperatures(options.temperature, self.config.fallback),
            lambda todo, temperature: self._decode(todo, options, temperature),
            full_window,
            self.fallback_counts,
            settled,
            pause,
        )

    def _decode(
        self, chunks: Sequence[ChunkInput], options: TranscriptionOptions, temperature: float
    ) -> list[Attempt]:
        setup = self.setup(options, temperature)
        reset = temperature > PROMPT_RESET_TEMPERATURE
        encode = setup.tokenizer.encode
        context = [[] if reset else context_tokens(encode, c.context) for c in chunks]
        return decode_windows(
            chunks,
            context,
            lambda windows, prompts: self.forward(windows, prompts, setup),
            lambda tokens: 0,  # every prompt length in one search
            temperature,
        )

    def setup(self, options: TranscriptionOptions, temperature: float) -> _Setup:
        from faster_whisper.tokenizer import Tokenizer
        from faster_whisper.transcribe import get_suppressed_tokens

        language = options.language if self.multilingual else "en"
        tokenizer = Tokenizer(
            self._tokens, self.multilingual, task=options.task.value, language=language or "en"
        )
        vocabulary = Vocabulary(
            size=self.meta.vocabulary_size,
            eot=tokenizer.eot,
            no_timestamps=tokenizer.no_timestamps,
            timestamp_begin=tokenizer.timestamp_begin,
            no_speech=tokenizer.no_speech,
            suppress=tuple(get_suppressed_tokens(tokenizer, [-1]) or ()),
            suppress_begin=self.meta.suppress_begin,
        )
        beam = 1 if options.logprobs else options.beam_size
        prompt = prompt_tokens(tokenizer.encode, options.prompt)
        return _Setup(
            tokenizer=tokenizer,
            rules=TimestampRules(vocabulary, self.net.device),
            search=Search(beam_size=beam, temperature=temperature, best_of=BEST_OF),
            detect=self.multilingual and options.language is None,
            among=options.languages,
            initial=list(prompt),
            keywords=prompt_tokens(tokenizer.encode, keyword_text(options.keywords)),
            options=options,
        )

    def forward(
        self, windows: list[ChunkInput], previous: list[list[int]], setup: _Setup
    ) -> list[WindowOutput]:
        import torch

        net, tokenizer = self.net, setup.tokenizer
        features = stack_padded([chunk.features for chunk in windows])
        encoded = net.encode(torch.from_numpy(features))
        cross = net.cross(encoded)
        languages = (
            [self._language_token(code) for code, _ in self._detect(cross, setup.among)]
            if setup.detect
            else [tokenizer.language] * len(windows)
        )
        prompts = [
            self._prompt(tokenizer, conditioning(setup.keywords, setup.initial + before), language)
            for before, language in zip(previous, languages, strict=True)
        ]
        decoded = self._search(cross, prompts, features.shape[-1], setup)
        if setup.options.keywords:  # each window decoded without them too (engine.keywords)
            unbiased = [
                self._prompt(tokenizer, conditioning([], setup.initial + before), language)
                for before, language in zip(previous, languages, strict=True)
            ]
            others = self._search(cross, unbiased, features.shape[-1], setup)
            decoded = [
                with_them
                if keeps_keywords(
                    tokenizer.decode(list(with_them.best.tokens)),
                    tokenizer.decode(list(without_them.best.tokens)),
                    setup.options.keywords,
                )
                else without_them
                for with_them, without_them in zip(decoded, others, strict=True)
            ]
        outputs = [
            self._output(chunk, result, setup)
            for chunk, result in zip(windows, decoded, strict=True)
        ]
        if setup.options.word_timestamps:
            outputs = align(net, self.meta, tokenizer, cross, windows, languages, outputs)
        return outputs

    def _search(
        self, cross: Cross, prompts: list[list[int]], frames: int, setup: _Setup
    ) -> list[Decoded]:
        """One search over the windows (rows of ``cross``), each after its prompt."""
        limits = [token_limit(len(p), frames) for p in prompts]
        searcher = Searcher(self.net, setup.rules, setup.search)
        return searcher.run(cross, prompts, setup.tokenizer.sot, limits)

    def _output(self, chunk: ChunkInput, decoded: Decoded, setup: _Setup) -> WindowOutput:
        tokenizer = setup.tokenizer
        best = decoded.best
        tokens = list(best.tokens)
        avg_logprob = best.total / (len(tokens) + 1)
        temperature = setup.search.temperature
        pieces = split(tokens, tokenizer.timestamp_begin, chunk.offset, chunk.duration)
        segments = []
        for piece in pieces:
            text = tokenizer.decode(piece.tokens)
            segments.append(
                RawSegment(
                    seek=int(chunk.offset * FRAMES_PER_SECOND),
                    start=piece.start,
                    end=piece.end,
                    text=text,
                    tokens=piece.tokens,
                    avg_logprob=avg_logprob,
                    compression_ratio=compression_ratio(text),
                    no_speech_prob=decoded.no_speech_prob,
                    temperature=temperature,
                    words=None,
                )
            )
        if setup.options.logprobs:
            segments = self._with_logprobs(segments, tokens, list(best.logprobs), tokenizer)
        done = finished(tokens, tokenizer.timestamp_begin)
        spoken_to = segments[-1].end if segments else None
        return WindowOutput(segments, done, truncated=not best.ended, spoken_to=spoken_to)

    def _with_logprobs(
        self, segments: list[RawSegment], tokens: list[int], logprobs: list[float], tokenizer: Any
    ) -> list[RawSegment]:
        token_bytes = byte_level(self._tokens.id_to_token)
        shares = split_by_segment(tokens, logprobs, [s.tokens for s in segments])
        return [
            replace(s, logprobs=text_tokens(s.tokens, share, tokenizer.eot, token_bytes))
            for s, share in zip(segments, shares, strict=True)
        ]

    def _prompt(self, tokenizer: Any, previous: list[int], language: int | None) -> list[int]:
        """Whisper's prompt: the keywords and the text before the window (at most half the
        context, :func:`~asrserve.engine.decoding.conditioning`), then the start of
        transcript, language and task: faster-whisper's ``get_prompt``."""
        prompt = []
        if previous:
            prompt = [tokenizer.sot_prev, *previous[-(MODEL_LENGTH // 2 - 1) :]]
        sequence = list(tokenizer.sot_sequence)
        if self.multilingual and language is not None:
            sequence[1] = language
        return prompt + sequence

    def _language_token(self, code: str) -> int:
        return self.meta.languages[code]

    def _detect(
        self, cross: list[tuple[Any, Any]], among: Sequence[str]
    ) -> list[tuple[str, float]]:
        """Each window's language: Whisper's language tokens after the start of
        transcript, their probabilities over the language tokens alone (as CTranslate2)."""
        import torch

        net = self.net
        rows = cross[0][0].shape[0]
        cache = net.start(cross, 1)
        sot = self.meta.start_of_transcript
        start = torch.full((rows, 1), sot, dtype=torch.long, device=net.device)
        zero = torch.zeros((rows, 1), dtype=torch.long, device=net.device)
        logits, _ = net.step(cache, start, zero, torch.ones_like(start, dtype=torch.bool))
        codes = list(self.meta.languages)
        ids = torch.tensor([self.meta.languages[c] for c in codes], device=net.device)
        probs = torch.softmax(logits[:, 0, ids], dim=-1).tolist()
        return [restricted(list(zip(codes, row, strict=True)), among) for row in probs]

    def detect_language(
        self, features: Sequence[np.ndarray], among: Sequence[str] = ()
    ) -> list[tuple[str, float]]:
        import torch

        net = self.net
        encoded = net.encode(torch.from_numpy(stack_padded(list(features))))
        return self._detect(net.cross(encoded), among)

    @property
    def loaded(self) -> bool:
        return self.shared.held_by(self)

    def unload(self) -> None:
        self._net = None
        self.shared.let_go(self)
        log.info("released model %s on %s", self.model_id, self.config.device)

    def load(self) -> None:
        self.shared.hold(self)
        log.info("reloaded model %s on %s", self.model_id, self.config.device)

    def transcribe(self, audio: np.ndarray, options: TranscriptionOptions) -> Transcript:
        from asrserve.engine.pytorch.sequential import transcribe

        return transcribe(self, audio, options)
