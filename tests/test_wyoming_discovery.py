"""The Wyoming server announced by mDNS (zeroconf), as Home Assistant discovers it: a
browser on this machine's network finds the instance by its name, the announced address
and port reach the server, and the announcement is withdrawn when the server stops."""

from __future__ import annotations

import asyncio
import socket
import threading
import uuid
from pathlib import Path

import pytest
from pydantic import ValidationError
from wyoming.client import AsyncTcpClient
from wyoming.info import Describe, Info
from zeroconf import ServiceBrowser, ServiceStateChange, Zeroconf

from asrserve.settings import Settings
from asrserve.wyoming.discovery import SERVICE_TYPE
from tests.support.wyoming import READ_TIMEOUT_S, wyoming_app


class Seen:
    """A browser's view of one instance: set when it appears, and when it goes."""

    def __init__(self, name: str) -> None:
        self.name = f"{name}.{SERVICE_TYPE}"
        self.added = threading.Event()
        self.removed = threading.Event()

    def on_change(
        self, zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
    ) -> None:
        if name != self.name:
            return  # another instance on the network
        if state_change is ServiceStateChange.Added:
            self.added.set()
        elif state_change is ServiceStateChange.Removed:
            self.removed.set()


def outward_address() -> str:
    """The address this machine reaches the mDNS group from."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("224.0.0.251", 5353))
        address: str = probe.getsockname()[0]
        return address


def test_the_server_is_announced_reached_there_and_withdrawn_at_stop(tmp_path: Path) -> None:
    name = f"asrserve-test-{uuid.uuid4().hex[:12]}"
    seen = Seen(name)
    zeroconf = Zeroconf()
    browser = ServiceBrowser(zeroconf, SERVICE_TYPE, handlers=[seen.on_change])
    env = {"ASRSERVE_WYOMING_HOST": "0.0.0.0", "ASRSERVE_WYOMING_ZEROCONF": name}
    try:
        with wyoming_app(tmp_path / "data", env) as (_, port):
            assert seen.added.wait(READ_TIMEOUT_S)
            info = zeroconf.get_service_info(SERVICE_TYPE, seen.name, timeout=10_000)
            assert info is not None
            assert (info.parsed_addresses(), info.port) == ([outward_address()], port)
            described = asyncio.run(_describe(info.parsed_addresses()[0], port))
            assert [program.name for program in described.asr] == ["asrserve"]
        assert seen.removed.wait(READ_TIMEOUT_S)
    finally:
        browser.cancel()
        zeroconf.close()


async def _describe(host: str, port: int) -> Info:
    async with AsyncTcpClient(host, port, read_timeout=READ_TIMEOUT_S) as client:
        await client.write_event(Describe().event())
        event = await client.read_event()
    assert event is not None
    return Info.from_event(event)


def test_an_announcement_of_a_loopback_server_is_refused() -> None:
    with pytest.raises(ValidationError, match="bound to loopback: set wyoming_host"):
        Settings(wyoming_port=10300, wyoming_zeroconf="kitchen")
