"""The scheduler's real clock is the event loop's, and readable from a device's thread."""

from __future__ import annotations

import asyncio
import threading

from asrserve.batcher.clock import MonotonicClock


def test_the_monotonic_clock_reads_the_same_time_on_and_off_the_loop() -> None:
    """A batch's pause reads it between fallback passes, in the device's thread; it used to
    ask for the running loop there and fail every looping window (RuntimeError)."""
    clock, read = MonotonicClock(), list[float]()

    async def main() -> tuple[float, float]:
        before = asyncio.get_running_loop().time()
        thread = threading.Thread(target=lambda: read.append(clock.now()))
        thread.start()
        await asyncio.to_thread(thread.join)
        return before, asyncio.get_running_loop().time()

    before, after = asyncio.run(main())
    assert before <= read[0] <= after
