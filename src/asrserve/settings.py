"""Service configuration: one frozen object, built once at start-up and passed down.

Every field can be set through the environment with the ``ASRSERVE_`` prefix
(``ASRSERVE_PORT=9000``) or through the matching ``asrserve serve`` flag.
"""

from __future__ import annotations

import os
import warnings
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from asrserve.batcher.policies import policy_class
from asrserve.engine.registry import DEFAULT_ENGINE, check_engine

MIB = 1024 * 1024
ENV_PREFIX = "ASRSERVE_"

# Settings renamed so that one word names one idea (docs/glossary.md): the old names are
# still read, with a FutureWarning, until the release after next.
RENAMED = {
    "cpu_workers": "cpu_replicas",
    "batch_window_s": "batch_api_window_s",
    "max_batch_file_bytes": "batch_api_max_file_bytes",
    "max_batch_requests": "batch_api_max_requests",
    "max_batch_line_bytes": "batch_api_max_line_bytes",
    "max_queued_batch_requests": "batch_api_max_queued_requests",
    "batch_prefetch_jobs": "batch_api_prefetch_jobs",
}


def warn_renamed(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and will stop working in a later release: use {new}",
        FutureWarning,
        stacklevel=3,
    )


class EncoderWindow(StrEnum):
    ADAPTIVE = "adaptive"  # pad each chunk to the smallest window bucket that holds it
    FULL = "full"  # Whisper's standard 30 s window for every chunk


class AuthMode(StrEnum):
    AUTO = "auto"  # on, unless the server binds only to loopback
    ON = "on"
    OFF = "off"


LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})


class RenamedEnv(PydanticBaseSettingsSource):
    """``ASRSERVE_<old name>`` for a renamed setting, read as the new one (the new name wins
    when both are set)."""

    def get_field_value(self, field: FieldInfo, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        environ = {name.upper(): value for name, value in os.environ.items()}
        values: dict[str, Any] = {}
        for old, new in RENAMED.items():
            value = environ.get(f"{ENV_PREFIX}{old.upper()}")
            if value is not None:
                warn_renamed(f"{ENV_PREFIX}{old.upper()}", f"{ENV_PREFIX}{new.upper()}")
                values[new] = value
        return values


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix=ENV_PREFIX, frozen=True, extra="forbid")

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        renamed = RenamedEnv(settings_cls)
        return init_settings, env_settings, renamed, dotenv_settings, file_secret_settings

    @model_validator(mode="before")
    @classmethod
    def _renamed_arguments(cls, data: Any) -> Any:
        """``Settings(cpu_workers=2)``: a renamed setting passed by its old name."""
        if not isinstance(data, dict):
            return data
        for old, new in RENAMED.items():
            if old in data:
                warn_renamed(old, new)
                value = data.pop(old)
                data.setdefault(new, value)
        return data

    @model_validator(mode="before")
    @classmethod
    def _one_model_directory(cls, data: Any) -> Any:
        """The older ``model`` (a directory) is the one model served unless ``models`` is set."""
        if isinstance(data, dict) and data.get("model") is not None and "models" not in data:
            data["models"] = (str(data["model"]),)
        return data

    # Network
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)

    # Access
    auth: AuthMode = Field(
        AuthMode.AUTO, description="API keys on /v1: auto = on unless bound to loopback only."
    )
    api_key: str | None = Field(
        None,
        repr=False,
        min_length=32,
        description="A key's secret from the environment (a container's Secret): serve stores"
        " it as the key named 'env' at start, replacing an older one of that name.",
    )
    admin_api_key: str | None = Field(
        None,
        repr=False,
        min_length=32,
        description="As api_key, for the admin key named 'env-admin' (/metrics, the scheduler).",
    )
    api_key_file: Path | None = Field(
        None, description="A file holding api_key's secret (a mounted Secret); wins over api_key."
    )
    admin_api_key_file: Path | None = Field(
        None, description="A file holding admin_api_key's secret (what Prometheus reads too)."
    )
    webhook_allow: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Hosts or CIDRs callbacks may reach although private (e.g. 10.0.0.0/8)."
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Host header names accepted besides the bind address and loopback names"
        " (comma-separated; '*': any). Checked with auth off, and with auth on once set.",
    )
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Origins (scheme://host[:port]) whose pages may open WebSockets besides"
        " this server's own (comma-separated; '*': any).",
    )

    # Storage
    data_dir: Path = Path("data")
    audio_retention_s: float = Field(
        3600.0, ge=0, description="Keep uploaded audio this long after a job ends."
    )
    record_traffic: bool = Field(
        True, description="Record arrivals and batches under data_dir/recordings (asrserve tune)."
    )
    record_max_lines: int = Field(
        100_000, ge=1, description="Rotate a recording file to .1 at this many lines."
    )

    # Engine (docs/models.md)
    models: Annotated[tuple[str, ...], NoDecode] = Field(
        ("tiny.en",),
        description="Models to serve, the first the default (comma-separated): directories,"
        " packaged models (tiny.en, base), faster-whisper size names or hub repo ids.",
    )
    model: Path | None = Field(
        None,
        description="The older setting: a CTranslate2 Whisper model directory, the one model"
        " served when models is not set.",
    )
    model_id: str | None = Field(
        None, description="Id the one configured model is served as; default: its name."
    )
    model_cache_dir: Path | None = Field(
        None, description="Joined packaged and downloaded models; default: data_dir/models."
    )
    offline: bool = Field(
        False, description="Never download a model (HF_HUB_OFFLINE=1 too): use the cache only."
    )
    engine: str = Field(
        DEFAULT_ENGINE, description="The engine that runs the models (engine/registry.py)."
    )
    device: str = Field("cpu", pattern="^(cpu|cuda|auto)$")
    device_index: Annotated[tuple[int, ...], NoDecode] = (0,)
    compute_type: str = Field("default", description="int8 on CPU, float16 on CUDA by default.")
    cpu_threads: Annotated[int, Field(ge=0)] | Literal["auto"] = Field(
        "auto",
        description="Threads per CPU replica; auto (or 0): the cores shared out between the"
        " replicas (docs/benchmarks.md, the layout).",
    )
    cpu_replicas: Annotated[int, Field(ge=1)] | Literal["auto"] = Field(
        "auto",
        description="Model replicas on the CPU (batches run at once; they share one copy of"
        " the weights); auto: one per core, one thread each, up to 8.",
    )
    beam_size: int = Field(5, ge=1, le=20)
    model_idle_s: float = Field(
        0.0,
        ge=0,
        description="A model that has run nothing for this long releases its weights on each"
        " device, and loads them again for its next request (0: never).",
    )
    vad_filter: bool = True
    encoder_window: EncoderWindow = EncoderWindow.ADAPTIVE
    encoder_windows_s: Annotated[tuple[float, ...], NoDecode] = Field(
        (5.0, 10.0, 15.0, 20.0, 30.0), description="Window buckets (s) for adaptive windows."
    )
    fallback_temperatures: Annotated[tuple[float, ...], NoDecode] = Field(
        (0.0, 0.2, 0.4, 0.6, 0.8, 1.0),
        description="Temperatures a window of a temperature-0 request is tried at, in turn,"
        " while its decode fails Whisper's thresholds (loops, or unlikely text); 0: no fallback.",
    )

    # Scheduler
    batch_policy: str = Field(
        "greedy",
        description="A registered batching policy: greedy, window, unbatched or none.",
    )
    max_batch_size: int = Field(16, ge=1, le=256)
    max_wait_ms: float = Field(20.0, ge=0)
    max_queue_age_s: float = Field(
        30.0, gt=0, description="A chunk waiting longer jumps every priority and length rule."
    )
    prefetch_jobs: int = Field(32, ge=1, description="Jobs claimed ahead of the device loops.")
    offline_holdoff_ms: float = Field(
        200.0,
        ge=0,
        description="Batch API work starts on a device only after online work was quiet this long.",
    )
    fill_wait_share: float = Field(
        0.25,
        ge=0,
        le=1,
        description="An idle replica may wait this share of a batch's predicted time for a"
        " fuller batch while other replicas compute (greedy; 0: never).",
    )
    offline_ride_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="Batch API chunks ride in an interactive batch while they add less than"
        " this share to its predicted time (0, the default: never; measured to slow the"
        " online batches they ride in far more than predicted on a CPU).",
    )
    batch_api_prefetch_jobs: int = Field(
        16, ge=1, description="Batch API items in flight; their own budget, never online slots."
    )
    preprocess_threads: int = Field(0, ge=0, description="Audio decode/feature threads; 0 = cores.")
    run_timeout_floor_s: float = Field(
        300.0,
        gt=0,
        description="A batch that runs 10x longer than the measured speed predicts, and at least"
        " this long, is hung: its jobs fail (run_timeout) and the device goes on.",
    )

    # Limits
    max_sync_upload_bytes: int = Field(25 * MIB, ge=1)
    max_job_upload_bytes: int = Field(1024 * MIB, ge=1)
    max_audio_seconds: float = Field(4 * 3600.0, gt=0)
    probe_processes: int = Field(
        2, ge=1, description="Processes that open uploads first (audio/probes.py)."
    )
    probe_memory_mb: int = Field(
        192,
        ge=80,
        description="Memory a probe may use opening one upload (its container's tables and"
        " tags); a file that needs more than this less 64 is refused (audio/probes.py).",
    )
    sync_timeout_s: float = Field(900.0, gt=0)
    max_wait_param_s: float = Field(60.0, gt=0, description="Cap for ?wait= long polls.")
    live_max_sessions: int = Field(
        64, ge=0, description="Live (WebSocket) sessions a node holds at once."
    )
    live_max_sessions_per_key: int = Field(
        0,
        ge=0,
        description="Live sessions one API key (auth off: one client address) may hold open on"
        " a node; 0: a quarter of live_max_sessions, at least 1.",
    )
    live_idle_timeout_s: float = Field(
        60.0, gt=0, description="A live session whose client sends nothing this long is closed."
    )
    live_interim_s: float = Field(
        1.0, gt=0, description="New audio between two interim decodes of an open live turn."
    )
    live_interim_deadline_s: float = Field(
        1.0, gt=0, description="An interim live decode no device started by then is dropped."
    )
    live_final_deadline_s: float = Field(
        10.0, gt=0, description="A live turn's final decode must start by then."
    )
    live_batch_s: float = Field(
        0.3,
        ge=0,
        description="Longest predicted time of a batch of live windows (0: no limit).",
    )
    background_batch_s: float = Field(
        1.0,
        ge=0,
        description="Longest predicted time of a batch of async or Batch API windows while"
        " interactive or live work is about (0: no limit).",
    )
    live_burst_s: float = Field(
        10.0, gt=0, description="How far ahead of real time a live client may send audio."
    )
    events_stream_s: float = Field(
        3600.0, gt=0, description="How long GET /v1/jobs/{id}/events stays open at most."
    )
    max_attempts: int = Field(3, ge=1, description="Deliveries before a job is failed.")
    max_json_body_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="A JSON request body (POST /v1/batches); a larger one gets 413, cut off"
        " while it is read.",
    )

    # Admission and backpressure (429 with Retry-After past these)
    max_queued_jobs: int = Field(1000, ge=1, description="Unfinished jobs per online class.")
    max_queued_audio_s: float = Field(
        8 * 3600.0, gt=0, description="Unfinished audio seconds per online class."
    )
    batch_api_max_queued_requests: int = Field(
        500_000, ge=1, description="Unfinished Batch API requests, all batches together."
    )
    max_queued_share: float = Field(
        0.25,
        gt=0,
        le=1,
        description="The share of each class's limits (jobs and audio seconds) one API key"
        " may hold; past it that key gets 429 queue_full. A key holding nothing in a class"
        " may always queue one request that fits it. Auth off: no shares.",
    )
    rate_limit_rpm: int = Field(
        0, ge=0, description="Default requests per minute per API key (0: no limit)."
    )
    quota_audio_minutes_per_day: float = Field(
        0.0, ge=0, description="Default audio minutes per UTC day per API key (0: no quota)."
    )
    max_concurrent_uploads: int = Field(
        64, ge=1, description="Uploads being received at once; more get 503 + Retry-After."
    )
    upload_idle_timeout_s: float = Field(
        30.0, gt=0, description="An upload that sends nothing for this long gets 408."
    )
    upload_timeout_s: float = Field(900.0, gt=0, description="Longest time to receive one upload.")
    max_uploads_per_key: int = Field(
        0,
        ge=0,
        description="Uploads one API key (auth off: one client address) may have received at"
        " once; more get 503 + Retry-After. 0: a quarter of max_concurrent_uploads, at least 1.",
    )
    max_waits_per_key: int = Field(
        32,
        ge=1,
        description="Event streams and long polls (?wait=) one API key (auth off: one client"
        " address) may hold open at once; more get 429 too_many_waits.",
    )
    upload_min_rate_bytes_s: int = Field(
        16 * 1024,
        ge=0,
        description="An upload must average this many bytes/s, after upload_rate_grace_s"
        " of slack, or gets 408 (0: no minimum).",
    )
    upload_rate_grace_s: float = Field(
        10.0, ge=0, description="Seconds an upload may lag behind upload_min_rate_bytes_s."
    )

    # Files and Batch API
    batch_api_max_file_bytes: int = Field(
        100 * MIB, ge=1, description="A batch's JSONL input file."
    )
    batch_api_max_requests: int = Field(50_000, ge=1, description="Lines in one batch.")
    batch_api_max_line_bytes: int = Field(
        64 * 1024,
        ge=1024,
        description="One line of a batch's JSONL input; a longer one fails as line_too_long.",
    )
    batch_api_window_s: float = Field(
        86400.0, gt=0, description="How long a completion_window='24h' batch may run."
    )

    # Webhooks
    webhook_max_attempts: int = Field(6, ge=1)
    webhook_backoff_s: float = Field(1.0, gt=0)
    webhook_timeout_s: float = Field(
        10.0, gt=0, description="Deadline for one delivery: lookup, connect, send and answer."
    )
    webhook_concurrency: int = Field(
        8, ge=1, description="Webhook deliveries in progress at once (each on its own)."
    )
    webhook_signing_key: str | None = Field(
        None,
        repr=False,
        description="Signs webhooks (each key's secret is derived from it); unset: one made at"
        " first start, kept in webhook-signing.key beside the stored files.",
    )

    # Distributed mode (unset broker: embedded, one process on SQLite)
    broker: str | None = Field(
        None, description="redis://HOST:PORT/DB: API and worker nodes share this Redis."
    )
    shared_dir: Path | None = Field(
        None, description="Distributed: directory every node mounts (files, large audio)."
    )
    redis_blob_max_bytes: int = Field(
        8 * MIB, ge=0, description="Distributed: audio up to this size travels inside Redis."
    )
    lease_s: float = Field(
        30.0, gt=0, description="Distributed: a job whose worker is silent this long is reclaimed."
    )
    result_retention_s: float = Field(
        7 * 86400.0, gt=0, description="Distributed: finished jobs and batches expire after this."
    )
    metrics_port: int = Field(
        0, ge=0, le=65535, description="Worker node: serve Prometheus /metrics here (0: off)."
    )
    redis_prefix: str = Field(
        "asrserve", pattern=r"^[A-Za-z0-9_.-]+$", description="Key prefix (several per Redis)."
    )

    # Shutdown
    shutdown_grace_s: float = Field(30.0, ge=0)

    log_level: str = "info"
    log_format: str = Field("json", pattern="^(json|text)$")

    @field_validator("device_index", "encoder_windows_s", "fallback_temperatures", mode="before")
    @classmethod
    def _parse_lists(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(float(part) for part in value.split(",") if part.strip())
        if isinstance(value, int | float):
            return (value,)
        return value

    @field_validator("webhook_allow", "allowed_hosts", "allowed_origins", "models", mode="before")
    @classmethod
    def _parse_names(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(part.strip() for part in value.split(",") if part.strip())
        return value

    @property
    def auth_enabled(self) -> bool:
        if self.auth is AuthMode.AUTO:
            return self.host not in LOOPBACK_HOSTS
        return self.auth is AuthMode.ON

    @field_validator("encoder_windows_s")
    @classmethod
    def _check_windows(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or any(not 1.0 <= w <= 30.0 for w in value):
            raise ValueError("encoder windows must be between 1 and 30 s")
        return tuple(sorted(set(value)))

    @field_validator("fallback_temperatures")
    @classmethod
    def _check_temperatures(cls, value: tuple[float, ...]) -> tuple[float, ...]:
        if not value or value[0] != 0.0 or list(value) != sorted(set(value)) or value[-1] > 1.0:
            raise ValueError("fallback temperatures rise from 0 to at most 1, e.g. 0,0.2,0.4")
        return value

    @field_validator("models")
    @classmethod
    def _some_model(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("name at least one model to serve")
        return value

    @model_validator(mode="after")
    def _model_id_of_one(self) -> Settings:
        if self.model_id and len(self.models) > 1:
            raise ValueError("model_id renames the one model served; several are served by name")
        return self

    @field_validator("batch_policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        policy_class(value)  # ValueError naming the registered policies
        return value

    @field_validator("engine")
    @classmethod
    def _known_engine(cls, value: str) -> str:
        return check_engine(value)  # ValueError naming the registered engines

    @property
    def windows(self) -> tuple[float, ...]:
        """The encoder windows chunks may be padded to under the configured mode; a model
        gets those its engine takes (:meth:`~asrserve.engine.base.Capabilities.windows`)."""
        if self.encoder_window is EncoderWindow.FULL:
            return (30.0,)
        return self.encoder_windows_s

    @property
    def model_cache(self) -> Path:
        """Where packaged models are joined and hub models downloaded."""
        return self.model_cache_dir or self.data_dir / "models"

    @property
    def db_path(self) -> Path:
        return self.data_dir / "asrserve.db"

    @property
    def audio_dir(self) -> Path:
        return self.data_dir / "audio"

    @property
    def spool_dir(self) -> Path:
        """Decoded audio of long files while their jobs run (unnamed temporary files)."""
        return self.data_dir / "spool"

    @property
    def files_dir(self) -> Path:
        return self.shared_root / "files"

    @property
    def shared_audio_dir(self) -> Path:
        """Distributed: uploaded audio too large to travel inside Redis."""
        return self.shared_root / "audio"

    @property
    def shared_root(self) -> Path:
        return self.shared_dir or self.data_dir

    @property
    def distributed(self) -> bool:
        return self.broker is not None
