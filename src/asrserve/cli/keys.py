"""``asrserve keys create|list|revoke``: manage API keys in the data dir ``serve`` uses.

The data dir comes from ``--data-dir`` or ``ASRSERVE_DATA_DIR`` (default ``./data``), as for
``serve``. A new key's secret is printed once and never stored.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

from asrserve.auth.env_keys import (
    ENV_NAMES,
    ReusedEnvKey,
    RevokedEnvKey,
    UnreadableEnvKey,
    env_keys,
    install,
)
from asrserve.auth.keys import DuplicateName, KeyStore, new_key
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.drivers.sqlite import Database
from asrserve.languages import LanguageRule
from asrserve.settings import LOOPBACK_HOSTS, Settings
from asrserve.settings.distributed import shown_url

T = TypeVar("T")


class UnsafeStart(Exception):
    """Auth is on for a public interface and no key exists: nobody could use the service."""


def add_arguments(keys: argparse.ArgumentParser) -> None:
    commands = keys.add_subparsers(dest="keys_command", required=True)
    create = commands.add_parser("create", help="create a key and print its secret once")
    create.add_argument("--name", required=True)
    create.add_argument("--admin", action="store_true", help="sees everything, /metrics too")
    create.add_argument("--rpm", type=int, help="requests per minute (default: server's)")
    create.add_argument("--audio-minutes-per-day", type=float, help="daily audio quota")
    create.add_argument(
        "--device-seconds-per-day",
        type=float,
        help="daily quota of device time its forward passes take (default: server's)",
    )
    create.add_argument(
        "--languages", help="the only languages its requests may be in, e.g. en,de (default: any)"
    )
    create.add_argument(
        "--default-language", help="the language of a request that names none (else detected)"
    )
    listing = commands.add_parser("list", help="list keys (never their secrets)")
    revoke = commands.add_parser("revoke", help="revoke a key by id or name")
    revoke.add_argument("key", help="key id (key_...) or name")
    for sub in (create, listing, revoke):
        sub.add_argument("--data-dir", type=Path, help="as for serve (ASRSERVE_DATA_DIR)")
        sub.add_argument("--broker", help="as for serve: the distributed mode's redis:// URL")


def run(args: argparse.Namespace) -> int:
    overrides = {"data_dir": args.data_dir, "broker": args.broker}
    settings = Settings(**{k: v for k, v in overrides.items() if v is not None})
    command: Callable[[KeyStore], Awaitable[int]] = {
        "create": lambda store: _create(store, args),
        "list": _list,
        "revoke": lambda store: _revoke(store, args.key),
    }[args.keys_command]
    return _with_store(settings, command)


def install_env_keys(settings: Settings) -> None:
    """Store the keys the environment gives and revoke those it no longer gives
    (env_keys.py); raise :class:`UnsafeStart` if one of them was revoked, is another key's
    or its file cannot be read."""
    try:
        wanted = env_keys(settings)
        installed, revoked = _with_store(settings, lambda store: install(store, wanted))
    except (RevokedEnvKey, ReusedEnvKey, UnreadableEnvKey) as exc:
        raise UnsafeStart(str(exc)) from None
    for name in installed:
        print(f"asrserve: stored the key '{name}' from the environment", file=sys.stderr)
    for name in revoked:
        print(f"asrserve: revoked the key '{name}': {ENV_NAMES[name]} is not set", file=sys.stderr)


def refuse_unsafe_start(settings: Settings) -> None:
    """Raise :class:`UnsafeStart` if ``serve`` would expose a service nobody can call."""
    if not settings.auth_enabled or settings.host in LOOPBACK_HOSTS:
        return
    if not _with_store(settings, lambda store: store.active()):
        raise UnsafeStart(
            f"auth is on for {settings.host} but there are no API keys in "
            f"{_store_name(settings)}: create one with `asrserve keys create "
            f"--name NAME {_where(settings)}` (or bind to 127.0.0.1, or set --auth off)"
        )


def _where(settings: Settings) -> str:
    if settings.broker:
        return f"--broker {shown_url(settings.broker)}"
    return f"--data-dir {settings.data_dir}"


def _store_name(settings: Settings) -> str:
    return shown_url(settings.broker) if settings.broker else str(settings.data_dir)


def _with_store(settings: Settings, command: Callable[[KeyStore], Awaitable[T]]) -> T:
    return asyncio.run(_call(command, settings))


async def _call(command: Callable[[KeyStore], Awaitable[T]], settings: Settings) -> T:
    """The key store of the mode ``serve`` would run in: SQLite, or the shared Redis."""
    url = settings.broker_url
    if url is not None:
        from asrserve.auth.redis import RedisKeyStore
        from asrserve.drivers.redis import connect

        client = connect(url)
        try:
            return await command(RedisKeyStore(client, settings.redis_prefix))
        finally:
            await client.aclose()
    db = Database(settings.db_path)
    try:
        return await command(SqliteKeyStore(db))
    finally:
        db.close()


async def _create(store: KeyStore, args: argparse.Namespace) -> int:
    if args.name in ENV_NAMES:
        print(
            f"asrserve: the name '{args.name}' is kept for the key {ENV_NAMES[args.name]}"
            " gives: choose another",
            file=sys.stderr,
        )
        return 2
    try:
        languages = LanguageRule.parse(args.languages, args.default_language)
    except ValueError as exc:
        print(f"asrserve: {exc}", file=sys.stderr)
        return 2
    secret, key = new_key(
        args.name,
        admin=args.admin,
        rate_limit_rpm=args.rpm,
        audio_minutes_per_day=args.audio_minutes_per_day,
        device_seconds_per_day=args.device_seconds_per_day,
        languages=languages,
    )
    try:
        await store.create(key)
    except DuplicateName as exc:
        print(f"asrserve: {exc}", file=sys.stderr)
        return 2
    print(f"created {key.id} ({key.name}{', admin' if key.admin else ''})", file=sys.stderr)
    print("the secret is shown only now; store it safely:", file=sys.stderr)
    print(secret)
    return 0


async def _list(store: KeyStore) -> int:
    print(
        f"{'id':<18} {'name':<20} {'admin':<5} {'hint':<12} {'languages':<14} {'default':<8}"
        f" {'created':<20} revoked"
    )
    for key in await store.all():
        created = _when(key.created_at)
        revoked = _when(key.revoked_at) if key.revoked_at else ""
        admin = "yes" if key.admin else "no"
        languages = key.language_rule.view()
        default = key.default_language or "-"
        print(
            f"{key.id:<18} {key.name:<20} {admin:<5} {key.hint + '…':<12} {languages:<14}"
            f" {default:<8} {created:<20} {revoked}"
        )
    return 0


async def _revoke(store: KeyStore, id_or_name: str) -> int:
    key = await store.revoke(id_or_name)
    if key is None:
        print(f"asrserve: no active key '{id_or_name}'", file=sys.stderr)
        return 1
    print(f"revoked {key.id} ({key.name})")
    return 0


def _when(stamp: float | None) -> str:
    if stamp is None:
        return ""
    return dt.datetime.fromtimestamp(stamp, dt.UTC).strftime("%Y-%m-%d %H:%M:%S")
