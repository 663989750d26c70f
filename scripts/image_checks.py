"""The images and the compose stack, run for real with podman (scripts/test-images.sh).

1. The CPU image alone: ``podman run``, then the official ``openai`` client transcribes
   jfk through the published port; prints the image's size and its time from run to ready.
2. deploy/compose.yaml (Redis + API + 2 workers): 16 async jobs; one worker is killed
   (SIGKILL) mid-work, the other drained (SIGTERM) during a batch and must exit 0 within
   its stop grace; both start again; every job succeeds, with one "job succeeded" log record
   each over both workers (the log, not the store, is what counts them).
3. Redis's container restarts while jobs are still queued: they survive (the AOF). Redis
   requires the password the API and the workers read (a client without it: NOAUTH).
4. ``/healthz`` (the API node's and each worker's probe server) answers within 1 s while
   both workers are saturated.
5. Home Assistant's Wyoming protocol on the API node's published port: the library's client
   sends jfk as a satellite does, and a worker's transcript comes back.

Exits non-zero, with the failed check, on the first that does not hold.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import wave
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import httpx
import numpy as np
from openai import OpenAI
from wyoming.asr import Transcribe, Transcript
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.client import AsyncTcpClient

ROOT = Path(__file__).resolve().parent.parent
JFK = ROOT / "tests" / "data" / "jfk.flac"
JFK_WORDS = "ask not what your country can do for you"
PROJECT = "asrserve-imagetest"
JOBS = 16
STOP_GRACE_S = 60.0  # deploy/compose.yaml's stop_grace_period for the workers
WAKE_LAG_S = 10.0  # a long poll answered later than this after its job ended lost its wake-up


class CheckFailed(Exception):
    pass


def check(ok: bool, what: str) -> None:
    if not ok:
        raise CheckFailed(what)
    print(f"  ok: {what}")


def podman(*args: str, capture: bool = True) -> str:
    done = subprocess.run(["podman", *args], check=True, capture_output=capture, text=True)
    return done.stdout.strip() if capture else ""


def logs(name: str) -> str:
    """A container's output, stdout and stderr together (the service logs to stderr)."""
    done = subprocess.run(
        ["podman", "logs", name], check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    return done.stdout.decode(errors="replace")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(0.2)


def answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2.0).status_code == 200
    except httpx.HTTPError:
        return False


def jfk_pcm() -> np.ndarray:
    """jfk as 16 kHz 16-bit mono samples."""
    with av.open(str(JFK)) as container:
        resampler = av.AudioResampler(format="s16", layout="mono", rate=16000)
        frames = [
            out.to_ndarray().reshape(-1)
            for frame in container.decode(audio=0)
            for out in resampler.resample(frame)
        ]
    return np.concatenate(frames).astype(np.int16)


async def wyoming_transcript(port: int, pcm: bytes) -> str:
    """``pcm`` (16 kHz 16-bit mono) sent to a Wyoming server as a satellite sends it; the
    ``transcript`` it answers."""
    fmt = {"rate": 16000, "width": 2, "channels": 1}
    async with AsyncTcpClient("127.0.0.1", port, read_timeout=120) as client:
        await client.write_event(Transcribe(language="en").event())
        await client.write_event(AudioStart(**fmt).event())
        for start in range(0, len(pcm), 2048):
            await client.write_event(AudioChunk(audio=pcm[start : start + 2048], **fmt).event())
        await client.write_event(AudioStop().event())
        while (event := await client.read_event()) is not None:
            if Transcript.is_type(event.type):
                return Transcript.from_event(event).text
            if event.type == "error":
                raise CheckFailed(f"wyoming answered an error: {event.data}")
    raise CheckFailed("the Wyoming server closed the connection without a transcript")


def long_clip(path: Path, repeats: int) -> bytes:
    """jfk ``repeats`` times over as 16 kHz mono WAV: long enough to keep workers busy."""
    samples = np.tile(jfk_pcm(), repeats)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16000)
        out.writeframes(samples.tobytes())
    path.write_bytes(buffer.getvalue())
    return buffer.getvalue()


def image_alone(image: str) -> None:
    print("1. the CPU image alone")
    key = f"asr_{secrets.token_hex(24)}"
    port = free_port()
    name = f"{PROJECT}-alone"
    podman("rm", "--force", "--ignore", name)
    started = time.monotonic()
    podman("run", "--detach", "--name", name, "-p", f"127.0.0.1:{port}:8000",
           "-e", f"ASRSERVE_API_KEY={key}", image)  # fmt: skip
    try:
        wait_for(lambda: answers(f"http://127.0.0.1:{port}/readyz"), 120, "the container's /readyz")
        ready_s = time.monotonic() - started
        size_mb = int(podman("image", "inspect", image, "--format", "{{.Size}}")) / 1e6
        print(f"  image {image}: {size_mb:.0f} MB; run to ready: {ready_s:.1f} s")
        client = OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
        with JFK.open("rb") as audio:
            text = client.audio.transcriptions.create(model="tiny.en", file=audio).text
        check(JFK_WORDS in text.lower(), f"the openai client transcribed jfk: {text!r}")
        with JFK.open("rb") as audio:  # the speaker model's weights are in the image
            diarized = client.audio.transcriptions.create(
                model="tiny.en", file=audio, response_format="diarized_json"
            )
        speakers = {segment.speaker for segment in diarized.segments}
        check(speakers == {"A"}, f"jfk diarized: one speaker, {sorted(speakers)}")
        check(
            httpx.get(f"http://127.0.0.1:{port}/v1/models").status_code == 401,
            "without the key: 401",
        )
        health = podman("inspect", name, "--format", "{{.Config.Healthcheck.Test}}")
        check("healthz" in health, "the image carries its HEALTHCHECK on /healthz")
        podman("healthcheck", "run", name)
        print("  ok: podman healthcheck run passes")
        torch = "import importlib.util as u; print(u.find_spec('torch') is None)"
        without = podman("exec", name, "python3", "-c", torch).strip() == "True"
        check(without, "the CPU image holds no PyTorch (the transformers extra is not in it)")
    finally:
        podman("rm", "--force", "--time", "0", name)


class Stack:
    """deploy/compose.yaml under podman-compose, as project PROJECT."""

    def __init__(self, image: str, redis_image: str, work: Path) -> None:
        self.key = f"asr_{secrets.token_hex(24)}"
        self.port, self.wyoming_port = free_port(), free_port()
        env_file = work / "asrserve.env"
        env_file.write_text(
            f"ASRSERVE_API_KEY={self.key}\nASRSERVE_LOG_FORMAT=json\n"
            "ASRSERVE_SHUTDOWN_GRACE_S=30\nASRSERVE_LEASE_S=5\n"
        )
        # The checks start the stopped workers themselves: a restart policy would restart
        # them first, and `podman wait` would never see the drained one's exit.
        self.override = work / "compose.override.yaml"
        self.override.write_text('services:\n  worker:\n    restart: "no"\n')
        admin = work / "admin-key"
        admin.write_text(f"asr_{secrets.token_hex(24)}\n")
        redis_password = work / "redis-password"
        redis_password.write_text(f"{secrets.token_hex(24)}\n")
        self.env = {
            **os.environ,
            "ASRSERVE_IMAGE": image,
            "REDIS_IMAGE": redis_image,
            "ASRSERVE_ENV_FILE": str(env_file),
            "ASRSERVE_ADMIN_KEY_FILE": str(admin),
            "ASRSERVE_REDIS_PASSWORD_FILE": str(redis_password),
            "ASRSERVE_PUBLISH": f"127.0.0.1:{self.port}",
            "ASRSERVE_WYOMING_PUBLISH": f"127.0.0.1:{self.wyoming_port}",
        }
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = httpx.Client(
            base_url=self.url, headers={"Authorization": f"Bearer {self.key}"}, timeout=60
        )

    def compose(self, *args: str) -> None:
        command = [sys.executable, "-m", "podman_compose", "-p", PROJECT,
                   "-f", str(ROOT / "deploy" / "compose.yaml"), "-f", str(self.override),
                   *args]  # fmt: skip
        subprocess.run(command, check=True, env=self.env, capture_output=True, text=True)

    def containers(self, service: str) -> list[str]:
        names = podman("ps", "--all", "--format", "{{.Names}}",
                       "--filter", f"label=io.podman.compose.project={PROJECT}",
                       "--filter", f"label=com.docker.compose.service={service}")  # fmt: skip
        return sorted(names.split())

    def job(self, job_id: str, wait: float = 0) -> dict[str, object]:
        """The job, after a long poll of ``wait`` seconds; the client waits longer than the
        server may, so that a slow answer is the server's, never the client's timeout."""
        answer = self.http.get(f"/v1/jobs/{job_id}?wait={wait}", timeout=wait + 30)
        body: dict[str, object] = answer.json()
        return body

    def statuses(self, ids: list[str]) -> dict[str, str]:
        return {i: str(self.job(i)["status"]) for i in ids}


def records(log: str) -> Iterator[dict[str, object]]:
    """The JSON log records in a container's output (other lines skipped)."""
    for line in log.splitlines():
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            continue


def logged(log: str) -> Counter[str]:
    """How often a worker's JSON log records storing each job's result."""
    done: Counter[str] = Counter()
    for record in records(log):
        if record.get("msg") == "job succeeded" and "job_id" in record:
            done[str(record["job_id"])] += 1
    return done


def stored_while_draining(log: str) -> int:
    """Jobs a worker stored between its first "stopping: draining" and "stopped" lines."""
    stored, draining = 0, False
    for record in records(log):
        message = str(record.get("msg", ""))
        if "stopping: draining" in message:
            draining = True
        elif draining and message.startswith("worker node") and message.endswith("stopped"):
            return stored
        elif draining and message == "job succeeded":
            stored += 1
    return stored


def probe_times(stack: Stack, workers: list[str]) -> list[float]:
    """Seconds each /healthz took: the API node's, then each worker's probe server."""
    started = time.monotonic()
    stack.http.get("/healthz", timeout=1.0).raise_for_status()
    times = [time.monotonic() - started]
    probe = (
        "import time, urllib.request; t = time.monotonic(); "
        "urllib.request.urlopen('http://127.0.0.1:9100/healthz', timeout=1); "
        "print(time.monotonic() - t)"
    )
    times += [float(podman("exec", name, "python3", "-c", probe)) for name in workers]
    return times


def compose_stack(image: str, redis_image: str, work: Path) -> None:
    print("2-4. the compose stack: Redis + API + 2 workers")
    stack = Stack(image, redis_image, work)
    stack.compose("down", "--volumes")
    stack.compose("up", "-d", "--scale", "worker=2", "redis", "api", "worker")
    try:
        run_stack(stack, long_clip(work / "long.wav", 3))
    except BaseException:
        for name in stack.containers("api") + stack.containers("worker"):
            print(f"--- {name}\n" + "\n".join(logs(name).splitlines()[-30:]), file=sys.stderr)
        raise
    finally:
        stack.compose("down", "--volumes", "--timeout", "5")
        # a worker that the check killed may be restarted by its policy while the stack goes
        # down (``unless-stopped``), and outlive ``down``: remove what is left of the stack
        for service in ("api", "worker", "redis"):
            for name in stack.containers(service):
                podman("rm", "--force", name)
    left = [name for service in ("api", "worker", "redis") for name in stack.containers(service)]
    check(not left, f"nothing of the stack is left running: {left}")  # after a passing run


def run_stack(stack: Stack, audio: bytes) -> None:
    wait_for(lambda: answers(f"{stack.url}/readyz"), 180, "the API node's /readyz")
    ping = ["podman", "exec", stack.containers("redis")[0], "redis-cli", "ping"]
    done = subprocess.run(ping, capture_output=True, text=True)
    refused = (done.stdout + done.stderr).strip()
    check("NOAUTH" in refused, f"Redis refuses a client without the password: {refused}")
    workers = stack.containers("worker")
    check(len(workers) == 2, f"two worker containers: {workers}")
    ready = "python3 -c \"import urllib.request; urllib.request.urlopen('http://127.0.0.1:9100/readyz')\""
    wait_for(
        lambda: all(subprocess.run(["podman", "exec", w, "sh", "-c", ready],
                                   capture_output=True).returncode == 0 for w in workers),
        180, "both workers' /readyz",
    )  # fmt: skip
    answers_ = [
        stack.http.post(
            "/v1/jobs", files={"file": (f"clip{n}.wav", audio, "audio/wav")},
            data={"model": "tiny.en"},
        )
        for n in range(JOBS)
    ]  # fmt: skip
    check([a.status_code for a in answers_] == [202] * JOBS, f"{JOBS} jobs accepted (202)")
    ids = [str(a.json()["id"]) for a in answers_]

    def both_busy() -> bool:
        return list(stack.statuses(ids).values()).count("running") >= 2

    wait_for(both_busy, 120, "both workers running jobs")
    times = probe_times(stack, workers)
    check(max(times) < 1.0, f"/healthz within 1 s under load: {[f'{t:.3f}' for t in times]}")

    doomed, drained = workers
    podman("kill", "--signal", "KILL", doomed)
    running = {i for i, s in stack.statuses(ids).items() if s == "running"}
    before_kill = logs(doomed)
    check(bool(running), f"jobs in flight at the kill: {len(running)}")
    # "job succeeded" is logged after the store: a job still running in the store has no
    # such record (a record would mean a store the job's status does not show)
    check(not running & set(logged(before_kill)),
          "the killed worker logged no result for a job the store shows running")  # fmt: skip

    # Mid-work: the drained worker has finished a forward pass, and its jobs are not done.
    wait_for(lambda: '"msg": "batch"' in logs(drained), 120, "a batch on the other worker")
    started = time.monotonic()
    podman("kill", "--signal", "TERM", drained)
    code = int(podman("wait", drained))
    drain_s = time.monotonic() - started
    grace = f"grace {STOP_GRACE_S:.0f} s"
    check(code == 0 and drain_s < STOP_GRACE_S,
          f"the drained worker exited {code} in {drain_s:.1f} s ({grace})")  # fmt: skip
    finished = stored_while_draining(logs(drained))
    check(finished > 0, f"the drained worker finished {finished} in-flight jobs before exiting")
    podman("start", doomed, drained)

    left = [i for i, s in stack.statuses(ids).items() if s in ("queued", "running")]
    check(bool(left), f"work still queued for the Redis restart: {len(left)} jobs")
    podman("restart", "--time", "10", stack.containers("redis")[0])
    wait_for(lambda: answers(f"{stack.url}/readyz"), 60, "the API node's /readyz after Redis")

    finals: dict[str, dict[str, object]] = {}
    lags: dict[str, float] = {}
    for i in ids:  # each long poll answers as its job ends, not at its wait's end
        asked = time.time()
        finals[i] = stack.job(i, wait=120)
        ended = finals[i].get("finished_at")
        if isinstance(ended, float) and ended > asked:
            lags[i] = time.time() - ended
    longest = max(lags.values(), default=0.0)
    check(longest < WAKE_LAG_S,
          f"long polls answered within {WAKE_LAG_S:.0f} s of their jobs' ends after the Redis"
          f" restart (the longest {longest:.2f} s of {len(lags)})")  # fmt: skip
    deadline = time.monotonic() + 600
    while any(j["status"] != "succeeded" for j in finals.values()):
        if time.monotonic() > deadline or any(j["status"] == "failed" for j in finals.values()):
            now = {i: j["status"] for i, j in finals.items()}
            raise CheckFailed(f"jobs not succeeded: {now}")
        finals = {i: j if j["status"] == "succeeded" else stack.job(i, wait=60)
                  for i, j in finals.items()}  # fmt: skip
    statuses = {str(j["status"]) for j in finals.values()}
    check(statuses == {"succeeded"} and len(finals) == JOBS,
          f"all {JOBS} jobs succeeded after the kill, the drain and the Redis restart")  # fmt: skip
    texts = [str(j["result"]["text"]).lower() for j in finals.values()]  # type: ignore[index]
    check(all(JFK_WORDS in t for t in texts), "every transcript is jfk's")

    after_kill = logs(doomed)[len(before_kill) :]
    counts = logged(logs(drained)) + logged(after_kill)
    counts += Counter({j: n for j, n in logged(before_kill).items() if j not in running})
    check(set(counts) == set(ids) and set(counts.values()) == {1},
          f"every job's result logged as stored exactly once (one 'job succeeded' record a job,"
          f" over both workers): {dict(Counter(counts.values()))}")  # fmt: skip
    # last, so that its job is not among the records counted above
    heard = asyncio.run(wyoming_transcript(stack.wyoming_port, jfk_pcm().tobytes())).lower()
    check(JFK_WORDS in heard, f"Wyoming on the API node's port: a worker's transcript: {heard!r}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="localhost/asrserve:test")
    parser.add_argument("--redis-image", default="docker.io/library/redis:7.4-bookworm")
    args = parser.parse_args()
    try:
        image_alone(args.image)
        with tempfile.TemporaryDirectory() as work:
            compose_stack(args.image, args.redis_image, Path(work))
    except (CheckFailed, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or ""
        print(f"image checks FAILED: {exc} {detail}", file=sys.stderr)
        return 1
    print("image checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
