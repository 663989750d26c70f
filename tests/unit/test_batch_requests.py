"""Batch input validation and output files: pure functions, no server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from asrserve.api.forms import ModelInfo
from asrserve.batches.models import BatchItem
from asrserve.batches.output import split_lines
from asrserve.batches.requests import InvalidInput, parse_input
from asrserve.formats import ResponseFormat
from asrserve.jobs.models import Job, JobError, JobStatus
from tests.unit.test_backends import transcript

MODEL = ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)


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
    a, b, c = parse_input(data, MODEL, max_requests=10)
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
        parse_input(raw, MODEL, max_requests=10)
    (error,) = caught.value.errors
    assert (error.code, error.param) == (code, param)


def test_too_many_requests_and_error_cap() -> None:
    with pytest.raises(InvalidInput) as caught:
        parse_input("\n".join(line(str(i)) for i in range(4)).encode(), MODEL, max_requests=3)
    assert caught.value.errors[0].code == "too_many_requests"
    with pytest.raises(InvalidInput) as caught:
        parse_input(b"x\n" * 500, MODEL, max_requests=1000)
    assert len(caught.value.errors) == 100 and caught.value.errors[-1].line == 100


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
