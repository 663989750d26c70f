"""The Batch API end to end: real servers, the real model, the official ``openai`` client.

A batch of 100+ requests with broken files among them completes with complete and correct
output and error files; validation errors are line-numbered; cancel keeps partial results;
SIGKILL and restart mid-batch resumes with no request lost or done twice; expiry keeps what
finished; the callback fires; an interactive request is not queued behind the backlog.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer
from tests.support.batches import (
    ENDPOINT,
    client_for,
    create_batch,
    get_batch,
    line,
    upload_audio,
    wait_ended,
    wait_for,
)
from tests.support.servers import Receiver, Server
from tests.support.wait import wait_until

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def short_clips(corpus: list[Clip]) -> list[Clip]:
    """The shortest clips, so batches of 100 run in seconds on two cores."""
    return sorted(corpus, key=lambda clip: clip.duration)[:6]


def jsonl(client: openai.OpenAI, file_id: str | None) -> list[dict[str, Any]]:
    if file_id is None:
        return []
    return [json.loads(row) for row in client.files.content(file_id).text.splitlines()]


def broken_files(tmp_path: Path, good: Path) -> dict[str, tuple[Path, int]]:
    """Files that are not usable audio, and the status their request must fail with."""
    truncated = tmp_path / "truncated.wav"
    truncated.write_bytes(good.read_bytes()[:30])
    random_bytes = tmp_path / "random.wav"
    random_bytes.write_bytes(bytes(range(256)) * 40)
    text = tmp_path / "notes.txt"
    text.write_text("this is not audio at all\n" * 50)
    return {"truncated": (truncated, 415), "random": (random_bytes, 415), "text": (text, 415)}


# --------------------------------------------------------------------------------------


def test_batch_of_100_with_broken_files_and_the_openai_client(
    make_server: type[Server], short_clips: list[Clip], tmp_path: Path
) -> None:
    server = make_server(tmp_path / "data").start()
    client = client_for(server)
    audio_ids = upload_audio(client, [clip.path for clip in short_clips])
    broken = broken_files(tmp_path, next(c.path for c in short_clips if c.path.suffix == ".wav"))
    broken_ids = dict(
        zip(broken, upload_audio(client, [p for p, _ in broken.values()]), strict=True)
    )
    lines, expected = [], {}
    for index in range(104):
        clip_index = index % len(short_clips)
        fmt = ("json", "text", "verbose_json", "srt")[index % 4]
        lines.append(line(f"req-{index}", audio_ids[clip_index], response_format=fmt))
        expected[f"req-{index}"] = (short_clips[clip_index], fmt)
    for name, file_id in broken_ids.items():
        lines.insert(17 * len(lines) // 100, line(f"broken-{name}", file_id))
    lines.append(line("missing", "file-does-not-exist"))
    batch_id = create_batch(client, lines, tmp_path, metadata={"project": "archive"})

    batch = wait_ended(server, batch_id)
    assert batch["status"] == "completed", batch
    assert batch["request_counts"] == {"total": 108, "completed": 104, "failed": 4}
    for stamp in ("created_at", "in_progress_at", "finalizing_at", "completed_at"):
        assert isinstance(batch[stamp], int)
    assert batch["metadata"] == {"project": "archive"}
    retrieved = client.batches.retrieve(batch_id)
    assert retrieved.output_file_id == batch["output_file_id"]

    output = jsonl(client, batch["output_file_id"])
    assert sorted(row["custom_id"] for row in output) == sorted(expected)
    references, hypotheses = [], []
    for row in output:
        assert row["error"] is None and row["response"]["status_code"] == 200
        clip, fmt = expected[row["custom_id"]]
        body = row["response"]["body"]
        if fmt == "srt":
            assert " --> " in body
            text = " ".join(b.split("\n", 2)[2] for b in body.strip().split("\n\n"))
        else:
            text = body if fmt == "text" else body["text"]
        if fmt == "verbose_json":
            assert body["segments"] and body["duration"] == pytest.approx(clip.duration, abs=0.1)
        references.append(clip.text)
        hypotheses.append(text)
    assert wer(references, hypotheses) <= 0.15

    errors = {row["custom_id"]: row for row in jsonl(client, batch["error_file_id"])}
    assert set(errors) == {f"broken-{name}" for name in broken} | {"missing"}
    for name, (_, status) in broken.items():
        response = errors[f"broken-{name}"]["response"]
        assert response["status_code"] == status
        assert response["body"]["error"]["message"]
    assert errors["missing"]["response"]["status_code"] == 404

    listed = httpx.get(f"{server.url}/v1/batches", params={"limit": 5}).json()
    assert [b["id"] for b in listed["data"]] == [batch_id]
    jobs = httpx.get(f"{server.url}/v1/jobs", params={"limit": 1}).json()["data"]
    assert jobs[0]["priority"] == "offline"


def test_invalid_requests_fail_validation_by_line(server: Server, tmp_path: Path) -> None:
    client = client_for(server)
    lines = [
        line("ok", "file-x"),
        "{not json",
        json.dumps({"method": "POST", "url": ENDPOINT, "body": {"file": "f"}}),
        line("ok", "file-y"),
        json.dumps({"custom_id": "u", "method": "POST", "url": "/v1/chat/completions", "body": {}}),
        line("t", "file-z", temperature=7),
        line("k", "file-z", stream=True),
        line("l", "file-z", language="fr"),
    ]
    batch = wait_ended(server, create_batch(client, lines, tmp_path), timeout=30)
    assert batch["status"] == "failed" and isinstance(batch["failed_at"], int)
    errors = {e["line"]: e for e in batch["errors"]["data"]}
    assert sorted(errors) == [2, 3, 4, 5, 6, 7, 8]
    assert errors[2]["code"] == "invalid_json"
    assert errors[3]["param"] == "custom_id"
    assert errors[4]["code"] == "duplicate_custom_id" and "line 1" in errors[4]["message"]
    assert errors[5]["param"] == "url"
    assert errors[6]["param"] == "body.temperature"
    assert "stream" in errors[7]["message"]
    assert errors[8]["code"] == "unsupported_language"
    assert batch["output_file_id"] is None


@pytest.mark.parametrize(
    ("changes", "status", "param"),
    [
        ({"endpoint": "/v1/chat/completions"}, 400, "endpoint"),
        ({"completion_window": "1h"}, 400, "completion_window"),
        ({"input_file_id": "file-missing"}, 404, "file_id"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, 400, "metadata"),
        ({"metadata": {"callback_url": "ftp://example.com/x"}}, 400, "metadata.callback_url"),
    ],
)
def test_create_batch_rejects_bad_parameters(
    server: Server, tmp_path: Path, changes: dict[str, Any], status: int, param: str
) -> None:
    path = tmp_path / "in.jsonl"
    path.write_text(line("a", "file-a") + "\n")
    with path.open("rb") as handle:
        uploaded = httpx.post(
            f"{server.url}/v1/files", files={"file": handle}, data={"purpose": "batch"}
        ).json()
    body = {
        "input_file_id": uploaded["id"],
        "endpoint": ENDPOINT,
        "completion_window": "24h",
        **changes,
    }
    response = httpx.post(f"{server.url}/v1/batches", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param


def test_files_api(server: Server, tmp_path: Path, short_clips: list[Clip]) -> None:
    files = f"{server.url}/v1/files"
    clip = short_clips[0]
    with clip.path.open("rb") as handle:
        audio = httpx.post(files, files={"file": handle}, data={"purpose": "audio"}).json()
    assert audio["object"] == "file" and audio["bytes"] == clip.path.stat().st_size
    assert audio["filename"] == clip.path.name and audio["purpose"] == "audio"
    assert httpx.get(f"{files}/{audio['id']}").json() == audio
    content = httpx.get(f"{files}/{audio['id']}/content")
    assert content.content == clip.path.read_bytes()
    listed = httpx.get(files, params={"purpose": "audio"}).json()
    assert audio["id"] in [f["id"] for f in listed["data"]]

    bad_purpose = httpx.post(files, files={"file": ("a.txt", b"x")}, data={"purpose": "fine-tune"})
    assert bad_purpose.status_code == 400 and bad_purpose.json()["error"]["param"] == "purpose"
    empty = httpx.post(files, files={"file": ("a.jsonl", b"")}, data={"purpose": "batch"})
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "empty_file"
    audio_as_input = {
        "input_file_id": audio["id"],
        "endpoint": ENDPOINT,
        "completion_window": "24h",
    }
    wrong = httpx.post(f"{server.url}/v1/batches", json=audio_as_input)
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "invalid_file_purpose"

    deleted = httpx.delete(f"{files}/{audio['id']}").json()
    assert deleted == {"id": audio["id"], "object": "file", "deleted": True}
    assert httpx.get(f"{files}/{audio['id']}").status_code == 404
    assert httpx.get(f"{files}/{audio['id']}/content").status_code == 404


def test_batch_file_size_limit_is_enforced(make_server: type[Server], tmp_path: Path) -> None:
    server = make_server(
        tmp_path / "data", env={"ASRSERVE_BATCH_API_MAX_FILE_BYTES": "1000"}
    ).start()
    big = (line("a", "file-a") + "\n") * 40
    response = httpx.post(
        f"{server.url}/v1/files", files={"file": ("big.jsonl", big)}, data={"purpose": "batch"}
    )
    assert response.status_code == 413 and response.json()["error"]["code"] == "file_too_large"
    assert list((tmp_path / "data" / "files").iterdir()) == []


# --------------------------------------------------------------------------------------
# Cancel, crash, expiry, callback, priority
# --------------------------------------------------------------------------------------


def many(client: openai.OpenAI, clips: list[Clip], count: int) -> tuple[list[str], dict[str, Clip]]:
    ids = upload_audio(client, [clip.path for clip in clips])
    lines, expected = [], {}
    for index in range(count):
        lines.append(line(f"r{index}", ids[index % len(ids)]))
        expected[f"r{index}"] = clips[index % len(ids)]
    return lines, expected


def test_cancel_keeps_partial_results(
    make_server: type[Server], corpus: list[Clip], tmp_path: Path
) -> None:
    server = make_server(tmp_path / "data").start()
    client = client_for(server)
    lines, expected = many(client, corpus[:12], 40)
    batch_id = create_batch(client, lines, tmp_path)
    wait_for(server, batch_id, lambda b: b["request_counts"]["completed"] >= 3)
    cancelling = client.batches.cancel(batch_id)
    assert cancelling.status == "cancelling"  # in progress: the runner finishes the cancel
    batch = wait_ended(server, batch_id, timeout=60)
    assert batch["status"] == "cancelled" and isinstance(batch["cancelled_at"], int)
    counts = batch["request_counts"]
    assert counts["total"] == 40 and 3 <= counts["completed"] < 40

    output = jsonl(client, batch["output_file_id"])
    errors = jsonl(client, batch["error_file_id"])
    assert len(output) == counts["completed"]
    assert len(output) + len(errors) == 40
    assert {row["custom_id"] for row in output + errors} == set(expected)
    assert all(row["response"]["status_code"] == 200 for row in output)
    assert all(row["error"]["code"] == "batch_cancelled" for row in errors)
    again = httpx.post(f"{server.url}/v1/batches/{batch_id}/cancel")
    assert again.status_code == 409


def test_kill_and_restart_mid_batch_resumes_without_loss_or_duplicates(
    make_server: type[Server], corpus: list[Clip], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    server = make_server(data).start()
    client = client_for(server)
    lines, expected = many(client, corpus[:12], 24)
    batch_id = create_batch(client, lines, tmp_path)
    before = wait_for(server, batch_id, lambda b: b["request_counts"]["completed"] >= 4)
    server.kill()
    assert before["request_counts"]["completed"] < 24, "the batch finished before the kill"

    restarted = make_server(data).start()
    batch = wait_ended(restarted, batch_id)
    assert batch["status"] == "completed"
    assert batch["request_counts"] == {"total": 24, "completed": 24, "failed": 0}
    client = client_for(restarted)
    output = jsonl(client, batch["output_file_id"])
    ids = [row["custom_id"] for row in output]
    assert len(ids) == len(set(ids)) == 24 and set(ids) == set(expected)
    assert batch["error_file_id"] is None
    texts = {row["custom_id"]: row["response"]["body"]["text"] for row in output}
    assert wer([c.text for c in expected.values()], [texts[k] for k in expected]) <= 0.15


def test_expired_batch_keeps_completed_results(
    make_server: type[Server], corpus: list[Clip], tmp_path: Path
) -> None:
    server = make_server(tmp_path / "data", env={"ASRSERVE_BATCH_API_WINDOW_S": "4"}).start()
    client = client_for(server)
    lines, _ = many(client, corpus[:12], 60)
    batch_id = create_batch(client, lines, tmp_path)
    batch = wait_ended(server, batch_id, timeout=60)
    assert batch["status"] == "expired" and isinstance(batch["expired_at"], int)
    output = jsonl(client, batch["output_file_id"])
    errors = jsonl(client, batch["error_file_id"])
    assert len(output) == batch["request_counts"]["completed"] < 60
    assert len(output) + len(errors) == 60
    assert errors and all(row["error"]["code"] == "batch_expired" for row in errors)


def test_callback_and_interactive_request_during_a_batch(
    server: Server,
    corpus: list[Clip],
    short_clips: list[Clip],
    tmp_path: Path,
    receiver: tuple[Receiver, str],
) -> None:
    record, url = receiver
    client = client_for(server)
    lines, _ = many(client, corpus[:12], 40)
    batch_id = create_batch(client, lines, tmp_path, metadata={"callback_url": url})
    wait_for(server, batch_id, lambda b: b["request_counts"]["completed"] >= 1)

    clip = short_clips[0]
    with clip.path.open("rb") as handle:
        sync = httpx.post(
            f"{server.url}{ENDPOINT}",
            files={"file": handle},
            data={"model": "whisper-1"},
            timeout=120,
        )
    assert sync.status_code == 200
    during = get_batch(server, batch_id)
    # The interactive request ran ahead of the backlog: the batch was still far from done.
    assert during["status"] == "in_progress", during
    assert during["request_counts"]["completed"] < 30
    # Its progress counts the finished requests' audio, and not yet all of it.
    assert 0 < during["audio_seconds_done"] < during["audio_seconds"], during

    batch = wait_ended(server, batch_id)
    assert batch["status"] == "completed"
    assert batch["audio_seconds_done"] is None  # shown while the batch is in progress only
    # the first delivery is answered 500; the retry follows after 1 s
    wait_until(record.answered_ok, 30, lambda: f"a delivered callback: {record.calls}")
    calls = [(headers["X-Asrserve-Event"], json.loads(body)) for _, headers, body in record.calls]
    assert [event for event, _ in calls] == ["batch.completed", "batch.completed"]
    assert calls[-1][1]["id"] == batch_id and calls[-1][1]["status"] == "completed"
