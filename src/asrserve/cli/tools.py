"""The commands the tooling adds (``asrserve bench``, ``asrserve tune``).

They are found through the ``asrserve.commands`` entry points, so the product never imports
the tooling: ``bench`` and ``tune`` register themselves, and an install without the
``bench`` extra (``jiwer``) still lists them and says what to install.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points

GROUP = "asrserve.commands"
EXTRA = "bench"  # the optional dependencies every tool may need


@dataclass(frozen=True, slots=True)
class Command:
    """A subcommand: its one-line help, its arguments and what it runs."""

    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
    installed: bool = True  # False: ``run`` only says what to install, whatever the arguments


def tool_commands(found: Iterable[EntryPoint] | None = None) -> dict[str, Command]:
    """Every registered tool by name; one that cannot be imported says why when run."""
    points = entry_points(group=GROUP) if found is None else found
    commands: dict[str, Command] = {}
    for point in sorted(points, key=lambda p: p.name):
        try:
            command = point.load()
        except ImportError as exc:
            command = _not_installed(point.name, exc)
        if not isinstance(command, Command):
            raise TypeError(f"entry point {point.name} = {point.value} is not a Command")
        commands[point.name] = command
    return commands


def _not_installed(name: str, exc: ImportError) -> Command:
    missing = exc.name or str(exc)
    text = (
        f"asrserve {name} needs the {EXTRA} extra (missing: {missing}):"
        f" pip install 'asrserve[{EXTRA}]'"
    )

    def add_arguments(sub: argparse.ArgumentParser) -> None:
        pass

    def run(args: argparse.Namespace) -> int:
        print(f"asrserve: {text}", file=sys.stderr)
        return 2

    help_ = f"(needs asrserve[{EXTRA}])"
    return Command(help=help_, add_arguments=add_arguments, run=run, installed=False)
