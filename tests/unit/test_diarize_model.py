"""OpenAI's diarizing model's name, ``gpt-4o-transcribe-diarize``: the default model under
its rules (requests.py): no prompt, no logprobs, json, text or diarized_json, and past 30 s
of audio a chunking_strategy."""

from __future__ import annotations

import pytest

from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.requests import check_chunking, parse_request

CATALOG = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])
DIARIZE = "gpt-4o-transcribe-diarize"


def refused(**fields: str) -> str | None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request({name: [value] for name, value in fields.items()}, CATALOG)
    return caught.value.param


def test_the_diarizing_models_name_is_the_default_model() -> None:
    request = parse_request({"model": [DIARIZE], "response_format": ["diarized_json"]}, CATALOG)
    assert request.options.model == "tiny.en"
    assert request.options.diarization is not None


@pytest.mark.parametrize(
    ("field", "value", "param"),
    [
        ("prompt", "Names: Ann, Bo.", "prompt"),
        ("include[]", "logprobs", "include[]"),
        ("response_format", "srt", "response_format"),
        ("response_format", "verbose_json", "response_format"),
    ],
)
def test_what_openais_diarizing_model_refuses_is_a_400_naming_it(
    field: str, value: str, param: str
) -> None:
    assert refused(model=DIARIZE, **{field: value}) == param
    parse_request({field: [value], "model": ["whisper-1"]}, CATALOG)  # whisper-1 takes it


def test_past_thirty_seconds_it_needs_a_chunking_strategy() -> None:
    bare = parse_request({"model": [DIARIZE], "response_format": ["diarized_json"]}, CATALOG)
    check_chunking(bare, 30.0)
    check_chunking(bare, None)  # a length the container does not state: not known here
    with pytest.raises(InvalidRequest) as caught:
        check_chunking(bare, 42.0)
    assert caught.value.param == "chunking_strategy"
    chunked = parse_request(
        {"model": [DIARIZE], "response_format": ["json"], "chunking_strategy": ["auto"]}, CATALOG
    )
    check_chunking(chunked, 42.0)
    plain = parse_request({"model": ["whisper-1"], "response_format": ["diarized_json"]}, CATALOG)
    check_chunking(plain, 42.0)
