"""Outbound URLs (webhook callbacks): http(s) only, and never to a private network.

A callback URL must be well formed (:func:`parse`: an absolute http(s) URL, a valid port, a
host that is an IDNA domain name or an IP address, no credentials, at most
``MAX_URL_LENGTH`` characters), else it is an :class:`InvalidUrl`. It may not point at
loopback, private, link-local, carrier-grade NAT, multicast or reserved addresses (the
service's own network, cloud metadata endpoints), nor at IPv6 forms that embed such an IPv4
address (IPv4-mapped, IPv4-compatible, SIIT, NAT64, 6to4), unless its host or address is
allow-listed (``ASRSERVE_WEBHOOK_ALLOW``: host names and CIDRs); else it is a
:class:`BlockedUrl`. The check runs when the URL is given and again, after a fresh DNS
lookup, at every delivery, which then connects to the address it checked (so DNS rebinding
cannot slip past). Redirects are never followed.
"""

from __future__ import annotations

import asyncio
import ipaddress
import re
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

MAX_URL_LENGTH = 2048
# What a caller is told when a host is refused: never which address a name resolved to, nor
# why a lookup failed (that would make the service a DNS oracle for the internal network).
REFUSED = "the callback host is not a public address"

_HOST_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?", re.IGNORECASE)
_NUMERIC_LABEL = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)
# IPv6 prefixes that embed an IPv4 address in their last 32 bits: SIIT (RFC 6145),
# well-known NAT64 (RFC 6052) and IPv4-compatible (deprecated; :: and ::1 are blocked anyway).
_EMBEDS_IPV4 = tuple(
    ipaddress.IPv6Network(net) for net in ("::ffff:0:0:0/96", "64:ff9b::/96", "::/96")
)
# Never public whatever follows: local-use NAT64 (RFC 8215) and Teredo (RFC 4380).
_LOCAL_IPV6 = tuple(ipaddress.IPv6Network(net) for net in ("64:ff9b:1::/48", "2001::/32"))


class UnusableUrl(ValueError):
    """A callback URL the service will not call."""


class InvalidUrl(UnusableUrl):
    """The URL is malformed: not something any delivery could use."""


class BlockedUrl(UnusableUrl):
    """The URL is well formed but reaches an address callbacks may not reach."""


@dataclass(frozen=True)
class Target:
    """Where to connect: the URL rewritten to a checked address, and the original host."""

    url: str
    host: str  # for TLS server name checks
    host_header: str  # the original host[:port]


def check_url(url: str, allow: Sequence[str]) -> None:
    """Reject a URL that is malformed or that names a blocked address literally."""
    parts = parse(url)
    host = parts.hostname or ""
    if host.lower() in ("localhost", "localhost.localdomain") and not _listed(host, None, allow):
        raise BlockedUrl(f"callback host '{host}' is the local machine")
    address = _literal(host)
    if address is not None and _blocked(address) and not _listed(host, address, allow):
        raise BlockedUrl(f"callback address {address} is not a public address")


async def resolve(url: str, allow: Sequence[str]) -> Target:
    """Look the host up and return a target pinned to an address that may be reached.

    The messages of the :class:`BlockedUrl` raised here name what the lookup found: log
    them, but tell the tenant only :data:`REFUSED`."""
    parts = parse(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    address = _literal(host)
    if address is None:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(
                host, port, type=socket.SOCK_STREAM
            )
        except (OSError, UnicodeError) as exc:
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


def parse(url: str) -> SplitResult:
    """The parts of a well-formed absolute http(s) URL; :class:`InvalidUrl` otherwise."""
    if len(url) > MAX_URL_LENGTH:
        raise InvalidUrl(f"the URL is longer than {MAX_URL_LENGTH} characters")
    try:
        parts = urlsplit(url)
        port = parts.port  # ValueError unless a number in 0-65535
        host = parts.hostname or ""
    except ValueError:
        raise InvalidUrl("the URL cannot be parsed (host or port)") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidUrl("the URL must be an absolute http(s) URL")
    if parts.username is not None or parts.password is not None:
        raise InvalidUrl("the URL must not carry credentials")
    if port == 0:
        raise InvalidUrl("the URL's port must be between 1 and 65535")
    _check_host(host, bracketed=parts.netloc.startswith("["))
    return parts


def _check_host(host: str, *, bracketed: bool) -> None:
    if bracketed:  # urlsplit accepts some bracketed hosts that are no IPv6 address
        if not isinstance(_literal(host), ipaddress.IPv6Address):
            raise InvalidUrl("a bracketed host must be an IPv6 address")
        return
    try:
        name = host.encode("idna").decode("ascii")
    except UnicodeError:
        raise InvalidUrl("the host is not a valid domain name") from None
    if not _HOST_NAME.fullmatch(name):
        raise InvalidUrl("the host is not a valid domain name")
    last = name.rstrip(".").rsplit(".", 1)[-1]
    if _NUMERIC_LABEL.fullmatch(last) and _literal(host) is None:
        # resolvers read 2130706433 or 0x7f.1 as IPv4 addresses: only dotted quads pass
        raise InvalidUrl("a numeric host must be a dotted-quad IPv4 address")


def _literal(host: str) -> IpAddress | None:
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        return None


def _blocked(address: IpAddress) -> bool:
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in net for net in _LOCAL_IPV6):
            return True
        embedded = _embedded_ipv4(address)
        if embedded is not None:  # judged by the IPv4 address it reaches
            return _blocked(embedded)
    return not address.is_global or address.is_multicast


def _embedded_ipv4(address: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address stands for: mapped, SIIT, NAT64, compatible, 6to4."""
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address.sixtofour is not None:  # 2002::/16, the IPv4 address in bits 16-48
        return address.sixtofour
    if any(address in net for net in _EMBEDS_IPV4):
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


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
