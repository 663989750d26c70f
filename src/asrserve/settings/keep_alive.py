"""``keep_alive``, as Ollama has it: how long a model's weights stay in memory after its
last use. ``-1`` (any negative value): always; ``0``: released as soon as its work is done;
``N``: after N idle seconds. Given as seconds (``300``, ``2.5``) or as a duration
(``5m``, ``1h30m``, ``90s``, ``500ms``: Go's notation, which Ollama takes).

A served model may carry its own default: ``ASRSERVE_MODELS="tiny.en,base:keep_alive=300"``
(``--model base:keep_alive=5m``).
"""

from __future__ import annotations

import math
import re

FOREVER = -1.0
UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|s|m|h)")
MODEL_OPTIONS = ("keep_alive",)


def parse_keep_alive(value: str | float) -> float:
    """Seconds (``-1``: forever) from a number or a duration; ValueError saying what is
    accepted otherwise."""
    if isinstance(value, bool):
        raise ValueError("keep_alive is a number of seconds or a duration, not a boolean")
    seconds = value if isinstance(value, int | float) else _seconds(value.strip())
    if not math.isfinite(seconds):
        raise ValueError("keep_alive must be finite (-1 keeps a model loaded for good)")
    return FOREVER if seconds < 0 else float(seconds)


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        pass
    sign, body = (-1.0, text[1:]) if text.startswith("-") else (1.0, text)
    parts = _DURATION.findall(body)
    if not body or "".join(number + unit for number, unit in parts) != body:
        raise ValueError(
            f"keep_alive {text[:40]!r} is neither seconds (300, -1, 0) nor a duration"
            " such as 5m, 1h30m or 90s"
        )
    return sign * sum(float(number) * UNITS[unit] for number, unit in parts)


def model_spec(entry: str) -> tuple[str, float | None]:
    """A served model's entry, ``NAME`` or ``NAME:keep_alive=VALUE``: its name and its own
    default keep_alive (None: the server's); ValueError for an option it does not know."""
    name, _, option = entry.rpartition(":")
    if not name or "=" not in option:
        return entry, None  # no option: a name (a path may hold a colon)
    key, _, value = option.partition("=")
    if key.strip() not in MODEL_OPTIONS:
        known = ", ".join(MODEL_OPTIONS)
        raise ValueError(f"model {entry!r}: unknown option {key.strip()!r} (known: {known})")
    try:
        return name.strip(), parse_keep_alive(value)
    except ValueError as exc:
        raise ValueError(f"model {entry!r}: {exc}") from None
