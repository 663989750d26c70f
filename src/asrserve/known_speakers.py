"""OpenAI's known speakers, validated: ``known_speaker_names[]`` with
``known_speaker_references[]`` (data URLs of 2–10 s clips, up to 4), for ``diarized_json``.

What a request can be refused for without decoding audio is refused here, each naming its
field: names without references or the reverse, more than ``MAX_KNOWN``, an empty, over-long
or repeated name, a reference that is not a base64 data URL or holds more than
``MAX_REFERENCE_BYTES``. Whether a reference is audio of 2–10 s is probed at intake, as the
upload is (``service/references.py``), and whether it holds speech is known where the
diarization runs (``inference/diarizing.py``): each a 400 naming
``known_speaker_references[]`` too, with the messages made here.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence

from asrserve.errors import InvalidRequest
from asrserve.openai_params import values
from asrserve.vocabulary import KnownSpeaker

NAMES = "known_speaker_names[]"
REFERENCES = "known_speaker_references[]"
MAX_KNOWN = 4
MAX_NAME_CHARS = 64
MAX_REFERENCE_BYTES = 1024 * 1024  # 10 s of 48 kHz 16-bit mono is 960 KB
REFERENCE_S = (2.0, 10.0)  # a reference's length, as OpenAI takes it
_DATA_URL = re.compile(r"data:([\w.+-]+/[\w.+-]+)?(;[\w-]+=[\w.-]+)*;base64,(.*)", re.DOTALL)

Fields = Mapping[str, Sequence[str]]


def known_speakers(fields: Fields, diarized: bool) -> tuple[KnownSpeaker, ...]:
    """The request's known speakers (none if it names none)."""
    names = values(fields, NAMES.removesuffix("[]"))
    references = values(fields, REFERENCES.removesuffix("[]"))
    if not names and not references:
        return ()
    if not diarized:
        given = NAMES if names else REFERENCES
        raise InvalidRequest(f"{given} is for response_format=diarized_json", param=given)
    if len(names) != len(references):
        missing = REFERENCES if len(names) > len(references) else NAMES
        counts = f"{len(names)} name(s), {len(references)} reference(s)"
        message = f"give one reference for each name: {counts}"
        raise InvalidRequest(message, param=missing)
    if len(names) > MAX_KNOWN:
        raise InvalidRequest(f"at most {MAX_KNOWN} known speakers, not {len(names)}", param=NAMES)
    seen: set[str] = set()
    for name in names:
        if not name.strip() or len(name) > MAX_NAME_CHARS:
            message = f"a known speaker's name is 1-{MAX_NAME_CHARS} characters"
            raise InvalidRequest(message, param=NAMES)
        if name in seen:
            raise InvalidRequest(f"{name[:40]!r} is named twice", param=NAMES)
        seen.add(name)
    return tuple(
        KnownSpeaker(name=name, audio=_audio(reference))
        for name, reference in zip(names, references, strict=True)
    )


def _audio(reference: str) -> str:
    """The reference's bytes as base64 (as sent: checked, not decoded as audio here)."""
    match = _DATA_URL.fullmatch(reference.strip())
    if match is None:
        raise InvalidRequest(
            "a reference is a data URL of audio (data:audio/wav;base64,...)", param=REFERENCES
        )
    if len(match[3]) > MAX_REFERENCE_BYTES * 4 // 3 + 4:
        raise InvalidRequest(
            f"a reference holds at most {MAX_REFERENCE_BYTES} bytes", param=REFERENCES
        )
    try:
        data = base64.b64decode(match[3], validate=True)
    except (binascii.Error, ValueError):
        raise InvalidRequest("a reference's data is not base64", param=REFERENCES) from None
    if not data:
        raise InvalidRequest("a reference holds no audio", param=REFERENCES)
    return base64.b64encode(data).decode("ascii")


def not_audio(name: str, why: str) -> InvalidRequest:
    """The refusal of ``name``'s reference that could not be read as audio (``why``)."""
    low, high = REFERENCE_S
    message = f"the reference of {name!r} is not audio of {low:g}-{high:g} s: {why}"
    return InvalidRequest(message, param=REFERENCES)


def check_length(name: str, seconds: float) -> None:
    """:class:`InvalidRequest` naming ``known_speaker_references[]`` if a reference of
    ``seconds`` is outside :data:`REFERENCE_S`."""
    low, high = REFERENCE_S
    if not low <= seconds <= high:
        message = f"the reference of {name!r} is {seconds:.1f} s: give {low:g}-{high:g} s"
        raise InvalidRequest(message, param=REFERENCES)
