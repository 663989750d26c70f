"""Who is calling: ``Authorization: Bearer <key>`` on every ``/v1`` route, whisper-asr-webservice's
``/asr`` and ``/detect-language``, ``/metrics`` and the API's schema and documentation pages
(``/openapi.json``, ``/docs``, ``/redoc``).

With auth on, a request without a valid key gets ``401``; a key past its request rate gets
``429`` with ``Retry-After``. Each key sees only what it created (jobs, files, batches):
anything else answers ``404``, exactly as if it did not exist. Admin keys see everything and
are the only ones that reach ``/metrics``, the scheduler view and the dashboard's data. With
auth off there is one open, all-seeing caller.
"""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable

from fastapi import Request
from fastapi.responses import Response

from asrserve.api.errors import error_response
from asrserve.auth.keys import ApiKey, KeyStore, hash_secret
from asrserve.auth.limits import RateLimiter
from asrserve.auth.principal import OPEN, Principal
from asrserve.errors import AsrError, Forbidden, RateLimited, Unauthenticated
from asrserve.settings.admission import AdmissionSettings

ADMIN_PATHS = frozenset({"/metrics", "/v1/scheduler", "/v1/dashboard/stats"})
DOC_PATHS = frozenset({"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})
PEER_PATHS = frozenset({"/asr", "/detect-language"})  # whisper-asr-webservice's routes


def caller(request: Request) -> Principal:
    principal = getattr(request.state, "principal", OPEN)
    assert isinstance(principal, Principal)
    return principal


class AccessControl:
    """The HTTP middleware that authenticates and rate-limits callers."""

    def __init__(
        self,
        settings: AdmissionSettings,
        keys: KeyStore,
        limiter: RateLimiter,
        *,
        auth_enabled: bool,
    ) -> None:
        """``settings``: the limits of a key that sets none; ``auth_enabled``:
        ``Settings.auth_enabled`` (off: one open caller)."""
        self._settings = settings
        self._auth_enabled = auth_enabled
        self._keys = keys
        self._limiter = limiter

    async def __call__(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        path = request.url.path
        if not self._auth_enabled or not _protected(path):
            return await call_next(request)
        headers: dict[str, str] = {}
        try:
            principal = await self.principal(request.headers.get("authorization", ""), headers)
            if path in ADMIN_PATHS and not principal.admin:
                raise Forbidden("this route needs an admin key", code="admin_required")
        except AsrError as exc:  # no key, past its rate, or the key store is unreachable
            return error_response(exc, headers)
        request.state.principal = principal
        response = await call_next(request)
        response.headers.update(headers)
        return response

    async def principal(
        self, authorization: str, headers: dict[str, str] | None = None
    ) -> Principal:
        """Who an ``Authorization`` header's key belongs to, one request of its rate spent
        (the rate headers added to ``headers``); :class:`Unauthenticated` or
        :class:`RateLimited` otherwise.
        Auth off: the open caller."""
        if not self._auth_enabled:
            return OPEN
        key = await self._key(authorization)
        if key is None:
            raise Unauthenticated("a valid API key is required: 'Authorization: Bearer <key>'")
        principal = Principal.of(key, self._settings)
        if principal.rate_limit_rpm:
            wait, left = await self._limiter.take(key.id, principal.rate_limit_rpm)
            rate = {
                "X-RateLimit-Limit-Requests": str(principal.rate_limit_rpm),
                "X-RateLimit-Remaining-Requests": str(left),
            }
            if headers is not None:
                headers.update(rate)
            if wait > 0:
                message = f"rate limit of {principal.rate_limit_rpm} requests per minute reached"
                raise RateLimited(message, retry_after=math.ceil(wait), code="rate_limit_exceeded")
        return principal

    async def _key(self, header: str) -> ApiKey | None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        key = await self._keys.find(hash_secret(token.strip()))
        return key if key is not None and key.revoked_at is None else None


def _protected(path: str) -> bool:
    return path.startswith("/v1/") or path == "/metrics" or path in DOC_PATHS | PEER_PATHS
