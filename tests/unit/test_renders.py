"""Transcript renders run in worker threads, a bounded number at a time, and a body past
the size cap is refused: a large render (hours of words, karaoke cues) never holds the
event loop every tenant's requests share."""

from __future__ import annotations

import asyncio
import threading

import pytest

from asrserve.api import responses
from asrserve.api.responses import Renders
from asrserve.errors import TooLarge


def test_a_render_runs_off_the_loop() -> None:
    """The render waits for the loop to act while it runs: on the loop it would wait for
    itself (and fail its wait)."""
    started, release = threading.Event(), threading.Event()

    def slow() -> bytes:
        started.set()
        if not release.wait(30):
            raise AssertionError("the loop did not run while the render did")
        return b"rendered"

    async def main() -> bytes:
        task = asyncio.create_task(Renders().run(slow))
        assert await asyncio.to_thread(started.wait, 30)
        release.set()  # the loop's own act, while the render is still under way
        return await task

    assert asyncio.run(main()) == b"rendered"


def test_renders_run_a_bounded_number_at_once() -> None:
    running, most = 0, 0
    lock, gate = threading.Lock(), threading.Event()

    def render() -> bytes:
        nonlocal running, most
        with lock:
            running += 1
            most = max(most, running)
        gate.wait(30)
        with lock:
            running -= 1
        return b""

    async def main() -> None:
        renders = Renders(at_once=2)
        tasks = [asyncio.create_task(renders.run(render)) for _ in range(5)]
        for _ in range(200):  # round trips through the thread pool: the renders get going
            await asyncio.to_thread(lambda: None)
        seen = most
        gate.set()
        assert seen == 2  # two ran; three waited their turn
        await asyncio.gather(*tasks)

    asyncio.run(main())
    assert most == 2


def test_a_body_past_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(responses, "MAX_RENDER_BYTES", 1000)
    with pytest.raises(TooLarge) as caught:
        asyncio.run(Renders().run(lambda: b"x" * 1001))
    assert caught.value.code == "response_too_large"
    assert asyncio.run(Renders().run(lambda: b"x" * 1000)) == b"x" * 1000
