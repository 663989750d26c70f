"""The request schema (``request_schema.py``) is what the OpenAPI forms show and what every
way in enforces: each bound a form shows is the bound a request is held to, each field the
forms show is read, and a value the schema refuses is a 400 naming the field as given."""

from __future__ import annotations

from typing import Any

import pytest

from asrserve.api.openapi import transcription_form, translation_form
from asrserve.batch_lines import BODY_FIELDS
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.request_schema import CueForm, RequestForm
from asrserve.requests import parse_request
from asrserve.vocabulary import Task

CATALOG = Catalog.of([ModelInfo(id="base", multilingual=True, default_beam_size=5)])
# what a field needs beside it to be asked for at all
CONTEXT = {
    **{name: {"response_format": ["srt"]} for name in CueForm.model_fields},
    "min_speakers": {"response_format": ["diarized_json"]},
    "max_speakers": {"response_format": ["diarized_json"]},
}


def _properties(operation: dict[str, Any]) -> dict[str, Any]:
    properties: dict[str, Any] = operation["requestBody"]["content"]["multipart/form-data"][
        "schema"
    ]["properties"]
    return properties


def _bounded() -> list[tuple[str, float, float]]:
    return [
        (name, schema["minimum"], schema["maximum"])
        for name, schema in _properties(transcription_form(sync=True)).items()
        if "maximum" in schema
    ]


def test_the_forms_show_the_schema_fields_by_the_names_clients_send() -> None:
    sync, jobs = (
        _properties(transcription_form(sync=True)),
        _properties(transcription_form(sync=False)),
    )
    aliases = {info.alias or name for name, info in RequestForm.model_fields.items()}
    assert set(sync) | set(jobs) == {"file", *aliases}
    assert set(sync) - set(jobs) == {"stream", *CueForm.model_fields}
    assert set(jobs) - set(sync) == {"callback_url"}
    translation = set(_properties(translation_form()))
    assert translation < set(sync) and "known_speaker_names[]" not in translation
    assert {"include[]", "include", "max_line_width"} <= BODY_FIELDS
    assert not {"stream", "callback_url", "min_speakers"} & BODY_FIELDS


@pytest.mark.parametrize(("name", "low", "high"), _bounded())
def test_each_bound_the_form_shows_is_the_bound_enforced(
    name: str, low: float, high: float
) -> None:
    context = CONTEXT.get(name, {})
    for inside in (low, high):
        parse_request({**context, name: [f"{inside:g}"]}, CATALOG)
    for outside in (low - 1, high + 1):
        with pytest.raises(InvalidRequest) as caught:
            parse_request({**context, name: [f"{outside:g}"]}, CATALOG)
        assert caught.value.param == name
        assert caught.value.message == f"{name} must be between {low:g} and {high:g}"


def test_the_forms_show_bounds_for_every_number_field() -> None:
    shown = {name for name, _, _ in _bounded()}
    numbers = {
        name
        for name, schema in _properties(transcription_form(sync=True)).items()
        if schema.get("type") in ("integer", "number")
    }
    assert (
        shown
        == numbers
        == {
            "temperature",
            "beam_size",
            "deadline_s",
            "min_speakers",
            "max_speakers",
            "max_line_width",
            "max_line_count",
            "max_words_per_cue",
            "max_cue_seconds",
        }
    )


@pytest.mark.parametrize(
    ("fields", "param", "message"),
    [
        ({"beam_size": ["2.5"]}, "beam_size", "beam_size must be a whole number"),
        ({"beam_size": ["inf"]}, "beam_size", "beam_size must be a whole number"),
        ({"beam_size": ["five"]}, "beam_size", "beam_size must be a number"),
        ({"temperature": ["warm"]}, "temperature", "temperature must be a number"),
        ({"temperature": ["nan"]}, "temperature", "temperature must be between 0 and 1"),
        ({"stream": ["yes"]}, "stream", "stream must be true or false"),
        (
            {"timestamp_granularities[]": ["word", "line"]},
            "timestamp_granularities[]",
            "timestamp_granularities[] takes 'word' or 'segment', not 'line'",
        ),
        ({"include[]": ["scores"]}, "include[]", "include[] takes 'logprobs', not 'scores'"),
    ],
)
def test_a_value_the_schema_refuses_is_a_400_naming_the_field_as_sent(
    fields: dict[str, list[str]], param: str, message: str
) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(fields, CATALOG)
    assert (caught.value.param, caught.value.message, caught.value.status) == (param, message, 400)


def test_a_whole_number_is_read_however_it_is_written() -> None:
    for written in ("3", "3.0", "3e0", " 3 "):
        assert parse_request({"beam_size": [written]}, CATALOG).options.beam_size == 3


def test_empty_values_are_values_not_given_and_lists_take_both_spellings() -> None:
    form = RequestForm.of(
        {
            "temperature": [""],
            "model": [""],
            "timestamp_granularities": ["word"],
            "timestamp_granularities[]": ["segment"],
        }
    )
    assert (form.temperature, form.model, form.timestamp_granularities) == (
        0.0,
        None,
        ["segment", "word"],
    )
    translation = parse_request({"language": ["de"]}, CATALOG, task=Task.TRANSLATE).options
    assert translation.language == "de"  # the speech's language, shown on the form
