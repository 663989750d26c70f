"""The bench's open loops (the soak's and ``--rate``'s): a request's latency runs from when
it was due, so a client that sends late adds to latency instead of hiding it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from asrserve.bench.load import AudioFile, send
from asrserve.bench.soak import SoakConfig, SoakOutcome, _send, windows


def test_a_request_sent_late_counts_in_the_window_it_was_due_with_its_lateness() -> None:
    """Due 19.9 s into a 20 s soak and sent 10 s after that (a busy client): it counts in
    the last window, not after every window, and its latency includes the 10 s."""
    file = AudioFile(Path("a.wav"), 2.0, None, b"RIFF")
    server = httpx.MockTransport(lambda request: httpx.Response(200, json={"text": "a"}))
    origin = time.monotonic() - 29.9

    async def due_at_19_9() -> SoakOutcome:
        async with httpx.AsyncClient(base_url="http://test", transport=server) as client:
            return await _send(client, file, origin, 19.9)

    outcome = asyncio.run(due_at_19_9())
    assert (outcome.start, outcome.status) == (19.9, 200)
    assert outcome.latency >= 10.0
    rows = windows([outcome], [], SoakConfig(seconds=20.0))
    assert [(row["start_s"], row["requests"]) for row in rows] == [(0.0, 0), (10.0, 1)]


def test_a_rate_request_sent_late_counts_its_lateness() -> None:
    file = AudioFile(Path("a.wav"), 2.0, None, b"RIFF")
    server = httpx.MockTransport(lambda request: httpx.Response(200, json={"text": "a"}))

    async def late() -> float:
        async with httpx.AsyncClient(base_url="http://test", transport=server) as client:
            sample = await send(client, file, {}, due=time.perf_counter() - 5.0)
        assert (sample.status, sample.text) == (200, "a")
        return sample.latency

    assert asyncio.run(late()) >= 5.0
