"""The one frozen ``Settings``: every group's fields, built once at start-up, passed down.

Every field can be set through the environment with the ``ASRSERVE_`` prefix
(``ASRSERVE_PORT=9000``); those marked as flags through ``asrserve serve`` too. The groups are
typed classes of their own (a part that needs only the limits can ask for
:class:`LimitsSettings`); ``Settings`` is each of them at once, so a setting is read as
``settings.port`` whatever its group, and its environment name stays flat.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from asrserve.settings.access import AccessSettings
from asrserve.settings.admission import AdmissionSettings
from asrserve.settings.batch_api import BatchApiSettings
from asrserve.settings.distributed import DistributedSettings
from asrserve.settings.engine import EngineSettings
from asrserve.settings.fields import ENV_PREFIX, LOOPBACK_HOSTS, AuthMode
from asrserve.settings.limits import LimitsSettings
from asrserve.settings.live import LiveSettings
from asrserve.settings.scheduler import SchedulerSettings
from asrserve.settings.server import ServerSettings
from asrserve.settings.storage import StorageSettings
from asrserve.settings.webhooks import WebhookSettings
from asrserve.settings.wyoming import WyomingSettings

# Each group by the title its table has in docs/configuration.md, in that order.
GROUPS: tuple[tuple[str, type[BaseModel]], ...] = (
    ("Server", ServerSettings),
    ("Access", AccessSettings),
    ("Storage", StorageSettings),
    ("Engine and models", EngineSettings),
    ("Scheduler", SchedulerSettings),
    ("Limits", LimitsSettings),
    ("Admission and backpressure", AdmissionSettings),
    ("Live sessions", LiveSettings),
    ("Files and Batch API", BatchApiSettings),
    ("Webhooks", WebhookSettings),
    ("Distributed mode", DistributedSettings),
    ("Wyoming (Home Assistant)", WyomingSettings),
)

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


def explain(exc: ValidationError) -> str:
    """What is wrong with the settings, one line per field, without the values given (a
    secret set too short must not reach a log)."""
    lines = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        where = ".".join(str(part) for part in error["loc"]) or "settings"
        lines.append(f"{ENV_PREFIX}{where.upper()} ({where}): {error['msg']}")
    return "; ".join(lines)


def warn_renamed(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and will stop working in a later release: use {new}",
        FutureWarning,
        stacklevel=3,
    )


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


class Settings(
    BaseSettings,
    ServerSettings,
    AccessSettings,
    StorageSettings,
    EngineSettings,
    SchedulerSettings,
    LimitsSettings,
    AdmissionSettings,
    LiveSettings,
    BatchApiSettings,
    WebhookSettings,
    DistributedSettings,
    WyomingSettings,
):
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

    # The settings below join groups: the host decides the auth default, the data dir the
    # places of the model cache and, without a shared dir, of the stored files.

    @property
    def auth_enabled(self) -> bool:
        if self.auth is AuthMode.AUTO:
            return self.host not in LOOPBACK_HOSTS
        return self.auth is AuthMode.ON

    @property
    def model_cache(self) -> Path:
        """Where packaged models are joined and hub models downloaded."""
        return self.model_cache_dir or self.data_dir / "models"

    @property
    def shared_root(self) -> Path:
        return self.shared_dir or self.data_dir

    @property
    def files_dir(self) -> Path:
        return self.shared_root / "files"

    @property
    def shared_audio_dir(self) -> Path:
        """Distributed: uploaded audio too large to travel inside Redis."""
        return self.shared_root / "audio"
