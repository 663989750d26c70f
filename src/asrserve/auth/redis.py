"""API keys and their daily audio and device usage in Redis.

Key layout (``P`` is the deployment's prefix):

- ``P:key:<id>``              the key, ``ApiKey.model_dump_json()``
- ``P:keys``                  list: every key id, in creation order
- ``P:keys:hash:<sha256>``    the id of the key whose secret hashes to it
- ``P:keys:name:<name>``      the id of the active (not revoked) key with this name
- ``P:usage:<id>:<day>``      seconds of audio charged to the key that day; expires two days
  after its last charge
- ``P:device:<id>:<day>``     device seconds its forward passes took that day; the same expiry
- ``P:device_audio:<id>:<day>`` audio seconds those passes decoded for the first time; the same

Keys never expire.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from asrserve.auth.keys import ApiKey, DeviceUsage, DuplicateName, KeyStore
from asrserve.drivers.redis_documents import Raw, Writer, text, transact

USAGE_TTL_S = 2 * 86400
# KEYS[1]: a usage counter; ARGV: seconds, limit, ttl. The new total, or nil when over limit.
CHARGE = """
local total = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(ARGV[1])
if total > tonumber(ARGV[2]) then
    return false
end
local text = string.format('%.17g', total)
redis.call('SET', KEYS[1], text, 'EX', ARGV[3])
return text
"""


def _number(value: float) -> str:
    """``value`` as Lua's ``tonumber`` reads it back exactly (it knows no 'inf')."""
    if math.isinf(value):
        return "1e999" if value > 0 else "-1e999"
    return repr(value)


class RedisKeyStore(KeyStore):
    def __init__(self, client: Redis, prefix: str) -> None:
        self._client = client
        self._p = prefix
        self._charge = client.register_script(CHARGE)

    def _key(self, key_id: str) -> str:
        return f"{self._p}:key:{key_id}"

    def _name(self, name: str) -> str:
        return f"{self._p}:keys:name:{name}"

    def _hash(self, digest: str) -> str:
        return f"{self._p}:keys:hash:{digest}"

    async def create(self, key: ApiKey) -> None:
        watched = [self._key(key.id), self._name(key.name), self._hash(key.hash)]

        async def plan(pipe: Pipeline) -> tuple[None, Writer | None]:
            stored, named, hashed = await pipe.mget(watched)
            if named is not None:
                raise DuplicateName(f"an active key is already named '{key.name}'")
            if stored is not None or hashed is not None:
                raise ValueError(f"key {key.id} or its secret is stored already")

            def write(tx: Pipeline) -> None:
                tx.set(self._key(key.id), key.model_dump_json())
                tx.set(self._hash(key.hash), key.id)
                tx.rpush(f"{self._p}:keys", key.id)
                if key.revoked_at is None:
                    tx.set(self._name(key.name), key.id)

            return None, write

        await transact(self._client, watched, plan)

    async def find(self, digest: str) -> ApiKey | None:
        key_id: Raw | None = await self._client.get(self._hash(digest))
        return None if key_id is None else await self.get(text(key_id))

    async def get(self, key_id: str) -> ApiKey | None:
        raw: Raw | None = await self._client.get(self._key(key_id))
        return None if raw is None else ApiKey.model_validate_json(raw)

    async def all(self) -> list[ApiKey]:
        ids: list[Raw] = await self._client.lrange(f"{self._p}:keys", 0, -1)
        if not ids:
            return []
        raws: list[Raw | None] = await self._client.mget([self._key(text(i)) for i in ids])
        return [ApiKey.model_validate_json(raw) for raw in raws if raw is not None]

    async def _active(self, pipe: Pipeline, id_or_name: str) -> ApiKey | None:
        """The active key with this id, else the one with this name (watching what it reads)."""
        raw: Raw | None = await pipe.get(self._key(id_or_name))
        key = None if raw is None else ApiKey.model_validate_json(raw)
        if key is not None and key.revoked_at is None:
            return key
        named: Raw | None = await pipe.get(self._name(id_or_name))
        if named is None:
            return None
        await pipe.watch(self._key(text(named)))
        raw = await pipe.get(self._key(text(named)))
        key = None if raw is None else ApiKey.model_validate_json(raw)
        return key if key is not None and key.revoked_at is None else None

    async def revoke(self, id_or_name: str) -> ApiKey | None:
        async def plan(pipe: Pipeline) -> tuple[ApiKey | None, Writer | None]:
            key = await self._active(pipe, id_or_name)
            if key is None:
                return None, None
            revoked = key.model_copy(update={"revoked_at": time.time()})

            def write(tx: Pipeline) -> None:
                tx.set(self._key(key.id), revoked.model_dump_json())
                tx.delete(self._name(key.name))

            return revoked, write

        watched = [self._key(id_or_name), self._name(id_or_name)]
        return await transact(self._client, watched, plan)

    async def charge(self, key_id: str, day: str, seconds: float, limit: float) -> float | None:
        counter = f"{self._p}:usage:{key_id}:{day}"
        total: Raw | None = await self._charge(
            keys=[counter], args=[_number(seconds), _number(limit), USAGE_TTL_S]
        )
        return None if total is None else float(total)

    def _device(self, key_id: str, day: str) -> tuple[str, str]:
        return f"{self._p}:device:{key_id}:{day}", f"{self._p}:device_audio:{key_id}:{day}"

    async def spend(self, spent: Mapping[str, DeviceUsage], day: str) -> None:
        async with self._client.pipeline(transaction=False) as pipe:
            for key_id, used in spent.items():
                device, audio = self._device(key_id, day)
                for counter, seconds in ((device, used.device_s), (audio, used.audio_s)):
                    pipe.incrbyfloat(counter, seconds)
                    pipe.expire(counter, USAGE_TTL_S)
            await pipe.execute()

    async def spent(self, key_id: str, day: str) -> DeviceUsage:
        values: list[Raw | None] = await self._client.mget(list(self._device(key_id, day)))
        device, audio = (0.0 if value is None else float(value) for value in values)
        return DeviceUsage(device, audio)
