"""The Wyoming server announced on the local network by mDNS (zeroconf), as Home Assistant
discovers Wyoming servers: the service type ``_wyoming._tcp.local.``, an instance named by
``wyoming_zeroconf``, the address the server is bound to (for a wildcard bind, the address
this machine reaches the mDNS group from) and its port. The ``zeroconf`` package speaks
mDNS from this process: no system service (Avahi) is needed.

An announcement that fails (no network route, the name taken on the network) is logged
and the server serves on: clients that know its address reach it as before."""

from __future__ import annotations

import ipaddress
import logging
import socket
from abc import ABC, abstractmethod

from zeroconf.asyncio import AsyncServiceInfo, AsyncZeroconf

from asrserve.settings import WyomingSettings

log = logging.getLogger(__name__)

SERVICE_TYPE = "_wyoming._tcp.local."
MDNS_GROUP = ("224.0.0.251", 5353)
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


class Announcement(ABC):
    @abstractmethod
    async def start(self, port: int) -> None:
        """Announce the server listening on ``port``."""

    @abstractmethod
    async def stop(self) -> None:
        """Withdraw the announcement (a goodbye to the network)."""


class Unannounced(Announcement):
    """No ``wyoming_zeroconf``: the server is reached by its address alone."""

    async def start(self, port: int) -> None:
        return None

    async def stop(self) -> None:
        return None


class Zeroconf(Announcement):
    def __init__(self, name: str, host: str) -> None:
        self.name = name
        self.host = host
        self._zeroconf: AsyncZeroconf | None = None

    async def start(self, port: int) -> None:
        try:
            address = _address(self.host)
            info = AsyncServiceInfo(
                SERVICE_TYPE, f"{self.name}.{SERVICE_TYPE}", addresses=[address], port=port
            )
            self._zeroconf = AsyncZeroconf()
            await self._zeroconf.async_register_service(info)
        except Exception as exc:  # OSError, zeroconf's own: the server serves on
            log.warning("wyoming: not announced by zeroconf: %r", exc)
            await self.stop()
            return
        log.info(
            "wyoming server announced by zeroconf",
            extra={"name": self.name, "address": socket.inet_ntop(_family(address), address)},
        )

    async def stop(self) -> None:
        zeroconf, self._zeroconf = self._zeroconf, None
        if zeroconf is not None:
            await zeroconf.async_unregister_all_services()
            await zeroconf.async_close()


def announcement(settings: WyomingSettings) -> Announcement:
    if settings.wyoming_zeroconf is None:
        return Unannounced()
    return Zeroconf(settings.wyoming_zeroconf, settings.wyoming_host)


def _address(host: str) -> bytes:
    """The packed address to announce for a server bound to ``host``."""
    if host in WILDCARD_HOSTS:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(MDNS_GROUP)  # no packet is sent: the route's source address
            host = probe.getsockname()[0]
    try:
        return ipaddress.ip_address(host).packed
    except ValueError:  # a name: its IPv4 address
        return socket.inet_aton(socket.gethostbyname(host))


def _family(address: bytes) -> socket.AddressFamily:
    return socket.AF_INET if len(address) == 4 else socket.AF_INET6
