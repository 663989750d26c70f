"""The key store contract, run against SQLite and Redis."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import redis.asyncio as aioredis

from asrserve.auth.env_keys import (
    EnvKey,
    ReusedEnvKey,
    RevokedEnvKey,
    UnreadableEnvKey,
    env_keys,
    install,
)
from asrserve.auth.keys import DeviceUsage, DuplicateName, KeyStore, hash_secret, new_key
from asrserve.auth.redis import RedisKeyStore
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.drivers.sqlite import Database
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.settings import Settings
from tests.support.loop import Run


class KeyStoreContract:
    def test_create_find_get_all(self, keys: KeyStore, run: Run) -> None:
        secret, alice = new_key("alice", admin=True, rate_limit_rpm=5)
        _, bob = new_key("bob", audio_minutes_per_day=1.5)
        run(keys.create(alice))
        run(keys.create(bob))
        assert run(keys.find(hash_secret(secret))) == alice
        assert run(keys.find(hash_secret("asr_wrong"))) is None
        assert run(keys.get(bob.id)) == bob
        assert run(keys.get("key_missing")) is None
        assert run(keys.all()) == [alice, bob]  # creation order
        assert run(keys.active()) == [alice, bob]

    def test_languages_kept_and_revocation_keeps_them(self, keys: KeyStore, run: Run) -> None:
        secret, tenant = new_key("tenant", languages=LanguageRule(("de", "fr"), "de"))
        run(keys.create(tenant))
        found = run(keys.find(hash_secret(secret)))
        assert found is not None and found.language_rule == LanguageRule(("de", "fr"), "de")
        revoked = run(keys.revoke("tenant"))
        assert revoked is not None and revoked.languages == ("de", "fr")
        assert run(keys.get(tenant.id)) == revoked

    def test_names_unique_among_active_keys(self, keys: KeyStore, run: Run) -> None:
        _, first = new_key("ci")
        run(keys.create(first))
        with pytest.raises(DuplicateName):
            run(keys.create(new_key("ci")[1]))
        revoked = run(keys.revoke("ci"))  # by name
        assert revoked is not None and revoked.id == first.id and revoked.revoked_at is not None
        assert run(keys.revoke("ci")) is None  # no active key of that name any more
        _, second = new_key("ci")
        run(keys.create(second))  # the name is free again
        assert [k.id for k in run(keys.active())] == [second.id]
        assert run(keys.get(first.id)) == revoked
        again = run(keys.revoke(second.id))  # by id
        assert again is not None and again.id == second.id
        assert run(keys.active()) == []
        assert len(run(keys.all())) == 2

    def test_charge_within_daily_limit(self, keys: KeyStore, run: Run) -> None:
        assert run(keys.charge("key_a", "2024-01-01", 40.0, 100.0)) == 40.0
        assert run(keys.charge("key_a", "2024-01-01", 0.1, 100.0)) == 40.1
        assert run(keys.charge("key_a", "2024-01-01", 60.0, 100.0)) is None  # over: nothing added
        assert run(keys.charge("key_a", "2024-01-01", 59.9, 100.0)) == 40.1 + 59.9
        assert run(keys.charge("key_a", "2024-01-02", 100.0, 100.0)) == 100.0  # a new day
        assert run(keys.charge("key_b", "2024-01-01", 1.0, 100.0)) == 1.0  # another key
        assert run(keys.charge("key_b", "2024-01-01", 1e9, float("inf"))) == 1e9 + 1.0

    def test_device_usage_adds_up_per_key_and_day(self, keys: KeyStore, run: Run) -> None:
        assert run(keys.spent("key_a", "2024-01-01")) == DeviceUsage(0.0, 0.0)
        day_one = {"key_a": DeviceUsage(1.5, 30.0), "key_b": DeviceUsage(2.0, 10.0)}
        run(keys.spend(day_one, "2024-01-01"))
        run(keys.spend({"key_a": DeviceUsage(0.25, 0.0)}, "2024-01-01"))  # a fallback pass
        run(keys.spend({"key_a": DeviceUsage(8.0, 4.0)}, "2024-01-02"))
        assert run(keys.spent("key_a", "2024-01-01")) == DeviceUsage(1.75, 30.0)
        assert run(keys.spent("key_b", "2024-01-01")) == DeviceUsage(2.0, 10.0)
        assert run(keys.spent("key_a", "2024-01-02")) == DeviceUsage(8.0, 4.0)

    def test_env_keys_installed_once_rotated_and_never_revived(
        self, keys: KeyStore, run: Run
    ) -> None:
        tenant = EnvKey("env", "asr_" + "t" * 40, admin=False)
        admin = EnvKey("env-admin", "asr_" + "a" * 40, admin=True)
        assert run(install(keys, [tenant, admin])) == (["env", "env-admin"], [])
        stored = run(keys.find(hash_secret(tenant.secret)))
        assert stored is not None and stored.name == "env" and not stored.admin
        found_admin = run(keys.find(hash_secret(admin.secret)))
        assert found_admin is not None and found_admin.admin
        assert run(install(keys, [tenant, admin])) == ([], [])  # a restart changes nothing
        assert len(run(keys.all())) == 2
        rotated = EnvKey("env", "asr_" + "r" * 40, admin=False)
        assert run(install(keys, [rotated, admin])) == (["env"], [])
        old = run(keys.find(hash_secret(tenant.secret)))
        assert old is not None and old.revoked_at is not None  # the old secret stops working
        assert {k.name for k in run(keys.active())} == {"env", "env-admin"}
        with pytest.raises(RevokedEnvKey, match=old.id):
            run(install(keys, [tenant]))  # a revoked secret is not brought back

    def test_an_env_key_whose_setting_is_removed_is_revoked(self, keys: KeyStore, run: Run) -> None:
        """Before, unsetting ASRSERVE_API_KEY left its key working for good."""
        tenant = EnvKey("env", "asr_" + "t" * 40, admin=False)
        admin = EnvKey("env-admin", "asr_" + "a" * 40, admin=True)
        _, other = new_key("ci")
        run(keys.create(other))
        run(install(keys, [tenant, admin]))
        assert run(install(keys, [admin])) == ([], ["env"])
        gone = run(keys.find(hash_secret(tenant.secret)))
        assert gone is not None and gone.revoked_at is not None
        assert {k.name for k in run(keys.active())} == {"env-admin", "ci"}  # others stay

    def test_a_secret_that_is_another_keys_is_refused(self, keys: KeyStore, run: Run) -> None:
        """Before, the admin secret set to a tenant key's was found stored and skipped:
        the service started with no admin key and said nothing."""
        secret, tenant = new_key("tenant")
        run(keys.create(tenant))
        with pytest.raises(ReusedEnvKey, match=tenant.id):
            run(install(keys, [EnvKey("env-admin", secret, admin=True)]))
        assert [k.name for k in run(keys.active())] == ["tenant"]


# The key table and a key's record as the release before languages wrote them.
OLD_SCHEMA = """
CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE,
    revoked_at REAL,
    data TEXT NOT NULL
);
"""
OLD_KEY = json.dumps(
    {
        "id": "key_old",
        "name": "ci",
        "admin": False,
        "hash": "ab" * 32,
        "hint": "asr_abcdef",
        "created_at": 1.0,
        "revoked_at": None,
        "rate_limit_rpm": 5,
        "audio_minutes_per_day": None,
    }
)
OLD_KEY_ROW = f"INSERT INTO api_keys VALUES ('key_old', 'ci', '{'ab' * 32}', NULL, ?)"
OLD_DEVICE_USAGE = """
CREATE TABLE key_device_usage (
    key_id TEXT NOT NULL,
    day TEXT NOT NULL,
    device_s REAL NOT NULL,
    PRIMARY KEY (key_id, day)
);
"""
OLD_DEVICE_ROW = "INSERT INTO key_device_usage VALUES ('key_a', '2024-01-01', 3.0)"


class TestSqliteKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, database: Database) -> KeyStore:
        return SqliteKeyStore(database)

    def test_a_key_table_from_before_languages_keeps_working(
        self, tmp_path: Path, run: Run
    ) -> None:
        """A table and a record made by the release before keys had languages: the key
        reads as allowing any language, and keys with languages go in beside it."""
        db = Database(tmp_path / "old.db")
        db.migrate(OLD_SCHEMA)
        db.run_sync(lambda c: c.execute(OLD_KEY_ROW, (OLD_KEY,)))
        keys = SqliteKeyStore(db)
        old = run(keys.find("ab" * 32))
        assert old is not None and old.name == "ci" and old.rate_limit_rpm == 5
        assert old.language_rule == ANY_LANGUAGE
        _, tenant = new_key("tenant", languages=LanguageRule(("de",), None))
        run(keys.create(tenant))
        assert [key.languages for key in run(keys.all())] == [(), ("de",)]
        db.close()

    def test_device_usage_from_before_audio_was_metered_keeps_counting(
        self, database: Database, run: Run
    ) -> None:
        """A day's device seconds written by the release that metered no audio: they stay,
        with no audio, and the day's later passes add both."""
        database.migrate(OLD_DEVICE_USAGE)
        database.run_sync(lambda c: c.execute(OLD_DEVICE_ROW))
        keys = SqliteKeyStore(database)
        assert run(keys.spent("key_a", "2024-01-01")) == DeviceUsage(3.0, 0.0)
        run(keys.spend({"key_a": DeviceUsage(1.0, 10.0)}, "2024-01-01"))
        assert run(keys.spent("key_a", "2024-01-01")) == DeviceUsage(4.0, 10.0)


class TestRedisKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, redis_client: aioredis.Redis) -> KeyStore:
        return RedisKeyStore(redis_client, "test")

    def test_a_record_from_before_languages_reads_as_any_language(
        self, keys: KeyStore, redis_client: aioredis.Redis, run: Run
    ) -> None:
        run(redis_client.set("test:key:key_old", OLD_KEY))
        run(redis_client.set(f"test:keys:hash:{'ab' * 32}", "key_old"))
        old = run(keys.find("ab" * 32))
        assert old is not None and old.name == "ci" and old.language_rule == ANY_LANGUAGE

    def test_usage_expires(self, keys: KeyStore, redis_client: aioredis.Redis, run: Run) -> None:
        run(keys.charge("key_a", "2024-01-01", 1.0, 10.0))
        assert 86400 < run(redis_client.ttl("test:usage:key_a:2024-01-01")) <= 2 * 86400
        run(keys.spend({"key_a": DeviceUsage(1.0, 2.0)}, "2024-01-01"))
        for counter in ("device", "device_audio"):
            assert 86400 < run(redis_client.ttl(f"test:{counter}:key_a:2024-01-01")) <= 2 * 86400


def test_env_keys_read_their_files_first(tmp_path: Path) -> None:
    tenant_file = tmp_path / "tenant"
    tenant_file.write_text("asr_" + "f" * 40 + "\n", encoding="utf-8")  # as `echo` writes it
    settings = Settings(
        api_key="asr_" + "v" * 40, api_key_file=tenant_file, admin_api_key="asr_" + "a" * 40
    )
    assert env_keys(settings) == [
        EnvKey("env", "asr_" + "f" * 40, admin=False),
        EnvKey("env-admin", "asr_" + "a" * 40, admin=True),
    ]
    assert env_keys(Settings()) == []
    same = Settings(api_key="asr_" + "s" * 40, admin_api_key="asr_" + "s" * 40)
    with pytest.raises(ReusedEnvKey, match="the same secret"):
        env_keys(same)
    tenant_file.write_text("short", encoding="utf-8")
    with pytest.raises(UnreadableEnvKey, match="shorter than 32"):
        env_keys(settings)
    with pytest.raises(UnreadableEnvKey, match="cannot read"):
        env_keys(Settings(admin_api_key_file=tmp_path / "missing"))
