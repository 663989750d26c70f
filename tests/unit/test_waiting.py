"""A timed wait on an event never loses its task's cancellation (see asrserve.waiting)."""

from __future__ import annotations

import asyncio
import contextlib

from asrserve.waiting import cancel_all, wait_event


def test_a_cancellation_in_the_iteration_the_event_is_set_propagates() -> None:
    """The race that kept a stopped worker node's device loop running: the event is set and
    the waiter cancelled before either wake-up has run. ``asyncio.wait_for`` on 3.11
    returns True here instead."""

    async def scenario() -> bool:
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_event(event, 60.0))
        await asyncio.sleep(0)  # one loop iteration: the task starts and waits on the event
        assert event._waiters
        event.set()
        waiting.cancel()
        try:
            await waiting
        except asyncio.CancelledError:
            return waiting.cancelled()
        return False

    assert asyncio.run(scenario()) is True


def test_it_says_whether_the_event_came_or_the_timeout_passed() -> None:
    async def scenario() -> tuple[bool, bool]:
        event = asyncio.Event()
        timed_out = await wait_event(event, 0.0)
        event.set()
        return timed_out, await wait_event(event, None)

    assert asyncio.run(scenario()) == (False, True)


def test_cancel_all_cancels_again_a_task_that_lost_its_cancellation() -> None:
    async def loses_the_first(started: asyncio.Event) -> None:
        started.set()
        with contextlib.suppress(asyncio.CancelledError):  # lost, as below a Redis call
            await asyncio.Event().wait()
        await asyncio.Event().wait()  # a loop would wait again

    async def scenario() -> tuple[set[asyncio.Task[None]], bool]:
        started = asyncio.Event()
        task = asyncio.create_task(loses_the_first(started))
        await started.wait()
        left = await cancel_all([task], 60.0)
        return left, task.cancelled()

    assert asyncio.run(scenario()) == (set(), True)
