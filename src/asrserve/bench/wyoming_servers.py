"""The servers ``asrserve bench wyoming`` measures: asrserve started on a Wyoming port of
its own, and the competitor at ``--against HOST:PORT`` or started from
``--against-command`` (``{port}`` and ``{model_dir}`` filled in), each ready once it
answers ``describe`` with ``info``; what each was set to, for the report."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import shlex
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from asrserve.bench.runner import server_settings
from asrserve.bench.wyoming import (
    COMMANDS,
    Spoken,
    Target,
    event_bytes,
    measure_wyoming,
    pcm16,
    spoken_commands,
    wyoming_report,
)
from asrserve.cli.server_process import ServerProcess, free_port
from asrserve.engine.whisper import bundled_model_path
from asrserve.wyoming.framing import read_event

HOST = "127.0.0.1"
START_TIMEOUT_S = 180.0
UTTERANCES, ROUNDS = 40, 3  # per round and concurrency; rounds per server and concurrency


async def describe(host: str, port: int) -> dict[str, Any]:
    """The server's first ``asr`` program in its ``info`` answer to ``describe``."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        writer.write(event_bytes("describe"))
        await writer.drain()
        while (event := await asyncio.wait_for(read_event(reader), 30.0)) is not None:
            if event.type == "info":
                program: dict[str, Any] = event.data["asr"][0]
                models = [model["name"] for model in program.get("models", [])]
                return {
                    "program": program["name"],
                    "version": program.get("version"),
                    "models": models,
                }
        raise ConnectionError("the connection closed before info")
    finally:
        writer.close()
        await writer.wait_closed()


def wait_info(port: int, proc: subprocess.Popen[bytes], log: Path) -> dict[str, Any]:
    """``describe`` until the server at ``port`` answers it (or its process exits)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, asyncio.TimeoutError):
            return asyncio.run(describe(HOST, port))
        if proc.poll() is not None:
            break
        time.sleep(0.2)  # waiting for another process: nothing to subscribe to
    tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
    raise SystemExit(f"asrserve bench: the Wyoming server on port {port} did not start:\n{tail}")


@contextlib.contextmanager
def asrserve_server(env: Mapping[str, str], tmp: Path) -> Iterator[tuple[Target, dict[str, Any]]]:
    """``asrserve serve`` with its Wyoming server on a free port; its settings."""
    port = free_port()
    server = ServerProcess(tmp / "asrserve", env={**env, "ASRSERVE_WYOMING_PORT": str(port)})
    server.start(timeout=START_TIMEOUT_S)
    try:
        assert server.proc is not None and server.log_path is not None
        info = wait_info(port, server.proc, server.log_path)
        yield Target("asrserve", HOST, port), {**info, "settings": server_settings(env)}
    finally:
        server.stop()


@contextlib.contextmanager
def competitor(command: str, model_dir: Path, tmp: Path) -> Iterator[tuple[Target, dict[str, Any]]]:
    """The competitor started from ``command``; its info and its command line."""
    port = free_port()
    line = command.format(port=port, model_dir=model_dir)
    log = tmp / "competitor.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(shlex.split(line), stdout=out, stderr=subprocess.STDOUT)
    try:
        info = wait_info(port, proc, log)
        yield Target(info["program"], HOST, port), {**info, "command": line}
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def run_wyoming(args: argparse.Namespace, env: dict[str, str]) -> dict[str, Any]:
    """The scenario: the servers started or reached, measured, reported; the JSON body."""
    if args.url is not None:
        raise SystemExit("asrserve bench: wyoming starts asrserve (no --url; --against)")
    if args.against and args.against_command:
        raise SystemExit("asrserve bench: --against or --against-command, not both")
    model_dir = args.model or bundled_model_path()
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="asrserve-wyoming-")))
        spoken = _spoken(args, tmp / "audio")
        servers = [stack.enter_context(asrserve_server(env, tmp))]
        if args.against_command:
            servers.append(stack.enter_context(competitor(args.against_command, model_dir, tmp)))
        elif args.against:
            host, _, port = args.against.rpartition(":")
            info = asyncio.run(describe(host, int(port)))
            servers.append(
                (Target(info["program"], host, int(port)), {**info, "address": args.against})
            )
        per_round = args.requests or UTTERANCES
        seconds = sum(s.seconds for s in spoken)
        print(
            f"{len(spoken)} utterances, {seconds:.1f} s of audio; servers "
            f"{[t.name for t, _ in servers]}, satellites {list(args.wyoming)}, "
            f"{per_round} utterances per round, {args.rounds} rounds",
            flush=True,
        )
        targets = [target for target, _ in servers]
        rows = measure_wyoming(targets, spoken, args.wyoming, per_round, args.rounds)
    body = {
        "servers": {target.name: about for target, about in servers},
        "model_dir": str(model_dir),
        "utterances": [{"text": s.text, "seconds": round(s.seconds, 2)} for s in spoken],
        "utterances_per_round": per_round,
        "rounds": args.rounds,
        "rows": rows,
    }
    print(wyoming_report(body))
    return body


def _spoken(args: argparse.Namespace, folder: Path) -> list[Spoken]:
    """``--audio`` (its files with ``--refs``' texts) or the commands spoken by espeak-ng."""
    if args.audio is None:
        return spoken_commands(folder, COMMANDS)
    from asrserve.bench.corpus import load_refs

    refs = load_refs(args.refs) if args.refs else {}
    files = sorted(p for p in args.audio.iterdir() if p.name in refs)
    if not files:
        raise SystemExit(f"asrserve bench: wyoming needs --refs naming files of {args.audio}")
    return [Spoken(refs[p.name], pcm16(p)) for p in files]
