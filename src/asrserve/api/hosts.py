"""The ``Host`` check: a defence against DNS rebinding.

A web page can make a browser reach ``127.0.0.1`` through a name of the attacker's that
it re-points at loopback; the browser then sends that name as ``Host``. So with auth off
(the loopback default, where such a page would otherwise read everything), a request whose
``Host`` (port ignored) is not the bind address, a loopback name (``127.0.0.1``, ``::1``,
``localhost``) or a name in ``ASRSERVE_ALLOWED_HOSTS`` gets ``421 misdirected_request``.
With auth on the keys already stop such a page; the check applies too once
``ASRSERVE_ALLOWED_HOSTS`` is set. ``*`` in it turns the check off. A request with no
``Host`` header at all (HTTP/1.0; never a browser) is let through.
"""

from __future__ import annotations

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from asrserve.errors import error_body
from asrserve.settings import LOOPBACK_HOSTS, Settings

ANY_HOST = "*"


def host_name(header: str) -> str:
    """The host part of a ``Host`` header, lower case, without port, brackets or final dot."""
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:8000
        return value[1:].partition("]")[0]
    if value.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        value = value.partition(":")[0]
    return value.rstrip(".")


def allowed_hosts(settings: Settings) -> frozenset[str] | None:
    """The names ``Host`` may carry; None where the check is off."""
    names = {name.strip().lower() for name in settings.allowed_hosts}
    if ANY_HOST in names or (settings.auth_enabled and not names):
        return None
    return frozenset({host_name(settings.host), *LOOPBACK_HOSTS, *(host_name(n) for n in names)})


class HostCheck:
    """ASGI middleware: ``421`` for HTTP requests whose ``Host`` is not allowed."""

    def __init__(self, app: ASGIApp, settings: Settings) -> None:
        self.app = app
        self.allowed = allowed_hosts(settings)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and self.allowed is not None:
            header = _host_header(scope)
            if header is not None and host_name(header) not in self.allowed:
                message = (
                    f"this server does not answer to the host name {host_name(header)[:100]!r}"
                    " (ASRSERVE_ALLOWED_HOSTS lists the names it does)"
                )
                body = error_body(421, message, param="Host", code="misdirected_request")
                await JSONResponse(body, status_code=421)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _host_header(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"host":
            return bytes(value).decode("latin-1")
    return None
