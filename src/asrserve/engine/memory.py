"""Giving freed memory back to the system.

glibc's ``malloc`` keeps what a process frees in its arenas for later use: the weights an
idle model releases stayed in the process's RSS (measured: the multilingual base model,
int8 on CPU, 268 MiB after a first transcription, 245 MiB once unloaded, 294 MiB after 30
unload/reload cycles; with :func:`give_back` after each unload 109 MiB and 120 MiB).
``malloc_trim(0)`` returns the free pages at the top of each arena and the unused pages
inside them. Where the C library has no ``malloc_trim`` (musl, macOS) nothing is done.
"""

from __future__ import annotations

import ctypes
import functools
import gc
from collections.abc import Callable


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return None
    return trim


def give_back() -> bool:
    """Collect garbage, then return freed heap memory to the system; whether the C library
    could (glibc)."""
    gc.collect()
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def trim() -> None:
    """Return freed heap memory to the system, without a garbage collection (which would
    hold every thread): after a large pass, whose buffers refcounting has already freed.
    ctypes lets other threads run while it trims."""
    found = _malloc_trim()
    if found is not None:
        found(0)
