"""A cap on FFmpeg's largest single allocation, in every process that opens uploads: each
one that decodes jobs (``runtime.start_inference``) and each probe process.

Opening a container makes FFmpeg read its index tables and tags into memory before any
of the service's limits apply: an MP4 whose ``stz2`` table lists 50 M sample sizes
allocates 200 MB in one go, an MP3 behind a 100 MB ID3v2 picture 100 MB. ``av_max_alloc``
makes ``av_malloc`` refuse anything larger than :data:`MAX_ALLOC_BYTES`: FFmpeg then skips
the tag (a picture is metadata the service never reads) or fails the open with ENOMEM (an
index table: the file is refused as undecodable). An honest file is far below the cap: ten
hours of AAC in MP4 is a 2 MB sample-size table and a 13 MB index. The sum of many smaller
allocations is bounded where intake opens a file first, in a probe process with an address
space limit (:mod:`asrserve.audio.probes`). Tools that encode long audio in one frame (the
tests' payloads, the corpus) run without it.
"""

from __future__ import annotations

import ctypes
import functools

MAX_ALLOC_BYTES = 64 * 1024 * 1024


@functools.cache
def cap_ffmpeg_allocations() -> bool:
    """Set FFmpeg's allocation cap in this process (once); whether the libavutil that PyAV
    loaded could be found."""
    import av  # noqa: F401  (loads PyAV's libavutil, whose path /proc/self/maps then names)

    library = _loaded_libavutil()
    if library is None:
        return False
    max_alloc = ctypes.CDLL(library).av_max_alloc
    max_alloc.argtypes = [ctypes.c_size_t]
    max_alloc.restype = None
    max_alloc(MAX_ALLOC_BYTES)
    return True


def _loaded_libavutil() -> str | None:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1]
                if "/libavutil" in path:
                    return path
    except OSError:  # no /proc (macOS): PyAV's own default cap applies
        return None
    return None
