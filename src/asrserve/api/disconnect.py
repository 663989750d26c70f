"""A client that goes away before its answer: what the server would do for nobody stops.

A synchronous transcription holds its connection open until the transcript is ready; if
the client closes it first (it gave up, its own timeout passed), the job is cancelled as
``DELETE /v1/jobs/{id}`` would cancel it, and the workers drop its chunks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from starlette.requests import Request

from asrserve.errors import ClientClosed

T = TypeVar("T")


class ClientGone(ClientClosed):
    """The client closed its connection before its answer; nobody reads this one."""

    def __init__(self) -> None:
        super().__init__("the client closed the request")


async def gone(request: Request) -> None:
    """Return once the client has closed the connection: blocking reads of the request's
    channel, which has nothing else to say once the body has been read (call only then)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


async def unless_gone(request: Request, work: Awaitable[T]) -> T:
    """What ``work`` returns, or :class:`ClientGone` as soon as the client is gone (``work``
    is then cancelled)."""
    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(gone(request))
    try:
        await asyncio.wait((task, watch), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, watch):
            pending.cancel()
    if task.done() and not task.cancelled():
        return task.result()
    raise ClientGone()
