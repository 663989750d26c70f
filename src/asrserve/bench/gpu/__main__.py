"""``python -m asrserve.bench.gpu stage|run|step``: what ``scripts/gpu_check.sh`` runs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(",") if part.strip())


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="python -m asrserve.bench.gpu")
    commands = top.add_subparsers(dest="command", required=True)
    stage = commands.add_parser("stage", help="take in one stage folder")
    stage.add_argument("folder", type=Path)
    stage.add_argument("--home", type=Path, required=True)
    run = commands.add_parser("run", help="every step; one JSON")
    run.add_argument("--home", type=Path, required=True)
    run.add_argument("--out", type=Path, required=True)
    run.add_argument("--device", default="cuda")
    run.add_argument("--dtypes", type=_names, default=("float16", "bfloat16"))
    run.add_argument("--batch-sizes", type=_sizes, default=(1, 2, 4, 8, 16, 32, 64))
    run.add_argument("--clients", type=int, default=64)
    run.add_argument("--rounds", type=int, default=3, help="requests per client")
    run.add_argument("--beam-size", type=int, default=5)
    run.add_argument("--deadline-s", type=float, default=480.0)
    run.add_argument("--only", type=_names, default=(), help="these steps alone, by name")
    # For the test that the check fails: each engine curve's words come back reversed.
    run.add_argument("--break-decode", action="store_true", help=argparse.SUPPRESS)
    step = commands.add_parser("step", help="(the run's) one step in this process")
    step.add_argument("args", type=Path)
    step.add_argument("result", type=Path)
    return top


def take_in(folder: Path, home: Path) -> int:
    from asrserve.bench.gpu.payload import READY, StageMissing, take_in
    from asrserve.bench.gpu.wheels import install

    try:
        manifest, number = take_in(folder, home)
    except StageMissing as exc:
        print(f"gpu check: {exc}", file=sys.stderr)
        return 3
    count = len(manifest.stages)
    print(f"gpu check: stage {number} of {count} is in {home}", flush=True)
    if number == count:
        wheels = install(home / "payload", home)
        (home / READY).write_text(manifest.pack_id, encoding="utf-8")
        print(f"gpu check: every stage is in; {len(wheels)} wheels unpacked; next: run")
    return 0


def run(args: argparse.Namespace) -> int:
    from asrserve.bench.gpu.check import RunConfig
    from asrserve.bench.gpu.check import run as run_check
    from asrserve.bench.gpu.payload import StageMissing
    from asrserve.bench.gpu.report import summary

    config = RunConfig(
        home=args.home,
        out=args.out,
        device=args.device,
        dtypes=args.dtypes,
        batch_sizes=args.batch_sizes,
        clients=args.clients,
        rounds=args.rounds,
        beam_size=args.beam_size,
        deadline_s=args.deadline_s,
        only=args.only,
        break_decode=args.break_decode,
    )
    try:
        body = run_check(config)
    except StageMissing as exc:
        print(f"gpu check: {exc}", file=sys.stderr)
        return 3
    print("\n".join(summary(body)))
    for failure in body["failures"]:
        why = "; ".join(failure["why"])
        print(f"gpu check: FAILED {failure['step']} ({failure['status']}): {why}", file=sys.stderr)
    return 1 if body["failures"] else 0


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command == "stage":
        return take_in(args.folder, args.home)
    if args.command == "run":
        return run(args)
    from asrserve.bench.gpu.steps import main as step

    return step(args.args, args.result)


if __name__ == "__main__":
    raise SystemExit(main())
