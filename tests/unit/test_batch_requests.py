"""Batch input validation and output files: pure functions, no server."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from asrserve import batch_lines as requests_module
from asrserve.batch_api.models import ENDPOINT as TRANSCRIPTIONS
from asrserve.batch_api.models import TRANSLATIONS, BatchItem
from asrserve.batch_api.output import split_lines
from asrserve.batch_lines import (
    InvalidInput,
    RequestLine,
    count_requests,
    jsonl_lines,
    parse_input,
)
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.formats import ResponseFormat
from asrserve.jobs.models import Job, JobError, JobStatus
from asrserve.request_schema import MAX_PROMPT_CHARS
from asrserve.requests import parse_request
from asrserve.vocabulary import Task
from tests.support.fakes import transcript

MODEL = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])
LINE_LIMIT = 1024


def parse(data: bytes, max_requests: int = 10) -> list[RequestLine]:
    return parse_input(io.BytesIO(data), MODEL, max_requests, LINE_LIMIT)


def line(custom_id: str = "a", **body: Any) -> str:
    return json.dumps(
        {
            "custom_id": custom_id,
            "method": "POST",
            "url": "/v1/audio/transcriptions",
            "body": {"file": "file-1", **body},
        }
    )


def test_parses_options_like_the_form_endpoint() -> None:
    data = "\n".join(
        [
            line("a"),
            "",
            line(
                "b", response_format="verbose_json", timestamp_granularities=["word"], beam_size=1
            ),
            line("c", temperature=0.2, language="en", prompt="Names: Ada."),
        ]
    ).encode()
    a, b, c = parse(data)
    assert (a.line, b.line, c.line) == (1, 3, 4)
    assert a.request.options.beam_size == 5 and a.request.response_format is ResponseFormat.JSON
    assert (
        b.request.words and b.request.options.word_timestamps and b.request.options.beam_size == 1
    )
    assert c.request.options.temperature == 0.2 and c.request.options.prompt == "Names: Ada."


@pytest.mark.parametrize(
    ("raw", "code", "param"),
    [
        (b"\xff\xfe", "invalid_encoding", None),
        (b"", "empty_file", None),
        (b"[1, 2]", "invalid_request", None),
        (line("a", response_format="docx").encode(), "invalid_body", "body.response_format"),
        (line("a", beam_size=50).encode(), "invalid_body", "body.beam_size"),
        (line("a", file=7).encode(), "invalid_body", "body.file"),
        (line("").encode(), "invalid_custom_id", "custom_id"),
        (line("a").replace('"POST"', '"GET"').encode(), "invalid_method", "method"),
    ],
)
def test_rejects(raw: bytes, code: str, param: str | None) -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(raw)
    (error,) = caught.value.errors
    assert (error.code, error.param) == (code, param)


def test_too_many_requests_and_error_cap() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse("\n".join(line(str(i)) for i in range(4)).encode(), max_requests=3)
    assert caught.value.errors[0].code == "too_many_requests"
    with pytest.raises(InvalidInput) as caught:
        parse(b"x\n" * 500, max_requests=1000)
    assert len(caught.value.errors) == 100 and caught.value.errors[-1].line == 100


def test_lines_split_on_newline_only_and_count_as_parsed() -> None:
    """\\r, \\x1e and U+2028 inside a line keep it one line; the count for admission is
    the parse's count (before: admission split on \\n, parsing on every line boundary)."""
    cr = line("cr").replace(", ", ",\r ")  # \r between tokens: JSON whitespace
    rs = line("rs", prompt="a b").replace(" b", "\u2028b")  # a raw U+2028 in a JSON string
    record_separator = "\x1e" + line("x1e")  # RFC 7464 style record separator
    data = "\n".join([cr, "", rs, "  ", record_separator, line("last")]).encode()
    with pytest.raises(InvalidInput) as caught:
        parse(data)
    (error,) = caught.value.errors  # \x1e is no JSON whitespace: that line alone is invalid
    assert (error.code, error.line) == ("invalid_json", 5)
    valid = "\n".join([cr, "", rs, "  ", line("last")]).encode()
    requests = parse(valid)
    assert [(r.line, r.custom_id) for r in requests] == [(1, "cr"), (3, "rs"), (5, "last")]
    assert requests[1].request.options.prompt == "a\u2028b"
    assert "\u2028".encode() in valid and b"\r" in valid
    assert count_requests(io.BytesIO(valid), LINE_LIMIT, 10) == len(requests) == 3
    assert count_requests(io.BytesIO(data), LINE_LIMIT, 10) == 4


def test_an_overlong_line_fails_alone_and_is_never_held() -> None:
    huge = line("huge", prompt="x" * 5000)
    data = "\n".join([line("a"), huge, line("b"), "{not json"]).encode()
    numbers = [(raw.number, raw.data is None) for raw in jsonl_lines(io.BytesIO(data), 1024)]
    assert numbers == [(1, False), (2, True), (3, False), (4, False)]
    with pytest.raises(InvalidInput) as caught:
        parse(data)
    errors = [(e.code, e.line) for e in caught.value.errors]
    assert errors == [("line_too_long", 2), ("invalid_json", 4)]

    class Reads(io.BytesIO):
        longest = 0

        def read(self, size: int | None = -1) -> bytes:
            piece = super().read(size)
            Reads.longest = max(Reads.longest, len(piece))
            return piece

    assert count_requests(Reads(b"y" * 1_000_000 + b"\n" + line("z").encode()), 1024, 10) == 2
    assert Reads.longest <= 64 * 1024


def test_line_limit_counts_bytes_without_the_newline() -> None:
    exact = line("e", prompt="p" * 100).encode()
    limit = len(exact)
    assert parse_input(io.BytesIO(exact + b"\n"), MODEL, 10, limit)[0].custom_id == "e"
    assert parse_input(io.BytesIO(exact), MODEL, 10, limit)[0].custom_id == "e"
    with pytest.raises(InvalidInput) as caught:
        parse_input(io.BytesIO(exact + b" \n"), MODEL, 10, limit)
    assert caught.value.errors[0].code == "line_too_long"


def test_deeply_nested_json_is_a_line_error() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_input(io.BytesIO(b"[" * 60_000 + b"\n" + line("a").encode()), MODEL, 10, 65536)
    (error,) = caught.value.errors
    assert (error.code, error.line) == ("invalid_json", 1)


def test_echoed_values_are_short() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse(line("a", **{"k" * 600: 1}).encode())
    assert caught.value.errors[0].param == "body" and len(caught.value.errors[0].message) < 200
    with pytest.raises(InvalidInput) as caught:
        parse(line("a", file="file-" + "f" * 500).encode())
    assert caught.value.errors[0].param == "body.file"


def test_prompt_is_capped() -> None:
    fits = parse_request({"prompt": ["p" * MAX_PROMPT_CHARS]}, MODEL)
    assert fits.options.prompt == "p" * MAX_PROMPT_CHARS
    with pytest.raises(InvalidRequest) as caught:
        parse_request({"prompt": ["p" * (MAX_PROMPT_CHARS + 1)]}, MODEL)
    assert (caught.value.param, caught.value.code) == ("prompt", "prompt_too_long")
    with pytest.raises(InvalidInput) as batch:
        data = line("a", prompt="p" * (MAX_PROMPT_CHARS + 1)).encode()
        parse_input(io.BytesIO(data), MODEL, 10, 64 * 1024)
    (error,) = batch.value.errors
    assert (error.code, error.param) == ("prompt_too_long", "body.prompt")


def test_a_prompt_holding_whispers_control_token_text_is_refused() -> None:
    """``<|endoftext|>`` in a prompt is Whisper's end-of-text token to its tokenizer: a
    400 naming ``prompt``, not a prompt that ends the decode."""
    with pytest.raises(InvalidRequest) as caught:
        parse_request({"prompt": ["Meeting notes <|endoftext|> go on"]}, MODEL)
    assert (caught.value.param, caught.value.status) == ("prompt", 400)
    assert "'<|'" in caught.value.message
    assert parse_request({"prompt": ["a < b | c"]}, MODEL).options.prompt == "a < b | c"


def test_a_translations_batch_runs_its_lines_as_translations() -> None:
    base = ModelInfo(id="base", multilingual=True, default_beam_size=5)
    served = Catalog.of([base, *MODEL.models])
    data = line("a", language="de").replace(TRANSCRIPTIONS, TRANSLATIONS).encode()
    (translated,) = parse_input(io.BytesIO(data), served, 10, LINE_LIMIT, TRANSLATIONS)
    options = translated.request.options
    assert (options.task, options.model, options.language) == (Task.TRANSLATE, "base", "de")
    with pytest.raises(InvalidInput) as english_only:
        parse_input(io.BytesIO(data), MODEL, 10, LINE_LIMIT, TRANSLATIONS)
    (error,) = english_only.value.errors
    assert (error.code, error.param, error.line) == ("translation_unsupported", "body.model", 1)


def test_each_line_url_is_the_batch_endpoint() -> None:
    """A transcriptions line in a translations batch (and the reverse) is the line's error."""
    with pytest.raises(InvalidInput) as caught:
        parse(line("a").replace(TRANSCRIPTIONS, TRANSLATIONS).encode())
    (error,) = caught.value.errors
    assert (error.code, error.param) == ("invalid_url", "url")
    assert TRANSCRIPTIONS in error.message
    with pytest.raises(InvalidInput) as crossed:
        parse_input(io.BytesIO(line("a").encode()), MODEL, 10, LINE_LIMIT, TRANSLATIONS)
    assert crossed.value.errors[0].code == "invalid_url"


def test_split_lines_one_per_request_in_input_order() -> None:
    def job(job_id: str, status: JobStatus, **fields: Any) -> Job:
        return Job(id=job_id, status=status, batch_id="batch_x1", **fields)

    items = [
        BatchItem(batch_id="batch_x1", line=1, custom_id="ok", job_id="job_x1_1"),
        BatchItem(
            batch_id="batch_x1",
            line=2,
            custom_id="srt",
            job_id="job_x1_2",
            response_format=ResponseFormat.SRT,
        ),
        BatchItem(batch_id="batch_x1", line=3, custom_id="bad", job_id="job_x1_3"),
        BatchItem(
            batch_id="batch_x1",
            line=4,
            custom_id="gone",
            error=JobError(status=404, code="file_not_found", message="no file"),
        ),
        BatchItem(batch_id="batch_x1", line=5, custom_id="late", job_id="job_x1_5"),
    ]
    jobs = {
        "job_x1_1": job("job_x1_1", JobStatus.SUCCEEDED, result=transcript()),
        "job_x1_2": job("job_x1_2", JobStatus.SUCCEEDED, result=transcript()),
        "job_x1_3": job(
            "job_x1_3", JobStatus.FAILED, error=JobError(status=415, code="bad", message="m")
        ),
        "job_x1_5": job("job_x1_5", JobStatus.CANCELLED),
    }
    output, errors = split_lines(items, jobs, "batch_expired")
    out = [json.loads(row) for row in output]
    err = [json.loads(row) for row in errors]
    assert [r["custom_id"] for r in out] == ["ok", "srt"]
    assert out[0]["response"] == {
        "status_code": 200,
        "request_id": "job_x1_1",
        "body": {"text": "hi"},
    }
    assert out[1]["response"]["body"].startswith("1\n00:00:00,000 --> 00:00:01,000\nhi")
    assert [r["custom_id"] for r in err] == ["bad", "gone", "late"]
    assert err[0]["response"]["status_code"] == 415
    assert err[0]["response"]["body"]["error"]["code"] == "bad"
    assert err[1]["response"]["status_code"] == 404 and err[1]["response"]["request_id"] is None
    assert err[2]["response"] is None and err[2]["error"]["code"] == "batch_expired"
    ids = [r["id"] for r in out + err]
    assert len(set(ids)) == 5 and all(i.startswith("batch_req_x1_") for i in ids)


def _lines_by_readline(data: bytes, limit: int) -> list[tuple[int, bytes | None]]:
    """What the lines are, the slow plain way: one bounded ``readline`` a line."""
    found, source = [], io.BytesIO(data)
    for number, raw in enumerate(iter(lambda: source.readline(), b""), start=1):
        content = raw[:-1] if raw.endswith(b"\n") else raw
        if content.strip():
            found.append((number, None if len(content) > limit else content.lstrip()))
    return found


@given(
    pieces=st.lists(
        st.sampled_from([b"\n", b" ", b"\t", b"\r", b"x", b"{}", b"yy" * 4]), max_size=60
    ),
    block=st.integers(min_value=1, max_value=9),
    limit=st.integers(min_value=1, max_value=12),
)
def test_block_reads_find_the_lines_readline_finds(
    pieces: list[bytes], block: int, limit: int
) -> None:
    """Lines cut across blocks, blank runs and overlong lines at any block size: the same
    numbers and bytes (from the first non-blank one) as one readline a line."""
    data = b"".join(pieces)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(requests_module, "BLOCK_BYTES", block)
        got = [(raw.number, raw.data) for raw in jsonl_lines(io.BytesIO(data), limit)]
    assert got == _lines_by_readline(data, limit)


def test_blank_runs_are_read_in_blocks_and_counting_stops_past_the_limit() -> None:
    """16 MiB of newlines is 257 reads, not 16 M (the 100 MiB upload of the hostile review
    took 12.7 s a count); a file past the request limit is counted only to limit + 1."""

    class Reads(io.BytesIO):
        calls = 0

        def read(self, size: int | None = -1) -> bytes:
            Reads.calls += 1
            return super().read(size)

    blank = b"\n" * (16 * 2**20) + line("z").encode()
    assert count_requests(Reads(blank), LINE_LIMIT, 10) == 1
    assert Reads.calls == 16 * 2**20 // (64 * 1024) + 2
    Reads.calls = 0
    many = (line("a") + "\n").encode() * 100_000
    assert count_requests(Reads(many), LINE_LIMIT, 10) == 11
    assert Reads.calls == 1


def test_a_diarized_line_asks_for_speakers_and_its_output_carries_them() -> None:
    (request,) = parse(line("a", response_format="diarized_json").encode())
    assert request.request.options.diarization is not None
    assert request.request.response_format is ResponseFormat.DIARIZED_JSON
    said = transcript()
    labelled = said.model_copy(
        update={"segments": [said.segments[0].model_copy(update={"speaker": "A"})]}
    )
    item = BatchItem(
        batch_id="batch_x1",
        line=1,
        custom_id="a",
        job_id="job_x1_1",
        response_format=ResponseFormat.DIARIZED_JSON,
    )
    done = Job(id="job_x1_1", status=JobStatus.SUCCEEDED, batch_id="batch_x1", result=labelled)
    (output,), _ = split_lines([item], {"job_x1_1": done}, "batch_expired")
    body = json.loads(output)["response"]["body"]
    assert [(s["type"], s["speaker"], s["text"]) for s in body["segments"]] == [
        ("transcript.text.segment", "A", "hi")
    ]


def test_a_lone_surrogate_in_a_key_is_named_by_its_escape() -> None:
    """Before, the error's param held the key itself, which no UTF-8 carries: storing the
    line error failed and the whole batch ended as internal_error."""
    data = line("a").replace('"file": "file-1"', '"file": "file-1", "\\ud800x": 1').encode()
    with pytest.raises(InvalidInput) as caught:
        parse(data)
    (error,) = caught.value.errors
    assert (error.code, error.param, error.line) == ("invalid_encoding", "body.\\ud800x", 1)
    assert error.param is not None and error.param.encode("utf-8") == b"body.\\ud800x"
