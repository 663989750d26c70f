"""One step of the run, in a process of its own: what it is given, what it measures.

The run (``check.py``) writes a step's arguments as JSON and starts
``python -m asrserve.bench.gpu step ARGS RESULT``; the step writes its result as JSON. A
process per step, so that a step past its time can be stopped (with the server it
started) and the GPU memory of one step is not the next one's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from asrserve.bench.gpu.clips import read_clips


def execute(kind: str, args: dict[str, Any]) -> dict[str, Any]:
    """The step's result: ``machine``, ``curve`` (the engine alone) or ``service``."""
    if kind == "machine":
        from asrserve.bench.gpu.machine import facts

        return facts(Path(args["home"]))
    if kind == "curve":
        from asrserve.bench.gpu.engine_curve import CurveSpec, measure

        return measure(
            CurveSpec(
                engine=args["engine"],
                model_dir=Path(args["model_dir"]),
                model_id=args["model_id"],
                device=args["device"],
                dtypes=tuple(args["dtypes"]),
                batch_sizes=tuple(args["batch_sizes"]),
                clips=read_clips(Path(args["clips"])),
                cache=Path(args["cache"]),
                beam_size=args["beam_size"],
                break_decode=args.get("break_decode", False),
            )
        )
    if kind == "service":
        from asrserve.bench.gpu.service import ServiceSpec
        from asrserve.bench.gpu.service import measure as serve

        return serve(
            ServiceSpec(
                model_dir=Path(args["model_dir"]),
                model_id=args["model_id"],
                device=args["device"],
                dtype=args["dtype"],
                clients=args["clients"],
                rounds=args["rounds"],
                clips=read_clips(Path(args["clips"])),
                cache=Path(args["cache"]),
                data=Path(args["data"]),
                log=Path(args["log"]),
                beam_size=args["beam_size"],
                policy=args.get("policy", "greedy"),
            )
        )
    raise SystemExit(f"gpu check: no step kind {kind!r}")


def main(args_path: Path, result_path: Path) -> int:
    body = json.loads(args_path.read_text(encoding="utf-8"))
    result = execute(body["kind"], body["args"])
    result_path.write_text(json.dumps(result, indent=1), encoding="utf-8")
    return 0
