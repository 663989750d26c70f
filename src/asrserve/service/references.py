"""Known speakers' references probed at intake, as the upload is.

A reference that is not audio, or whose container states a length outside 2–10 s, is
refused before the job is stored or charged (a 400 naming ``known_speaker_references[]``),
so a job never waits in the queue only to fail on it. Whether a reference holds speech, and
the length of one whose container does not state it, are known only once it is decoded,
where the diarization runs (``inference/diarizing.py``).
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
from collections.abc import Sequence
from pathlib import Path

from asrserve.audio.errors import AudioError
from asrserve.audio.probes import Probes
from asrserve.known_speakers import check_length, not_audio
from asrserve.vocabulary import KnownSpeaker


async def probe_references(
    probes: Probes,
    known: Sequence[KnownSpeaker],
    folder: Path,
    max_seconds: float,
    tenant: str = "",
) -> None:
    """Each of ``known``'s references probed in a file of ``folder`` (under the uploads'
    ``max_seconds``, so that a long one is told its length); :class:`InvalidRequest` for
    the first that fails."""
    for speaker in known:
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".reference") as file:
            path = Path(file.name)
            await asyncio.to_thread(path.write_bytes, base64.b64decode(speaker.audio))
            try:
                seconds = await probes.probe(path, max_seconds, tenant)
            except AudioError as exc:
                raise not_audio(speaker.name, exc.message) from None
        if seconds is not None:
            check_length(speaker.name, seconds)
