"""Known speakers' references at intake: probed as the upload is, checked for speech, and
kept as blobs beside the job's audio.

A reference that is not audio, or whose container states a length outside 2-10 s, or
that holds no speech, is refused before the job is stored or charged (a 400 naming
``known_speaker_references[]``), so a job never waits in the queue only to fail on it.
The speech is looked for once the probe has passed (opening the file then needs no more
memory than the probe bounded), in at most 10.5 s of decoded audio, with the speech
detector the diarization uses. The length of a reference whose container does not state
it is known only once it is decoded, where the diarization runs
(``inference/diarizing.py``). Admitted, they are kept as blobs (``blobs/references.py``).
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
from collections.abc import Sequence
from pathlib import Path

from asrserve.audio.decode import decode
from asrserve.audio.errors import AudioError
from asrserve.audio.probes import Probes
from asrserve.errors import InvalidRequest
from asrserve.known_speakers import REFERENCE_S, REFERENCES, check_length, not_audio
from asrserve.speakers.diarize import regions
from asrserve.speakers.turns import clips
from asrserve.vocabulary import KnownSpeaker


def holds_speech(path: Path) -> bool:
    """Whether the reference at ``path`` has speech the diarization can embed."""
    return bool(clips(regions(decode(path, REFERENCE_S[1] + 0.5))))


async def probe_references(
    probes: Probes,
    known: Sequence[KnownSpeaker],
    folder: Path,
    max_seconds: float,
    tenant: str = "",
) -> None:
    """Each of ``known``'s references probed in a file of ``folder`` (under the uploads'
    ``max_seconds``, so that a long one is told its length) and looked at for speech;
    :class:`InvalidRequest` for the first that fails."""
    for speaker in known:
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".reference") as file:
            path = Path(file.name)
            await asyncio.to_thread(path.write_bytes, base64.b64decode(speaker.audio))
            try:
                seconds = await probes.probe(path, max_seconds, tenant)
                if seconds is not None:
                    check_length(speaker.name, seconds)
                if not await asyncio.to_thread(holds_speech, path):
                    message = f"the reference of {speaker.name!r} holds no speech"
                    raise InvalidRequest(message, param=REFERENCES)
            except AudioError as exc:
                raise not_audio(speaker.name, exc.message) from None
