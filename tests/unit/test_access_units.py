"""Pure parts of access control: outbound URL checks and webhook delivery."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx
import pytest

from asrserve.jobs.models import WebhookStatus
from asrserve.outbound import BlockedUrl, InvalidUrl, check_url, resolve
from asrserve.service.signing import Signer
from asrserve.service.webhooks import Owed, WebhookSender
from asrserve.settings import Settings


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:8000/hook",
        "http://localhost/hook",
        "http://10.1.2.3/hook",
        "http://192.168.0.10/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://100.64.0.1/",
        "http://[::1]/hook",
        "http://[fe80::1]/hook",
        "http://[::ffff:127.0.0.1]/hook",
        "http://0.0.0.0/",
        "http://224.0.0.1/",
        # IPv6 forms that embed a private or loopback IPv4 address
        "http://[64:ff9b::127.0.0.1]/hook",  # NAT64, well-known prefix
        "http://[64:ff9b::10.0.0.1]/hook",
        "http://[64:ff9b:1::808:808]/hook",  # NAT64, local-use prefix: never public
        "http://[2002:7f00:1::1]/hook",  # 6to4 of 127.0.0.1
        "http://[2002:a9fe:a9fe::]/hook",  # 6to4 of 169.254.169.254
        "http://[::127.0.0.1]/hook",  # IPv4-compatible
        "http://[::192.168.1.1]/hook",
        "http://[::ffff:0:127.0.0.1]/hook",  # SIIT (IPv4-translated)
        "http://[::ffff:0:10.0.0.1]/hook",
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/hook",  # Teredo
    ],
)
def test_blocked_urls(url: str) -> None:
    with pytest.raises(BlockedUrl):
        check_url(url, ())
    with pytest.raises(BlockedUrl):
        asyncio.run(resolve(url, ()))


@pytest.mark.parametrize(
    "url",
    [
        "ftp://example.com/x",
        "http:///nohost",
        "http://user:pw@example.com/",
        "http://@example.com/",
        "http://example.com:99999/",  # .port raises ValueError
        "http://example.com:0/",
        "http://example.com:x/",
        "http://a..b/",  # not IDNA-encodable
        "http://" + "a" * 64 + ".com/",  # a label over 63 characters
        "http://exa mple.com/",
        "http://%6c%6fcalhost/",
        "http://[::1",
        "http://[evil]/",
        "http://[v1.x]/",
        "http://2130706433/",  # read as 127.0.0.1 by resolvers
        "http://0x7f.1/",
        "http://example.com/" + "x" * 2048,
    ],
)
def test_malformed_urls(url: str) -> None:
    with pytest.raises(InvalidUrl):
        check_url(url, ())
    with pytest.raises(InvalidUrl):
        asyncio.run(resolve(url, ()))


def test_public_and_allow_listed_urls() -> None:
    check_url("https://hooks.example.com/x", ())
    check_url("http://8.8.8.8/x", ())
    check_url("http://127.0.0.1:9000/x", ("127.0.0.1",))
    check_url("http://10.2.3.4/x", ("10.0.0.0/8",))
    check_url("http://localhost/x", ("localhost",))
    target = asyncio.run(resolve("http://10.2.3.4:81/a?b=c", ("10.0.0.0/8",)))
    assert (target.url, target.host, target.host_header) == (
        "http://10.2.3.4:81/a?b=c",
        "10.2.3.4",
        "10.2.3.4:81",
    )
    public = asyncio.run(resolve("https://[2001:4860:4860::8888]/x", ()))
    assert public.url == "https://[2001:4860:4860::8888]/x"
    for embeds_public in ("64:ff9b::8.8.8.8", "2002:808:808::1", "::ffff:0:8.8.8.8"):
        check_url(f"http://[{embeds_public}]/x", ())
    check_url("http://xn--bcher-kva.example/x", ())
    check_url("http://bücher.example/x", ())


def test_a_host_name_is_checked_by_what_it_resolves_to() -> None:
    with pytest.raises(BlockedUrl, match="resolves to"):
        asyncio.run(resolve("http://localhost:9/x", ()))  # the lookup says loopback


class Deliveries:
    """A webhook source that owes one delivery per key and records each attempt."""

    def __init__(self, urls: dict[str, str]) -> None:
        self.urls = urls
        self.recorded: dict[str, tuple[WebhookStatus, str | None]] = {}
        self.all_recorded = asyncio.Event()

    async def owed(self) -> list[Owed]:
        return [
            Owed(key, url, "job.succeeded", {"id": key}, 0, self._recorder(key))
            for key, url in self.urls.items()
            if key not in self.recorded
        ]

    def _recorder(self, key: str) -> Callable[[WebhookStatus, str | None], Awaitable[None]]:
        async def record(status: WebhookStatus, error: str | None) -> None:
            self.recorded[key] = (status, error)
            if len(self.recorded) == len(self.urls):
                self.all_recorded.set()

        return record


class Answer(httpx.AsyncByteStream):
    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield b"ok"


async def send_all(deliveries: Deliveries, allow: tuple[str, ...]) -> list[httpx.Request]:
    """Run a sender (one attempt per delivery) until each delivery has its attempt recorded;
    the requests that reached the (in-process) callback receiver."""
    received: list[httpx.Request] = []

    def receive(request: httpx.Request) -> httpx.Response:
        received.append(request)
        return httpx.Response(200, stream=Answer())  # streamed, as a socket's answer is

    client = httpx.AsyncClient(transport=httpx.MockTransport(receive))
    settings = Settings(webhook_allow=allow, webhook_max_attempts=1)
    sender = WebhookSender(settings, [deliveries], Signer(b"test"), client)
    running = asyncio.create_task(sender.run())
    recorded = asyncio.create_task(deliveries.all_recorded.wait())
    await asyncio.wait([running, recorded], timeout=30, return_when=asyncio.FIRST_COMPLETED)
    running.cancel()
    recorded.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await running  # re-raises what stopped the sender, if anything did
    await sender.aclose()
    return received


def test_a_malformed_callback_fails_alone_and_the_others_are_delivered() -> None:
    deliveries = Deliveries(
        {
            "bad-port": "http://example.com:99999/",  # stored by an older version
            "bad-host": "http://a..b/",
            "good": "http://127.0.0.1:9/hook",
        }
    )
    received = asyncio.run(send_all(deliveries, ("127.0.0.1",)))
    assert deliveries.recorded == {
        "bad-port": (
            WebhookStatus.FAILED,
            "invalid callback URL: the URL cannot be parsed (host or port)",
        ),
        "bad-host": (
            WebhookStatus.FAILED,
            "invalid callback URL: the host is not a valid domain name",
        ),
        "good": (WebhookStatus.DELIVERED, None),
    }
    assert [str(request.url) for request in received] == ["http://127.0.0.1:9/hook"]


def test_a_blocked_host_is_recorded_without_what_it_resolves_to() -> None:
    deliveries = Deliveries({"internal": "http://localhost:9/x"})  # the lookup says loopback
    received = asyncio.run(send_all(deliveries, ()))
    assert deliveries.recorded == {
        "internal": (WebhookStatus.FAILED, "blocked: the callback host is not a public address")
    }
    assert received == []
