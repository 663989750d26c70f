"""How the forward-pass batcher forms batches on each device (docs/scheduler.md)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, Field, field_validator

from asrserve.settings.fields import FLAG
from asrserve.settings.registered import check_policy


class Calibration(StrEnum):
    STORED = "stored"  # measure unless a stored calibration of the same setup exists
    FRESH = "fresh"  # measure at every start
    OFF = "off"  # no calibration: the curves learn from traffic alone


class SchedulerSettings(BaseModel):
    batch_policy: str = Field(
        "greedy",
        description="A registered batching policy: `greedy`, `window`, `unbatched` or `none`.",
        json_schema_extra=FLAG,
    )
    max_batch_size: int = Field(
        16, ge=1, le=256, description="Windows in one forward pass at most.",
        json_schema_extra=FLAG,
    )  # fmt: skip
    calibration: Calibration = Field(
        Calibration.STORED,
        description="How each model's cost curve (batch size against device time, per window)"
        " is seeded when it loads: `stored`, measured once per setup and kept under"
        " `data_dir`; `fresh`, measured at every start; `off`, learned from traffic alone."
        " Batches grow only as far as the curve pays (docs/scheduler.md).",
        json_schema_extra=FLAG,
    )
    max_wait_ms: float = Field(
        20.0,
        ge=0,
        description="The `window` policy's wait for more windows after the first arrives.",
        json_schema_extra=FLAG,
    )
    max_queue_age_s: float = Field(
        30.0,
        gt=0,
        description="A window waiting longer jumps every priority and length rule.",
        json_schema_extra=FLAG,
    )
    prefetch_jobs: int = Field(32, ge=1, description="Jobs claimed ahead of the device loops.")
    batch_api_prefetch_jobs: int = Field(
        16,
        ge=1,
        description="Batch API requests in flight at once: their own budget, apart from"
        " `prefetch_jobs` for online jobs.",
    )
    offline_holdoff_ms: float = Field(
        200.0,
        ge=0,
        description="A device that ran online work starts Batch API work only after this much"
        " online quiet (at most `max_queue_age_s` of holding off).",
    )
    fill_wait_share: float = Field(
        0.25,
        ge=0,
        le=1,
        description="An idle replica may wait this share of a batch's predicted time for a"
        " fuller batch while other replicas compute (`greedy`; 0: never).",
    )
    offline_ride_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Batch API windows ride in an online batch while they add less than this"
        " share to its predicted time (0, the default: never; when windows rode, an interactive"
        " client's p95 was 7.06x its idle p95, in a run whose JSON was not kept; in the"
        " committed rerun none rode, docs/benchmarks.md).",
    )
    live_batch_s: float = Field(
        0.3,
        ge=0,
        description="The longest a batch of live windows may take, as the fitted batch cost"
        " predicts it (0: no limit; never below one window).",
    )
    background_batch_s: float = Field(
        1.0,
        ge=0,
        description="While interactive or live work came or ran in the last minute, async and"
        " Batch API windows join a batch only while its predicted time stays within this (0:"
        " no limit); a quarter of the devices also stays free of them then.",
    )
    preprocess_threads: int = Field(
        0, ge=0, description="Audio decode and feature threads (0: the cores)."
    )
    run_timeout_floor_s: float = Field(
        300.0,
        gt=0,
        description="A batch that runs 10x longer than the device's measured speed predicts,"
        " and at least this long, is hung: its jobs fail (`run_timeout`), the device goes on.",
    )

    @field_validator("batch_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        return check_policy(value)  # ValueError naming the registered policies
