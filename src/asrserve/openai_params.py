"""OpenAI's newer transcription parameters, validated: ``include[]`` and ``chunking_strategy``
(``languages[]`` and ``keywords[]`` are the request schema's list fields).

The official ``openai`` client sends a list as repeated ``name[]`` fields and an object as
one field per key (``chunking_strategy[type]=server_vad``, ``chunking_strategy[threshold]=
0.4``); ``curl`` users write ``chunking_strategy`` as one field holding JSON. Both are read.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence

from asrserve.errors import InvalidRequest
from asrserve.vocabulary import Chunking

Fields = Mapping[str, Sequence[str]]

INCLUDE = "include[]"
CHUNKING = "chunking_strategy"


def values(fields: Fields, name: str) -> list[str]:
    """Every value of a list field, sent as ``name[]`` (the openai client) or ``name``."""
    return [*fields.get(f"{name}[]", ()), *fields.get(name, ())]


def logprobs(fields: Fields) -> bool:
    """Whether ``include[]`` asks for the tokens' log probabilities (its only value)."""
    asked = values(fields, "include")
    unknown = sorted(set(asked) - {"logprobs"})
    if unknown:
        raise InvalidRequest(
            f"include[] takes only 'logprobs', not {unknown[0][:40]!r}", param=INCLUDE
        )
    return bool(asked)


def chunking(fields: Fields) -> Chunking | None:
    """``chunking_strategy``: None for ``auto`` (or absent), else the ``server_vad`` split."""
    keyed = {
        name[len(CHUNKING) + 1 : -1]: items[-1]
        for name, items in fields.items()
        if name.startswith(f"{CHUNKING}[") and name.endswith("]") and items
    }
    whole = fields.get(CHUNKING)
    value = whole[-1].strip() if whole else ""
    if keyed and value:
        raise InvalidRequest(
            f"give {CHUNKING} once: as one field or as its {CHUNKING}[...] fields", param=CHUNKING
        )
    if keyed:
        return _server_vad(keyed)
    if value in ("", "auto"):
        return None
    try:
        given = json.loads(value)
    except ValueError:
        given = None
    if given == "auto":
        return None
    if not isinstance(given, dict):
        raise InvalidRequest(
            f'{CHUNKING} must be "auto" or an object {{"type": "server_vad", ...}}',
            param=CHUNKING,
        )
    return _server_vad(given)


BOUNDS = {
    "threshold": (0.0, 1.0),
    "silence_duration_ms": (0, 10_000),
    "prefix_padding_ms": (0, 5_000),
}


def _server_vad(given: Mapping[str, object]) -> Chunking:
    if given.get("type") != "server_vad":
        raise InvalidRequest(
            f'{CHUNKING}.type must be "server_vad" (or give {CHUNKING}="auto")',
            param=f"{CHUNKING}.type",
        )
    unknown = sorted(set(given) - {"type", *BOUNDS})
    if unknown:
        raise InvalidRequest(
            f"{CHUNKING} has no field {unknown[0][:40]!r}", param=f"{CHUNKING}.{unknown[0][:40]}"
        )
    settings: dict[str, float] = {}
    for name, (low, high) in BOUNDS.items():
        if given.get(name) is not None:
            settings[name] = _bounded(given[name], name, low, high)
    return Chunking.model_validate(settings)


def _bounded(value: object, name: str, low: float, high: float) -> float:
    param = f"{CHUNKING}.{name}"
    whole = isinstance(low, int)
    kind = "a whole number" if whole else "a number"
    message = f"{param} must be {kind} from {low:g} to {high:g}"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidRequest(message, param=param)
    try:
        number = float(value)
    except ValueError:
        raise InvalidRequest(message, param=param) from None
    if not math.isfinite(number) or not low <= number <= high:
        raise InvalidRequest(message, param=param)
    if whole and not number.is_integer():
        raise InvalidRequest(message, param=param)
    return int(number) if whole else number
