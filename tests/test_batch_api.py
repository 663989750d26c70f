"""The Batch API's semantics, asked of the app in this process with a fake engine
(``tests/support/inprocess.py``): the stores, uploads, probes, VAD and the batch runner real,
only the forward pass fake, driven through the official ``openai`` client.

A batch of 100+ requests with broken files among them completes with complete output and
error files, each line its own request's; validation errors are line-numbered; bad
parameters and files are refused; cancel keeps partial results; expiry keeps what finished;
the callback fires; an interactive request is not queued behind the backlog.

Where a test needs the batch caught part way, the fake's gate is a :class:`Turnstile` that
lets its forward passes through one at a time. The real model's text through the Batch API
is checked by tests/test_batch_api_process.py (the kill-and-restart test's WER) and
tests/test_batch_cli.py (srt and txt against the references); the process (SIGKILL and
restart mid-batch) by tests/test_batch_api_process.py.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import openai
import pytest
from starlette.testclient import TestClient

from asrserve.bench.corpus import Clip
from tests.support.batches import ENDPOINT, Batch, create_batch, ended, line, upload_audio
from tests.support.inprocess import URL, in_process
from tests.support.servers import Receiver
from tests.support.turnstile import Turnstile
from tests.support.wait import wait_until

# The webhook test's receiver listens on loopback, which callbacks may not reach by default
# (the shared server's setting, which these tests ran on).
WEBHOOK_ENV = {"ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1"}


@dataclass
class App:
    http: TestClient
    client: openai.OpenAI
    gate: Turnstile

    def batch(self, batch_id: str) -> Batch:
        response = self.http.get(f"/v1/batches/{batch_id}")
        assert response.status_code == 200, response.text
        body: Batch = response.json()
        return body

    def ended(self, batch_id: str) -> Batch:
        """The batch once it has ended, by long polls (``?wait=``)."""

        def polled() -> Batch | None:
            response = self.http.get(f"/v1/batches/{batch_id}", params={"wait": 30})
            body: Batch = response.json()
            return body if ended(body) else None

        return wait_until(polled, 60, f"batch {batch_id} to end", every=0.05)

    def step_until(self, batch_id: str, done: Callable[[Batch], bool]) -> Batch:
        """The batch once ``done`` holds for it, its passes let through one at a time; the
        passes after it are held."""

        def reached() -> Batch | None:
            batch = self.batch(batch_id)
            if done(batch):
                return batch
            self.gate.allow_one()
            return None

        def why() -> str:
            return f"batch {batch_id}: {self.batch(batch_id)}"

        try:
            return wait_until(reached, 60, why, every=0.05)
        finally:
            self.gate.hold()

    def jsonl(self, file_id: str | None) -> list[dict[str, Any]]:
        if file_id is None:
            return []
        text = self.client.files.content(file_id).text
        return [json.loads(row) for row in text.splitlines()]


@contextlib.contextmanager
def batch_app(
    tmp_path: Path, env: Mapping[str, str] | None = None, held: bool = False
) -> Iterator[App]:
    """The app over a new data dir; ``held``: its forward passes wait at a turnstile."""
    with in_process(tmp_path / "data", env) as app:
        (engine,) = app.engines
        gate = Turnstile()
        if held:
            gate.hold()
        engine.gate = gate
        client = openai.OpenAI(
            base_url=f"{URL}/v1", api_key="unused", max_retries=0, http_client=app.client
        )
        try:
            yield App(app.client, client, gate)
        finally:
            gate.set()  # nothing left waiting as the app stops


@pytest.fixture(scope="module")
def short_clips(corpus: list[Clip]) -> list[Clip]:
    """The three shortest clips (three containers): the least audio to decode for a fake
    forward pass."""
    return sorted(corpus, key=lambda clip: clip.duration)[:3]


@pytest.fixture(scope="module")
def shortest(short_clips: list[Clip]) -> list[Clip]:
    """The shortest clip alone: a held batch's first pass comes within a second of its start
    (the expiry test's window is 4 s)."""
    return short_clips[:1]


def broken_files(tmp_path: Path, good: Path) -> dict[str, tuple[Path, int]]:
    """Files that are not usable audio, and the status their request must fail with."""
    truncated = tmp_path / "truncated.wav"
    truncated.write_bytes(good.read_bytes()[:30])
    random_bytes = tmp_path / "random.wav"
    random_bytes.write_bytes(bytes(range(256)) * 40)
    text = tmp_path / "notes.txt"
    text.write_text("this is not audio at all\n" * 50)
    return {"truncated": (truncated, 415), "random": (random_bytes, 415), "text": (text, 415)}


def words(text: str) -> str:
    return " ".join(text.split())


# --------------------------------------------------------------------------------------


def test_batch_of_100_with_broken_files_and_the_openai_client(
    short_clips: list[Clip], tmp_path: Path
) -> None:
    with batch_app(tmp_path) as app:
        client = app.client
        audio_ids = upload_audio(client, [clip.path for clip in short_clips])
        good = next(c.path for c in short_clips if c.path.suffix == ".wav")
        broken = broken_files(tmp_path, good)
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

        batch = app.ended(batch_id)
        assert batch["status"] == "completed", batch
        assert batch["request_counts"] == {"total": 108, "completed": 104, "failed": 4}
        for stamp in ("created_at", "in_progress_at", "finalizing_at", "completed_at"):
            assert isinstance(batch[stamp], int)
        assert batch["metadata"] == {"project": "archive"}
        retrieved = client.batches.retrieve(batch_id)
        assert retrieved.output_file_id == batch["output_file_id"]

        output = app.jsonl(batch["output_file_id"])
        assert sorted(row["custom_id"] for row in output) == sorted(expected)
        texts: dict[str, set[str]] = {clip.path.name: set() for clip in short_clips}
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
                assert body["segments"]
                assert body["duration"] == pytest.approx(clip.duration, abs=0.1)
            texts[clip.path.name].add(words(text))
        # Each line holds its own request's transcript (the fake's text is its clip's chunk
        # durations): one text per clip in all four formats, and no two clips' alike.
        assert all(len(found) == 1 for found in texts.values()), texts
        assert len(set.union(*texts.values())) == len(short_clips), texts

        errors = {row["custom_id"]: row for row in app.jsonl(batch["error_file_id"])}
        assert set(errors) == {f"broken-{name}" for name in broken} | {"missing"}
        for name, (_, status) in broken.items():
            response = errors[f"broken-{name}"]["response"]
            assert response["status_code"] == status
            assert response["body"]["error"]["message"]
        assert errors["missing"]["response"]["status_code"] == 404

        listed = app.http.get("/v1/batches", params={"limit": 5}).json()
        assert [b["id"] for b in listed["data"]] == [batch_id]
        jobs = app.http.get("/v1/jobs", params={"limit": 1}).json()["data"]
        assert jobs[0]["priority"] == "offline"


def test_invalid_requests_fail_validation_by_line(tmp_path: Path) -> None:
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
    with batch_app(tmp_path) as app:
        # one long poll: the batch failing validation wakes it (it answered the batch as it
        # stood, validating, at its timeout before)
        batch_id = create_batch(app.client, lines, tmp_path)
        response = app.http.get(f"/v1/batches/{batch_id}", params={"wait": 60})
        batch = response.json()
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


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[App]:
    """One app for the tests that only ask it to refuse something."""
    with batch_app(tmp_path_factory.mktemp("batch-api")) as app:
        yield app


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
    shared: App, changes: dict[str, Any], status: int, param: str
) -> None:
    uploaded = shared.http.post(
        "/v1/files",
        files={"file": ("in.jsonl", line("a", "file-a") + "\n")},
        data={"purpose": "batch"},
    ).json()
    body = {
        "input_file_id": uploaded["id"],
        "endpoint": ENDPOINT,
        "completion_window": "24h",
        **changes,
    }
    response = shared.http.post("/v1/batches", json=body)
    assert response.status_code == status, response.text
    assert response.json()["error"]["param"] == param


def test_files_api(shared: App, short_clips: list[Clip]) -> None:
    http = shared.http
    clip = short_clips[0]
    with clip.path.open("rb") as handle:
        audio = http.post("/v1/files", files={"file": handle}, data={"purpose": "audio"}).json()
    assert audio["object"] == "file" and audio["bytes"] == clip.path.stat().st_size
    assert audio["filename"] == clip.path.name and audio["purpose"] == "audio"
    assert http.get(f"/v1/files/{audio['id']}").json() == audio
    content = http.get(f"/v1/files/{audio['id']}/content")
    assert content.content == clip.path.read_bytes()
    listed = http.get("/v1/files", params={"purpose": "audio"}).json()
    assert audio["id"] in [f["id"] for f in listed["data"]]

    bad_purpose = http.post(
        "/v1/files", files={"file": ("a.txt", b"x")}, data={"purpose": "fine-tune"}
    )
    assert bad_purpose.status_code == 400 and bad_purpose.json()["error"]["param"] == "purpose"
    empty = http.post("/v1/files", files={"file": ("a.jsonl", b"")}, data={"purpose": "batch"})
    assert empty.status_code == 400 and empty.json()["error"]["code"] == "empty_file"
    audio_as_input = {
        "input_file_id": audio["id"],
        "endpoint": ENDPOINT,
        "completion_window": "24h",
    }
    wrong = http.post("/v1/batches", json=audio_as_input)
    assert wrong.status_code == 400 and wrong.json()["error"]["code"] == "invalid_file_purpose"

    deleted = http.delete(f"/v1/files/{audio['id']}").json()
    assert deleted == {"id": audio["id"], "object": "file", "deleted": True}
    assert http.get(f"/v1/files/{audio['id']}").status_code == 404
    assert http.get(f"/v1/files/{audio['id']}/content").status_code == 404


def test_batch_file_size_limit_is_enforced(tmp_path: Path) -> None:
    big = (line("a", "file-a") + "\n") * 40
    with batch_app(tmp_path, {"ASRSERVE_BATCH_API_MAX_FILE_BYTES": "1000"}) as app:
        response = app.http.post(
            "/v1/files", files={"file": ("big.jsonl", big)}, data={"purpose": "batch"}
        )
    assert response.status_code == 413 and response.json()["error"]["code"] == "file_too_large"
    assert list((tmp_path / "data" / "files").iterdir()) == []


# --------------------------------------------------------------------------------------
# Cancel, expiry, callback, priority
# --------------------------------------------------------------------------------------


def many(client: openai.OpenAI, clips: list[Clip], count: int) -> tuple[list[str], dict[str, Clip]]:
    ids = upload_audio(client, [clip.path for clip in clips])
    lines, expected = [], {}
    for index in range(count):
        lines.append(line(f"r{index}", ids[index % len(ids)]))
        expected[f"r{index}"] = clips[index % len(ids)]
    return lines, expected


def test_cancel_keeps_partial_results(shortest: list[Clip], tmp_path: Path) -> None:
    with batch_app(tmp_path, held=True) as app:
        client = app.client
        lines, expected = many(client, shortest, 40)
        batch_id = create_batch(client, lines, tmp_path)
        app.step_until(batch_id, lambda b: b["request_counts"]["completed"] >= 3)
        cancelling = client.batches.cancel(batch_id)
        assert cancelling.status == "cancelling"  # in progress: the runner finishes the cancel
        batch = app.ended(batch_id)
        assert batch["status"] == "cancelled" and isinstance(batch["cancelled_at"], int)
        counts = batch["request_counts"]
        assert counts["total"] == 40 and 3 <= counts["completed"] < 40

        output = app.jsonl(batch["output_file_id"])
        errors = app.jsonl(batch["error_file_id"])
        assert len(output) == counts["completed"]
        assert len(output) + len(errors) == 40
        assert {row["custom_id"] for row in output + errors} == set(expected)
        assert all(row["response"]["status_code"] == 200 for row in output)
        assert all(row["error"]["code"] == "batch_cancelled" for row in errors)
        again = app.http.post(f"/v1/batches/{batch_id}/cancel")
        assert again.status_code == 409


def test_expired_batch_keeps_completed_results(shortest: list[Clip], tmp_path: Path) -> None:
    with batch_app(tmp_path, {"ASRSERVE_BATCH_API_WINDOW_S": "4"}, held=True) as app:
        client = app.client
        lines, _ = many(client, shortest, 60)
        batch_id = create_batch(client, lines, tmp_path)
        app.step_until(batch_id, lambda b: b["request_counts"]["completed"] >= 1)
        batch = app.ended(batch_id)  # the passes held: the window runs out
        assert batch["status"] == "expired" and isinstance(batch["expired_at"], int)
        output = app.jsonl(batch["output_file_id"])
        errors = app.jsonl(batch["error_file_id"])
        assert 1 <= len(output) == batch["request_counts"]["completed"] < 60
        assert len(output) + len(errors) == 60
        assert errors and all(row["error"]["code"] == "batch_expired" for row in errors)


def test_callback_and_interactive_request_during_a_batch(
    shortest: list[Clip], tmp_path: Path, receiver: tuple[Receiver, str]
) -> None:
    record, url = receiver
    with batch_app(tmp_path, WEBHOOK_ENV, held=True) as app:
        client = app.client
        lines, _ = many(client, shortest, 40)
        batch_id = create_batch(client, lines, tmp_path, metadata={"callback_url": url})
        app.step_until(batch_id, lambda b: b["request_counts"]["completed"] >= 1)
        wait_until(lambda: app.gate.waiting, 30, "a pass of the batch held at the gate")

        (clip,) = shortest
        answers: list[httpx2.Response] = []

        def transcribe() -> None:
            with clip.path.open("rb") as handle:
                answers.append(
                    app.http.post(ENDPOINT, files={"file": handle}, data={"model": "whisper-1"})
                )

        caller = threading.Thread(target=transcribe)
        caller.start()

        def queued() -> bool:
            view = app.http.get("/v1/scheduler").json()
            return bool(view["queued_items"].get("0"))

        wait_until(queued, 30, "the interactive request's audio queued")

        def answered() -> bool:
            if caller.is_alive():
                app.gate.allow_one()
                return False
            return True

        wait_until(answered, 30, "the interactive request's answer", every=0.05)
        app.gate.hold()
        caller.join()
        (sync,) = answers
        assert sync.status_code == 200
        during = app.batch(batch_id)
        # The interactive request ran ahead of the backlog: the batch was still far from done.
        assert during["status"] == "in_progress", during
        assert during["request_counts"]["completed"] < 30
        # Its progress counts the finished requests' audio, and not yet all of it.
        assert 0 < during["audio_seconds_done"] < during["audio_seconds"], during

        app.gate.set()
        batch = app.ended(batch_id)
        assert batch["status"] == "completed"
        assert batch["audio_seconds_done"] is None  # shown while the batch is in progress only
        # the first delivery is answered 500; the retry follows after 1 s
        wait_until(record.answered_ok, 30, lambda: f"a delivered callback: {record.calls}")
    calls = [(headers["X-Asrserve-Event"], json.loads(body)) for _, headers, body in record.calls]
    assert [event for event, _ in calls] == ["batch.completed", "batch.completed"]
    assert calls[-1][1]["id"] == batch_id and calls[-1][1]["status"] == "completed"
