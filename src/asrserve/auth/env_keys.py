"""Keys whose secrets come from the environment (``ASRSERVE_API_KEY``,
``ASRSERVE_ADMIN_API_KEY``, or files named by ``..._FILE``), as containers get them from a
Secret or an env file.

``serve`` installs them before it binds: each is stored under a fixed name, so a changed
secret replaces the key of that name (the old secret stops working), an unchanged one is
left alone, and a setting removed revokes its key (the environment is where such a key
lives: ``keys create`` refuses those names). Several API nodes starting at once may race to
install the same secret; the loser finds it stored and goes on. A secret that was revoked
stays revoked: restarting with it is refused, never a way round ``asrserve keys revoke``;
so is a secret that is another key's (the admin secret set to the tenant's would give no
admin key).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from asrserve.auth.keys import DuplicateName, KeyStore, hash_secret, key_for
from asrserve.settings.access import AccessSettings


class RevokedEnvKey(Exception):
    """The environment carries a secret whose key was revoked."""


class UnreadableEnvKey(Exception):
    """A key file named by the settings cannot be read, or holds too short a secret."""


class ReusedEnvKey(Exception):
    """The environment carries a secret that is another key's."""


@dataclass(frozen=True, slots=True)
class EnvKey:
    name: str
    secret: str
    admin: bool


MIN_SECRET = 32  # characters: as hard to guess as the keys ``keys create`` makes
ENV_NAMES = {"env": "ASRSERVE_API_KEY", "env-admin": "ASRSERVE_ADMIN_API_KEY"}


def env_keys(settings: AccessSettings) -> list[EnvKey]:
    """The keys the settings give, each from its file if one is named, else from its value."""
    wanted = [
        ("env", _secret(settings.api_key_file, settings.api_key), False),
        ("env-admin", _secret(settings.admin_api_key_file, settings.admin_api_key), True),
    ]
    keys = [EnvKey(name, secret, admin) for name, secret, admin in wanted if secret]
    if len({key.secret for key in keys}) < len(keys):
        raise ReusedEnvKey(
            "ASRSERVE_ADMIN_API_KEY holds the same secret as ASRSERVE_API_KEY: an admin key"
            " needs a secret of its own"
        )
    return keys


def _secret(path: Path | None, value: str | None) -> str | None:
    if path is None:
        return value
    try:
        secret = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnreadableEnvKey(f"cannot read the key file {path}: {exc}") from None
    if len(secret) < MIN_SECRET:
        raise UnreadableEnvKey(f"the key in {path} is shorter than {MIN_SECRET} characters")
    return secret


async def install(store: KeyStore, keys: list[EnvKey]) -> tuple[list[str], list[str]]:
    """Store each key unless its secret is stored already, and revoke the key of each
    environment name no setting gives any more: the names stored now, and those revoked."""
    given = {wanted.name for wanted in keys}
    revoked = []
    for older in await store.active():
        if older.name in ENV_NAMES and older.name not in given:
            await store.revoke(older.id)
            revoked.append(older.name)
    installed = []
    for wanted in keys:
        if await _present(store, wanted):
            continue
        digest = hash_secret(wanted.secret)
        for older in await store.active():  # an older secret of this name is rotated out
            if older.name == wanted.name and older.hash != digest:
                await store.revoke(older.id)
        try:
            await store.create(key_for(wanted.secret, wanted.name, admin=wanted.admin))
        except DuplicateName:  # another node installed it between our find and create
            if not await _present(store, wanted):
                raise
            continue
        installed.append(wanted.name)
    return installed, revoked


async def _present(store: KeyStore, wanted: EnvKey) -> bool:
    found = await store.find(hash_secret(wanted.secret))
    if found is None:
        return False
    setting = ENV_NAMES[wanted.name]
    if found.revoked_at is not None:
        raise RevokedEnvKey(
            f"the secret of {setting} belongs to revoked key {found.id} ({found.name}):"
            " set a new one"
        )
    if found.name != wanted.name:
        raise ReusedEnvKey(
            f"the secret of {setting} is the secret of key {found.id} ({found.name}):"
            " set a secret of its own"
        )
    return True
