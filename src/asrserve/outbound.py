"""Outbound URLs (webhook callbacks): http(s) only, and never to a private network.

A callback URL may not point at loopback, private, link-local, carrier-grade NAT, multicast
or reserved addresses (the service's own network, cloud metadata endpoints) unless its host
or address is allow-listed (``ASRSERVE_WEBHOOK_ALLOW``: host names and CIDRs). The check runs
when the URL is given and again, after a fresh DNS lookup, at every delivery, which then
connects to the address it checked (so DNS rebinding cannot slip past). Redirects are
never followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class BlockedUrl(ValueError):
    pass


@dataclass(frozen=True)
class Target:
    """Where to connect: the URL rewritten to a checked address, and the original host."""

    url: str
    host: str  # for TLS server name checks
    host_header: str  # the original host[:port]


def check_url(url: str, allow: Sequence[str]) -> None:
    """Reject a URL that is not http(s) or that names a blocked address literally."""
    parts = _parts(url)
    host = parts.hostname or ""
    if host.lower() in ("localhost", "localhost.localdomain") and not _listed(host, None, allow):
        raise BlockedUrl(f"callback host '{host}' is the local machine")
    address = _literal(host)
    if address is not None and _blocked(address) and not _listed(host, address, allow):
        raise BlockedUrl(f"callback address {address} is not a public address")


async def resolve(url: str, allow: Sequence[str]) -> Target:
    """Look the host up and return a target pinned to an address that may be reached."""
    parts = _parts(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = _literal(host)
    if address is None:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except OSError as exc:
            raise BlockedUrl(f"cannot resolve '{host}': {exc}") from exc
        addresses = [ipaddress.ip_address(info[4][0]) for info in infos]
    else:
        addresses = [address]
    for candidate in addresses:
        if _blocked(candidate) and not _listed(host, candidate, allow):
            raise BlockedUrl(f"'{host}' resolves to {candidate}, not a public address")
    pinned = addresses[0]
    literal = f"[{pinned}]" if pinned.version == 6 else str(pinned)
    netloc = f"{literal}:{parts.port}" if parts.port else literal
    return Target(parts._replace(netloc=netloc).geturl(), host, parts.netloc)


def _parts(url: str) -> SplitResult:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise BlockedUrl("the URL must be an absolute http(s) URL")
    if parts.username or parts.password:
        raise BlockedUrl("the URL must not carry credentials")
    return parts


def _literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _blocked(address: IpAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return not address.is_global or address.is_multicast


def _listed(host: str, address: IpAddress | None, allow: Sequence[str]) -> bool:
    for entry in allow:
        if entry.lower() == host.lower():
            return True
        if address is None:
            continue
        try:
            if address in ipaddress.ip_network(entry, strict=False):
                return True
        except ValueError:
            continue  # a host name entry
    return False
