"""A stored file, in the shape of OpenAI's file object."""

from __future__ import annotations

import secrets
import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class FilePurpose(StrEnum):
    BATCH = "batch"  # a JSONL request file for /v1/batches
    AUDIO = "audio"  # audio that batch requests reference by id
    BATCH_OUTPUT = "batch_output"  # written by the service: a batch's results or errors


UPLOADABLE = (FilePurpose.BATCH, FilePurpose.AUDIO)


class StoredFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    object: Literal["file"] = "file"
    bytes: int
    created_at: int = Field(default_factory=lambda: int(time.time()))
    filename: str
    purpose: FilePurpose
    status: Literal["processed"] = "processed"
    expires_at: int | None = None
    status_details: str | None = None
    owner: str | None = Field(None, exclude=True)  # the API key that stored it
    # a batch file's requests, counted once at upload (up to the limit + 1); not shown
    requests: int | None = None

    def view(self) -> dict[str, Any]:
        """The file object as OpenAI shows it."""
        return self.model_dump(mode="json", exclude={"requests"})


def new_file_id() -> str:
    return f"file-{int(time.time() * 1000):012x}{secrets.token_hex(8)}"
