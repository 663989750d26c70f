"""Cutting transcripts into subtitle cues people can read, and checking the shaping options,
without the model."""

from __future__ import annotations

import dataclasses
import io
import json
import re

import pytest

from asrserve.batch_api.models import ENDPOINT, BatchItem
from asrserve.batch_api.output import split_lines
from asrserve.batch_lines import InvalidInput, parse_input
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.formats import ResponseFormat, WhisperOutput, render, render_whisper, to_srt, to_vtt
from asrserve.jobs.models import Job, JobStatus
from asrserve.requests import parse_cue_limits, parse_request
from asrserve.subtitles import KARAOKE_MAX_WORDS, Cue, CueLimits, cues, timed_texts
from asrserve.transcript import Segment, Transcript, Word
from tests.support.subtitles import check_cues, parse_srt, parse_vtt

MODEL = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])
PROSE = (
    "The quick brown fox jumps over the lazy dog near the river bank. Then it runs away,"
    " far from the farm and the barking dogs, and sleeps under an old oak tree until the"
    " morning comes again Is anyone there? Nobody answered the call that came at midnight"
    " because the whole village was asleep after the long harvest festival"
)


def segment(text: str, start: float, end: float, words: list[Word] | None) -> Segment:
    return Segment(
        id=0,
        seek=0,
        start=start,
        end=end,
        text=text,
        tokens=[],
        temperature=0.0,
        avg_logprob=-0.1,
        compression_ratio=1.0,
        no_speech_prob=0.0,
        words=words,
    )


def spoken(text: str, *, step: float = 0.4, pauses: dict[int, float] | None = None) -> Transcript:
    """One paragraph-sized segment (as batched decoding makes them) of ``text``'s words,
    each 0.3 s long, ``step`` s apart, with extra pauses after the words indexed."""
    words, clock = [], 0.0
    for index, word in enumerate(text.split()):
        words.append(Word(word=f" {word}", start=round(clock, 3), end=round(clock + 0.3, 3)))
        clock += step + (pauses or {}).get(index, 0.0)
    return Transcript(
        language="en", duration=clock + 1.0, segments=[segment(f" {text}", 0.0, clock, words)]
    )


def plain(cue: Cue) -> str:
    return " ".join(cue.text().split())


def within(cut: list[Cue], limits: CueLimits) -> None:
    for cue in cut:
        lines = cue.text().split("\n")
        assert len(lines) <= limits.max_line_count, cue
        assert all(len(line) <= limits.max_line_width for line in lines), cue
        assert cue.end - cue.start <= limits.max_cue_seconds + 1e-9, cue
        if limits.max_words_per_cue is not None:
            assert len(cue.words) <= limits.max_words_per_cue, cue


@pytest.mark.parametrize(
    "limits",
    [
        CueLimits(),
        CueLimits(max_line_width=16, max_line_count=1),
        CueLimits(max_line_width=30, max_line_count=3, max_words_per_cue=6, max_cue_seconds=2.0),
    ],
    ids=["defaults", "one-short-line", "tight"],
)
def test_every_cue_is_within_the_limits_and_keeps_the_text(limits: CueLimits) -> None:
    transcript = spoken(PROSE, pauses={30: 0.8})
    cut = cues(transcript, limits)
    within(cut, limits)
    assert len(cut) > 2
    assert " ".join(plain(cue) for cue in cut) == " ".join(transcript.text.split())
    check_cues(parse_srt(to_srt(transcript, limits)), transcript.duration)


def test_defaults_are_two_lines_of_42_characters() -> None:
    assert CueLimits() == CueLimits(42, 2, None, 7.0, False)
    transcript = spoken(PROSE)
    assert render(transcript, ResponseFormat.SRT) == to_srt(transcript, CueLimits())
    lines = [line for cue in cues(transcript, CueLimits()) for line in cue.text().split("\n")]
    assert all(len(line) <= 42 for line in lines)


def test_a_full_cue_ends_at_its_last_sentence_end() -> None:
    text = "one two three. four five six seven eight"
    cut = cues(spoken(text), CueLimits(max_words_per_cue=5))
    assert [plain(c) for c in cut] == ["one two three.", "four five six seven eight"]


def test_without_a_sentence_end_a_full_cue_ends_at_its_longest_pause() -> None:
    text = "one two, three four five six seven eight"
    cut = cues(spoken(text, pauses={2: 0.5, 0: 0.2}), CueLimits(max_words_per_cue=5))
    assert [plain(c) for c in cut] == ["one two, three", "four five six seven eight"]


def test_without_a_sentence_end_or_a_pause_a_full_cue_ends_at_its_last_comma() -> None:
    text = "one two, three four five six seven eight"
    cut = cues(spoken(text), CueLimits(max_words_per_cue=5))
    assert [plain(c) for c in cut] == ["one two,", "three four five six seven", "eight"]


def test_a_long_pause_always_ends_a_cue() -> None:
    cut = cues(spoken("one two three four", pauses={1: 2.5}), CueLimits())
    assert [plain(c) for c in cut] == ["one two", "three four"]


def test_lines_are_wrapped_evenly_between_words_and_a_long_word_is_its_own_line() -> None:
    cut = cues(spoken("The quick brown fox jumps over the lazy dog."), CueLimits())
    assert cut[0].text() == "The quick brown fox\njumps over the lazy dog."
    word = "Pneumonoultramicroscopicsilicovolcanoconiosis"
    cut = cues(spoken(f"a {word} b"), CueLimits(max_line_width=10, max_line_count=3))
    assert [c.text() for c in cut] == [f"a\n{word}\nb"]


def test_cue_times_never_go_back_end_before_the_next_and_stay_in_the_audio() -> None:
    words = [
        Word(word=" one", start=1.0, end=2.5),
        Word(word=" two.", start=0.8, end=1.2),  # the aligner's times can go back
        Word(word=" three", start=2.0, end=9.5),
    ]
    transcript = Transcript(
        language="en", duration=9.0, segments=[segment(" one two. three", 0.8, 9.5, words)]
    )
    cut = cues(transcript, CueLimits(max_words_per_cue=2, max_cue_seconds=5.0))
    assert [(c.start, c.end, plain(c)) for c in cut] == [
        (1.0, 2.0, "one two."),
        (2.0, 7.0, "three"),  # a word longer than a cue may last: shown that long
    ]


def test_karaoke_vtt_underlines_each_word_in_its_time() -> None:
    transcript = spoken("Hello big world.", step=0.5)
    vtt = to_vtt(transcript, CueLimits(highlight_words=True))
    assert vtt == (
        "WEBVTT\n\n"
        "00:00:00.000 --> 00:00:00.300\n<u>Hello</u> big world.\n\n"
        "00:00:00.300 --> 00:00:00.500\nHello big world.\n\n"
        "00:00:00.500 --> 00:00:00.800\nHello <u>big</u> world.\n\n"
        "00:00:00.800 --> 00:00:01.000\nHello big world.\n\n"
        "00:00:01.000 --> 00:00:01.300\nHello big <u>world.</u>\n"
    )
    cues_shown = parse_vtt(vtt)
    check_cues(cues_shown, transcript.duration)
    assert {re.sub("</?u>", "", c.text) for c in cues_shown} == {"Hello big world."}


def test_a_karaoke_cue_holds_a_bounded_number_of_words() -> None:
    """With the widest limits a cue took ~300 words and was written once per word: output
    grew with the square of the cue (~3 KB per word of the transcript). A karaoke cue holds
    at most KARAOKE_MAX_WORDS; the same limits without karaoke keep their wide cues."""
    transcript = spoken(" ".join(["word"] * 600), step=0.05)  # no pause, 30 s
    wide = CueLimits(max_line_width=200, max_line_count=10, max_cue_seconds=60.0)
    karaoke = dataclasses.replace(wide, highlight_words=True)
    assert max(len(cue.words) for cue in cues(transcript, karaoke)) == KARAOKE_MAX_WORDS
    assert max(len(cue.words) for cue in cues(transcript, wide)) > 300
    vtt = to_vtt(transcript, karaoke)
    assert len(vtt) / 600 < 2 * KARAOKE_MAX_WORDS * len(" word") + 100  # bytes per word


def test_segments_without_words_are_split_by_character_share() -> None:
    text = " aaaa bb, cccc dd. eeee"  # 18 characters but spaces over 1.8 s: 0.1 s each
    transcript = Transcript(language="en", duration=5.0, segments=[segment(text, 2.0, 3.8, None)])
    timed = [(round(s, 3), round(e, 3), t) for s, e, t, _ in timed_texts(transcript, CueLimits())]
    assert timed == [(2.0, 3.8, "aaaa bb, cccc dd. eeee")]
    tight = CueLimits(max_line_width=10, max_line_count=1)
    timed = [(round(s, 3), round(e, 3), t) for s, e, t, _ in timed_texts(transcript, tight)]
    assert timed == [(2.0, 2.7, "aaaa bb,"), (2.7, 3.4, "cccc dd."), (3.4, 3.8, "eeee")]


def test_whisper_tsv_has_a_row_a_cue() -> None:
    transcript = spoken("one two three. four five six", step=0.5)
    tsv = render_whisper(transcript, WhisperOutput.TSV, CueLimits(max_words_per_cue=3))
    assert tsv == "start\tend\ttext\n0\t1300\tone two three.\n1500\t2800\tfour five six\n"


def fields(**values: str) -> dict[str, list[str]]:
    return {name: [value] for name, value in values.items()}


def test_shaping_fields_are_parsed_with_defaults_for_the_rest() -> None:
    given = fields(max_line_width="32", max_words_per_cue="7", highlight_words="true")
    limits = parse_cue_limits(given, True, needs="srt")
    assert limits == CueLimits(32, 2, 7, 7.0, True)
    assert parse_cue_limits({}, True, needs="srt") == CueLimits()
    assert parse_cue_limits({}, False, needs="srt") is None


@pytest.mark.parametrize(
    ("given", "param", "message"),
    [
        (fields(max_line_width="9"), "max_line_width", "between 10 and 200"),
        (fields(max_line_width="wide"), "max_line_width", "must be a number"),
        (fields(max_line_count="2.5"), "max_line_count", "whole number"),
        (fields(max_line_count="11"), "max_line_count", "between 1 and 10"),
        (fields(max_words_per_cue="0"), "max_words_per_cue", "between 1 and 100"),
        (fields(max_cue_seconds="0.5"), "max_cue_seconds", "between 1 and 60"),
        (fields(highlight_words="maybe"), "highlight_words", "true or false"),
    ],
)
def test_a_shaping_field_out_of_bounds_is_refused_by_name(
    given: dict[str, list[str]], param: str, message: str
) -> None:
    with pytest.raises(InvalidRequest, match=message) as caught:
        parse_cue_limits(given, True, needs="srt")
    assert caught.value.param == param


def test_shaping_a_format_that_is_not_subtitles_is_refused_by_name() -> None:
    with pytest.raises(InvalidRequest, match="needs response_format srt or vtt") as caught:
        parse_cue_limits(fields(max_cue_seconds="3"), False, needs="response_format srt or vtt")
    assert caught.value.param == "max_cue_seconds"
    with pytest.raises(InvalidRequest, match="highlight_words needs output") as caught:
        parse_cue_limits(fields(highlight_words="1"), True, needs="output srt", highlight=False)
    assert caught.value.param == "highlight_words"


def test_a_subtitle_request_asks_for_word_timestamps_and_carries_its_limits() -> None:
    srt = parse_request(fields(response_format="srt", max_line_count="1"), MODEL)
    assert srt.options.word_timestamps and srt.cues == CueLimits(max_line_count=1)
    assert not srt.words  # no words in the answer: they only cut the cues
    plain_json = parse_request({}, MODEL)
    assert not plain_json.options.word_timestamps and plain_json.cues is None
    with pytest.raises(InvalidRequest, match="needs response_format srt or vtt") as caught:
        parse_request(fields(response_format="text", max_line_width="30"), MODEL)
    assert caught.value.param == "max_line_width"


def test_an_async_job_is_shaped_when_its_transcript_is_fetched() -> None:
    job = parse_request(fields(response_format="vtt"), MODEL, shaping=False)
    assert job.options.word_timestamps and job.cues is None
    with pytest.raises(InvalidRequest, match="when the transcript is fetched") as caught:
        parse_request(fields(response_format="vtt", max_line_count="1"), MODEL, shaping=False)
    assert caught.value.param == "max_line_count"


def test_a_batch_line_carries_its_limits_to_its_output_line() -> None:
    body = {"file": "file-1", "response_format": "srt", "max_words_per_cue": 3}
    entry = {"custom_id": "a", "method": "POST", "url": ENDPOINT, "body": body}
    (request,) = parse_input(io.BytesIO(json.dumps(entry).encode()), MODEL, 10, 1024)
    assert request.request.cues == CueLimits(max_words_per_cue=3)
    with pytest.raises(InvalidInput) as caught:
        bad = {**entry, "body": {**body, "response_format": "json"}}
        parse_input(io.BytesIO(json.dumps(bad).encode()), MODEL, 10, 1024)
    assert caught.value.errors[0].param == "body.max_words_per_cue"
    item = BatchItem(
        batch_id="batch_x1",
        line=1,
        custom_id="a",
        job_id="job_x1_1",
        response_format=ResponseFormat.SRT,
        cues=request.request.cues,
    )
    stored = BatchItem.model_validate_json(item.model_dump_json())
    result = spoken("one two three four five")
    job = Job(id="job_x1_1", status=JobStatus.SUCCEEDED, batch_id="batch_x1", result=result)
    (output,), _ = split_lines([stored], {"job_x1_1": job}, "batch_expired")
    cues_written = parse_srt(json.loads(output)["response"]["body"])
    assert [c.text for c in cues_written] == ["one two three", "four five"]
