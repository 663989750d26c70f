"""The ``Host`` check: a defence against DNS rebinding.

A web page can make a browser reach ``127.0.0.1`` through a name of the attacker's that
it re-points at loopback; the browser then sends that name as ``Host``. So with auth off
(the loopback default, where such a page would otherwise read everything), a request whose
``Host`` (port ignored) is not the bind address, a loopback name (``127.0.0.1``, ``::1``,
``localhost``) or a name in ``ASRSERVE_ALLOWED_HOSTS`` gets ``421 misdirected_request``.
With auth on the keys already stop such a page; the check applies too once
``ASRSERVE_ALLOWED_HOSTS`` is set. ``*`` in it turns the check off. A request with no
``Host`` header at all (HTTP/1.0; never a browser) is let through.

WebSockets get the same ``Host`` check and one of their own: a browser lets any page open
a WebSocket to any address, and says which page in ``Origin``. A handshake whose
``Origin`` is neither this server's own (the scheme-less ``host[:port]`` equal to
``Host``) nor listed in ``ASRSERVE_ALLOWED_ORIGINS`` is refused with ``403
cross_origin_websocket``, auth on or off. Clients other than browsers send no ``Origin``
and are let through.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.websockets import WebSocket

from asrserve.api.errors import error_response
from asrserve.errors import AsrError, Forbidden, Misdirected
from asrserve.settings import LOOPBACK_HOSTS
from asrserve.settings.access import AccessSettings

ANY_HOST = "*"


def host_name(header: str) -> str:
    """The host part of a ``Host`` header, lower case, without port, brackets or final dot."""
    value = header.strip().lower()
    if value.startswith("["):  # [::1]:8000
        return value[1:].partition("]")[0]
    if value.count(":") == 1:  # name:port (a bare IPv6 address has several colons)
        value = value.partition(":")[0]
    return value.rstrip(".")


def allowed_hosts(
    settings: AccessSettings, *, host: str, auth_enabled: bool
) -> frozenset[str] | None:
    """The names ``Host`` may carry on a server bound to ``host`` (``Settings.host``, auth
    on or off: ``Settings.auth_enabled``); None where the check is off."""
    names = {name.strip().lower() for name in settings.allowed_hosts}
    if ANY_HOST in names or (auth_enabled and not names):
        return None
    return frozenset({host_name(host), *LOOPBACK_HOSTS, *(host_name(n) for n in names)})


class HostCheck:
    """ASGI middleware: ``421`` for requests and WebSocket handshakes whose ``Host`` is not
    allowed, ``403`` for cross-origin WebSocket handshakes."""

    def __init__(
        self, app: ASGIApp, settings: AccessSettings, *, host: str, auth_enabled: bool
    ) -> None:
        self.app = app
        self.allowed = allowed_hosts(settings, host=host, auth_enabled=auth_enabled)
        self.origins = frozenset(o.strip().lower().rstrip("/") for o in settings.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        host = _header(scope, b"host")
        refused: AsrError | None = None
        if self.allowed is not None and host is not None and host_name(host) not in self.allowed:
            message = (
                f"this server does not answer to the host name {host_name(host)[:100]!r}"
                " (ASRSERVE_ALLOWED_HOSTS lists the names it does)"
            )
            refused = Misdirected(message, param="Host", code="misdirected_request")
        elif scope["type"] == "websocket":
            origin = _header(scope, b"origin")
            if origin is not None and not self._same_or_allowed(origin, host):
                message = (
                    f"WebSockets from the page at {origin[:100]!r} are not accepted"
                    " (ASRSERVE_ALLOWED_ORIGINS lists the origins that are)"
                )
                refused = Forbidden(message, param="Origin", code="cross_origin_websocket")
        if refused is None:
            await self.app(scope, receive, send)
            return
        response = error_response(refused)
        if scope["type"] == "http":
            await response(scope, receive, send)
        elif "websocket.http.response" in scope.get("extensions", {}):
            await WebSocket(scope, receive, send).send_denial_response(response)
        else:  # the server cannot answer a handshake with a body: a plain 403
            await send({"type": "websocket.close", "code": 1008})

    def _same_or_allowed(self, origin: str, host: str | None) -> bool:
        value = origin.strip().lower().rstrip("/")
        if "*" in self.origins or value in self.origins:
            return True
        return host is not None and urlsplit(value).netloc == host.strip().lower()


def _header(scope: Scope, wanted: bytes) -> str | None:
    for name, value in scope["headers"]:
        if name == wanted:
            return bytes(value).decode("latin-1")
    return None
