"""Leadership: exactly one node at a time runs the cluster-wide duties.

The Batch API runner, the webhook sender and the audio retention sweep must not run
twice at once (a webhook would be sent twice). Each API node competes for one lease key
(``SET NX PX``); the holder renews it every third of its time to live and runs the
duties; if it cannot renew (Redis unreachable, or the lease was lost) it stops them, and
another node takes over once the lease expires.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import redis.asyncio as aioredis

from asrserve.distributed.connection import REDIS_ERRORS

log = logging.getLogger(__name__)

RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class Leadership:
    def __init__(self, client: aioredis.Redis, key: str, holder: str, ttl_s: float) -> None:
        self._client = client
        self._key = key
        self._holder = holder
        self._ttl_ms = max(int(ttl_s * 1000), 300)
        self._renew = client.register_script(RENEW)
        self._release = client.register_script(RELEASE)
        self.leading = False

    async def run(self, duties: Callable[[], Awaitable[None]]) -> None:
        """Compete for the lease forever; run ``duties`` while holding it."""
        while True:
            try:
                if await self._client.set(self._key, self._holder, nx=True, px=self._ttl_ms):
                    await self._lead(duties)
            except Exception as exc:
                if not _outage(exc):
                    log.exception("the leader's duties failed; competing for the lease again")
                else:
                    log.warning("leadership: redis unreachable (%s)", exc)
            await asyncio.sleep(self._ttl_ms / 3000)  # a lease timer, not a wait for an event

    async def _lead(self, duties: Callable[[], Awaitable[None]]) -> None:
        log.info("leading: running the batch runner, webhooks and retention here")
        self.leading = True
        task = asyncio.ensure_future(duties())
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=self._ttl_ms / 3000)
                if done:
                    task.result()  # raises what the duties raised (logged by the caller)
                    return
                if not await self._renew(keys=[self._key], args=[self._holder, self._ttl_ms]):
                    log.warning("leadership lost; stopping the duties")
                    return
        finally:
            self.leading = False
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await self.release()

    async def release(self) -> None:
        with contextlib.suppress(*REDIS_ERRORS):  # else it expires on its own
            await self._release(keys=[self._key], args=[self._holder])


def _outage(exc: BaseException) -> bool:
    """Redis was unreachable (the only error, or the only errors of a task group)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_outage(inner) for inner in exc.exceptions)
    return isinstance(exc, REDIS_ERRORS)
