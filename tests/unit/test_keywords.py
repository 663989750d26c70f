"""OpenAI's ``keywords[]``: the bounds the form shows are the bounds enforced, the longest
list allowed fits Whisper's prompt whole, and the prompt both engines build with them is
faster-whisper's ``get_prompt`` with ``hotwords`` (on the bundled tiny.en's tokenizer); live
sessions take them in both shapes."""

from __future__ import annotations

import functools
from types import SimpleNamespace
from typing import Any, cast

import pytest
from faster_whisper.tokenizer import Tokenizer
from faster_whisper.transcribe import WhisperModel
from tokenizers import Tokenizer as HfTokenizer

from asrserve.api.openapi import transcription_form, translation_form
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.engine.decoding import CONTEXT_TOKENS, PROMPT_TOKENS, conditioning, prompt_tokens
from asrserve.engine.keywords import keeps_keywords, spelled
from asrserve.engine.pytorch.engine import TransformersEngine
from asrserve.engine.whisper import bundled_model_path
from asrserve.errors import InvalidRequest
from asrserve.live import beta, ga
from asrserve.request_schema import MAX_KEYWORD_BYTES, MAX_KEYWORD_CHARS, MAX_KEYWORDS
from asrserve.requests import parse_request
from asrserve.vocabulary import keyword_text

CATALOG = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])
PARAM = "keywords[]"


def refusal(terms: list[str]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_request({PARAM: terms}, CATALOG)
    assert caught.value.param == PARAM
    return caught.value


def keywords(terms: list[str]) -> tuple[str, ...]:
    return parse_request({PARAM: terms}, CATALOG).options.keywords


def test_each_bound_the_form_shows_is_enforced() -> None:
    shown = transcription_form(sync=True)["requestBody"]["content"]["multipart/form-data"]
    field = shown["schema"]["properties"][PARAM]
    assert field["maxItems"] == MAX_KEYWORDS == 32
    for bound in (f"{MAX_KEYWORDS} terms", f"{MAX_KEYWORD_CHARS} characters", "150 bytes"):
        assert bound in field["description"]
    translation = translation_form()["requestBody"]["content"]["multipart/form-data"]
    assert PARAM in translation["schema"]["properties"]  # faster-whisper biases both tasks

    assert keywords(["a"] * MAX_KEYWORDS) == ("a",) * MAX_KEYWORDS
    assert refusal(["a"] * 33).message == "keywords[] takes at most 32 values"
    assert keywords([" Nakamura ", "x" * 64]) == ("Nakamura", "x" * 64)  # stripped
    assert refusal(["x" * 65]).message == (
        "keywords[] takes terms of at most 64 characters, not 65"
    )
    fifty = "y" * 50
    assert len(", ".join([fifty, fifty, "z" * 46])) == MAX_KEYWORD_BYTES == 150
    assert keywords([fifty, fifty, "z" * 46])[2] == "z" * 46
    over = refusal([fifty, fifty, "z" * 47])
    assert (over.code, over.status) == ("keywords_too_long", 400)
    assert "at most 150 bytes joined" in over.message and "not 151" in over.message
    assert "not 151" in refusal(["é" * 25, "é" * 25, "z" * 47]).message  # bytes, not characters
    assert refusal(["ok", " "]).message == "keywords[] holds an empty term"
    assert "control character" in refusal(["tab\there"]).message
    assert "<|" in refusal(["<|endoftext|>"]).message


@functools.cache
def tokenizer() -> Any:
    hf = HfTokenizer.from_file(str(bundled_model_path() / "tokenizer.json"))
    return Tokenizer(hf, False, task="transcribe", language="en")


def test_the_longest_keywords_allowed_fit_the_prompt_whole() -> None:
    """A byte-level token is at least one byte: the 150 bytes allowed are at most 151 tokens
    with the space before them, leaving the prompt and previous text at least 72."""
    worst = ["\U00010348" * 12] * 3  # 4-byte characters, each its own tokens
    text = keyword_text(worst)
    assert text is not None and len(text.encode()) == MAX_KEYWORD_BYTES - 2
    tokens = prompt_tokens(tokenizer().encode, text)
    assert len(tokens) == len(text.encode()) + 1 <= MAX_KEYWORD_BYTES + 1
    assert PROMPT_TOKENS - (MAX_KEYWORD_BYTES + 1) == 72 >= CONTEXT_TOKENS
    assert conditioning(tokens, list(range(300)))[: len(tokens)] == tokens  # never cut


def get_prompt(previous: list[int], hotwords: str | None) -> list[int]:
    """faster-whisper's own prompt (a 448-token model, timestamps on, no prefix)."""
    model = SimpleNamespace(max_length=448)
    prompt: list[int] = WhisperModel.get_prompt(model, tokenizer(), previous, hotwords=hotwords)
    return prompt


def ours(terms: tuple[str, ...], prompt: str | None, before: list[int]) -> list[list[int]]:
    """The prompts the two engines build: the transformers engine's, and what the
    CTranslate2 pipeline hands faster-whisper's ``get_prompt``."""
    tok = tokenizer()
    hot, initial = keyword_text(terms), prompt_tokens(tok.encode, prompt)
    kept = prompt_tokens(tok.encode, hot)
    engine = cast(TransformersEngine, SimpleNamespace(multilingual=False))  # English-only
    torch_prompt = TransformersEngine._prompt(
        engine, tok, conditioning(kept, initial + before), None
    )
    pipeline = get_prompt(conditioning(kept, [*initial, *before])[len(kept) :], hot)
    return [torch_prompt, pipeline]


def test_both_engines_prompt_with_keywords_as_faster_whisper_does() -> None:
    tok = tokenizer()
    terms = ("Siobhan Nakamura", "Zyqlo", "Szczecin")
    hot = keyword_text(terms)
    assert hot == "Siobhan Nakamura, Zyqlo, Szczecin"
    before = tok.encode(" said before the window.")
    prompt = "Meeting notes."
    for given, previous in (
        ((), []),
        ((), before),
        (terms, []),
        (terms, before),
        (terms, prompt_tokens(tok.encode, prompt) + before),
    ):
        expected = get_prompt(previous, keyword_text(given))
        text = prompt if len(previous) > len(before) else None
        assert ours(given, text, before if previous else []) == [expected, expected]
    keyword_tokens = tok.encode(" " + hot)
    assert get_prompt([], hot) == [tok.sot_prev, *keyword_tokens, *tok.sot_sequence]

    # past the budget the previous text keeps what fits beside the keywords (faster-whisper
    # gives it 223 tokens of its own, past Whisper's half of the context)
    long_before = list(range(1000, 1400))
    room = PROMPT_TOKENS - len(keyword_tokens)
    cut = [tok.sot_prev, *keyword_tokens, *long_before[-room:], *tok.sot_sequence]
    assert ours(terms, None, long_before) == [cut, cut]
    assert len(cut) == 1 + PROMPT_TOKENS + len(tok.sot_sequence)


def test_live_sessions_take_keywords_in_both_shapes() -> None:
    start = beta.default_config(CATALOG)
    old = {"input_audio_transcription": {"keywords": ["Zyqlo", "Grafana"]}}
    config = beta.updated(start, old, CATALOG)
    assert config.options.keywords == ("Zyqlo", "Grafana")
    assert beta.transcription_view(config.options)["keywords"] == ["Zyqlo", "Grafana"]
    new = {"type": "transcription", "audio": {"input": {"transcription": {"keywords": ["X"]}}}}
    assert ga.updated(start, new, CATALOG).options.keywords == ("X",)
    for value, param in (
        ("Zyqlo", "session.input_audio_transcription.keywords"),
        (["x" * 65], PARAM),
    ):
        with pytest.raises(InvalidRequest) as caught:
            beta.updated(start, {"input_audio_transcription": {"keywords": value}}, CATALOG)
        assert caught.value.param == param


def test_a_term_is_spelled_as_whole_words_whatever_the_case_and_punctuation() -> None:
    terms = ("Grafana", "Siobhan Nakamura", "C++", "K8s")
    assert spelled("We run grafana's dashboards; SIOBHAN  nakamura, hi.", terms) == {
        "Grafana",
        "Siobhan Nakamura",
    }
    assert spelled("Grafanas and Nakamura Siobhan", terms) == frozenset()
    assert spelled("we use c on k8s", terms) == {"C++", "K8s"}  # "C++" is the word "c"
    assert spelled("anything", ("!!",)) == frozenset()  # no word: never spelled


def test_a_window_keeps_its_keyword_decode_only_where_it_spells_one_the_other_does_not() -> None:
    terms = ("Zyqlo", "Grafana")
    assert keeps_keywords("It is called Zyqlo.", "It is called Zyklo.", terms)
    assert not keeps_keywords("At the town, please record.", "At the tone, please record.", terms)
    assert not keeps_keywords("We use Grafana.", "We use Grafana!", terms)  # both spell it
    assert keeps_keywords("Grafana and Zyqlo", "Grafana and Zyklo", terms)  # one more
