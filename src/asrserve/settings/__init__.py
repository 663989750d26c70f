"""Service configuration: one frozen :class:`Settings` of typed groups (``core.py``)."""

from asrserve.settings.access import AccessSettings
from asrserve.settings.admission import AdmissionSettings
from asrserve.settings.batch_api import BatchApiSettings
from asrserve.settings.core import (
    GROUPS,
    RENAMED,
    Settings,
    explain,
    warn_renamed,
)
from asrserve.settings.distributed import DistributedSettings
from asrserve.settings.engine import EngineSettings
from asrserve.settings.fields import ENV_PREFIX, LOOPBACK_HOSTS, MIB, AuthMode, EncoderWindow
from asrserve.settings.limits import LimitsSettings
from asrserve.settings.live import LiveSettings
from asrserve.settings.scheduler import SchedulerSettings
from asrserve.settings.server import ServerSettings
from asrserve.settings.storage import StorageSettings
from asrserve.settings.webhooks import WebhookSettings
from asrserve.settings.wyoming import WyomingSettings

__all__ = [
    "ENV_PREFIX",
    "GROUPS",
    "LOOPBACK_HOSTS",
    "MIB",
    "RENAMED",
    "AccessSettings",
    "AdmissionSettings",
    "AuthMode",
    "BatchApiSettings",
    "DistributedSettings",
    "EncoderWindow",
    "EngineSettings",
    "LimitsSettings",
    "LiveSettings",
    "SchedulerSettings",
    "ServerSettings",
    "Settings",
    "StorageSettings",
    "WebhookSettings",
    "WyomingSettings",
    "explain",
    "warn_renamed",
]
