"""Intake probes in processes of their own, each under an address-space limit.

FFmpeg reads a container's index tables and tags when it opens a file, before any of the
service's limits apply, and :mod:`asrserve.audio.allocations` caps only each allocation,
not their sum. So intake opens an upload first here: ``processes`` probe processes
(``python -m asrserve.audio.probe_process``), each file in a fork limited to ``memory_bytes``
more address space. A file whose opening needs more fails its probe
(``audio_metadata_too_large``) there, in memory the server never shares; one that passes
needs no more where it is decoded later. The sum across concurrent uploads is
``processes × memory_bytes`` whatever they hold: further probes wait for a free process.

A process speaks one JSON line per request and answer on its pipes; one that dies (the
OOM killer, a crash inside FFmpeg) fails the probe it was running and is replaced.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from pathlib import Path

from asrserve.audio import errors
from asrserve.audio.errors import AudioError, UnsupportedAudio

LINE_LIMIT = 64 * 1024  # an answer line: a duration or an error's message


class Probes:
    """The probe processes, started as needed and replaced when one dies."""

    def __init__(self, processes: int, memory_bytes: int) -> None:
        self._memory_bytes = memory_bytes
        self._slots = asyncio.Semaphore(processes)
        self._idle: list[asyncio.subprocess.Process] = []
        self._all: set[asyncio.subprocess.Process] = set()

    async def probe(self, path: Path, max_seconds: float) -> float | None:
        """:func:`asrserve.audio.decode.probe` of ``path``, in a probe process."""
        async with self._slots:
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
