"""API keys. The secret is shown once, at creation; only its SHA-256 is stored.

A key's secret is 32 random bytes (``secrets.token_urlsafe``), so a fast hash is enough:
there is nothing to brute-force that a salt or a slow hash would protect.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from asrserve.languages import ANY_LANGUAGE, LanguageRule

PREFIX = "asr_"


class ApiKey(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    name: str
    admin: bool = False
    hash: str  # sha256 hex of the secret
    hint: str  # the secret's first characters, to recognise it in a list
    created_at: float = Field(default_factory=time.time)
    revoked_at: float | None = None
    rate_limit_rpm: int | None = None  # None: the server's default
    audio_minutes_per_day: float | None = None  # None: the server's default
    device_seconds_per_day: float | None = None  # None: the server's default
    # Whisper's codes this key may be transcribed in (empty: any), and the language of a
    # request that names none (None: detected, among ``languages``). A record stored before
    # keys had them reads as any language.
    languages: tuple[str, ...] = ()
    default_language: str | None = None

    @property
    def language_rule(self) -> LanguageRule:
        return LanguageRule(self.languages, self.default_language)


def new_key(
    name: str,
    *,
    admin: bool = False,
    rate_limit_rpm: int | None = None,
    audio_minutes_per_day: float | None = None,
    device_seconds_per_day: float | None = None,
    languages: LanguageRule = ANY_LANGUAGE,
) -> tuple[str, ApiKey]:
    """A fresh secret and its record (which does not contain it)."""
    secret = PREFIX + secrets.token_urlsafe(32)
    key = key_for(
        secret,
        name,
        admin=admin,
        rate_limit_rpm=rate_limit_rpm,
        audio_minutes_per_day=audio_minutes_per_day,
        device_seconds_per_day=device_seconds_per_day,
        languages=languages,
    )
    return secret, key


def key_for(
    secret: str,
    name: str,
    *,
    admin: bool = False,
    rate_limit_rpm: int | None = None,
    audio_minutes_per_day: float | None = None,
    device_seconds_per_day: float | None = None,
    languages: LanguageRule = ANY_LANGUAGE,
) -> ApiKey:
    """The record of a key whose secret is ``secret`` (made here, or given by an operator)."""
    return ApiKey(
        id=f"key_{secrets.token_hex(6)}",
        name=name,
        admin=admin,
        hash=hash_secret(secret),
        hint=secret[: len(PREFIX) + 6],
        rate_limit_rpm=rate_limit_rpm,
        audio_minutes_per_day=audio_minutes_per_day,
        device_seconds_per_day=device_seconds_per_day,
        languages=languages.allowed,
        default_language=languages.default,
    )


def hash_secret(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def utc_day() -> str:
    """Today (UTC), as the daily usage counts it."""
    return dt.datetime.now(dt.UTC).date().isoformat()


@dataclass(frozen=True)
class DeviceUsage:
    """What a key's forward passes took: device seconds, and the audio seconds they decoded
    for the first time (a window's later fallback passes add device seconds, no audio)."""

    device_s: float = 0.0
    audio_s: float = 0.0

    def __add__(self, other: DeviceUsage) -> DeviceUsage:
        return DeviceUsage(self.device_s + other.device_s, self.audio_s + other.audio_s)

    @property
    def rate(self) -> float | None:
        """Device seconds per audio second (None before any audio)."""
        return self.device_s / self.audio_s if self.audio_s > 0 else None


class KeyStore(ABC):
    @abstractmethod
    async def create(self, key: ApiKey) -> None:
        """Names are unique among keys that are not revoked."""

    @abstractmethod
    async def find(self, digest: str) -> ApiKey | None:
        """The key, revoked or not, whose secret hashes to ``digest``."""

    @abstractmethod
    async def get(self, key_id: str) -> ApiKey | None: ...

    @abstractmethod
    async def all(self) -> list[ApiKey]: ...

    @abstractmethod
    async def revoke(self, id_or_name: str) -> ApiKey | None:
        """Revoke the active key with this id or name; None if there is none."""

    @abstractmethod
    async def charge(self, key_id: str, day: str, seconds: float, limit: float) -> float | None:
        """Add ``seconds`` of audio to the key's usage on ``day`` if that keeps it within
        ``limit``: the new total, or None (nothing added) when it would not fit."""

    @abstractmethod
    async def spend(self, spent: Mapping[str, DeviceUsage], day: str) -> None:
        """Add each key's device usage (``spent``: key id -> usage) to its usage on ``day``:
        what its forward passes took, charged after they ran."""

    @abstractmethod
    async def spent(self, key_id: str, day: str) -> DeviceUsage:
        """What the key's forward passes took on ``day``."""

    async def active(self) -> list[ApiKey]:
        return [key for key in await self.all() if key.revoked_at is None]


class DuplicateName(ValueError):
    pass
