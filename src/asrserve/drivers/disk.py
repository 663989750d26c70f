"""The free space the service keeps on its data dir's file system.

Uploads stop short of :data:`DISK_RESERVE_BYTES` (``api/uploads.py``), and so does a job's
decoded audio where it spills from memory to the spool (``audio/pcm.py``): the database
keeps room for the results and acks of jobs already accepted, the WAL between
checkpoints, the traffic recordings.
"""

from __future__ import annotations

import os
from pathlib import Path

MIB = 1024 * 1024
DISK_RESERVE_BYTES = 64 * MIB


def free_bytes(folder: Path) -> int:
    stat = os.statvfs(folder)
    return stat.f_bavail * stat.f_frsize
