"""The Batch API as the tests drive it: through the official ``openai`` client, and its
progress read over HTTP."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai

from tests.support.servers import Server
from tests.support.wait import wait_until

ENDPOINT = "/v1/audio/transcriptions"
Batch = dict[str, Any]


def client_for(server: Server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)


def upload_audio(client: openai.OpenAI, paths: list[Path]) -> list[str]:
    ids = []
    for path in paths:
        with path.open("rb") as handle:
            ids.append(client.files.create(file=handle, purpose="audio").id)  # type: ignore[arg-type]
    return ids


def line(custom_id: str, file_id: str, *, url: str = ENDPOINT, **body: Any) -> str:
    entry = {
        "custom_id": custom_id,
        "method": "POST",
        "url": url,
        "body": {"file": file_id, **body},
    }
    return json.dumps(entry)


def create_batch(
    client: openai.OpenAI,
    lines: list[str],
    tmp_path: Path,
    metadata: dict[str, str] | None = None,
    endpoint: str = ENDPOINT,
) -> str:
    path = tmp_path / f"requests-{time.monotonic_ns()}.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with path.open("rb") as handle:
        input_file = client.files.create(file=handle, purpose="batch")
    batch = client.batches.create(
        input_file_id=input_file.id,
        endpoint=endpoint,  # type: ignore[arg-type]
        completion_window="24h",
        metadata=metadata,
    )
    assert batch.status == "validating"
    return batch.id


def get_batch(server: Server, batch_id: str) -> Batch:
    response = httpx.get(f"{server.url}/v1/batches/{batch_id}", timeout=10)
    response.raise_for_status()
    body: Batch = response.json()
    return body


def wait_for(
    server: Server, batch_id: str, done: Callable[[Batch], bool], timeout: float = 240
) -> Batch:
    """The batch once ``done`` holds for it."""

    def reached() -> Batch | None:
        batch = get_batch(server, batch_id)
        return batch if done(batch) else None

    def why() -> str:
        return f"batch {batch_id}: {get_batch(server, batch_id)}\n{server.log()}"

    return wait_until(reached, timeout, why)


def wait_ended(server: Server, batch_id: str, timeout: float = 240) -> Batch:
    """The batch once it has ended, by long polls (``?wait=``): the server answers each as
    soon as the batch ends."""
    deadline = time.monotonic() + timeout
    while True:
        response = httpx.get(f"{server.url}/v1/batches/{batch_id}", params={"wait": 60}, timeout=90)
        response.raise_for_status()
        batch: Batch = response.json()
        if ended(batch):
            return batch
        assert time.monotonic() < deadline, f"batch {batch_id}: {batch}\n{server.log()}"


def ended(batch: Batch) -> bool:
    return batch["status"] in ("completed", "failed", "expired", "cancelled")
