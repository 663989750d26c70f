"""A TCP relay on loopback between a client and a real server, that a test can hold, cut or
silence: to put a network's faults between one node and Redis while the others reach it
directly. Runs on the test's event loop."""

from __future__ import annotations

import asyncio
import contextlib

CHUNK = 65536


class TcpProxy:
    """Relays each accepted connection to ``upstream_port`` on 127.0.0.1.

    ``hold()``: connections accepted from now on relay nothing, in either direction, until
    ``release()`` (their bytes wait; the upstream connection is made on release, so a server
    that is down meanwhile is reached once it is back). ``silence()`` drops every byte of
    the connections open now and keeps them open (a peer gone without closing). ``refuse()``
    closes them and refuses new ones (a peer unreachable) until ``resume()``."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._released = asyncio.Event()
        self._released.set()
        self._open: set[_Link] = set()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> TcpProxy:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def hold(self) -> None:
        self._released.clear()

    def release(self) -> None:
        self._released.set()

    def silence(self) -> None:
        for link in self._open:
            link.silent = True

    async def refuse(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
        for link in list(self._open):
            link.close()
        if server is not None:
            await server.wait_closed()

    async def resume(self) -> None:
        await self.start()

    async def aclose(self) -> None:
        self.release()
        await self.refuse()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # the top of a connection's task: ending with a cancellation (the loop closing) is
        # ending, not an error for asyncio's server to log
        with contextlib.suppress(asyncio.CancelledError):
            await self._relay(reader, writer)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        link = _Link(writer)
        self._open.add(link)
        try:
            await self._released.wait()
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            link.close()
            self._open.discard(link)
            return
        link.upstream = up_writer
        try:
            await asyncio.gather(_pipe(reader, up_writer, link), _pipe(up_reader, writer, link))
        finally:
            link.close()
            self._open.discard(link)


class _Link:
    def __init__(self, client: asyncio.StreamWriter) -> None:
        self.client = client
        self.upstream: asyncio.StreamWriter | None = None
        self.silent = False

    def close(self) -> None:
        for writer in (self.client, self.upstream):
            if writer is not None:
                writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(CHUNK):
            if link.silent:
                continue
            writer.write(data)
            await writer.drain()
    link.close()
