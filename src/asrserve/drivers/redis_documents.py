"""Documents in Redis, shared by every Redis store: one JSON value per object under
``<base>:<id>``, zset indexes of ids written in the same MULTI as the document, optimistic
transactions (WATCH, read, MULTI/EXEC, again on a conflict), and reads through an index
that drop the entries whose document has expired."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar, cast

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.exceptions import WatchError

T = TypeVar("T")
M = TypeVar("M")
Writer = Callable[[Pipeline], None]
Plan = Callable[[Pipeline], Awaitable[tuple[T, Writer | None]]]
Raw = bytes | str  # what redis-py's types promise; bytes, as the client does not decode
CHUNK = 500  # ids per MGET / per create_many transaction

# KEYS[1]: an index; KEYS[i + 1]: the document of member ARGV[i]. Removes the members whose
# document is gone (checked here, atomically, so an id created again meanwhile keeps its entry).
PRUNE = """
local removed = 0
for i, member in ipairs(ARGV) do
    if redis.call('EXISTS', KEYS[i + 1]) == 0 then
        removed = removed + redis.call('ZREM', KEYS[1], member)
    end
end
return removed
"""


async def transact(client: Redis, keys: Sequence[str], plan: Plan[T]) -> T:
    """Optimistic transaction: WATCH ``keys``, let ``plan`` read (it may WATCH more), then
    queue its writer's commands in one MULTI/EXEC; start again if a watched key changed."""
    async with client.pipeline(transaction=True) as pipe:
        while True:
            try:
                await pipe.watch(*keys)
                result, write = await plan(pipe)
                if write is None:
                    return result
                pipe.multi()  # type: ignore[no-untyped-call]
                write(pipe)
                await pipe.execute()
                return result
            except WatchError:
                continue


def text(value: Raw) -> str:
    return value.decode() if isinstance(value, bytes) else value


async def zrange(
    client: Redis, index: str, start: str | int, end: str | int, **kw: object
) -> list[str]:
    """The members of ``index`` in that range (keywords as for ``Redis.zrange``)."""
    found = cast("list[Raw]", await client.zrange(index, start, end, **kw))  # type: ignore[arg-type]
    return [text(member) for member in found]


def ttl_ms(seconds: float | None) -> int | None:
    return None if seconds is None else max(1, int(seconds * 1000))


class Docs(Generic[M]):
    """The JSON documents of one model, ``<base>:<id>``, and reads through zset indexes."""

    def __init__(self, client: Redis, base: str, parse: Callable[[Raw], M]) -> None:
        self.client = client
        self.base = base
        self._parse = parse
        self._prune = client.register_script(PRUNE)

    def key(self, doc_id: str) -> str:
        return f"{self.base}:{doc_id}"

    async def get(self, doc_id: str) -> M | None:
        raw: Raw | None = await self.client.get(self.key(doc_id))
        return None if raw is None else self._parse(raw)

    async def load(self, index: str, ids: Sequence[str]) -> list[M]:
        """The documents of ``ids`` in that order, pruning from ``index`` those gone."""
        found: list[M] = []
        for start in range(0, len(ids), CHUNK):
            part = ids[start : start + CHUNK]
            raws: list[Raw | None] = await self.client.mget([self.key(i) for i in part])
            missing = [i for i, raw in zip(part, raws, strict=True) if raw is None]
            found += [self._parse(raw) for raw in raws if raw is not None]
            if missing:
                await self._prune(keys=[index, *map(self.key, missing)], args=missing)
        return found

    async def update(
        self,
        doc_id: str,
        mutate: Callable[[M], M | None],
        write: Callable[[Pipeline, M, M], None],
    ) -> M | None:
        """Atomically apply ``mutate`` to the document; ``write`` queues the new one (and its
        index changes). The new document, or None when missing or left as it is."""
        key = self.key(doc_id)

        async def plan(pipe: Pipeline) -> tuple[M | None, Writer | None]:
            raw: Raw | None = await pipe.get(key)
            old = None if raw is None else self._parse(raw)
            new = None if old is None else mutate(old)
            if old is None or new is None:
                return None, None
            return new, lambda tx: write(tx, old, new)

        return await transact(self.client, [key], plan)

    async def members(self, index: str) -> list[M]:
        """Every document of ``index``, in id order."""
        return await self.load(index, await zrange(self.client, index, 0, -1))

    async def page(
        self, index: str, *, limit: int, after: str | None, keep: Callable[[M], bool]
    ) -> list[M]:
        """Newest (highest id) first, ids below ``after``, those that ``keep`` accepts."""
        found: list[M] = []
        start = "+" if after is None else f"({after}"
        while len(found) < limit:
            want = max(limit - len(found), 50)
            ids = await zrange(
                self.client, index, start, "-", desc=True, bylex=True, offset=0, num=want
            )
            found += [doc for doc in await self.load(index, ids) if keep(doc)]
            if len(ids) < want:
                break
            start = f"({ids[-1]}"
        return found[:limit]
