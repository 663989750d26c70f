"""``gpu_check.sh run``: every step in turn, each within its time and the run's deadline, and
the one JSON they make.

The steps: what the machine is (``machine``), then per model the transformers engine alone
(``<model>/transformers``), the service on it (``<model>/service``; for the first model
also under ``unbatched``, ``<model>/service-unbatched``) and CTranslate2 alone
(``<model>/ctranslate2``, skipped on CUDA without CUDA 12's cuBLAS). A step that fails or
runs out of time is recorded with the tail of its log, and the next one runs; one that
would start with too little of the deadline left is recorded as skipped.

Each step that ran is judged (``judge.py``): its judgements are recorded with it, and one
whose judgements fail is ``failed``, with their reasons. The JSON's ``failures`` names
every step that failed, timed out or was not reached before the deadline, with why; the
run exits non-zero where there is one (``__main__``), after writing the JSON.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from asrserve.bench.gpu.judge import Judgement, failures, judge, reason
from asrserve.bench.gpu.pack import MODELS
from asrserve.bench.gpu.payload import PACK, PAYLOAD, Manifest, check_ready

LIMITS_S = {"machine": 90.0, "curve": 150.0, "service": 180.0}
MIN_STEP_S = 15.0  # a step with less time than this left is not started
RESERVE_S = 10.0  # of the deadline, kept for writing the JSON
RESULT = "gpu-check.json"


@dataclass(frozen=True)
class RunConfig:
    home: Path  # where the stages were taken in
    out: Path  # the JSON and the logs
    device: str = "cuda"
    dtypes: tuple[str, ...] = ("float16", "bfloat16")
    batch_sizes: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    clients: int = 64
    rounds: int = 3  # requests per client
    beam_size: int = 5
    deadline_s: float = 480.0
    only: tuple[str, ...] = ()  # these steps alone (by name); empty: every step
    break_decode: bool = False  # the engine curves' words reversed: the check must fail


@dataclass(frozen=True)
class Step:
    name: str
    kind: str
    args: dict[str, Any] = field(default_factory=dict)


def plan_steps(config: RunConfig, models: list[str]) -> list[Step]:
    payload = config.home / PAYLOAD
    common = {"device": config.device, "beam_size": config.beam_size}
    common |= {"clips": str(payload / "clips"), "cache": str(config.home / "cache")}
    steps = [Step("machine", "machine", {"home": str(config.home)})]
    for model in models:
        own = common | {"model_dir": str(payload / "models" / model), "model_id": model}
        curve = own | {"dtypes": list(config.dtypes), "batch_sizes": list(config.batch_sizes)}
        curve |= {"break_decode": config.break_decode}
        served = own | {"dtype": config.dtypes[0], "clients": config.clients}
        served |= {"rounds": config.rounds, "data": str(config.home / "data" / model)}
        served |= {"log": str(config.out / "logs" / f"{model}-server.log")}
        steps += [
            Step(f"{model}/transformers", "curve", curve | {"engine": "transformers"}),
            Step(f"{model}/service", "service", served),
        ]
        if model == models[0]:  # what batching adds, the same service without it
            unbatched = served | {"policy": "unbatched"}
            unbatched |= {"data": str(config.home / "data" / f"{model}-unbatched")}
            unbatched |= {"log": str(config.out / "logs" / f"{model}-unbatched-server.log")}
            steps.append(Step(f"{model}/service-unbatched", "service", unbatched))
        steps.append(Step(f"{model}/ctranslate2", "curve", curve | {"engine": "ctranslate2"}))
    unknown = set(config.only) - {step.name for step in steps}
    if unknown:
        raise SystemExit(f"gpu check: no step {', '.join(sorted(unknown))} (--only)")
    return [step for step in steps if not config.only or step.name in config.only]


def judged(record: dict[str, Any], device: str) -> dict[str, Any]:
    """A step that ran, with its judgements; ``failed`` with their reasons where one fails."""
    if record["status"] != "ok":
        return record
    try:
        judgements = judge(record["kind"], record["result"], device)
    except (KeyError, TypeError, ValueError) as exc:  # a result without what is judged
        judgements = [Judgement("judged", f"{type(exc).__name__}: {exc}", "judgeable", False)]
    record["judgements"] = [j.record() for j in judgements]
    reasons = failures(judgements)
    if reasons:
        record |= {"status": "failed", "error": "judged: " + "; ".join(reasons)}
    return record


def failed_steps(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each step that failed, timed out or was not reached, with why: the judgements that
    failed, else its error's last line (a step that skipped itself, such as CTranslate2
    where it cannot run, is not one)."""
    out = []
    for record in records:
        if record["status"] not in ("failed", "timed out") and not record.get("unreached"):
            continue
        why = [reason(j) for j in record.get("judgements", []) if not j["passed"]]
        why = why or (record.get("error") or record["status"]).strip().splitlines()[-1:]
        out.append({"step": record["name"], "status": record["status"], "why": why})
    return out


def run_step(step: Step, out: Path, limit: float) -> dict[str, Any]:
    """The step in a process of its own (and its own process group, so that a server it
    started goes with it), stopped at ``limit`` seconds."""
    stem = step.name.replace("/", "-")
    args, result, log = (out / "steps" / f"{stem}.{kind}" for kind in ("args.json", "json", "log"))
    args.parent.mkdir(parents=True, exist_ok=True)
    args.write_text(json.dumps({"kind": step.kind, "args": step.args}), encoding="utf-8")
    command = [sys.executable, "-m", "asrserve.bench.gpu", "step", str(args), str(result)]
    start = time.perf_counter()
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            command, stdout=sink, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code: int | None = proc.wait(limit)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            code = None
    record = {"name": step.name, "kind": step.kind, "limit_s": round(limit)}
    record["seconds"] = round(time.perf_counter() - start, 1)
    if code == 0 and result.is_file():
        body = json.loads(result.read_text(encoding="utf-8"))
        status = "skipped" if "skipped" in body else "ok"
        return record | {"status": status, "error": body.get("skipped"), "result": body}
    status = "timed out" if code is None else "failed"
    tail = log.read_text(errors="replace")[-3000:]
    return record | {"status": status, "error": tail, "result": None}


def versions(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The machine step's versions (driver, CUDA runtimes, torch, CTranslate2, compute
    capability), where it ran."""
    for record in records:
        if record["kind"] == "machine" and record.get("result"):
            found: dict[str, Any] = record["result"]["versions"]
            return found
    return None


def pack_facts(home: Path) -> dict[str, Any]:
    """The pack the run ran on: its id, facts, and each stage's bytes with the tree's."""
    manifest = Manifest.read(home / PACK)
    tree = manifest.facts.get("tree_bytes", 0)
    stages = [
        {"stage": n, "bytes": size, "with_tree_bytes": size + tree}
        for n, size in enumerate(manifest.stage_bytes(), 1)
    ]
    head = {"pack_id": manifest.pack_id, "stage_budget_bytes": manifest.budget}
    return head | manifest.facts | {"stages": stages}


def run(config: RunConfig) -> dict[str, Any]:
    """Every step, then the JSON (``out/gpu-check.json``); the JSON's body."""
    check_ready(config.home)
    started = time.perf_counter()
    deadline = started + config.deadline_s - RESERVE_S
    models = json.loads((config.home / PAYLOAD / MODELS).read_text(encoding="utf-8"))
    (config.out / "logs").mkdir(parents=True, exist_ok=True)
    records: list[dict[str, Any]] = []
    for step in plan_steps(config, models):
        left = deadline - time.perf_counter()
        if left < MIN_STEP_S:
            why = f"{left:.0f} s of the deadline left"
            records.append({"name": step.name, "kind": step.kind, "status": "skipped"})
            records[-1] |= {"error": why, "unreached": True}
            continue
        print(f"== {step.name} (at most {min(LIMITS_S[step.kind], left):.0f} s)", flush=True)
        record = run_step(step, config.out, min(LIMITS_S[step.kind], left))
        records.append(judged(record, config.device))
        print(f"   {records[-1]['status']} in {records[-1]['seconds']} s", flush=True)
    body = {
        "check": "asrserve GPU check (scripts/gpu_check.sh)",
        "config": asdict(config) | {"home": str(config.home), "out": str(config.out)},
        "wall_s": round(time.perf_counter() - started, 1),
        "pack": pack_facts(config.home),
        "versions": versions(records),
        "failures": failed_steps(records),
        "steps": records,
    }
    (config.out / RESULT).write_text(json.dumps(body, indent=1), encoding="utf-8")
    return body
