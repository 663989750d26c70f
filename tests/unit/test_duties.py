"""The leader's duties: one that fails restarts alone, and the others never stop."""

from __future__ import annotations

import asyncio

from asrserve.cluster.base import supervised


def test_a_failing_duty_restarts_alone_while_the_others_run() -> None:
    starts = {"broken": 0, "steady": 0}
    steady_running, broken_thrice = asyncio.Event(), asyncio.Event()

    async def broken() -> None:
        starts["broken"] += 1
        if starts["broken"] == 3:
            broken_thrice.set()
        raise ValueError("a poisoned batch")

    async def steady() -> None:
        starts["steady"] += 1
        steady_running.set()
        await asyncio.Event().wait()  # runs until cancelled

    async def main() -> None:
        async with asyncio.TaskGroup() as group:
            tasks = [
                group.create_task(supervised("broken", broken, restart_s=0.0)),
                group.create_task(supervised("steady", steady, restart_s=0.0)),
            ]
            await steady_running.wait()
            await broken_thrice.wait()
            assert not any(task.done() for task in tasks)
            for task in tasks:
                task.cancel()

    asyncio.run(main())
    assert starts["steady"] == 1  # never restarted by the other's failures
