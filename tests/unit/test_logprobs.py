"""Token log probabilities (include[]=logprobs) piece by piece: each chosen token's log
probability from a step's logits, the text tokens of a segment with Whisper's own tokenizer,
a window's tokens shared out to its segments, and the fallback keeping the kept decode's."""

from __future__ import annotations

import functools
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from asrserve.engine.base import ChunkInput, RawSegment
from asrserve.engine.fallback import TEMPERATURES, Attempt, decode_all
from asrserve.engine.logprobs import byte_level, chosen_logprobs, split_by_segment, text_tokens
from asrserve.engine.whisper import bundled_model_path
from asrserve.transcript import TokenLogprob

EOT = 50256  # tiny.en's end of text: every id from it on is special or a timestamp
TIMESTAMP = 50363 + 1 + 50  # <|1.00|>


def test_each_chosen_token_gets_the_log_softmax_of_its_step() -> None:
    rng = np.random.default_rng(7)
    logits = rng.normal(0, 5, size=(4, 50)).astype(np.float32)  # 3 tokens, then the eot step
    tokens = [3, 17, 42]
    expected = [
        float(np.log(np.exp(row[t]) / np.exp(row).sum()))
        for row, t in zip(logits.astype(np.float64), tokens, strict=False)
    ]
    assert chosen_logprobs(logits, tokens) == pytest.approx(expected, abs=1e-5)  # float32
    assert chosen_logprobs(list(logits), tokens) == chosen_logprobs(logits, tokens)  # by row
    assert all(value <= 0 for value in chosen_logprobs(logits, tokens))
    with pytest.raises(ValueError, match="2 steps of logits for 3 tokens"):
        chosen_logprobs(logits[:2], tokens)


def test_text_tokens_join_to_the_text_when_a_character_spans_tokens() -> None:
    """Whisper's byte-level tokens may split a character (日本語, €): the token that
    completes it carries it, its bytes stay its own; timestamps and eot are left out."""
    hf = Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    text = " Ça coûte 5 €, 日本語です."
    ids = hf.encode(text, add_special_tokens=False).ids
    decoded = [TIMESTAMP, *ids, TIMESTAMP, EOT]
    logprobs = [-0.1 * (i + 1) for i in range(len(decoded))]
    tokens = text_tokens(decoded, logprobs, EOT, byte_level(hf.id_to_token))
    assert len(tokens) == len(ids)
    assert "".join(t.token for t in tokens) == hf.decode(ids) == text
    assert b"".join(bytes(t.bytes) for t in tokens) == text.encode()
    assert any(t.token == "" for t in tokens)  # a split character: the case is exercised
    assert [t.logprob for t in tokens] == pytest.approx(logprobs[1 : 1 + len(ids)])


def test_a_windows_tokens_are_shared_out_to_its_segments_in_order() -> None:
    window = [TIMESTAMP, 1, 2, TIMESTAMP, TIMESTAMP, 3, TIMESTAMP, 4]  # the last unfinished
    logprobs = [-0.5, -1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0]
    shares = split_by_segment(window, logprobs, [window[:4], window[4:7]])
    assert shares == [[-0.5, -1.0, -2.0, -3.0], [-4.0, -5.0, -6.0]]
    with pytest.raises(ValueError, match="next tokens"):
        split_by_segment(window, logprobs, [window[1:4]])


def _segment(text: str, logprob: float) -> RawSegment:
    tokens = [TokenLogprob(token=" " + word, logprob=logprob, bytes=[]) for word in text.split()]
    return RawSegment(
        seek=0,
        start=0.0,
        end=1.0,
        text=text,
        tokens=list(range(len(tokens))),
        avg_logprob=logprob,
        compression_ratio=1.0,
        no_speech_prob=0.01,
        temperature=0.0,
        words=None,
        logprobs=tokens,
    )


def test_the_fallback_keeps_the_kept_decodes_token_logprobs() -> None:
    """A decode that fails (too unlikely) is tried again; the segments kept carry the log
    probabilities of the try kept, not of the failed one."""
    tries = {0.0: _segment("mumbled words", -1.5), 0.2: _segment("clear words", -0.2)}

    def decode(chunks: list[ChunkInput], temperature: float) -> list[Attempt]:
        return [Attempt([replace(tries[temperature])], temperature) for _ in chunks]

    chunk = ChunkInput(features=np.zeros((80, 3000), np.float32), offset=0.0, duration=5.0)
    [kept] = decode_all([chunk], TEMPERATURES, decode, lambda c: None)
    assert kept[0].logprobs is not None
    assert [(t.token, t.logprob) for t in kept[0].logprobs] == [(" clear", -0.2), (" words", -0.2)]


@functools.cache
def whisper_tokenizer() -> Tokenizer:
    return Tokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=EOT - 1), max_size=40))
def test_any_tokens_join_to_what_the_tokenizer_decodes(ids: list[int]) -> None:
    """Whatever the tokens (bytes that never make a character among them), their texts
    joined are the segment's text as Whisper's tokenizer decodes it."""
    hf = whisper_tokenizer()
    tokens = text_tokens(ids, [0.0] * len(ids), EOT, byte_level(hf.id_to_token))
    assert "".join(t.token for t in tokens) == hf.decode(ids)
