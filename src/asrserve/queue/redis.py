"""The distributed queue: Redis Streams with one consumer group, shared by many workers.

Key layout (every key starts with ``{prefix}:``):

- ``q:{stream}`` (``q:interactive``, ``q:async``, ``q:batch``): one stream per priority,
  entries ``{job: <job id>}``, read through the consumer group ``workers``;
- ``queued``: hash job id -> stream entry id of its live entry (makes ``put`` idempotent);
- ``deliveries``: hash job id -> times handed out (reads and reclaims);
- ``dead``: stream of dead letters ``{job_id, priority, deliveries, reason}``, capped at
  about the latest 100,000 (``MAXLEN ~``).

Every finished entry is XACKed *and* XDELed, so a stream holds only unfinished work: that is
why the group is created at ``0`` (not ``$``) — re-created after a NOGROUP (Redis restarted
without persistence, or the group destroyed) it re-delivers what is still queued.

Semantics: at-least-once. A claimed entry is leased for ``lease_s``; ``extend`` (the
heartbeat) renews the lease, and an entry idle past it belongs to a dead worker: the next
``get`` of any consumer reclaims it (XAUTOCLAIM) — a redelivery, never a loss. ``recover``
therefore only counts such entries: a starting worker must not steal live workers' entries.
``release`` re-adds the job at the *tail* of its stream (a stream cannot re-insert an entry
at its old position) and undoes the delivery count. ``block_s`` must stay below the client's
``socket_timeout`` (if any); a ``get`` cancelled while blocked may leave an entry claimed,
which is reclaimed after the lease.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from functools import partial
from typing import Any, TypeVar

import redis.asyncio as aioredis
from redis.exceptions import ResponseError

from asrserve.drivers.redis_documents import text
from asrserve.queue.base import Delivery, Queue
from asrserve.vocabulary import Priority

T = TypeVar("T")
Arg = str | int | float
GROUP = "workers"
PUT_CHUNK = 1000  # ids per script call: a long script would block Redis for everyone

# KEYS: queued, stream; ARGV: job ids in order. Adds those not queued yet.
PUT = """
for _, job in ipairs(ARGV) do
  if redis.call('HEXISTS', KEYS[1], job) == 0 then
    redis.call('HSET', KEYS[1], job, redis.call('XADD', KEYS[2], '*', 'job', job))
  end
end
"""

# KEYS: deliveries, streams...; ARGV: consumer, lease_ms, total, cap per stream...
# Per stream, most urgent first: reclaim expired leases, then read new entries.
CLAIM = """
local out, total = {}, tonumber(ARGV[3])
for i = 2, #KEYS do
  local room = math.min(tonumber(ARGV[i + 2]), total - #out)
  if room <= 0 then break end
  local got, cursor = {}, '0-0'
  repeat
    local r = redis.call('XAUTOCLAIM', KEYS[i], 'workers', ARGV[1], ARGV[2], cursor,
                         'COUNT', room - #got)
    cursor = r[1]
    for _, e in ipairs(r[2]) do got[#got + 1] = e end
  until cursor == '0-0' or #got >= room
  if #got < room then
    local r = redis.call('XREADGROUP', 'GROUP', 'workers', ARGV[1], 'COUNT', room - #got,
                         'STREAMS', KEYS[i], '>')
    if r then for _, e in ipairs(r[1][2]) do got[#got + 1] = e end end
  end
  for _, e in ipairs(got) do
    local job = e[2][2]
    out[#out + 1] = {i - 2, e[1], job, redis.call('HINCRBY', KEYS[1], job, 1)}
  end
end
return out
"""

# KEYS: stream, queued, deliveries[, dead]; ARGV: entry id, job id[, priority, n, reason].
# Removes the entry; the hashes only if they still point at it (a stale receipt is a no-op).
ACK = """
local live = redis.call('HGET', KEYS[2], ARGV[2]) == ARGV[1]
if live and KEYS[4] then
  redis.call('XADD', KEYS[4], 'MAXLEN', '~', '100000', '*', 'job_id', ARGV[2],
             'priority', ARGV[3], 'deliveries', ARGV[4], 'reason', ARGV[5])
end
redis.call('XACK', KEYS[1], 'workers', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if live then
  redis.call('HDEL', KEYS[2], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return live and 1 or 0
"""

# KEYS: stream, queued, deliveries; ARGV: entry id, job id, consumer.
# Only an entry this consumer still holds goes back: a fresh entry at the tail.
RELEASE = """
local p = redis.call('XPENDING', KEYS[1], 'workers', ARGV[1], ARGV[1], 1)
if #p == 0 or p[1][2] ~= ARGV[3] then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], redis.call('XADD', KEYS[1], '*', 'job', ARGV[2]))
redis.call('XACK', KEYS[1], 'workers', ARGV[1])
redis.call('XDEL', KEYS[1], ARGV[1])
if redis.call('HINCRBY', KEYS[3], ARGV[2], -1) <= 0 then redis.call('HDEL', KEYS[3], ARGV[2]) end
return 1
"""

# KEYS: queued, deliveries, stream; ARGV: job ids. Removes their entries no consumer holds.
DISCARD = """
for _, job in ipairs(ARGV) do
  local id = redis.call('HGET', KEYS[1], job)
  if id and #redis.call('XPENDING', KEYS[3], 'workers', id, id, 1) == 0 then
    redis.call('XDEL', KEYS[3], id)
    redis.call('HDEL', KEYS[1], job)
    redis.call('HDEL', KEYS[2], job)
  end
end
"""

# KEYS: stream; ARGV: consumer, entry ids... Resets the idle time of those still ours.
EXTEND = """
local n = 0
for i = 2, #ARGV do
  local p = redis.call('XPENDING', KEYS[1], 'workers', ARGV[i], ARGV[i], 1)
  if #p > 0 and p[1][2] == ARGV[1] then
    redis.call('XCLAIM', KEYS[1], 'workers', ARGV[1], 0, ARGV[i], 'JUSTID')
    n = n + 1
  end
end
return n
"""

# KEYS: streams; ARGV: lease_ms. Counts pending entries idle past the lease.
EXPIRED = """
local n = 0
for i = 1, #KEYS do
  local start = '-'
  repeat
    local r = redis.call('XPENDING', KEYS[i], 'workers', 'IDLE', ARGV[1], start, '+', 1000)
    n = n + #r
    if #r > 0 then start = '(' .. r[#r][1] end
  until #r < 1000
end
return n
"""

# Stream names are stored state: the offline class keeps the name it had before it was
# renamed from "batch", so that entries queued by an older version are still read.
STREAMS = {Priority.INTERACTIVE: "interactive", Priority.ASYNC: "async", Priority.OFFLINE: "batch"}


class RedisQueue(Queue):
    def __init__(
        self,
        client: aioredis.Redis,
        prefix: str,
        consumer: str,
        lease_s: float,
        *,
        block_s: float = 5.0,
    ) -> None:
        self._redis = client
        self._consumer = consumer
        self._lease_ms = max(1, int(lease_s * 1000))
        self._block_s = block_s
        self._queued = f"{prefix}:queued"
        self._deliveries = f"{prefix}:deliveries"
        self._dead = f"{prefix}:dead"
        self._streams = {p: f"{prefix}:q:{STREAMS[p]}" for p in Priority}
        self._by_stream = {s: p for p, s in self._streams.items()}
        self._grouped = False
        self._put = client.register_script(PUT)
        self._claim_script = client.register_script(CLAIM)
        self._ack_script = client.register_script(ACK)
        self._release_script = client.register_script(RELEASE)
        self._extend_script = client.register_script(EXTEND)
        self._expired_script = client.register_script(EXPIRED)
        self._discard_script = client.register_script(DISCARD)

    async def _groups(self) -> None:
        """Create the group on every stream (at ``0``: see the module docstring)."""
        pipe = self._redis.pipeline(transaction=False)
        for stream in self._streams.values():
            pipe.xgroup_create(stream, GROUP, id="0", mkstream=True)
        for result in await pipe.execute(raise_on_error=False):
            if isinstance(result, Exception) and "BUSYGROUP" not in str(result):
                raise result
        self._grouped = True

    async def _run(self, op: Callable[[], Awaitable[T]]) -> T:
        """Run ``op``, creating the groups first and again (then retrying) on NOGROUP."""
        if not self._grouped:
            await self._groups()
        try:
            return await op()
        except ResponseError as err:
            if "NOGROUP" not in str(err):
                raise
        await self._groups()
        return await op()

    async def put(self, job_id: str, priority: Priority) -> None:
        await self.put_many([job_id], priority)

    async def put_many(self, job_ids: Sequence[str], priority: Priority) -> None:
        await self._in_chunks(self._put, [self._queued, self._streams[priority]], job_ids)

    async def _in_chunks(
        self, script: Callable[..., Awaitable[Any]], keys: list[str], job_ids: Sequence[str]
    ) -> None:
        """``script`` over ``job_ids``, :data:`PUT_CHUNK` ids a call: each call is one
        atomic script, and a long one would block Redis for everyone."""
        for start in range(0, len(job_ids), PUT_CHUNK):
            part = list(job_ids[start : start + PUT_CHUNK])
            await self._run(partial(script, keys=keys, args=part))

    async def _claim(self, limits: Mapping[Priority, int], total: int) -> list[Delivery]:
        order = sorted(p for p in limits if limits[p] > 0)
        keys = [self._deliveries, *(self._streams[p] for p in order)]
        args: list[Arg] = [self._consumer, self._lease_ms, total, *(limits[p] for p in order)]
        rows = await self._run(lambda: self._claim_script(keys=keys, args=args))
        return [Delivery(text(job), order[i], int(n), text(eid)) for i, eid, job, n in rows]

    async def _block(self, caps: Mapping[Priority, int], seconds: float) -> list[Delivery]:
        streams: dict[Any, Any] = {self._streams[p]: ">" for p in sorted(caps)}
        ms = max(1, int(seconds * 1000))
        reply: Any = await self._redis.xreadgroup(GROUP, self._consumer, streams, count=1, block=ms)
        pairs = reply.items() if isinstance(reply, dict) else (reply or [])  # RESP3 or RESP2
        got = sorted(
            (self._by_stream[text(name)], text(eid), text(fields[b"job"]))
            for name, entries in pairs
            for eid, fields in entries
        )
        if not got:
            return []
        pipe = self._redis.pipeline(transaction=False)
        for _, _, job in got:
            pipe.hincrby(self._deliveries, job, 1)
        counts = await pipe.execute()
        return [Delivery(job, p, int(n), eid) for (p, eid, job), n in zip(got, counts, strict=True)]

    def _arm(self) -> object:
        """Nothing to arm: the blocking read in ``_wait`` is the wake-up."""
        return None

    async def _wait(
        self, token: object, limits: Mapping[Priority, int], total: int, timeout: float
    ) -> list[Delivery]:
        """One ``XREADGROUP … BLOCK`` over every eligible stream, at most ``block_s``, so
        that expired leases are reclaimed (by the next claim) at least that often."""
        if not limits or total <= 0:
            await asyncio.sleep(min(timeout, self._block_s))  # nothing may be claimed
            return []
        items = await self._run(partial(self._block, limits, min(timeout, self._block_s)))
        for extra in items[total:]:  # two streams answered at once
            await self.release(extra)
        return items[:total]

    def _keys(self, delivery: Delivery) -> list[str]:
        return [self._streams[delivery.priority], self._queued, self._deliveries]

    async def _remove(self, delivery: Delivery, dead: list[Arg] | None = None) -> None:
        keys = self._keys(delivery)
        args: list[Arg] = [delivery.receipt, delivery.job_id]
        if dead is not None:
            keys.append(self._dead)
            args += dead
        await self._run(lambda: self._ack_script(keys=keys, args=args))

    async def ack(self, delivery: Delivery) -> None:
        await self._remove(delivery)

    async def dead_letter(self, delivery: Delivery, reason: str) -> None:
        await self._remove(delivery, [delivery.priority.name.lower(), delivery.deliveries, reason])

    async def dead_letters(self) -> list[dict[str, str]]:
        entries: Any = await self._redis.xrange(self._dead)
        return [{text(k): text(v) for k, v in fields.items()} for _, fields in entries]

    async def release(self, delivery: Delivery) -> None:
        args = [delivery.receipt, delivery.job_id, self._consumer]
        await self._run(lambda: self._release_script(keys=self._keys(delivery), args=args))

    async def extend(self, deliveries: Sequence[Delivery]) -> None:
        by_stream: dict[str, list[str]] = {}
        for d in deliveries:
            by_stream.setdefault(self._streams[d.priority], []).append(d.receipt)
        for stream, ids in by_stream.items():
            script = partial(self._extend_script, keys=[stream], args=[self._consumer, *ids])
            await self._run(script)

    async def discard(self, job_ids: Sequence[str], priority: Priority) -> None:
        keys = [self._queued, self._deliveries, self._streams[priority]]
        await self._in_chunks(self._discard_script, keys, job_ids)

    async def recover(self) -> int:
        """Counts (does not claim) entries whose lease expired: ``get`` reclaims them."""
        keys = list(self._streams.values())
        return int(await self._run(lambda: self._expired_script(keys=keys, args=[self._lease_ms])))

    async def depth(self) -> dict[Priority, int]:
        counts: dict[Priority, int] = {}
        for priority, stream in self._streams.items():
            groups = await self._run(partial(self._redis.xinfo_groups, stream))
            group = next((g for g in groups if text(g["name"]) == GROUP), None)
            if group is not None and group["lag"] is not None:
                counts[priority] = int(group["lag"])
            else:
                pending = int(group["pending"]) if group is not None else 0
                counts[priority] = int(await self._redis.xlen(stream)) - pending
        return counts
