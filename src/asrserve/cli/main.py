"""The ``asrserve`` command: ``serve`` and ``transcribe``."""

from __future__ import annotations

import argparse
import faulthandler
import json
import os
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from asrserve.cli.logs import configure as configure_logging
from asrserve.cli.tools import Command, tool_commands
from asrserve.engine.base import Engine, ModelNotFoundError
from asrserve.errors import InvalidRequest
from asrserve.settings import Settings, explain, warn_renamed
from asrserve.settings.table import flags
from asrserve.vocabulary import TranscriptionOptions

if TYPE_CHECKING:
    from collections.abc import Callable

    from asrserve.transcript import Transcript

# Flags of renamed settings (see settings.RENAMED), still accepted with a warning.
RENAMED_FLAGS = {"--cpu-workers": "--cpu-replicas"}


def build_settings(args: argparse.Namespace) -> Settings:
    for old, new in RENAMED_FLAGS.items():
        value = getattr(args, _dest(old), None)
        if value is not None:
            warn_renamed(old, new)
            if getattr(args, _dest(new), None) is None:
                setattr(args, _dest(new), value)
    overrides: dict[str, Any] = {
        flag.field: getattr(args, flag.field)
        for flag in flags()
        if getattr(args, flag.field, None) is not None
    }
    if getattr(args, "models", None):
        overrides["models"] = tuple(args.models)
    if getattr(args, "offline", False):
        overrides["offline"] = True
    if getattr(args, "devices", None):
        overrides.update(parse_devices(args.devices))
    return Settings(**overrides)


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


def parse_devices(value: str) -> dict[str, Any]:
    """``cpu`` or ``cuda:0,cuda:1`` → device and device indices (one replica each)."""
    parts = [part.strip() for part in value.split(",") if part.strip()]
    kinds = {part.split(":")[0] for part in parts}
    if kinds == {"cpu"}:
        return {"device": "cpu"}
    if kinds != {"cuda"}:
        raise SystemExit(f"asrserve: --devices takes 'cpu' or 'cuda:N,...', not {value!r}")
    indices = tuple(int(part.split(":")[1]) if ":" in part else 0 for part in parts)
    return {"device": "cuda", "device_index": indices}


def add_model_arguments(sub: argparse.ArgumentParser) -> None:
    """``--model`` (repeatable, replaces ASRSERVE_MODELS) and ``--offline`` (docs/models.md)."""
    sub.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="NAME",
        help="a model to serve, repeatable, the first the default: a directory, tiny.en, base,"
        " a faster-whisper size (large-v3) or a hub repo id (org/name); NAME:keep_alive=5m"
        " gives it its own keep_alive (-1 forever, 0 after each use)",
    )
    sub.add_argument(
        "--offline", action="store_true", help="never download a model: use the cache only"
    )


def parser(tools: Mapping[str, Command] | None = None) -> argparse.ArgumentParser:
    """The command line; ``tools`` are the tooling's commands (default: the installed)."""
    root = argparse.ArgumentParser(prog="asrserve", description=__doc__)
    commands = root.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the HTTP service (ASRSERVE_* env too)")
    worker = commands.add_parser("worker", help="distributed: a worker node (no HTTP)")
    transcribe = commands.add_parser("transcribe", help="transcribe files locally, no server")
    serve.add_argument(
        "--inference",
        action="store_true",
        help="with --broker: run inference in this process too (default: an API node only)",
    )
    serve.add_argument("--workers", action="store_true", help=argparse.SUPPRESS)  # renamed
    for sub in (serve, worker, transcribe):
        kinds = {}
        for flag in flags():
            sub.add_argument(flag.name, type=flag.kind, default=None, help=flag.help)
            kinds[flag.name] = flag.kind
        for old, new in RENAMED_FLAGS.items():
            sub.add_argument(old, type=kinds[new], default=None, help=argparse.SUPPRESS)
        sub.add_argument("--devices", help="'cpu' or 'cuda:0,cuda:1': one model replica each")
        add_model_arguments(sub)
    for name, tool in (tool_commands() if tools is None else tools).items():
        tool.add_arguments(commands.add_parser(name, help=tool.help))
    keys = commands.add_parser("keys", help="create, list or revoke API keys")
    from asrserve.cli.keys import add_arguments as add_keys_arguments

    add_keys_arguments(keys)
    batch = commands.add_parser("batch", help="transcribe a folder through the Batch API")
    from asrserve.cli.batch import add_arguments as add_batch_arguments
    from asrserve.cli.batch import add_task_arguments

    add_batch_arguments(batch)
    transcribe.add_argument("files", nargs="+", type=Path)
    transcribe.add_argument("--format", default="txt", choices=["txt", "json", "srt", "vtt"])
    add_task_arguments(transcribe)
    transcribe.add_argument(
        "--out", type=Path, default=None, help="write FILE.<format> here (default: stdout)"
    )
    return root


PRIVATE_UMASK = 0o077
"""Commands that write the data dir (people's recordings, transcripts, keys) create its
files ``0600`` and its folders ``0700``: owner only."""
DATA_DIR_COMMANDS = frozenset({"serve", "worker", "keys"})
SERVICE_COMMANDS = frozenset({"serve", "worker"})


# Commands with their own module: ``run(args)`` there (imported only when used).
COMMAND_MODULES = {
    "batch": "asrserve.cli.batch",
    "keys": "asrserve.cli.keys",
}


def _run_module(module: str, args: argparse.Namespace) -> int:
    import importlib

    result: int = importlib.import_module(module).run(args)
    return result


def main(argv: Sequence[str] | None = None) -> int:
    tools = tool_commands()
    words = list(sys.argv[1:] if argv is None else argv)
    if words and words[0] in tools and not tools[words[0]].installed:
        return tools[words[0]].run(argparse.Namespace(command=words[0]))
    args = parser(tools).parse_args(words)
    if args.command in DATA_DIR_COMMANDS:
        os.umask(PRIVATE_UMASK)
    if args.command in SERVICE_COMMANDS:
        # ``kill -USR1 <pid>`` writes every thread's stack to stderr: how to see what a
        # stuck server or worker node is doing, without stopping it.
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    if args.command in tools:
        return tools[args.command].run(args)
    module = COMMAND_MODULES.get(args.command)
    try:
        if module is not None:
            return _run_module(module, args)
        settings = build_settings(args)
    except ValidationError as exc:
        print(f"asrserve: invalid setting: {explain(exc)}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        if args.command == "serve":
            return serve(settings, inference=serves_inference(args, settings))
        if args.command == "worker":
            return work(settings)
        return transcribe(
            settings, args.files, args.format, args.out, task=args.task, language=args.language
        )
    except ModelNotFoundError as exc:
        print(f"asrserve: {exc}", file=sys.stderr)
        return 2


def serves_inference(args: argparse.Namespace, settings: Settings) -> bool:
    """Whether ``serve`` runs inference: always when embedded; with a broker, only when
    asked (``--inference``; ``--workers`` is its old name)."""
    if args.workers:
        warn_renamed("--workers", "--inference")
    return settings.broker is None or args.inference or args.workers


def serve(settings: Settings, *, inference: bool = True) -> int:
    import uvicorn

    from asrserve.api.app import create_app
    from asrserve.cli.keys import UnsafeStart, install_env_keys, refuse_unsafe_start
    from asrserve.engine.sources import resolve_models

    # fail fast, with a clear message, before binding the port
    resolve_models(settings, settings.model_cache)
    try:
        install_env_keys(settings)
        refuse_unsafe_start(settings)
    except UnsafeStart as exc:
        print(f"asrserve: {exc}", file=sys.stderr)
        return 2
    app = create_app(settings, inference=inference)
    uvicorn.run(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        log_config=None,  # keep the handlers configure_logging() installed
        timeout_graceful_shutdown=int(settings.shutdown_grace_s) + 5,
    )
    return 0


def work(settings: Settings) -> int:
    """A worker node: claims jobs from the shared Redis until SIGTERM, then drains."""
    import asyncio
    import logging

    from asrserve.engine.sources import resolve_models
    from asrserve.inference.node import run_worker

    if settings.broker is None:
        print("asrserve: a worker node needs --broker redis://HOST:PORT/DB", file=sys.stderr)
        return 2
    resolve_models(settings, settings.model_cache)
    asyncio.run(run_worker(settings))
    # Everything is handed back or stored and Redis is closed. Leave without the
    # interpreter's teardown: destroying the native inference libraries' thread pools
    # (CTranslate2, onnxruntime) at exit was seen to crash or hang a stopped worker node
    # now and then, which turned a clean stop into a failed one.
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def transcribe(
    settings: Settings,
    files: list[Path],
    fmt: str,
    out: Path | None,
    *,
    task: str = "transcribe",
    language: str | None = None,
) -> int:
    from tqdm import tqdm

    from asrserve.audio.errors import AudioError
    from asrserve.formats import ResponseFormat, render

    try:
        options = local_options(settings, task, language)
    except InvalidRequest as exc:
        print(f"asrserve: {exc.message}", file=sys.stderr)
        return 2
    engine = local_engine(settings)
    response = {
        "txt": ResponseFormat.TEXT,
        "json": ResponseFormat.VERBOSE_JSON,
        "srt": ResponseFormat.SRT,
        "vtt": ResponseFormat.VTT,
    }[fmt]
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    failures = 0
    for path in tqdm(files, unit="file", disable=len(files) < 2, file=sys.stderr):
        bar = tqdm(desc=path.name, unit="s", file=sys.stderr, leave=False, dynamic_ncols=True)

        def progress(done: float, total: float, bar: Any = bar) -> None:
            bar.total = round(total, 1)
            bar.update(round(done, 1) - bar.n)

        try:
            with bar:
                transcript = transcribe_local(settings, engine, path, options, progress)
        except (AudioError, OSError) as exc:
            failures += 1
            print(f"asrserve: {path}: {exc}", file=sys.stderr)
            continue
        body = render(transcript, response)
        text = json.dumps(body, indent=2) if isinstance(body, dict) else body
        if out is None:
            sys.stdout.write(text if text.endswith("\n") else text + "\n")
        else:
            (out / f"{path.stem}.{fmt}").write_text(text, encoding="utf-8")
    return 1 if failures else 0


def local_engine(settings: Settings) -> Engine:
    """The default model's engine, one replica, in this process."""
    from asrserve.engine.registry import load_engines

    return next(iter(load_engines(settings.model_copy(update={"cpu_replicas": 1}))[0].values()))


def transcribe_local(
    settings: Settings,
    engine: Engine,
    path: Path,
    options: TranscriptionOptions,
    progress: Callable[[float, float], None] = lambda done, total: None,
) -> Transcript:
    """``path`` transcribed in this process as ``asrserve transcribe`` does: the settings'
    length limit, VAD, batch size and encoder windows."""
    from asrserve.inference.direct import transcribe_file

    return transcribe_file(
        engine,
        path,
        options,
        max_seconds=settings.max_audio_seconds,
        vad=settings.vad_filter,
        batch_size=settings.max_batch_size,
        windows=engine.capabilities.windows(settings.windows),
        first_window_s=settings.first_window_s,
        progress=progress,
    )


def local_options(settings: Settings, task: str, language: str | None) -> TranscriptionOptions:
    """``--task`` and ``--language`` checked as the API checks them, against the default
    model (a translation needs a multilingual one, as does a language other than English)."""
    from asrserve.engine.registry import served_models
    from asrserve.requests import parse_request
    from asrserve.vocabulary import Task

    fields = {"language": [language]} if language else {}
    return parse_request(fields, served_models(settings), task=Task(task)).options


if __name__ == "__main__":
    raise SystemExit(main())
