"""Each key's device seconds of the day, written to its key's usage as passes run.

The scheduler charges every forward pass to the keys of its windows
(``batcher/shares.py``); the meter adds those charges up per key and writes them to the key
store's daily usage (``KeyStore.spend``), which the device-seconds quota reads when new
work arrives (``auth/quota.py``). Writes do not wait for each other: charges that come
while one write runs are gathered and go in the next, so a busy device costs the store
one write at a time, not one per pass. A write that fails keeps its charges for the next.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Callable

from asrserve.auth.keys import KeyStore
from asrserve.batcher.shares import NOBODY

log = logging.getLogger(__name__)


def utc_day() -> str:
    return dt.datetime.now(dt.UTC).date().isoformat()


class DeviceMeter:
    def __init__(self, keys: KeyStore, today: Callable[[], str] = utc_day) -> None:
        self._keys = keys
        self._today = today
        self._owed: dict[str, float] = {}
        self._writing: asyncio.Task[None] | None = None

    def charged(self, tenant: str, seconds: float) -> None:
        """A pass's share for ``tenant`` (a key id; work of no key is not metered). Called on
        the event loop."""
        if tenant == NOBODY or seconds <= 0:
            return
        self._owed[tenant] = self._owed.get(tenant, 0.0) + seconds
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write(), name="device-meter")

    async def _write(self) -> None:
        while self._owed:
            owed, self._owed = self._owed, {}
            try:
                await self._keys.spend(owed, self._today())
            except Exception:
                log.warning("device seconds not written yet; kept for the next write")
                for tenant, seconds in owed.items():
                    self._owed[tenant] = self._owed.get(tenant, 0.0) + seconds
                return

    async def flush(self) -> None:
        """Wait for the writes under way (at shutdown)."""
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
