"""Each key's device seconds of the day, written to its key's usage as passes run.

The scheduler charges every forward pass to the keys of its windows (``batcher/shares.py``);
the meter adds those charges up per key, with the audio seconds the passes decoded for the
first time, and writes them to the key store's daily usage (``KeyStore.spend``). The device-
seconds quota reads them when new work arrives (``auth/quota.py``), and admission's limits
in device seconds count a key's queued audio at its measured device seconds per audio second
(``admission/base.py``). Writes do not wait for each other: charges that come while one
write runs are gathered and go in the next, so a busy device costs the store one write at a
time, not one per pass. A write that fails keeps its charges for the next."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from asrserve.auth.keys import DeviceUsage, KeyStore, utc_day
from asrserve.batcher.shares import NOBODY

log = logging.getLogger(__name__)


class DeviceMeter:
    def __init__(self, keys: KeyStore, today: Callable[[], str] = utc_day) -> None:
        self._keys = keys
        self._today = today
        self._owed: dict[str, DeviceUsage] = {}
        self._writing: asyncio.Task[None] | None = None

    def charged(self, tenant: str, seconds: float, audio_s: float) -> None:
        """A pass's share for ``tenant`` (a key id; work of no key is not metered): its
        device seconds and new audio seconds. Called on the event loop."""
        if tenant == NOBODY or seconds <= 0:
            return
        self._owed[tenant] = self._owed.get(tenant, DeviceUsage()) + DeviceUsage(seconds, audio_s)
        if self._writing is None or self._writing.done():
            self._writing = asyncio.create_task(self._write(), name="device-meter")

    async def _write(self) -> None:
        while self._owed:
            owed, self._owed = self._owed, {}
            try:
                await self._keys.spend(owed, self._today())
            except Exception:
                log.warning("device seconds not written yet; kept for the next write")
                for tenant, used in owed.items():
                    self._owed[tenant] = self._owed.get(tenant, DeviceUsage()) + used
                return

    async def flush(self) -> None:
        """Wait for the writes under way (at shutdown)."""
        if self._writing is not None:
            await asyncio.gather(self._writing, return_exceptions=True)
