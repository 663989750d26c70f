"""Intake probes in processes of their own, each under an address-space limit.

FFmpeg reads a container's index tables and tags when it opens a file, before any of the
service's limits apply, and :mod:`asrserve.audio.allocations` caps only each allocation,
not their sum. So intake opens an upload first here: ``processes`` probe processes
(``python -m asrserve.audio.probe_process``), each file in a fork limited to ``memory_bytes``
more address space. A file whose opening needs more fails its probe
(``audio_metadata_too_large``) there, in memory the server never shares; one that passes
needs no more where it is decoded later. The sum across concurrent uploads is
``processes × memory_bytes`` whatever they hold: further probes wait for a free process,
and a freed process goes to the waiting tenant (API key) holding the fewest now, then to the
one served least recently (:class:`FairSlots`), so one key's queue of uploads does not hold
another key's one upload behind all of it.

A process speaks one JSON line per request and answer on its pipes; one that dies (the
OOM killer, a crash inside FFmpeg) fails the probe it was running and is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import sys
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

from asrserve.audio import errors
from asrserve.audio.errors import AudioError, UnsupportedAudio

LINE_LIMIT = 64 * 1024  # an answer line: a duration or an error's message


class Probes:
    """The probe processes, started as needed and replaced when one dies."""

    def __init__(self, processes: int, memory_bytes: int) -> None:
        self._memory_bytes = memory_bytes
        self._slots = FairSlots(processes)
        self._idle: list[asyncio.subprocess.Process] = []
        self._all: set[asyncio.subprocess.Process] = set()

    async def probe(self, path: Path, max_seconds: float, tenant: str = "") -> float | None:
        """:func:`asrserve.audio.decode.probe` of ``path``, in a probe process, for
        ``tenant`` (an API key's id; "": no key)."""
        async with self._slots.held(tenant):
            process = self._idle.pop() if self._idle else await self._start()
            try:
                answer = await _ask(process, {"path": str(path), "max_seconds": max_seconds})
            except BaseException:
                self._drop(process)  # dead, or cancelled mid-answer: its pipe is out of step
                raise
            self._idle.append(process)
        return _result(answer)

    async def _start(self) -> asyncio.subprocess.Process:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "asrserve.audio.probe_process",
            str(self._memory_bytes),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=LINE_LIMIT,
        )
        self._all.add(process)
        return process

    def _drop(self, process: asyncio.subprocess.Process) -> None:
        self._all.discard(process)
        with contextlib.suppress(ProcessLookupError):
            process.kill()

    async def close(self) -> None:
        for process in list(self._all):
            self._drop(process)
            await process.wait()
        self._idle.clear()


class FairSlots:
    """``slots`` held at once; a freed slot goes to the waiting tenant that holds the fewest
    now, then to the one served least recently, then to the first that asked."""

    def __init__(self, slots: int) -> None:
        self._free = slots
        self._held: Counter[str] = Counter()
        self._served: dict[str, int] = {}  # tenant -> the grant it had last
        self._grants = itertools.count()
        self._waiting: list[tuple[str, asyncio.Future[None]]] = []

    @contextlib.asynccontextmanager
    async def held(self, tenant: str) -> AsyncIterator[None]:
        if self._free and not self._waiting:
            self._grant(tenant)
        else:
            granted = asyncio.get_running_loop().create_future()
            self._waiting.append((tenant, granted))
            try:
                await granted
            except asyncio.CancelledError:
                if granted.done() and not granted.cancelled():
                    self._release(tenant)  # given a slot as the waiter was cancelled
                else:
                    self._waiting.remove((tenant, granted))
                raise
        try:
            yield
        finally:
            self._release(tenant)

    def _grant(self, tenant: str) -> None:
        self._free -= 1
        self._held[tenant] += 1
        self._served[tenant] = next(self._grants)

    def _release(self, tenant: str) -> None:
        self._free += 1
        self._held[tenant] -= 1
        while self._free and self._waiting:
            turn = min(
                range(len(self._waiting)),
                key=lambda i: (
                    self._held[self._waiting[i][0]],
                    self._served.get(self._waiting[i][0], -1),
                    i,
                ),
            )
            tenant, granted = self._waiting.pop(turn)
            self._grant(tenant)
            granted.set_result(None)


async def _ask(
    process: asyncio.subprocess.Process, request: dict[str, object]
) -> dict[str, object]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(request).encode() + b"\n")
    try:
        await process.stdin.drain()
        line = await process.stdout.readline()
    except (BrokenPipeError, ConnectionResetError):
        line = b""
    if not line:
        raise UnsupportedAudio("the file could not be probed: its probe process died")
    answer: dict[str, object] = json.loads(line)
    return answer


def _result(answer: dict[str, object]) -> float | None:
    if "error" not in answer:
        duration = answer["duration"]
        return None if duration is None else float(str(duration))
    kind = getattr(errors, str(answer["error"]), None)
    message = str(answer["message"])
    if isinstance(kind, type) and issubclass(kind, AudioError):
        raise kind(message)
    raise UnsupportedAudio(message)
