"""The hostile soak (``asrserve bench hostile SECONDS``): two tenants on one server, auth
on. The honest tenant runs the bench's closed loop (synchronous transcriptions) alone, then
again while the other tenant attacks with every item of the second hostile review at once:

- ``flood``: async jobs resubmitted as they finish, as many as its queue share allows;
- ``webhooks``: those jobs call back a receiver that trickles a byte every 8 s;
- ``events``: an event stream held open on each of its jobs, up to its share;
- ``live``: its share of live sessions, held silent until the idle timeout, reopened;
- ``speech``: two live sessions without turn detection, speech streamed into each at real
  time and committed every 25 s, so each asks for an interim decode of its whole open turn
  every second (issue 42's finding: 14.5× an honest key's p95);
- ``batches``: files of 8 MiB of blank lines and one request, batched over and over, and
  2000-line batches created and cancelled;
- ``tags``: MP3s behind 135 MB of cover pictures (refused by the probe, 413);
- ``loops``: synchronous transcriptions of 60 s of one sentence said over and over (a
  corpus file's first 3 s, tiled), which Whisper loops on at temperature 0, so each of its
  windows runs the whole fallback ladder (issue 42: 5× the device time of other audio).

The report gives the honest tenant's p95 both ways and their ratio (the target: 1.5×),
and what each attack was answered (status counts): a test would time it, this measures it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import multiprocessing
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from multiprocessing.synchronize import Event as EventType
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from asrserve.bench.load import AudioFile, LoadResult, Pattern, run_load
from asrserve.cli.server_process import ServerProcess, free_port

FIELDS = {"model": "whisper-1", "response_format": "json"}
TRICKLE_S = 8.0  # the slow receiver's pace: a byte this often
IDLE_S = 10.0  # the server's live idle timeout in this scenario
EVENT_STREAMS = 8  # held open at once
LIVE_SESSIONS = 16  # at once: a quarter of the default ASRSERVE_LIVE_MAX_SESSIONS
SPEAKING_SESSIONS = 2  # streaming speech at once
COMMIT_S = 25.0  # a speaking session commits its buffer this often (under the 29 s limit)
FRAME_S = 0.1  # audio sent per append
# flood's jobs call the trickle back
ATTACKS = ("flood", "events", "live", "speech", "batches", "tags", "loops")
LOOP_SENTENCE_S = 3.0  # the start of a corpus file, tiled
LOOP_TILES = 20


def with_pictures(mp3: bytes, pictures: int, picture_bytes: int) -> bytes:
    """``mp3`` behind an ID3v2.3 tag of ``pictures`` APIC frames, each ``picture_bytes`` of
    "JPEG" (a JPEG marker, then zeros): metadata FFmpeg holds in memory once it opens it."""

    def frame(number: int) -> bytes:
        body = b"\x00image/jpeg\x00\x03" + f"cover {number}".encode() + b"\x00"
        body += b"\xff\xd8\xff" + bytes(picture_bytes)
        return b"APIC" + struct.pack(">I", len(body)) + b"\x00\x00" + body

    frames = b"".join(frame(number) for number in range(pictures))
    size = len(frames)  # ID3v2's "synchsafe" size: 7 bits a byte
    synchsafe = bytes((size >> shift) & 0x7F for shift in (21, 14, 7, 0))
    return b"ID3\x03\x00\x00" + synchsafe + frames + mp3


def new_key(data_dir: Path, name: str) -> str:
    command = [sys.executable, "-m", "asrserve.cli", "keys", "create", "--name", name]
    done = subprocess.run(
        [*command, "--data-dir", str(data_dir)], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


class Attacker:
    """Every attack as a loop of its own, each answer counted by attack and status."""

    def __init__(
        self, url: str, key: str, files: list[AudioFile], hook_url: str, attacks: Sequence[str]
    ) -> None:
        self.url, self.files, self.hook_url, self.chosen = url, files, hook_url, set(attacks)
        self.headers = {"Authorization": f"Bearer {key}"}
        self.answers: Counter[str] = Counter()
        self._jobs: asyncio.Queue[str] = asyncio.Queue()
        self._heavy: bytes | None = None
        self._looping: bytes | None = None

    async def run(self, stop: asyncio.Event) -> None:
        every: list[Callable[[httpx.AsyncClient], Awaitable[None]]] = [
            self.flood,
            *[self.events] * EVENT_STREAMS,
            *[self.live] * LIVE_SESSIONS,
            *[self.speech] * SPEAKING_SESSIONS,
            self.batches,
            self.tags,
            self.loops,
        ]
        attacks = [attack for attack in every if attack.__name__ in self.chosen]
        async with httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=60) as c:
            tasks = [asyncio.create_task(self._forever(attack, c)) for attack in attacks]
            await stop.wait()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _forever(
        self, attack: Callable[[httpx.AsyncClient], Awaitable[None]], client: httpx.AsyncClient
    ) -> None:
        while True:
            try:
                await attack(client)
            except (httpx.HTTPError, OSError) as exc:
                self.answers[f"{attack.__name__} {type(exc).__name__}"] += 1
                await asyncio.sleep(0.5)  # a refused connection: try again, not in a spin

    def _count(self, attack: str, response: httpx.Response) -> httpx.Response:
        self.answers[f"{attack} {response.status_code}"] += 1
        return response

    async def flood(self, client: httpx.AsyncClient) -> None:
        """The longest file as an async job with a slow callback, again when refused."""
        longest = max(self.files, key=lambda f: f.duration)
        files = {"file": (longest.path.name, longest.data)}
        data = {**FIELDS, "callback_url": self.hook_url}
        response = self._count("flood", await client.post("/v1/jobs", files=files, data=data))
        if response.status_code == 202:
            await self._jobs.put(response.json()["id"])
        else:
            await asyncio.sleep(0.2)  # 429: its share is full; its jobs finishing make room

    async def events(self, client: httpx.AsyncClient) -> None:
        job_id = await self._jobs.get()
        async with client.stream("GET", f"/v1/jobs/{job_id}/events", timeout=None) as response:
            self._count("events", response)
            async for _ in response.aiter_bytes():
                pass

    async def live(self, client: httpx.AsyncClient) -> None:
        from websockets.asyncio.client import connect

        url = self.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
        async with connect(url, additional_headers=self.headers) as ws:
            async for message in ws:  # silent: the server closes it after its idle timeout
                event = json.loads(message)
                if event["type"] == "error":
                    self.answers[f"live {event['error']['code']}"] += 1
        await asyncio.sleep(0.1)  # then open the next: a reconnect pace, not a wait on state

    async def speech(self, client: httpx.AsyncClient) -> None:
        """A session without turn detection, the corpus spoken into it at real time (16 kHz
        PCM), its buffer committed every COMMIT_S."""
        from websockets.asyncio.client import connect

        url = self.url.replace("http://", "ws://") + "/v1/realtime?intent=transcription"
        pcm = _speech_pcm(self.files)
        step = int(16_000 * FRAME_S) * 2
        audio_input = {"format": {"type": "audio/pcm", "rate": 16_000}, "turn_detection": None}
        update = {"type": "transcription", "audio": {"input": audio_input}}
        async with connect(url, additional_headers=self.headers, max_queue=None) as ws:
            await ws.send(json.dumps({"type": "session.update", "session": update}))
            reading = asyncio.create_task(self._read_live(ws))
            started, sent, committed = time.monotonic(), 0.0, 0.0
            try:
                for at in itertools.cycle(range(0, len(pcm) - step, step)):
                    chunk = base64.b64encode(pcm[at : at + step]).decode()
                    await ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
                    sent += FRAME_S
                    if sent - committed >= COMMIT_S:
                        await ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
                        committed = sent
                    await asyncio.sleep(max(0.0, started + sent - time.monotonic()))  # real time
            finally:
                reading.cancel()

    async def _read_live(self, ws: Any) -> None:
        async for message in ws:
            event = json.loads(message)
            kind = event["type"]
            if kind == "error":
                self.answers[f"speech {event['error']['code']}"] += 1
            elif kind.endswith("transcription.completed"):
                self.answers["speech turns completed"] += 1
            elif kind.endswith("transcription.failed"):
                self.answers[f"speech turns failed: {event['error']['code']}"] += 1

    async def batches(self, client: httpx.AsyncClient) -> None:
        audio = self.files[0]
        upload = {"file": (audio.path.name, audio.data)}
        stored = await client.post("/v1/files", files=upload, data={"purpose": "audio"})
        audio_id = self._count("batches-audio", stored).json()["id"]
        request = {"file": audio_id, **FIELDS}
        entry = {"custom_id": "x", "method": "POST", "url": "/v1/audio/transcriptions"}
        line = json.dumps({**entry, "body": request})
        blank = b"\n" * (8 * 2**20) + line.encode()
        many = "\n".join(line.replace('"x"', f'"x{n}"') for n in range(2000)).encode()
        for name, content in (("blank", blank), ("many", many)):
            files = {"file": (f"{name}.jsonl", content)}
            posted = await client.post("/v1/files", files=files, data={"purpose": "batch"})
            body = {
                "input_file_id": self._count("batches-file", posted).json()["id"],
                "endpoint": "/v1/audio/transcriptions",
                "completion_window": "24h",
            }
            batch = self._count(f"batches-{name}", await client.post("/v1/batches", json=body))
            if name == "many" and batch.status_code == 200:
                cancel = await client.post(f"/v1/batches/{batch.json()['id']}/cancel")
                self._count("batches-cancel", cancel)
        await asyncio.sleep(1.0)  # a round a second: 8 MiB of files each, not the whole disk

    async def tags(self, client: httpx.AsyncClient) -> None:
        if self._heavy is None:  # built once: the attacker's own work is not what is measured
            self._heavy = with_pictures(_silent_mp3(), 3, 45 * 1000 * 1000)
        files = {"file": ("cover.mp3", self._heavy)}
        self._count("tags", await client.post("/v1/jobs", files=files, data=FIELDS))

    async def loops(self, client: httpx.AsyncClient) -> None:
        if self._looping is None:
            self._looping = _looping_wav(self.files[0])
        files = {"file": ("loop.wav", self._looping)}
        route = "/v1/audio/transcriptions"
        self._count("loops", await client.post(route, files=files, data=FIELDS, timeout=None))


class Trickle:
    """A webhook receiver that answers one byte every :data:`TRICKLE_S` s, for ever."""

    def __init__(self) -> None:
        self.port = free_port()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Trickle:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # cancelled when the receiver closes: that ends the answer, as a hang-up would
        with contextlib.suppress(OSError, asyncio.CancelledError):
            await reader.readuntil(b"\r\n\r\n")
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
            while True:
                writer.write(b".")
                await writer.drain()
                await asyncio.sleep(TRICKLE_S)  # the receiver's own slowness: what it attacks


def _speech_pcm(files: Sequence[AudioFile]) -> bytes:
    """The files' speech, one after another, as 16 kHz 16-bit PCM."""
    from asrserve.audio.decode import decode

    samples = np.concatenate([decode(f.path, 3600.0) for f in files])
    pcm: bytes = (np.clip(samples, -1.0, 1.0) * 32767).astype("<i2").tobytes()
    return pcm


def _looping_wav(audio: AudioFile) -> bytes:
    """The first :data:`LOOP_SENTENCE_S` of ``audio``, :data:`LOOP_TILES` times over, as
    16 kHz 16-bit WAV."""
    import io
    import wave

    from asrserve.audio.decode import decode

    sentence = decode(audio.path, 3600.0)[: int(16_000 * LOOP_SENTENCE_S)]
    samples = np.tile(np.clip(sentence, -1.0, 1.0), LOOP_TILES)
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes((samples * 32767).astype("<i2").tobytes())
    return buffer.getvalue()


def _silent_mp3() -> bytes:
    import io

    import av
    import numpy as np

    buffer = io.BytesIO()
    with av.open(buffer, "w", format="mp3") as out:
        stream = out.add_stream("libmp3lame", rate=16_000, layout="mono")
        frame = av.AudioFrame.from_ndarray(
            np.zeros((1, 16_000), dtype=np.float32), format="flt", layout="mono"
        )
        frame.sample_rate = 16_000
        for piece in (frame, None):
            for packet in stream.encode(piece):
                out.mux(packet)
    return buffer.getvalue()


async def _honest(url: str, key: str, files: list[AudioFile], pattern: Pattern) -> LoadResult:
    return await run_load(url, files, pattern, FIELDS, headers={"Authorization": f"Bearer {key}"})


def _attack(
    url: str,
    key: str,
    files: list[AudioFile],
    attacks: Sequence[str],
    stop: EventType,
    answers: Connection,
) -> None:
    """The attacker's process: every attack until ``stop`` is set, then its answers."""

    async def attack() -> Counter[str]:
        async with Trickle() as trickle:
            attacker = Attacker(url, key, files, f"http://127.0.0.1:{trickle.port}/hook", attacks)
            stopping = asyncio.Event()
            attacking = asyncio.create_task(attacker.run(stopping))
            await asyncio.to_thread(stop.wait)
            stopping.set()
            await attacking
        return attacker.answers

    answers.send(dict(asyncio.run(attack())))


async def _attacked(
    url: str,
    keys: tuple[str, str],
    files: list[AudioFile],
    pattern: Pattern,
    attacks: Sequence[str],
) -> tuple[LoadResult, Counter[str]]:
    """The honest loop while another process attacks: the attacker's own client work
    (building 135 MB uploads, its event loop) is not the honest client's, as it would not
    be on another machine; the two still share this machine's cores with the server."""
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    receive, send = context.Pipe(duplex=False)
    args = (url, keys[1], files, list(attacks), stop, send)
    attacker = context.Process(target=_attack, args=args, name="attacker")
    attacker.start()
    try:
        await asyncio.sleep(10.0)  # the attacks in full swing before the honest loop starts
        result = await _honest(url, keys[0], files, pattern)
    finally:
        stop.set()
    answers = await asyncio.to_thread(_answers, receive, attacker)
    attacker.join()
    return result, Counter(answers)


def _answers(receive: Connection, attacker: BaseProcess) -> dict[str, int]:
    """What the attacker process sends once stopped, or an error if it died first."""
    while not receive.poll(1.0):  # a bounded wait, to notice a dead process
        if not attacker.is_alive():
            raise RuntimeError(f"the attacker process exited ({attacker.exitcode}) early")
    answers: dict[str, int] = receive.recv()
    return answers


def measure_hostile(
    files: list[AudioFile], seconds: float, env: dict[str, str], attacks: Sequence[str] = ATTACKS
) -> dict[str, Any]:
    """The honest tenant's closed loop alone, then under ``attacks``, on one server."""
    with tempfile.TemporaryDirectory(prefix="asrserve-hostile-") as tmp:
        data = Path(tmp) / "data"
        data.mkdir()
        keys = (new_key(data, "honest"), new_key(data, "attacker"))
        server_env = {
            **env,
            "ASRSERVE_AUTH": "on",
            "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1",
            "ASRSERVE_LIVE_IDLE_TIMEOUT_S": str(IDLE_S),
        }
        server = ServerProcess(data, server_env).start(timeout=120)
        try:
            warm = Pattern(requests=2, concurrency=1)
            asyncio.run(_honest(server.url, keys[0], files, warm))
            mean = sum(f.duration for f in files) / len(files)
            pattern = Pattern(requests=max(8, int(seconds / mean) * 2), concurrency=2)
            alone = asyncio.run(_honest(server.url, keys[0], files, pattern))
            started = time.monotonic()
            attacked, answers = asyncio.run(_attacked(server.url, keys, files, pattern, attacks))
            wall = time.monotonic() - started
        finally:
            server.stop()
    p95_alone, p95_attacked = alone.percentile(95), attacked.percentile(95)
    return {
        "requests": pattern.requests,
        "clients": pattern.concurrency,
        "alone": {"p50_s": alone.percentile(50), "p95_s": p95_alone, "ok": len(alone.ok)},
        "attacked": {
            "p50_s": attacked.percentile(50),
            "p95_s": p95_attacked,
            "ok": len(attacked.ok),
            "wall_s": wall,
        },
        "p95_ratio": p95_attacked / p95_alone,
        "attacks_run": list(attacks),
        "target_ratio": 1.5,
        "attacks": dict(sorted(answers.items())),
    }


def hostile_report(body: dict[str, Any]) -> str:
    alone, attacked = body["alone"], body["attacked"]
    lines = [
        f"honest tenant: {body['requests']} sync requests, {body['clients']} clients",
        f"  alone:          p50 {alone['p50_s']:.2f} s, p95 {alone['p95_s']:.2f} s"
        f" ({alone['ok']} ok)",
        f"  under attack:   p50 {attacked['p50_s']:.2f} s, p95 {attacked['p95_s']:.2f} s"
        f" ({attacked['ok']} ok)",
        f"  p95 ratio {body['p95_ratio']:.2f}× (target ≤ {body['target_ratio']}×)",
        "attacker's answers:",
        *(f"  {name}: {count}" for name, count in body["attacks"].items()),
    ]
    return "\n".join(lines)
