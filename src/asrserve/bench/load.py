"""Load generation over real HTTP: closed loop (C clients) or open loop (Poisson/bursty)."""

from __future__ import annotations

import asyncio
import math
import random
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import numpy as np

# The server (uvicorn) closes a keep-alive connection after 5 s idle, just when httpx
# (keepalive_expiry 5 s by default) may still pick it for the next request, which then fails
# with a ReadError: the likely cause of one such error in a 20 s soak. The bench's clients
# drop idle connections well before the server does.
KEEPALIVE_EXPIRY_S = 2.0


def limits(connections: int, keepalive: int | None = None) -> httpx.Limits:
    """The bench clients' connection limits (see KEEPALIVE_EXPIRY_S)."""
    return httpx.Limits(
        max_connections=connections,
        max_keepalive_connections=keepalive,
        keepalive_expiry=KEEPALIVE_EXPIRY_S,
    )


@dataclass(frozen=True)
class AudioFile:
    path: Path
    duration: float
    reference: str | None
    data: bytes


@dataclass(frozen=True)
class Sample:
    file: AudioFile
    latency: float
    status: int
    text: str


@dataclass
class LoadResult:
    wall: float = 0.0
    samples: list[Sample] = field(default_factory=list)

    @property
    def ok(self) -> list[Sample]:
        return [s for s in self.samples if s.status == 200]

    def percentile(self, q: float) -> float:
        latencies = [s.latency for s in self.ok]
        return float(np.percentile(latencies, q)) if latencies else float("nan")

    @property
    def audio_per_wall(self) -> float:
        return sum(s.file.duration for s in self.ok) / self.wall if self.wall else 0.0

    @property
    def requests_per_s(self) -> float:
        return len(self.ok) / self.wall if self.wall else 0.0


@dataclass(frozen=True)
class Pattern:
    """``concurrency`` for a closed loop, or ``rate`` (req/s) for an open loop."""

    requests: int
    concurrency: int = 1
    rate: float | None = None
    burst: int = 1  # open loop: arrivals come in groups of this size
    seed: int = 0

    def describe(self) -> str:
        if self.rate is None:
            return f"closed loop, {self.concurrency} client(s)"
        kind = "Poisson" if self.burst == 1 else f"bursts of {self.burst}"
        return f"open loop, {self.rate:g} req/s ({kind})"


async def send(
    client: httpx.AsyncClient, file: AudioFile, fields: dict[str, str], due: float | None = None
) -> Sample:
    """One transcription request, timed from ``due`` (``perf_counter``: when an open loop
    meant to send it, so a late send adds to its latency) or from now."""
    start = time.perf_counter() if due is None else due
    response = await client.post(
        "/v1/audio/transcriptions", data=fields, files={"file": (file.path.name, file.data)}
    )
    latency = time.perf_counter() - start
    text = response.json().get("text", "") if response.status_code == 200 else response.text
    return Sample(file=file, latency=latency, status=response.status_code, text=text)


async def run_load(
    url: str,
    files: list[AudioFile],
    pattern: Pattern,
    fields: dict[str, str],
    headers: dict[str, str] | None = None,
) -> LoadResult:
    order = [files[i % len(files)] for i in range(pattern.requests)]
    result = LoadResult()
    pool = limits(max(pattern.concurrency, 64))
    async with httpx.AsyncClient(
        base_url=url, timeout=3600, limits=pool, headers=headers
    ) as client:
        start = time.perf_counter()
        if pattern.rate is None:
            result.samples = await _closed(client, order, pattern.concurrency, fields)
        else:
            result.samples = await _open(client, order, pattern, fields)
        result.wall = time.perf_counter() - start
    return result


async def _closed(
    client: httpx.AsyncClient, order: list[AudioFile], concurrency: int, fields: dict[str, str]
) -> list[Sample]:
    queue = list(reversed(order))
    samples: list[Sample] = []

    async def client_loop() -> None:
        while queue:
            samples.append(await send(client, queue.pop(), fields))

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return samples


async def _open(
    client: httpx.AsyncClient, order: list[AudioFile], pattern: Pattern, fields: dict[str, str]
) -> list[Sample]:
    gaps = iter(arrival_gaps(pattern))
    due = time.perf_counter()  # arrivals keep to the schedule: a late wake-up is not added on
    tasks = []
    for index, file in enumerate(order):
        if index % pattern.burst == 0 and index:
            due += next(gaps)
            await asyncio.sleep(max(0.0, due - time.perf_counter()))
        tasks.append(asyncio.create_task(send(client, file, fields, due)))
    return list(await asyncio.gather(*tasks))


def arrival_gaps(pattern: Pattern) -> list[float]:
    """Seconds between the open loop's arrival groups: exponential draws, so groups arrive as
    a Poisson process (its rate divided by the burst size, to keep req/s). Seeded, so a
    caller can know the schedule a pattern will offer before running it."""
    assert pattern.rate is not None
    rng = random.Random(pattern.seed)
    groups = math.ceil(pattern.requests / pattern.burst)
    return [rng.expovariate(pattern.rate / pattern.burst) for _ in range(groups - 1)]
