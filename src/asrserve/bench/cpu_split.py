"""Where the cores went while a load ran: the server's threads by group (its
``/v1/scheduler`` ``cpu_seconds``, ``inference/cpu_split.py``) and the bench's own load
client, in cores (CPU seconds over the row's wall seconds), so the engine's share of the
machine is measured beside the work a service must do around it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

CLIENT = "bench load client (this process)"


def split(
    before: Mapping[str, Any], after: Mapping[str, Any], wall: float, client_cpu: float
) -> dict[str, float]:
    """Cores each group used over ``wall`` seconds: the server's groups between two views,
    and the client's ``client_cpu`` seconds."""
    if wall <= 0:
        return {}
    start, end = before.get("cpu_seconds", {}), after.get("cpu_seconds", {})
    cores = {label: (end[label] - start.get(label, 0.0)) / wall for label in end}
    cores[CLIENT] = client_cpu / wall
    return {label: round(value, 3) for label, value in cores.items()}


def split_table(rows: Sequence[tuple[str, Mapping[str, float]]]) -> str:
    """One line per row (its label, then each group's cores and share of all the cores
    the row used)."""
    lines = []
    for label, cores in rows:
        if not cores:
            continue
        total = sum(cores.values())
        parts = ", ".join(
            f"{group} {value:.2f} ({value / total:.0%})"
            for group, value in sorted(cores.items(), key=lambda kv: -kv[1])
        )
        lines.append(f"  {label}: {total:.2f} cores: {parts}")
    return "\n".join(["cores used, by thread group:", *lines]) if lines else ""
