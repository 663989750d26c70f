"""Languages per tenant, piece by piece (no model, no server): a key's list and default as
``keys create`` takes them, a request checked against them on every route that parses one,
detection restricted to them, and what ``/v1/models`` says of them."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from asrserve.api.model_routes import languages_for
from asrserve.batch_lines import InvalidInput, parse_input
from asrserve.cli.main import main
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.jobs.models import Job
from asrserve.languages import ANY_LANGUAGE, LanguageRule, restricted
from asrserve.live import beta as live_config
from asrserve.requests import parse_request
from asrserve.vocabulary import Task, TranscriptionOptions

ENGLISH = ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)
BASE = ModelInfo(id="base", multilingual=True, default_beam_size=5)
SERVED = Catalog.of([BASE, ENGLISH])  # base is the default
GERMAN_FRENCH = LanguageRule(("de", "fr"))


def refusal(
    fields: dict[str, list[str]], rule: LanguageRule, task: Task = Task.TRANSCRIBE
) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(fields, SERVED, languages=rule, task=task)
    return caught.value


def test_a_key_rule_is_parsed_from_the_flags_or_refused_saying_why() -> None:
    assert LanguageRule.parse(" EN,de, en", "de") == LanguageRule(("en", "de"), "de")
    assert LanguageRule.parse(None, "fr") == LanguageRule((), "fr")  # any language, French first
    assert LanguageRule.parse(None, None) == ANY_LANGUAGE
    cases = {
        ("en,xx", None): "--languages: unknown language 'xx'",
        ("de,fr", "en"): "--default-language en is not one of --languages (de, fr)",
        (" , ", None): "--languages names no language",
        (None, "german"): "--default-language: unknown language 'german'",
    }
    for (languages, default), message in cases.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            LanguageRule.parse(languages, default)


def test_the_keys_command_stores_and_lists_languages_and_refuses_bad_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    create = ["keys", "create", "--name", "de", "--languages", "de,fr"]
    assert main([*create, "--default-language", "de", *data]) == 0
    assert main(["keys", "create", "--name", "open", *data]) == 0
    capsys.readouterr()
    assert main([*create, "--default-language", "it", *data]) == 2
    assert "--default-language it is not one of --languages (de, fr)" in capsys.readouterr().err
    assert main(["keys", "list", *data]) == 0
    header, german, everything = capsys.readouterr().out.splitlines()
    assert header.split()[4:6] == ["languages", "default"]
    assert german.split()[4:6] == ["de,fr", "de"] and everything.split()[4:6] == ["any", "-"]


def test_restricted_detection_is_the_most_probable_allowed_language_renormalised() -> None:
    ranked = [("en", 0.6), ("nl", 0.3), ("de", 0.075), ("fr", 0.025)]
    assert restricted(ranked, ()) == ("en", 0.6)
    code, probability = restricted(ranked, ("de", "fr"))
    assert (code, round(probability, 9)) == ("de", 0.75)  # 0.075 of the 0.1 the two share
    assert restricted(ranked, ("fr",)) == ("fr", 1.0)
    with pytest.raises(ValueError, match="xx"):
        restricted(ranked, ("xx",))


def test_a_request_outside_the_key_languages_is_refused_naming_them() -> None:
    for task in (Task.TRANSCRIBE, Task.TRANSLATE):
        error = refusal({"language": ["en"]}, GERMAN_FRENCH, task=task)
        assert (error.code, error.param) == ("language_not_allowed", "language")
        assert "allows only de, fr" in error.message
    allowed = parse_request({"language": ["FR"]}, SERVED, languages=GERMAN_FRENCH).options
    assert (allowed.language, allowed.languages) == ("fr", ())


def test_a_request_languages_narrow_detection_within_the_key_languages() -> None:
    """OpenAI's ``languages[]``: detected among the request's list, as among a key's; one
    language is that language; the key's list still bounds it; never with ``language``."""

    def options(fields: dict[str, list[str]], rule: LanguageRule) -> TranscriptionOptions:
        return parse_request(fields, SERVED, languages=rule).options

    among = options({"languages[]": ["FR", "de", "fr"]}, ANY_LANGUAGE)
    assert (among.language, among.languages) == (None, ("fr", "de"))
    with_default = LanguageRule(("de", "fr"), "de")  # the request's list overrides the default
    assert options({"languages": ["fr", "de"]}, with_default).languages == ("fr", "de")
    assert options({"languages[]": ["fr"]}, with_default).language == "fr"
    english = options({"model": ["tiny.en"], "languages[]": ["en"]}, ANY_LANGUAGE)
    assert (english.language, english.languages) == ("en", ())
    cases = {
        ("languages[]", "it"): (GERMAN_FRENCH, "language_not_allowed"),
        ("languages[]", "xx"): (ANY_LANGUAGE, None),
    }
    for (param, value), (rule, expected) in cases.items():
        error = refusal({param: ["de", value]}, rule)
        assert (error.param, error.code) == ("languages[]", expected), error.message
    both = refusal({"languages[]": ["de"], "language": ["de"]}, ANY_LANGUAGE)
    assert (both.param, both.message) == ("languages[]", "give language or languages[], not both")
    english_only = refusal({"model": ["tiny.en"], "languages[]": ["de"]}, ANY_LANGUAGE)
    assert (english_only.param, english_only.code) == ("model", "unsupported_language")
    assert "this request's languages[] allows only de" in english_only.message
    english_first = Catalog.of([ENGLISH, BASE])  # an omitted model: one that speaks them
    german = parse_request({"languages[]": ["de"]}, english_first).options
    assert (german.model, german.language) == ("base", "de")
    many = refusal({"languages[]": ["de"] * 21}, ANY_LANGUAGE)
    assert (many.param, many.message) == ("languages[]", "languages[] takes at most 20 values")


def test_no_language_is_the_default_the_only_one_or_detected_among_the_list() -> None:
    def options(rule: LanguageRule, task: Task = Task.TRANSCRIBE) -> TranscriptionOptions:
        return parse_request({}, SERVED, languages=rule, task=task).options

    assert (options(GERMAN_FRENCH).language, options(GERMAN_FRENCH).languages) == (
        None,
        ("de", "fr"),
    )
    with_default = LanguageRule(("de", "fr"), "fr")
    assert (options(with_default).language, options(with_default).languages) == ("fr", ())
    assert options(LanguageRule(("it",))).language == "it"  # one language: no detection
    assert options(LanguageRule((), "de")).language == "de"
    assert options(with_default, Task.TRANSLATE).language == "fr"  # the source language
    detect = options(with_default, Task.DETECT)  # /detect-language: detected, never assumed
    assert (detect.language, detect.languages) == (None, ("de", "fr"))
    assert options(ANY_LANGUAGE) == parse_request({}, SERVED).options


def test_an_english_only_model_is_refused_for_a_key_that_never_speaks_english() -> None:
    error = refusal({"model": ["tiny.en"]}, GERMAN_FRENCH)
    assert (error.code, error.param) == ("unsupported_language", "model")
    assert "English only" in error.message and "de, fr" in error.message
    defaulted = refusal({"model": ["tiny.en"]}, LanguageRule(("en", "de"), "de"))
    assert (defaulted.code, defaulted.param) == ("unsupported_language", "model")
    assert "'de'" in defaulted.message
    english = parse_request({"model": ["tiny.en"]}, SERVED, languages=LanguageRule(("en", "de")))
    assert (english.options.language, english.options.languages) == (None, ())  # nothing to detect


def test_batch_lines_are_checked_against_the_owners_languages() -> None:
    lines = [
        {"custom_id": c, "method": "POST", "url": "/v1/audio/transcriptions", "body": body}
        for c, body in (("a", {"file": "f"}), ("b", {"file": "f", "language": "en"}))
    ]
    data = "\n".join(json.dumps(line) for line in lines).encode()
    (_, second) = parse_input(io.BytesIO(data), SERVED, 10, 1024)
    assert second.request.options.language == "en"
    with pytest.raises(InvalidInput) as caught:
        parse_input(io.BytesIO(data), SERVED, 10, 1024, languages=GERMAN_FRENCH)
    (error,) = caught.value.errors
    assert (error.line, error.code, error.param) == (2, "language_not_allowed", "body.language")
    among = {"file": "f", "languages": ["de", "fr"]}
    line = {"custom_id": "c", "method": "POST", "url": "/v1/audio/transcriptions", "body": among}
    (parsed,) = parse_input(io.BytesIO(json.dumps(line).encode()), SERVED, 10, 1024)
    assert parsed.request.options.languages == ("de", "fr")
    assert "de, fr" in error.message


def test_a_live_session_takes_the_key_default_and_refuses_other_languages() -> None:
    rule = LanguageRule(("de", "fr"), "de")
    start = live_config.default_config(SERVED, rule)
    assert start.options.language == "de"
    update = {"input_audio_transcription": {"language": "en"}}
    with pytest.raises(InvalidRequest) as caught:
        live_config.updated(start, update, SERVED, rule)
    assert (caught.value.code, caught.value.param) == ("language_not_allowed", "language")
    french = {"input_audio_transcription": {"language": "fr"}}
    assert live_config.updated(start, french, SERVED, rule).options.language == "fr"
    among = {"input_audio_transcription": {"languages": ["fr", "de"]}}
    assert live_config.updated(start, among, SERVED, rule).options.languages == ("fr", "de")
    for languages, param in (
        (["it"], "languages[]"),
        ("fr", "session.input_audio_transcription.languages"),
    ):
        wrong = {"input_audio_transcription": {"languages": languages}}
        with pytest.raises(InvalidRequest) as caught:
            live_config.updated(start, wrong, SERVED, rule)
        assert caught.value.param == param


def test_a_key_never_speaking_english_gets_a_multilingual_model_by_default() -> None:
    """The default model English-only, base served beside it. Before, a German-French key
    could not open a live session at all (the session's first settings were refused), and
    ``whisper-1`` was refused on every route."""
    english_first = Catalog.of([ENGLISH, BASE])
    start = live_config.default_config(english_first, GERMAN_FRENCH)
    assert (start.options.model, start.options.languages) == ("base", ("de", "fr"))
    update = {"input_audio_transcription": {"model": "whisper-1", "language": "fr"}}
    updated = live_config.updated(start, update, english_first, GERMAN_FRENCH)
    assert (updated.options.model, updated.options.language) == ("base", "fr")
    for rule, model in [
        (GERMAN_FRENCH, "base"),
        (LanguageRule((), "de"), "base"),  # any language, German assumed
        (LanguageRule(("en", "de")), "tiny.en"),  # English allowed, none assumed
        (ANY_LANGUAGE, "tiny.en"),
    ]:
        request = parse_request({"model": ["whisper-1"]}, english_first, languages=rule)
        assert request.options.model == model, rule
    with pytest.raises(InvalidRequest) as caught:  # no multilingual model: says why
        live_config.default_config(Catalog.of([ENGLISH]), GERMAN_FRENCH)
    assert (caught.value.code, caught.value.param) == ("unsupported_language", "model")


def test_model_cards_show_the_key_languages_for_each_model() -> None:
    assert languages_for(BASE, ANY_LANGUAGE) == {
        "allowed_languages": None,
        "default_language": None,
    }
    assert languages_for(ENGLISH, ANY_LANGUAGE)["default_language"] == "en"
    german = LanguageRule(("de", "fr"), "de")
    assert languages_for(BASE, german) == {
        "allowed_languages": ["de", "fr"],
        "default_language": "de",
    }
    assert languages_for(ENGLISH, german) == {"allowed_languages": [], "default_language": None}
    both = LanguageRule(("en", "de"))
    assert languages_for(ENGLISH, both) == {"allowed_languages": ["en"], "default_language": "en"}
    assert languages_for(BASE, LanguageRule(("it",)))["default_language"] == "it"


def test_jobs_stored_before_languages_read_as_detecting_among_all() -> None:
    old = '{"id": "job_old", "options": {"model": "base", "language": null}}'
    assert Job.model_validate_json(old).options.languages == ()
    options = TranscriptionOptions(model="base", languages=("de", "fr"))
    assert TranscriptionOptions.model_validate_json(options.model_dump_json()) == options


def test_asr_picks_a_multilingual_model_for_a_key_that_needs_one() -> None:
    from asrserve.api.asr_webservice_routes import _needs_languages

    assert not _needs_languages("transcribe", None, ANY_LANGUAGE)
    assert not _needs_languages("transcribe", None, LanguageRule(("en", "de")))
    assert _needs_languages("transcribe", None, GERMAN_FRENCH)  # English is not allowed
    assert _needs_languages("transcribe", None, LanguageRule(("en", "de"), "de"))  # the default
    assert _needs_languages("transcribe", "DE", ANY_LANGUAGE)
    assert _needs_languages("translate", None, ANY_LANGUAGE)
