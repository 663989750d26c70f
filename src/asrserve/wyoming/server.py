"""The Wyoming server: a TCP listener beside HTTP, one :class:`Connection` per client, and
its two-phase stop.

Started by the app's lifespan when ``wyoming_port`` is set (an embedded node and a
distributed API node alike: the utterances go through the service, wherever the model
runs). It listens through asyncio directly rather than the library's ``AsyncTcpServer``,
whose ``stop`` closes every connection at once, before the listener.
"""

from __future__ import annotations

import asyncio
import logging

from asrserve.engine.catalog import Catalog
from asrserve.errors import AsrError
from asrserve.service.jobs import Service
from asrserve.settings import LOOPBACK_HOSTS, Settings
from asrserve.wyoming.discovery import Announcement, announcement
from asrserve.wyoming.edge import Edge
from asrserve.wyoming.framing import MAX_LINE_BYTES
from asrserve.wyoming.handler import Connection

log = logging.getLogger(__name__)


class WyomingServer:
    def __init__(self, edge: Edge, announced: Announcement) -> None:
        self.edge = edge
        self.announced = announced
        self.port = 0  # the bound port, once started
        self._server: asyncio.Server | None = None
        self._connections: dict[asyncio.Task[None], Connection] = {}

    async def start(self) -> None:
        settings = self.edge.settings
        host, port = settings.wyoming_host, settings.wyoming_port or 0
        self._server = await asyncio.start_server(
            self._serve, host=host, port=port, limit=MAX_LINE_BYTES
        )
        self.port = self._server.sockets[0].getsockname()[1]
        log.info("wyoming server listening", extra={"host": host, "port": self.port})
        if host not in LOOPBACK_HOSTS:
            log.warning(
                "the Wyoming server is bound to %s: Wyoming has no authentication, so whoever"
                " reaches port %d can transcribe audio as %s, spending its quota and this"
                " server's devices; bind it to loopback or firewall the port",
                host,
                self.port,
                "the key ASRSERVE_WYOMING_KEY names" if settings.wyoming_key else "the open caller",
            )
        try:
            await self.edge.principal()
        except AsrError as exc:
            log.warning("wyoming: %s: each utterance is refused until it does", exc.message)
        await self.announced.start(self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connection = Connection(reader, writer, self.edge)
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = connection
        try:
            await connection.run()
        finally:
            del self._connections[task]

    async def stop(self, grace_s: float) -> None:
        """The announcement withdrawn; no new connection; an idle one closed at once; one
        inside an utterance (sending it, or waiting for its text) given up to ``grace_s`` to
        be answered, then closed; what is left after that, cancelled."""
        if self._server is None:
            return
        await self.announced.stop()
        self._server.close()
        busy = []
        for task, connection in list(self._connections.items()):
            if connection.busy:
                connection.stopping = True
                busy.append(task)
            else:
                task.cancel()
        if busy:
            _, late = await asyncio.wait(busy, timeout=grace_s)
            for task in late:
                task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()
        log.info("wyoming server stopped")


async def start_wyoming(
    settings: Settings, service: Service, catalog: Catalog
) -> WyomingServer | None:
    """The Wyoming server, listening; None when ``wyoming_port`` is unset."""
    if settings.wyoming_port is None:
        return None
    server = WyomingServer(Edge(service, catalog, settings), announcement(settings))
    await server.start()
    return server
