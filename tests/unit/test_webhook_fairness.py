"""The webhook sender serves tenants fairly (#25 item 8): against an in-process receiver,
one tenant's slow receivers hold at most its share of the delivery slots, and a receiver
that let a deadline pass gets a shorter one on its retries."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from asrserve.jobs.models import WebhookStatus
from asrserve.service.signing import Signer
from asrserve.service.webhooks import Owed, WebhookSender
from asrserve.settings import Settings

SLOW = "http://127.0.0.1:9/slow"  # answers when the test ends
FAST = "http://127.0.0.1:9/fast"
SIGNER = Signer(b"test")


class Source:
    """Owes one delivery per key, to a tenant, until an attempt is final."""

    def __init__(self, owed: dict[str, tuple[str, str]]) -> None:
        self.owed_to = owed  # key → (tenant, url)
        self.attempts: dict[str, list[tuple[WebhookStatus, str | None]]] = {k: [] for k in owed}
        self.recorded = asyncio.Event()

    async def owed(self) -> list[Owed]:
        return [
            Owed(
                key,
                url,
                "job.succeeded",
                {"id": key},
                len(self.attempts[key]),
                self._for(key),
                tenant,
            )
            for key, (tenant, url) in self.owed_to.items()
            if not self.final(key)
        ]

    def final(self, key: str) -> bool:
        return any(status is not WebhookStatus.PENDING for status, _ in self.attempts[key])

    def _for(self, key: str) -> Callable[[WebhookStatus, str | None], Awaitable[None]]:
        async def record(status: WebhookStatus, error: str | None) -> None:
            self.attempts[key].append((status, error))
            self.recorded.set()

        return record


class Receiver:
    def __init__(self, slow_awaited: int = 0) -> None:
        self.release = asyncio.Event()
        self.slow_now = 0
        self.slow_most = 0
        self.slow_awaited = slow_awaited  # slow requests at once that set ``all_slow``
        self.all_slow = asyncio.Event()

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/slow":
            self.slow_now += 1
            self.slow_most = max(self.slow_most, self.slow_now)
            if self.slow_now == self.slow_awaited:
                self.all_slow.set()
            try:
                await self.release.wait()
            finally:
                self.slow_now -= 1
        return httpx.Response(200, stream=Answer())


class Answer(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"ok"


async def until(source: Source, done: Callable[[], bool], settings: Settings) -> Receiver:
    """Run a sender until ``done`` holds (after an attempt is recorded)."""

    async def recorded(_: Receiver) -> None:
        while not done():
            source.recorded.clear()
            await source.recorded.wait()

    return await sending(source, settings, Receiver(), recorded)


async def sending(
    source: Source,
    settings: Settings,
    receiver: Receiver,
    reached: Callable[[Receiver], Awaitable[None]],
) -> Receiver:
    """Run a sender to ``receiver`` until ``reached`` returns (30 s at most), then answer
    every slow request and stop it."""
    client = httpx.AsyncClient(transport=httpx.MockTransport(receiver))
    sender = WebhookSender(settings, [source], SIGNER, client)
    running = asyncio.create_task(sender.run())
    try:
        async with asyncio.timeout(30):
            await reached(receiver)
    finally:
        receiver.release.set()
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        await sender.aclose()
    return receiver


def test_slow_receivers_hold_their_tenants_share_of_the_slots() -> None:
    """Six deliveries of one tenant to a receiver that never answers, then one of another:
    with 4 slots a tenant runs at most 1 (a quarter), so the other tenant's is delivered
    while all six wait (it waited for four of them to time out)."""
    owed = {f"evil-{n}": ("evil", SLOW) for n in range(6)} | {"honest": ("honest", FAST)}
    source = Source(owed)
    settings = Settings(webhook_allow=("127.0.0.1",), webhook_concurrency=4)
    receiver = asyncio.run(until(source, lambda: source.final("honest"), settings))
    assert source.attempts["honest"] == [(WebhookStatus.DELIVERED, None)]
    assert receiver.slow_most == 1
    assert all(not source.attempts[key] for key in owed if key != "honest")


def test_a_receiver_that_let_the_deadline_pass_gets_a_quarter_of_it() -> None:
    source = Source({"late": ("someone", SLOW)})
    settings = Settings(
        webhook_allow=("127.0.0.1",),
        webhook_timeout_s=0.4,
        webhook_backoff_s=0.01,
        webhook_max_attempts=3,
    )
    asyncio.run(until(source, lambda: source.final("late"), settings))
    assert source.attempts["late"] == [
        (WebhookStatus.PENDING, "no answer within 0.4 s"),
        (WebhookStatus.PENDING, "no answer within 0.1 s"),
        (WebhookStatus.FAILED, "no answer within 0.1 s"),
    ]


def test_a_tenant_alone_takes_every_slot() -> None:
    """With nobody else owed a webhook (auth off: the one open caller), the share does not
    apply: four slow deliveries at once on four slots."""
    source = Source({f"only-{n}": ("only", SLOW) for n in range(6)})
    settings = Settings(webhook_allow=("127.0.0.1",), webhook_concurrency=4)

    async def all_slow(receiver: Receiver) -> None:
        await receiver.all_slow.wait()

    receiver = asyncio.run(sending(source, settings, Receiver(slow_awaited=4), all_slow))
    assert receiver.slow_most == 4
