"""faster-whisper's batched pipeline, with one prompt per batch item.

The stock ``BatchedInferencePipeline`` gives every item of a batch the same prompt. A
window that Whisper left unfinished is decoded again from where it stopped (see
``whisper.py``); like faster-whisper's sequential ``transcribe`` (with its default
``condition_on_previous_text``), that continuation is conditioned on the text decoded
before it, so items of one batch need different prompts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from math import ceil
from typing import Any

import numpy as np
from faster_whisper import BatchedInferencePipeline

from asrserve.engine.base import FRAMES_PER_SECOND
from asrserve.engine.decoding import conditioning, prompt_tokens
from asrserve.engine.keywords import keeps_keywords
from asrserve.engine.logprobs import chosen_logprobs

# A window's text is at most this many tokens per second of its length (fast English
# speech is about 4; timestamps add 2 per segment): a decode that loops on a short window
# stops there instead of running to the model's 448-token limit, which on a 5 s window
# cost 15-25 times a normal decode. A full 30 s window keeps the model's limit.
TOKENS_PER_SECOND = 15
VOCABULARY = 51_866  # Whisper's largest vocabulary (large-v3's)
# Vocabulary-wide logits one generate call may hand back when logprobs are asked (2 windows
# at the longest decode): the worst case of an ``include[]=logprobs`` pass, whatever its batch
LOGPROBS_PASS_BYTES = 192 * 1024 * 1024


@dataclass(frozen=True)
class DecodeOptions:
    """What one batched decode reads: this pipeline and the stock ``forward`` it inherits.
    Not faster-whisper's ``TranscriptionOptions``, whose sequential-only fields (conditioning
    on previous text, the initial-timestamp limit, the fallback thresholds) the batched path
    never reads; conditioning is ``previous``, the fallback is ``fallback.py``."""

    beam_size: int
    best_of: int
    temperatures: tuple[float, ...]  # one: the temperature of this decode
    initial_prompt: str | None
    suppress_tokens: tuple[int, ...]
    multilingual: bool
    word_timestamps: bool
    logprobs: bool = False  # each chosen token's log probability (a greedy or sampled decode)
    patience: float = 1.0
    length_penalty: float = 1.0
    repetition_penalty: float = 1.0
    no_repeat_ngram_size: int = 0
    suppress_blank: bool = True
    without_timestamps: bool = False
    hotwords: str | None = None  # the request's keywords, joined (vocabulary.keyword_text)
    keywords: tuple[str, ...] = ()  # the same, each term (engine.keywords: which decode stays)
    prepend_punctuations: str = "\"'“¿([{-"
    append_punctuations: str = "\"'.。,，!！?？:：”)]}、"


def token_limit(prompt_tokens: int, frames: int, model_limit: int) -> int:
    """``max_length`` of a generate call (prompt included) for a batch padded to ``frames``."""
    return min(model_limit, prompt_tokens + -(-frames * TOKENS_PER_SECOND // FRAMES_PER_SECOND))


def search(options: DecodeOptions) -> dict[str, Any]:
    """How a generate call searches at the options' temperature, as faster-whisper's
    ``generate_with_fallback`` does: beam search at 0, else the best of ``best_of`` samples."""
    temperature = options.temperatures[0]
    if temperature > 0:
        return {
            "beam_size": 1,
            "num_hypotheses": options.best_of,
            "sampling_topk": 0,
            "sampling_temperature": temperature,
        }
    return {"beam_size": options.beam_size, "patience": options.patience}


class PromptedPipeline(BatchedInferencePipeline):  # type: ignore[misc]
    """``previous[i]``: tokens to condition item i of the next ``forward`` call on."""

    def __init__(self, model: Any) -> None:
        super().__init__(model)
        self.previous: list[list[int]] = []
        # Per item of the last call: did Whisper mark the rest of the window as silent?
        self.finished: list[bool] = []
        # Per item of the last call: did its decode run to the token limit?
        self.truncated: list[bool] = []
        # Per item of the last call (options.logprobs): its tokens, each one's log probability.
        self.logprobs: list[tuple[list[int], list[float]]] = []
        # Per item of the last call: where its decode's timestamps end its last segment.
        self.spoken_to: list[float | None] = []
        self._encoded: Any = None  # the last call's encoder output, for word alignment
        self.last_speech_timestamp: float = 0.0

    def forward(
        self,
        features: np.ndarray,
        tokenizer: Any,
        chunks_metadata: list[dict[str, float]],
        options: DecodeOptions,
    ) -> list[list[dict[str, Any]]]:
        """The stock ``forward``, with each item's ``spoken_to`` noted before its words are
        timed (alignment moves segments' ends to their words')."""
        outputs: list[list[dict[str, Any]]] = super().forward(
            features, tokenizer, chunks_metadata, replace(options, word_timestamps=False)
        )
        self.spoken_to = [float(out[-1]["end"]) if out else None for out in outputs]
        if options.word_timestamps:  # as the stock forward times them
            sizes = [
                int(ceil(chunk["duration"]) * self.model.frames_per_second)
                for chunk in chunks_metadata
            ]
            self.last_speech_timestamp = self.model.add_word_timestamps(
                outputs,
                tokenizer,
                self._encoded,
                sizes,
                options.prepend_punctuations,
                options.append_punctuations,
                self.last_speech_timestamp,
            )
        self._encoded = None
        return outputs

    def generate_segment_batched(
        self, features: np.ndarray, tokenizer: Any, options: DecodeOptions
    ) -> tuple[Any, list[dict[str, Any]]]:
        model = self.model
        initial = prompt_tokens(tokenizer.encode, options.initial_prompt)
        keywords = prompt_tokens(tokenizer.encode, options.hotwords)  # as get_prompt's
        previous = self.previous or [[] for _ in range(features.shape[0])]
        prompts = [
            model.get_prompt(
                tokenizer,
                # what fits beside the keywords (decoding.conditioning), after them
                previous_tokens=conditioning(keywords, [*initial, *prev])[len(keywords) :],
                without_timestamps=options.without_timestamps,
                hotwords=options.hotwords,
            )
            for prev in previous
        ]
        prompt_length = max(map(len, prompts))
        max_length = token_limit(prompt_length, features.shape[-1], model.max_length)
        # with keywords, each window decoded without them too (engine.keywords)
        unbiased = [
            model.get_prompt(
                tokenizer,
                previous_tokens=conditioning([], [*initial, *prev]),
                without_timestamps=options.without_timestamps,
            )
            for prev in (previous if options.keywords else [])
        ]
        unbiased_length = max(map(len, unbiased), default=0)
        unbiased_max = token_limit(unbiased_length, features.shape[-1], model.max_length)
        group = features.shape[0]
        if options.logprobs and not options.word_timestamps:  # words align the whole batch
            # each window's every step's logits are held until its call ends
            group = logprobs_group(max_length)
        results: list[Any] = []
        bounds: list[tuple[int, int]] = []  # each decode kept: its prompt's length, its limit
        for start in range(0, features.shape[0], group):
            part = features if group >= features.shape[0] else features[start : start + group]
            encoder_output = model.encode(part)
            self._encoded = encoder_output
            window = slice(start, start + group)
            sets = [prompts[window], *([unbiased[window]] if unbiased else [])]
            if options.multilingual:  # one detection for both decodes
                self._set_languages(encoder_output, tokenizer, sets)
            biased = self._generate(encoder_output, sets[0], max_length, options)
            if not unbiased:
                results += biased
                bounds += [(prompt_length, max_length)] * len(biased)
                continue
            others = self._generate(encoder_output, sets[1], unbiased_max, options)
            for with_them, without_them in zip(biased, others, strict=True):
                kept = keeps_keywords(
                    _text(with_them, tokenizer), _text(without_them, tokenizer), options.keywords
                )
                results.append(with_them if kept else without_them)
                bounds.append(
                    (prompt_length, max_length) if kept else (unbiased_length, unbiased_max)
                )
        output = []
        self.finished = []
        self.truncated = []
        self.logprobs = []
        for index, result in enumerate(results):
            tokens = result.sequences_ids[0]
            if options.logprobs:  # the steps of the hypothesis kept (the first)
                self.logprobs.append((list(tokens), chosen_logprobs(_steps(result), tokens)))
                results[index] = None  # its logits (~45 MB a window) go now, not at the end
            self.finished.append(
                len(tokens) >= 2 and tokens[-2] < tokenizer.timestamp_begin <= tokens[-1]
            )
            length, limit = bounds[index]
            self.truncated.append(length + len(tokens) >= limit)
            cum_logprob = result.scores[0] * (len(tokens) ** options.length_penalty)
            output.append(
                {
                    "avg_logprob": cum_logprob / (len(tokens) + 1),
                    "no_speech_prob": result.no_speech_prob,
                    "tokens": tokens,
                }
            )
        return encoder_output, output

    def _set_languages(
        self, encoder_output: Any, tokenizer: Any, prompt_sets: list[list[list[int]]]
    ) -> None:
        """On a multilingual model: each window's language, detected once, set in each of
        its prompts (the keywords' and the one without them)."""
        detected = self.model.model.detect_language(encoder_output)
        for prompts in prompt_sets:
            position = prompts[0].index(tokenizer.language)
            for prompt, langs in zip(prompts, detected, strict=True):
                prompt[len(prompt) - len(prompts[0]) + position] = tokenizer.tokenizer.token_to_id(
                    langs[0][0]
                )

    def _generate(
        self,
        encoder_output: Any,
        prompts: list[list[int]],
        max_length: int,
        options: DecodeOptions,
    ) -> list[Any]:
        """One generate call: the windows, each after its prompt."""
        model = self.model
        results: list[Any] = model.model.generate(
            encoder_output,
            prompts,
            length_penalty=options.length_penalty,
            max_length=max_length,
            suppress_blank=options.suppress_blank,
            suppress_tokens=list(options.suppress_tokens),
            return_scores=True,
            return_no_speech_prob=True,
            return_logits_vocab=options.logprobs,
            repetition_penalty=options.repetition_penalty,
            no_repeat_ngram_size=options.no_repeat_ngram_size,
            **search(options),
        )
        return results


def _text(result: Any, tokenizer: Any) -> str:
    """A generate call's text for one window (its first hypothesis, text tokens only)."""
    text: str = tokenizer.decode(result.sequences_ids[0])
    return text


def logprobs_group(max_length: int) -> int:
    """Windows in one generate call when their logprobs are asked: CTranslate2 hands back
    every step's logits over the vocabulary for each window of the call (``max_length``
    steps of :data:`VOCABULARY` float32 at most: 93 MB a window at 448), so they go in
    groups that hold at most :data:`LOGPROBS_PASS_BYTES` between them."""
    return max(1, LOGPROBS_PASS_BYTES // (max_length * VOCABULARY * 4))


def _steps(result: Any) -> Iterator[Any]:
    """A decode's per-step logits (CTranslate2 ``StorageView`` rows, on any device), a row
    at a time (off the GPU one by one)."""
    import ctranslate2

    steps = result.logits[0]
    if not steps or not list(steps[0].shape):
        raise ValueError("the decode gave no logits: a beam search (beam_size > 1) gives none")
    for step in steps:
        yield step if step.device == "cpu" else step.to_device(ctranslate2.Device.cpu)
