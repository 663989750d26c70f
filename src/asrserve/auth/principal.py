"""The caller of a request, as the rest of the service sees it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

from asrserve.auth.keys import ApiKey
from asrserve.errors import NotFound
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.settings.admission import AdmissionSettings


class Owned(Protocol):
    """A job, file or batch: created by the key it is owned by (None: auth was off)."""

    @property
    def owner(self) -> str | None: ...


OwnedT = TypeVar("OwnedT", bound=Owned)


@dataclass(frozen=True)
class Principal:
    key_id: str | None  # None: auth is off
    admin: bool
    rate_limit_rpm: int = 0  # 0: none
    audio_minutes_per_day: float = 0.0  # 0: no quota
    device_seconds_per_day: float = 0.0  # 0: no quota
    languages: LanguageRule = ANY_LANGUAGE  # what its requests may be transcribed in

    @property
    def owner(self) -> str | None:
        """What the caller's new jobs, files and batches are owned by."""
        return self.key_id

    @property
    def scope(self) -> str | None:
        """The owner to filter listings by (None: everything)."""
        return None if self.admin else self.key_id

    def sees(self, owner: str | None) -> bool:
        return self.admin or owner == self.key_id

    def visible(self, item: OwnedT | None, missing: NotFound) -> OwnedT:
        """``item`` if this caller may see it; ``missing`` raised otherwise, exactly as if it
        did not exist (each key sees only what it created)."""
        if item is None or not self.sees(item.owner):
            raise missing
        return item

    @classmethod
    def of(cls, key: ApiKey, settings: AdmissionSettings) -> Principal:
        """A key's principal, with the server's defaults where the key sets no limit."""
        rpm = settings.rate_limit_rpm if key.rate_limit_rpm is None else key.rate_limit_rpm
        quota = key.audio_minutes_per_day
        device = key.device_seconds_per_day
        return cls(
            key_id=key.id,
            admin=key.admin,
            rate_limit_rpm=rpm,
            audio_minutes_per_day=settings.quota_audio_minutes_per_day if quota is None else quota,
            device_seconds_per_day=(
                settings.quota_device_seconds_per_day if device is None else device
            ),
            languages=key.language_rule,
        )


OPEN = Principal(key_id=None, admin=True)
