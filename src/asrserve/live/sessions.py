"""Where live sessions are opened: :class:`LiveSessions` on a node that runs a model (its
scheduler decodes them), :class:`NoLive` on an API node that runs none (live audio is not
carried between nodes: every session is refused there)."""

from __future__ import annotations

import secrets
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager

from asrserve.live.decoder import LiveDecoder
from asrserve.live.errors import LiveUnavailable
from asrserve.live.session import LiveLimits, LiveSession, SessionConfig
from asrserve.settings.live import LiveSettings

Charge = Callable[[float], Awaitable[None]]


class Live(ABC):
    @abstractmethod
    def session(
        self, config: SessionConfig, charge: Charge, holder: str, tenant: str = ""
    ) -> AbstractAsyncContextManager[LiveSession]:
        """A new session for ``holder`` (an API key, or a client address), its decodes in
        ``tenant``'s share of the devices (an API key's id; "": none), closed (its
        decodes dropped) when the context exits; raises :class:`LiveUnavailable` if none can
        be opened here now or ``holder`` holds its share, and what ``charge`` raises for
        the session's first seconds (a used-up quota)."""

    @property
    @abstractmethod
    def open_sessions(self) -> int: ...


class LiveSessions(Live):
    def __init__(self, decoder: LiveDecoder, settings: LiveSettings) -> None:
        self.decoder = decoder
        self._settings = settings
        self._limits = LiveLimits(
            interim_s=settings.live_interim_s,
            interim_growth=settings.live_interim_growth,
            interim_deadline_s=settings.live_interim_deadline_s,
            final_deadline_s=settings.live_final_deadline_s,
            burst_s=settings.live_burst_s,
            long_turn_s=settings.live_max_turn_s,
        )
        self._open = 0
        self._held: Counter[str] = Counter()
        self._share = settings.live_max_sessions_per_key or max(1, settings.live_max_sessions // 4)

    @property
    def open_sessions(self) -> int:
        return self._open

    @asynccontextmanager
    async def session(
        self, config: SessionConfig, charge: Charge, holder: str, tenant: str = ""
    ) -> AsyncIterator[LiveSession]:
        if self._open >= self._settings.live_max_sessions:
            message = f"this node holds its most live sessions ({self._settings.live_max_sessions})"
            raise LiveUnavailable(message, code="too_many_sessions")
        if self._held[holder] >= self._share:
            message = f"you hold your share of this node's live sessions ({self._share})"
            raise LiveUnavailable(message, code="too_many_sessions")
        self.decoder.engine(config.options.model)  # served here, or InvalidRequest
        session = LiveSession(
            f"sess_{secrets.token_hex(10)}",
            self.decoder,
            config,
            self._limits,
            charge,
            tenant=tenant,
        )
        self._open += 1
        self._held[holder] += 1
        try:
            await session.open()
            yield session
        finally:
            self._open -= 1
            self._held[holder] -= 1
            if not self._held[holder]:
                del self._held[holder]
            await session.close()


class NoLive(Live):
    @property
    def open_sessions(self) -> int:
        return 0

    @asynccontextmanager
    async def session(
        self, config: SessionConfig, charge: Charge, holder: str, tenant: str = ""
    ) -> AsyncIterator[LiveSession]:
        raise LiveUnavailable(
            "live transcription runs on a node that runs a model; this API node runs none",
            code="live_unavailable",
        )
        yield  # pragma: no cover - an async generator that never yields
