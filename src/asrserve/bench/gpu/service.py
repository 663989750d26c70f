"""The service: ``asrserve serve`` on the transformers engine under many clients, and its
WER on every language of the recordings it speaks.

One server per model and batching policy (the bench's :class:`ServerProcess`, its load
generator :func:`run_load`). ``clients`` closed-loop clients send the English recordings
over and over (``rounds`` requests each), after one request that loads everything; then one
client sends each English recording once (a lone request's latency); then each language's
recordings are sent once, with their language named, and their answers scored. The check
runs the first model under ``unbatched`` too, beside the default: on a GPU, what batching
adds to the same service (issue 44's comparison, which a 2-core CPU cannot settle).
While it runs, the server's own NVML gauge (``asrserve_gpu_memory_used_bytes`` in
``/metrics``, the whole device's memory in use) is read twice a second for its peak.

What the judgements read (``judge.py``): the lone client's answer for each English
recording, and the engine's own for it once the server has stopped (the server's settings
in this process, each file through ``asrserve transcribe``'s path: the same windows, a
batch of one); and the answer to ten seconds of silence (zeros, made here as a WAV).
"""

from __future__ import annotations

import asyncio
import io
import os
import re
import shutil
import threading
import wave
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from asrserve.bench.gpu.clips import Clip
from asrserve.bench.load import AudioFile, LoadResult, Pattern, run_load
from asrserve.bench.runner import scheduler_delta
from asrserve.bench.wer import normalize, wer
from asrserve.cli.server_process import ServerProcess
from asrserve.engine.loading import vocabulary_size
from asrserve.engine.model_dirs import MULTILINGUAL_VOCABULARY

GPU_MEMORY = re.compile(r"^asrserve_gpu_memory_used_bytes\{[^}]*\} (\S+)$", re.MULTILINE)
SAMPLE_S = 0.5
START_S = 240.0  # imports, the model's conversion and load
SILENCE_S = 10.0
RATE = 16_000


@dataclass(frozen=True)
class ServiceSpec:
    model_dir: Path
    model_id: str
    device: str
    dtype: str
    clients: int
    rounds: int  # requests per client
    clips: list[Clip]
    cache: Path
    data: Path  # the server's data directory
    log: Path  # where its log is copied once it stops
    beam_size: int
    policy: str = "greedy"  # ASRSERVE_BATCH_POLICY


def server_env(spec: ServiceSpec) -> dict[str, str]:
    """The server's settings: the transformers engine on the device, the batch as wide as
    the clients, and no per-address upload limit below them (the clients share one)."""
    return {
        "ASRSERVE_ENGINE": "transformers",
        "ASRSERVE_DEVICE": spec.device,
        "ASRSERVE_COMPUTE_TYPE": spec.dtype,
        "ASRSERVE_MODELS": str(spec.model_dir),
        "ASRSERVE_MODEL_CACHE_DIR": str(spec.cache),
        "ASRSERVE_OFFLINE": "true",
        "ASRSERVE_BEAM_SIZE": str(spec.beam_size),
        "ASRSERVE_BATCH_POLICY": spec.policy,
        "ASRSERVE_MAX_BATCH_SIZE": str(max(spec.clients, 1)),
        "ASRSERVE_PREFETCH_JOBS": str(max(spec.clients, 32)),
        "ASRSERVE_MAX_CONCURRENT_UPLOADS": str(max(spec.clients, 64)),
        "ASRSERVE_MAX_UPLOADS_PER_KEY": str(max(spec.clients, 16)),
    }


class MemorySampler:
    """The peak of the server's GPU memory gauge, read until stopped (None: no gauge)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.peak: float | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                text = httpx.get(f"{self.url}/metrics", timeout=5).text
            except httpx.HTTPError:
                text = ""
            for value in GPU_MEMORY.findall(text):
                self.peak = max(self.peak or 0.0, float(value))
            self._stop.wait(SAMPLE_S)


def audio_files(clips: list[Clip]) -> list[AudioFile]:
    files = []
    for clip in clips:
        with wave.open(str(clip.path)) as audio:
            duration = audio.getnframes() / audio.getframerate()
        files.append(AudioFile(clip.path, duration, clip.text, clip.path.read_bytes()))
    return files


def load_row(result: LoadResult, scheduler: dict[str, Any]) -> dict[str, Any]:
    pairs = [(s.file.reference or "", s.text) for s in result.ok]
    return {
        "requests": len(result.samples),
        "errors": len(result.samples) - len(result.ok),
        "wall_s": round(result.wall, 3),
        "audio_s_per_s": round(result.audio_per_wall, 2),
        "requests_per_s": round(result.requests_per_s, 2),
        "p50_s": round(result.percentile(50), 3),
        "p95_s": round(result.percentile(95), 3),
        "mean_batch_size": scheduler.get("mean_batch_size"),
        "wer": round(wer([r for r, _ in pairs], [h for _, h in pairs]), 4) if pairs else None,
    }


def languages(spec: ServiceSpec) -> list[str]:
    """The recordings' languages the model speaks (an English-only model: English)."""
    multilingual = vocabulary_size(spec.model_dir) >= MULTILINGUAL_VOCABULARY
    found = sorted({clip.language for clip in spec.clips})
    return found if multilingual else [code for code in found if code == "en"]


def silence_file() -> AudioFile:
    """Ten seconds of zeros as a 16 kHz mono WAV, in memory."""
    data = io.BytesIO()
    with wave.open(data, "wb") as audio:
        audio.setnchannels(1)
        audio.setsampwidth(2)
        audio.setframerate(RATE)
        audio.writeframes(bytes(2 * round(SILENCE_S * RATE)))
    return AudioFile(Path("silence.wav"), SILENCE_S, "", data.getvalue())


def engine_answers(spec: ServiceSpec, answers: dict[str, str]) -> dict[str, Any]:
    """The engine's own answer for each English recording, beside the service's lone one
    (``answers``: the file's name -> its text): the server's settings in this process
    (its environment), each file as ``asrserve transcribe`` runs it."""
    from asrserve.cli.main import local_engine, local_options, transcribe_local
    from asrserve.settings import Settings

    os.environ.update(server_env(spec))
    settings = Settings()
    engine = local_engine(settings)
    options = local_options(settings, "transcribe", None)
    clips = []
    try:
        for clip in spec.clips:
            if clip.language != "en":
                continue
            text = transcribe_local(settings, engine, clip.path, options).text.strip()
            served = answers.get(clip.path.name)
            same = served is not None and normalize(served) == normalize(text)
            clips.append({"clip": clip.path.name, "service": served, "engine": text, "same": same})
    finally:
        engine.unload()
    return {"compared": "words (bench.wer.normalize)", "clips": clips}


def measure(spec: ServiceSpec) -> dict[str, Any]:
    fields = {"model": spec.model_id, "response_format": "json"}
    english = audio_files([clip for clip in spec.clips if clip.language == "en"])
    server = ServerProcess(spec.data, env=server_env(spec)).start(timeout=START_S)
    try:
        with MemorySampler(server.url) as sampler:
            asyncio.run(run_load(server.url, english[:1], Pattern(requests=1), fields))
            before = httpx.get(f"{server.url}/v1/scheduler").json()
            pattern = Pattern(requests=spec.clients * spec.rounds, concurrency=spec.clients)
            result = asyncio.run(run_load(server.url, english, pattern, fields))
            after = httpx.get(f"{server.url}/v1/scheduler").json()
            lone = Pattern(requests=len(english), concurrency=1)
            alone = asyncio.run(run_load(server.url, english, lone, fields))
            by_language = {code: language_wer(server.url, spec, code) for code in languages(spec)}
            quiet = asyncio.run(run_load(server.url, [silence_file()], Pattern(requests=1), fields))
        peak = sampler.peak
    finally:
        server.stop()
        if server.log_path is not None and server.log_path.exists():
            shutil.copyfile(server.log_path, spec.log)
    answers = {s.file.path.name: s.text for s in alone.samples if s.status == 200}
    [heard] = quiet.samples
    return {
        "model": spec.model_id,
        "policy": spec.policy,
        "env": server_env(spec),
        "clients": spec.clients,
        "load": load_row(result, scheduler_delta(before, after)),
        "lone": load_row(alone, {}),
        "wer_by_language": by_language,
        "gpu_memory_used_peak_bytes": None if peak is None else int(peak),
        "silence": {
            "seconds": SILENCE_S,
            "status": heard.status,
            "errors": int(heard.status != 200),
            "text": heard.text,  # the error's body where it failed
        },
        "engine_answers": engine_answers(spec, answers),
    }


def language_wer(url: str, spec: ServiceSpec, code: str) -> dict[str, Any]:
    """Each recording of one language sent once with its language named; the WER."""
    files = audio_files([clip for clip in spec.clips if clip.language == code])
    fields = {"model": spec.model_id, "response_format": "json", "language": code}
    pattern = Pattern(requests=len(files), concurrency=max(1, min(spec.clients, len(files))))
    result = asyncio.run(run_load(url, files, pattern, fields))
    return load_row(result, {}) | {"clips": len(files)}
