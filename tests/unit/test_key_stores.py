"""The key store contract, run against SQLite and Redis."""

from __future__ import annotations

import pytest
import redis.asyncio as aioredis

from asrserve.auth.keys import DuplicateName, KeyStore, hash_secret, new_key
from asrserve.auth.redis import RedisKeyStore
from asrserve.auth.sqlite import SqliteKeyStore
from asrserve.sqlite import Database
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


class TestSqliteKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, database: Database) -> KeyStore:
        return SqliteKeyStore(database)


class TestRedisKeyStore(KeyStoreContract):
    @pytest.fixture
    def keys(self, redis_client: aioredis.Redis) -> KeyStore:
        return RedisKeyStore(redis_client, "test")

    def test_usage_expires(self, keys: KeyStore, redis_client: aioredis.Redis, run: Run) -> None:
        run(keys.charge("key_a", "2024-01-01", 1.0, 10.0))
        assert 86400 < run(redis_client.ttl("test:usage:key_a:2024-01-01")) <= 2 * 86400
