"""``asrserve batch run DIR``: transcribe a folder of audio through the Batch API.

Uploads every audio file of DIR, submits one batch, shows its progress, then writes one
transcript per file. Against ``--url`` or, by default, a private server started for the
run (and stopped after it, also on Ctrl-C, which cancels the batch first).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from asrserve.batch_api.models import COMPLETION_WINDOW, ENDPOINT, TRANSLATIONS, BatchStatus

AUDIO_EXTENSIONS = frozenset(
    {".wav", ".flac", ".mp3", ".ogg", ".opus", ".m4a", ".mp4", ".webm", ".aac"}
)
RESPONSE_FORMATS = {"srt": "srt", "vtt": "vtt", "txt": "text", "json": "json"}
POLL_S = 0.5
TIMEOUT = httpx.Timeout(300.0, connect=10.0)


class UsageError(Exception):
    """Bad command line input (exit code 2)."""


class BatchError(Exception):
    """The server refused a request, or the batch could not run."""


@dataclass(frozen=True)
class Ask:
    """What every request of the batch asks for: the endpoint (which says the task) and the
    body's options besides the file."""

    endpoint: str
    options: dict[str, str]

    @classmethod
    def of(cls, args: argparse.Namespace) -> Ask:
        endpoint = TRANSLATIONS if args.task == "translate" else ENDPOINT
        options = {"response_format": RESPONSE_FORMATS[args.format]}
        if args.language:
            options["language"] = args.language
        return cls(endpoint, options)


@dataclass(frozen=True)
class RunOutcome:
    """What became of one input file: its rendered body, or why it failed."""

    path: Path
    body: str | dict[str, Any] | None = None
    error: str | None = None


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """``--task`` and ``--language``, as ``transcribe`` and ``batch run`` both take them."""
    parser.add_argument(
        "--task",
        default="transcribe",
        choices=["transcribe", "translate"],
        help="translate: into English (a multilingual model only)",
    )
    parser.add_argument(
        "--language", help="the spoken language, an ISO-639-1 code (default: detected)"
    )


def add_arguments(batch: argparse.ArgumentParser) -> None:
    commands = batch.add_subparsers(dest="batch_command", required=True)
    run_parser = commands.add_parser("run", help="transcribe every audio file of a folder")
    run_parser.add_argument("dir", type=Path, help="folder of audio files (not recursive)")
    run_parser.add_argument("--format", default="txt", choices=list(RESPONSE_FORMATS))
    add_task_arguments(run_parser)
    run_parser.add_argument("--url", help="a running server (default: start a private one)")
    run_parser.add_argument("--out", type=Path, help="write transcripts here (default: DIR)")
    run_parser.add_argument(
        "--data-dir", type=Path, help="private server's data dir (default: a temporary one)"
    )


def run(args: argparse.Namespace) -> int:
    started = time.monotonic()
    try:
        files = audio_files(args.dir)
    except UsageError as exc:
        print(f"asrserve: {exc}", file=sys.stderr)
        return 2
    try:
        ask = Ask.of(args)
        if args.url:
            return submit(args.url.rstrip("/"), files, args.format, args.out, started, ask)
        with local_server(args.data_dir) as url:
            return submit(url, files, args.format, args.out, started, ask)
    except KeyboardInterrupt:
        print("asrserve: interrupted", file=sys.stderr)
        return 130
    except httpx.HTTPError as exc:
        print(f"asrserve: {args.url or 'the private server'}: {exc}", file=sys.stderr)
        return 1
    except (BatchError, RuntimeError) as exc:  # RuntimeError: the private server did not start
        print(f"asrserve: {exc}", file=sys.stderr)
        return 1


def audio_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise UsageError(f"{folder} is not a directory")
    files = sorted(
        p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_EXTENSIONS
    )
    if not files:
        known = ", ".join(sorted(ext[1:] for ext in AUDIO_EXTENSIONS))
        raise UsageError(f"no audio files ({known}) in {folder}")
    return files


@contextlib.contextmanager
def local_server(data_dir: Path | None) -> Iterator[str]:
    """A private ``asrserve serve`` on a free loopback port, for the length of the block."""
    from asrserve.cli.server_process import ServerProcess

    with contextlib.ExitStack() as stack:
        if data_dir is None:
            temp = stack.enter_context(tempfile.TemporaryDirectory(prefix="asrserve-batch-"))
            data_dir = Path(temp) / "data"
        server = ServerProcess(data_dir)
        try:
            # The server inherits a blocked SIGINT: the terminal's Ctrl-C reaches only this
            # process, which cancels the batch and then stops the server itself.
            old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
            try:
                server.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old)
            yield server.url
        finally:
            server.stop()
            if server.log_path is not None:
                server.log_path.unlink(missing_ok=True)


def submit(
    url: str, files: list[Path], fmt: str, out: Path | None, started: float, ask: Ask
) -> int:
    """Upload, run and wait for one batch; write its transcripts. ``started``: for the
    wall time in the summary (the whole command, a private server's start included)."""
    with httpx.Client(base_url=url, timeout=TIMEOUT) as client:
        file_ids = [upload(client, path, "audio") for path in _bar(files, "upload")]
        batch = call(
            client,
            "POST",
            "/v1/batches",
            json={
                "input_file_id": upload_requests(client, files, file_ids, ask),
                "endpoint": ask.endpoint,
                "completion_window": COMPLETION_WINDOW,
                "metadata": {"source": "asrserve batch run"},
            },
        )
        try:
            batch = wait(client, batch, len(files))
        except KeyboardInterrupt:
            cancel(client, batch["id"])
            raise
        outcomes = collect(client, batch, files)
    written = write(outcomes, fmt, out)
    summary(batch, outcomes, written, time.monotonic() - started)
    failed = any(o.error is not None for o in outcomes)
    return 1 if failed or batch["status"] != BatchStatus.COMPLETED else 0


def cancel(client: httpx.Client, batch_id: str) -> None:
    try:
        call(client, "POST", f"/v1/batches/{batch_id}/cancel", timeout=10.0)
    except (BatchError, httpx.HTTPError) as exc:  # e.g. it ended meanwhile
        print(f"asrserve: could not cancel {batch_id}: {exc}", file=sys.stderr)
    else:
        print(f"asrserve: cancelled {batch_id}", file=sys.stderr)


def call(client: httpx.Client, method: str, url: str, **kwargs: Any) -> dict[str, Any]:
    response = client.request(method, url, **kwargs)
    if response.is_error:
        try:
            message = response.json()["error"]["message"]
        except (ValueError, KeyError, TypeError):
            message = response.text[:200]
        raise BatchError(f"{method} {url}: {response.status_code} {message}")
    body: dict[str, Any] = response.json()
    return body


def upload(client: httpx.Client, path: Path, purpose: str) -> str:
    with path.open("rb") as handle:  # httpx streams file objects in chunks
        part = {"file": (path.name, handle)}
        body = call(client, "POST", "/v1/files", files=part, data={"purpose": purpose})
    return str(body["id"])


def upload_requests(client: httpx.Client, files: list[Path], file_ids: list[str], ask: Ask) -> str:
    lines = [
        json.dumps(
            {
                "custom_id": path.name,
                "method": "POST",
                "url": ask.endpoint,
                "body": {"file": file_id, **ask.options},
            }
        )
        for path, file_id in zip(files, file_ids, strict=True)
    ]
    data = "".join(f"{line}\n" for line in lines).encode()
    part = ("requests.jsonl", data, "application/jsonl")
    body = call(client, "POST", "/v1/files", files={"file": part}, data={"purpose": "batch"})
    return str(body["id"])


def wait(client: httpx.Client, batch: dict[str, Any], total: int) -> dict[str, Any]:
    """Poll the batch until it ends. The bar counts seconds of audio transcribed, running
    requests' windows included (``audio_seconds_done``), so its ETA moves within a long
    file too; beside it, the files done."""
    with _bar(None, "transcribe", total=None, smoothing=0.0, unit="audio s") as bar:
        while not BatchStatus(batch["status"]).finished:
            time.sleep(POLL_S)  # a remote status: there is nothing to subscribe to
            batch = call(client, "GET", f"/v1/batches/{batch['id']}")
            counts = batch["request_counts"]
            bar.set_postfix_str(f"files {counts['completed'] + counts['failed']}/{total}")
            done = batch.get("audio_seconds_done")
            if done is None:
                continue
            bar.total = round(batch["audio_seconds"], 1)
            bar.update(round(done, 1) - bar.n)
    return batch


def collect(client: httpx.Client, batch: dict[str, Any], files: list[Path]) -> list[RunOutcome]:
    """One outcome per input file, from the output and error files, by custom id."""
    if batch["status"] == BatchStatus.FAILED:  # the input was rejected as a whole
        problems = (batch.get("errors") or {}).get("data") or [{"message": "unknown error"}]
        lines = "; ".join(str(p["message"]) for p in problems[:5])
        raise BatchError(f"batch {batch['id']} failed: {lines}")
    bodies = {e["custom_id"]: e["response"]["body"] for e in _lines(client, batch, "output")}
    errors: dict[str, str] = {}
    for entry in _lines(client, batch, "error"):
        response = entry.get("response")
        error = response["body"]["error"] if response else entry["error"]
        errors[entry["custom_id"]] = str(error["message"])
    missing = f"no result (the batch is {batch['status']})"
    return [
        RunOutcome(path, body=bodies[path.name])
        if path.name in bodies
        else RunOutcome(path, error=errors.get(path.name, missing))
        for path in files
    ]


def _lines(client: httpx.Client, batch: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    file_id = batch.get(f"{kind}_file_id")
    if not file_id:
        return []
    response = client.get(f"/v1/files/{file_id}/content")
    response.raise_for_status()
    return [json.loads(line) for line in response.text.splitlines() if line.strip()]


def write(outcomes: list[RunOutcome], fmt: str, out: Path | None) -> list[Path]:
    """``name.<fmt>`` per transcript, next to its audio or in ``out``. Files that share a
    stem (``a.wav``, ``a.mp3``) keep their audio extension: ``a.wav.srt``."""
    stems = Counter(o.path.stem for o in outcomes)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
    written = []
    for outcome in outcomes:
        if outcome.body is None:
            continue
        name = outcome.path.stem if stems[outcome.path.stem] == 1 else outcome.path.name
        target = (out or outcome.path.parent) / f"{name}.{fmt}"
        body = outcome.body
        text = json.dumps(body, indent=2, ensure_ascii=False) if fmt == "json" else str(body)
        target.write_text(text if text.endswith("\n") else text + "\n", encoding="utf-8")
        written.append(target)
    return written


def summary(
    batch: dict[str, Any], outcomes: list[RunOutcome], written: list[Path], wall_s: float
) -> None:
    failed = [o for o in outcomes if o.error is not None]
    hours = batch.get("audio_seconds", 0.0) / 3600
    print(
        f"batch {batch['id']} {batch['status']}: {len(outcomes) - len(failed)} completed, "
        f"{len(failed)} failed of {len(outcomes)}; {hours:.3f} h of audio in {wall_s:.1f} s"
    )
    for outcome in failed:
        print(f"  failed: {outcome.path.name}: {outcome.error}")
    if written:
        print(f"{len(written)} transcript(s) written to {written[0].parent}")


def _bar(items: list[Path] | None, desc: str, unit: str = "file", **kwargs: Any) -> Any:
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit=unit, file=sys.stderr, dynamic_ncols=True, **kwargs)
