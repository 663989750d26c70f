"""Waiting for an event with a timeout, and cancelling tasks, without losing a cancellation.

On Python 3.11 ``asyncio.wait_for(event.wait(), timeout)`` returns normally when its task is
cancelled in the loop iteration in which the event is set: the cancellation is lost, and a
loop around the wait (a device loop, a claim loop) runs on after shutdown cancelled it, so
the shutdown waits forever (python/cpython#86296, fixed in 3.12). ``asyncio.timeout`` hands
such a cancellation on. Every timed wait on an event goes through here, and shutdown
cancels its tasks with :func:`cancel_all`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

RECANCEL_S = 0.5  # cancel_all: how long a cancelled task may take before it is cancelled again


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


async def cancel_all(tasks: Iterable[asyncio.Task[Any]], bound: float) -> set[asyncio.Task[Any]]:
    """Cancel ``tasks`` and wait up to ``bound`` seconds for them to end; the ones left.

    A task still running half a second after a cancellation is cancelled again: a
    cancellation can be lost below us (seen under load on Python 3.11: a worker node's
    heartbeat, cancelled in its Redis call, slept on), and a loop that lost one would
    otherwise run on and keep a stopping process alive for good.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + bound
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        remaining = deadline - loop.time()
        if remaining <= 0:
            break
        _, pending = await asyncio.wait(pending, timeout=min(RECANCEL_S, remaining))
    return pending
