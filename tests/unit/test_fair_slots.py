"""The intake probes' processes are shared across keys: a freed one goes to the waiting key
that holds the fewest, then to the one served least recently (``audio.probes.FairSlots``)."""

from __future__ import annotations

import asyncio

from asrserve.audio.probes import FairSlots


async def _settle() -> None:
    for _ in range(10):
        await asyncio.sleep(0)


def test_a_freed_slot_goes_to_the_key_that_waited_behind_anothers_queue() -> None:
    """Issue 42: one key's queued uploads held another key's one upload behind all of them
    (a FIFO semaphore). With one slot held by a, then a's three and b's one waiting, b goes
    second, and a's run in the order they came."""
    order: list[str] = []

    async def main() -> None:
        slots = FairSlots(1)
        release = asyncio.Event()

        async def hold(tenant: str, label: str, until: asyncio.Event | None = None) -> None:
            async with slots.held(tenant):
                order.append(label)
                if until is not None:
                    await until.wait()

        first = asyncio.create_task(hold("a", "a0", release))
        await _settle()
        waiting = [
            asyncio.create_task(hold(t, label))
            for t, label in [("a", "a1"), ("a", "a2"), ("a", "a3"), ("b", "b1")]
        ]
        await _settle()
        release.set()
        await asyncio.gather(first, *waiting)

    asyncio.run(main())
    assert order == ["a0", "b1", "a1", "a2", "a3"]


def test_a_waiter_cancelled_gives_up_its_place_and_the_slots_stay_whole() -> None:
    async def main() -> list[str]:
        slots, order = FairSlots(1), list[str]()
        release = asyncio.Event()

        async def hold(tenant: str, until: asyncio.Event | None = None) -> None:
            async with slots.held(tenant):
                order.append(tenant)
                if until is not None:
                    await until.wait()

        first = asyncio.create_task(hold("a", release))
        await _settle()
        gone, kept = asyncio.create_task(hold("b")), asyncio.create_task(hold("c"))
        await _settle()
        gone.cancel()
        await _settle()
        release.set()
        await asyncio.gather(first, kept)
        await hold("d")  # the slot came back: nothing leaked
        return order

    assert asyncio.run(main()) == ["a", "c", "d"]
