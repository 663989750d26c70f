"""Waiting for an event with a timeout, without losing a cancellation.

On Python 3.11 ``asyncio.wait_for(event.wait(), timeout)`` returns normally when its task is
cancelled in the loop iteration in which the event is set: the cancellation is lost, and a
loop around the wait (a device loop, a claim loop) runs on after shutdown cancelled it, so
the shutdown waits forever (python/cpython#86296, fixed in 3.12). ``asyncio.timeout`` hands
such a cancellation on. Every timed wait on an event goes through here.
"""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait until ``event`` is set (True) or ``timeout`` seconds pass (False; None: no
    timeout). A cancellation of the caller always propagates."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
