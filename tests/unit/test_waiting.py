"""A timed wait on an event never loses its task's cancellation (see asrserve.waiting)."""

from __future__ import annotations

import asyncio

from asrserve.waiting import wait_event


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
