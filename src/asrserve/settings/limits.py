"""What one request, upload or wait may take: sizes, durations, deadlines and shares."""

from __future__ import annotations

from pydantic import BaseModel, Field

from asrserve.settings.fields import FLAG, MIB


class LimitsSettings(BaseModel):
    max_sync_upload_bytes: int = Field(
        25 * MIB,
        ge=1,
        description="An upload to `/v1/audio/transcriptions`, `/v1/audio/translations`,"
        " `/asr` and `/detect-language`.",
        json_schema_extra=FLAG,
    )
    max_job_upload_bytes: int = Field(
        1024 * MIB, ge=1, description="An upload to `/v1/jobs`.", json_schema_extra=FLAG
    )
    max_audio_seconds: float = Field(
        4 * 3600.0, gt=0, description="The longest audio a job may hold.", json_schema_extra=FLAG
    )
    sync_timeout_s: float = Field(
        900.0,
        gt=0,
        description="The deadline of synchronous requests (`504` past it; windows not started"
        " are dropped).",
        json_schema_extra=FLAG,
    )
    max_wait_param_s: float = Field(60.0, gt=0, description="The cap of `?wait=` long polls.")
    events_stream_s: float = Field(
        3600.0, gt=0, description="How long `GET /v1/jobs/{id}/events` stays open at most."
    )
    max_attempts: int = Field(
        3,
        ge=1,
        description="A job started this often without finishing is failed (and dead-lettered).",
    )
    max_json_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="A JSON request body (`POST /v1/batches`); past it `413`"
        " `request_too_large`, cut off while it is read.",
    )
    probe_processes: int = Field(
        2, ge=1, description="Processes that open uploads first (audio/probes.py)."
    )
    probe_memory_mb: int = Field(
        192,
        ge=80,
        description="Memory a probe may use opening one upload (its container's tables and"
        " tags); a file that needs more than this less 64 is refused (docs/reliability.md).",
    )
    max_concurrent_uploads: int = Field(
        64, ge=1, description="Uploads being received at once; more get `503` + `Retry-After`."
    )
    max_uploads_per_key: int = Field(
        0,
        ge=0,
        description="Uploads one API key (auth off: one client address) may have received at"
        " once; more get `503`. 0: a quarter of `max_concurrent_uploads`, at least 1.",
    )
    upload_idle_timeout_s: float = Field(
        30.0, gt=0, description="An upload that sends nothing for this long gets `408`."
    )
    upload_timeout_s: float = Field(
        900.0, gt=0, description="The longest time to receive one upload (past it `408`)."
    )
    upload_min_rate_bytes_s: int = Field(
        16 * 1024,
        ge=0,
        description="An upload must average this many bytes/s, after `upload_rate_grace_s` of"
        " slack, or gets `408` (0: no minimum).",
    )
    upload_rate_grace_s: float = Field(
        10.0, ge=0, description="Seconds an upload may lag behind `upload_min_rate_bytes_s`."
    )
    max_waits_per_key: int = Field(
        32,
        ge=1,
        description="Event streams and `?wait=` long polls one API key (auth off: one client"
        " address) may hold open at once; more get `429 too_many_waits`.",
    )
