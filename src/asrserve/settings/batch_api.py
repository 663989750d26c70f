"""The Files and Batch API's limits."""

from __future__ import annotations

from pydantic import BaseModel, Field

from asrserve.settings.fields import MIB


class BatchApiSettings(BaseModel):
    batch_api_max_file_bytes: int = Field(
        100 * MIB, ge=1, description="A batch's JSONL input file."
    )
    batch_api_max_requests: int = Field(50_000, ge=1, description="Lines in one batch.")
    batch_api_max_line_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="One line of a batch's input; a longer one fails as `line_too_long`.",
    )
    batch_api_window_s: float = Field(
        86400.0, gt=0, description="How long a `24h` batch may run before it expires."
    )
