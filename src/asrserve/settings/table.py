"""The settings as people read them, made from the fields so that a setting is written once:
``asrserve serve``'s flags, and docs/configuration.md's tables (``python -m
asrserve.settings.table --write docs/configuration.md``, ``make docs``; ``--check`` fails when
the file's tables are not the fields')."""

from __future__ import annotations

import argparse
import sys
import types
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from asrserve.settings.core import GROUPS
from asrserve.settings.fields import ENV_PREFIX, MIB

BEGIN = "<!-- settings: made by python -m asrserve.settings.table -->"
END = "<!-- settings: end -->"
PLAIN_TYPES: tuple[type[Any], ...] = (int, float, str, Path)


@dataclass(frozen=True)
class Flag:
    """One ``asrserve serve`` flag: the setting it sets, argparse's type, its help."""

    name: str
    field: str
    kind: type[Any]
    help: str


def flags() -> list[Flag]:
    """A flag for each field marked as one, named after it (``--max-batch-size``)."""
    return [
        Flag(f"--{name.replace('_', '-')}", name, _argument_type(info), _help(info))
        for _, group in GROUPS
        for name, info in group.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("flag")
    ]


def markdown() -> str:
    """A table per group: each setting's environment name (and flag), default, meaning."""
    parts = [BEGIN]
    for title, group in GROUPS:
        parts += [f"**{title}**", "", "| Env / flag | Default | Meaning |", "|---|---|---|"]
        for name, info in group.model_fields.items():
            names = f"`{ENV_PREFIX}{name.upper()}`"
            if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get("flag"):
                names += f" `--{name.replace('_', '-')}`"
            parts.append(f"| {names} | {_shown(name, info.default)} | {info.description} |")
        parts.append("")
    parts.append(END)
    return "\n".join(parts)


def replaced(text: str) -> str:
    """``text`` (docs/configuration.md) with its settings tables made anew."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + markdown() + text[end:]


def _argument_type(info: FieldInfo) -> type[Any]:
    """The field's own type where argparse can make it (optional or not); else the text,
    which the settings parse (a list, ``auto`` or a number, an enum's value)."""
    annotation = info.annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        present = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = present[0] if len(present) == 1 else str
    for plain in PLAIN_TYPES:
        if annotation is plain:
            return plain
    return str


def _help(info: FieldInfo) -> str:
    text = (info.description or "").replace("`", "").replace("%", "%%")
    return f"{text} (default: {_shown('', info.default).replace('`', '')})"


def _shown(name: str, value: object) -> str:
    if value is None:
        return "unset"
    if isinstance(value, tuple):
        return f"`{','.join(_number(v) for v in value)}`" if value else "none"
    if isinstance(value, Enum):
        return f"`{value.value}`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, int) and name.endswith("_bytes") and value >= 1024:
        return _size(value)
    return f"`{_number(value)}`"


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _size(value: int) -> str:
    for unit, size in (("GiB", 1024 * MIB), ("MiB", MIB), ("KiB", 1024)):
        if value % size == 0:
            return f"{value // size} {unit}"
    return f"`{value}`"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m asrserve.settings.table")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--write", type=Path, help="make the tables in this file anew")
    action.add_argument("--check", type=Path, help="fail if this file's tables differ")
    args = parser.parse_args(argv)
    path: Path = args.write or args.check
    text = path.read_text(encoding="utf-8")
    if args.write:
        path.write_text(replaced(text), encoding="utf-8")
        return 0
    if replaced(text) != text:
        print(f"{path}: the settings tables differ from the fields; run --write", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
