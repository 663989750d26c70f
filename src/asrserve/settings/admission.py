"""Admission and backpressure: what may be queued, and each key's share and rate."""

from __future__ import annotations

from pydantic import BaseModel, Field


class AdmissionSettings(BaseModel):
    max_queued_jobs: int = Field(
        1000, ge=1, description="Unfinished jobs per online class before `429 queue_full`."
    )
    max_queued_audio_s: float = Field(
        8 * 3600.0, gt=0, description="Unfinished audio seconds per online class before `429`."
    )
    max_queued_device_s: float = Field(
        0.0,
        ge=0,
        description="Unfinished work per online class in device seconds before `429` (0: no"
        " limit): queued audio counted at the measured device seconds per audio second, a"
        " key's share at its own rate of today where that is higher.",
    )
    batch_api_max_queued_requests: int = Field(
        500_000, ge=1, description="Unfinished Batch API requests, all batches together."
    )
    max_queued_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="The share of each class's limits (jobs and audio seconds) one API key may"
        " hold before its own `429`; a key holding nothing may always queue one request that"
        " fits the class. Auth off: no shares.",
    )
    rate_limit_rpm: int = Field(
        0,
        ge=0,
        description="Requests per minute per API key (0: no limit; a key's own `--rpm` wins).",
    )
    quota_audio_minutes_per_day: float = Field(
        0.0,
        ge=0,
        description="Audio minutes per UTC day per API key (0: no quota; a key's own"
        " `--audio-minutes-per-day` wins).",
    )
    quota_device_seconds_per_day: float = Field(
        0.0,
        ge=0,
        description="Device seconds per UTC day per API key: what its forward passes took,"
        " fallback passes and live interims included, charged after each pass; new work is"
        " refused once it is used up (0: no quota; a key's own `--device-seconds-per-day`"
        " wins).",
    )
