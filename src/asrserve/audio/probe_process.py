"""One probe process (:mod:`asrserve.audio.probes`): ``python -m asrserve.audio.probe_process
MEMORY_BYTES`` reads ``{"path", "max_seconds"}`` lines on stdin and answers each with
``{"duration"}`` or ``{"error", "message"}`` (an :mod:`asrserve.audio.errors` class name).

Each probe runs in a fork of this (single-threaded) process, under an address-space limit
of what the fork maps plus ``MEMORY_BYTES``, and reports the peak it reached: a fork
starts with its own peak, so every file's is its own. The limit makes an allocation fail
where the file would need more; FFmpeg then skips a tag or fails the open, and the fork
cannot tell which. So a file is refused unless its peak stayed more than
:data:`~asrserve.audio.allocations.MAX_ALLOC_BYTES` (FFmpeg's largest allocation) below
the limit: then no allocation can have failed for the limit, and opening the file anywhere
else (the decoder, in the server) needs no more than that peak.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import sys
from pathlib import Path

from asrserve.audio.allocations import MAX_ALLOC_BYTES, cap_ffmpeg_allocations
from asrserve.audio.decode import probe
from asrserve.audio.errors import AudioError, AudioMetadataTooLarge

MIB = 1024 * 1024


def probed(request: dict[str, object], memory_bytes: int) -> dict[str, object]:
    """The answer to one request, from a fork of this process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the fork: probe, answer, exit without running this process's cleanup
        os.close(read_end)
        try:
            os.write(write_end, json.dumps(_limited(request, memory_bytes)).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        data = answer.read()
    os.waitpid(pid, 0)
    if not data:
        return {"error": "UnsupportedAudio", "message": "the file could not be probed"}
    reply: dict[str, object] = json.loads(data)
    return reply


def _limited(request: dict[str, object], memory_bytes: int) -> dict[str, object]:
    base = _status("VmSize")
    if base is not None:
        _, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = base + memory_bytes
        resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
    try:
        duration = probe(Path(str(request["path"])), float(str(request["max_seconds"])))
        peak = _status("VmPeak")
        if base is not None and peak is not None and peak - base > memory_bytes - MAX_ALLOC_BYTES:
            raise _too_large(memory_bytes)
    except AudioError as exc:
        return {"error": type(exc).__name__, "message": exc.message}
    except OSError as exc:  # the upload is gone
        return {"error": "UnsupportedAudio", "message": f"the file is not readable: {exc.strerror}"}
    return {"duration": duration}


def _too_large(memory_bytes: int) -> AudioError:
    budget = (memory_bytes - MAX_ALLOC_BYTES) // MIB
    message = f"opening the file needs more than {budget} MiB (its index tables or tags)"
    return AudioMetadataTooLarge(message)


def _status(field: str) -> int | None:
    """A ``/proc/self/status`` size in bytes; None where there is none (not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _one_arena() -> None:
    """One malloc arena: a thread FFmpeg starts must not reserve 64 MiB of address space
    for an arena of its own, which would count against the limit as if it were used."""
    m_arena_max = -8  # glibc's mallopt parameter
    try:
        ctypes.CDLL(None).mallopt(m_arena_max, 1)
    except (AttributeError, OSError):  # not glibc
        return


def main() -> None:
    memory_bytes = int(sys.argv[1])
    if memory_bytes <= MAX_ALLOC_BYTES:
        raise SystemExit(f"a probe needs more than {MAX_ALLOC_BYTES // MIB} MiB")
    cap_ffmpeg_allocations()
    _one_arena()
    for line in sys.stdin:
        sys.stdout.write(json.dumps(probed(json.loads(line), memory_bytes)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
