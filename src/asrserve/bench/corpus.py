"""Synthetic speech test corpus built with espeak-ng from known sentences.

Every sentence in :data:`SENTENCES` is synthesized once (espeak-ng writes
22.05 kHz mono 16-bit WAV); clips are made by concatenating the sentence audio
with :data:`GAP_SECONDS` of silence in between, so clip durations are known
exactly without re-synthesizing. Clips are then re-encoded with PyAV into a
rotating set of containers to exercise the server's audio decoding.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import random
import shutil
import subprocess
import tempfile
import wave
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import av
import numpy as np
import numpy.typing as npt
from av.audio.stream import AudioStream

__all__ = [
    "SENTENCES",
    "Clip",
    "build_corpus",
    "convert",
    "exclusive",
    "load_refs",
    "synthesize",
]

CORPUS_VERSION = "1"
"""Bump when sentences or the build recipe change, to invalidate caches."""
GAP_SECONDS = 0.6
CONTAINERS = (".wav", ".flac", ".mp3", ".ogg", ".m4a")
MIN_CLIP_S, MAX_CLIP_S, MAX_SENTENCES = 2.0, 30.0, 5

SENTENCES: tuple[str, ...] = (
    "Good morning.",
    "Please close the door.",
    "The cat is sleeping on the warm blanket.",
    "We walked home after the rain stopped.",
    "My brother likes to cook fresh pasta.",
    "The library opens at nine in the morning on weekdays.",
    "She bought apples, bread, and a small jar of honey at the market.",
    "Turn left at the old church and keep going until you see the river.",
    "The children played in the park until the sun went down.",
    "Could you send me the report before lunch?",
    "It was a quiet evening, and the streets were almost empty.",
    "The train to the city leaves from the second platform.",
    "He forgot his umbrella again, so he came back soaking wet.",
    "Our teacher asked us to read the first chapter by Friday.",
    "The coffee shop on the corner makes the best cinnamon rolls in town.",
    "A strong wind knocked over the fence in the back garden last night.",
    "When the music started, everyone in the room began to dance.",
    "The doctor told him to drink more water and get plenty of sleep.",
    "Thank you for your help.",
    "The small boat drifted slowly across the calm blue lake.",
    "My grandmother still writes letters by hand to all of her old friends.",
    "They painted the kitchen a bright shade of yellow.",
    "If you are cold, there is an extra sweater in the closet.",
    "The meeting was moved to the afternoon because the manager was late.",
    "Birds were singing in the trees outside my window.",
    "Please remember to turn off the lights when you leave the office.",
    "The museum has a new exhibit about ancient ships and the people who sailed them.",
    "I would like a cup of tea with milk.",
    "The road was closed for repairs, so we had to take a long detour through the hills.",
    "Every summer our family spends a week at a cabin near the mountains.",
    "The baker wakes up very early to make bread for the whole village.",
    "Where did you put the keys?",
    "The football match was cancelled because of heavy snow.",
    "She opened the window to let the fresh air into the room.",
    "After dinner, we sat by the fire and told stories until midnight.",
    "The garden is full of roses, tulips, and tall green grass.",
    "He practices the piano for an hour every evening before he goes to bed.",
    "The airport was crowded with travelers waiting for delayed flights.",
    "Nobody knew the answer to the last question on the test.",
    "It is going to be a long and busy day, but we will finish the work together.",
)


@dataclass(frozen=True)
class Clip:
    """One corpus audio file, its reference transcript and duration (s)."""

    path: Path
    text: str
    duration: float


def synthesize(
    text: str, out_wav: Path, *, voice: str = "en-us", speed: int = 150, gap_ms: int = 0
) -> None:
    """Synthesize *text* to *out_wav* with espeak-ng.

    *speed* is in words per minute; *gap_ms* adds a pause between words
    (espeak-ng ``-g``, which counts in 10 ms units, so it is rounded down).
    """
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise RuntimeError("espeak-ng not found on PATH; install it (apt-get install espeak-ng)")
    cmd = [exe, "-v", voice, "-s", str(speed), "-w", str(out_wav)]
    if gap_ms > 0:
        cmd += ["-g", str(gap_ms // 10)]
    subprocess.run([*cmd, "--", text], check=True, capture_output=True)


# suffix -> (container format, codec, sample format, sample rate or None=keep)
_CODECS: dict[str, tuple[str, str, str, int | None]] = {
    ".wav": ("wav", "pcm_s16le", "s16", None),
    ".flac": ("flac", "flac", "s16", None),
    ".mp3": ("mp3", "libmp3lame", "s16p", None),
    ".ogg": ("ogg", "libopus", "s16", 48000),
    ".webm": ("webm", "libopus", "s16", 48000),
    ".m4a": ("ipod", "aac", "fltp", None),
}


def convert(src_wav: Path, dst: Path) -> None:
    """Re-encode *src_wav* to mono *dst*, codec chosen by ``dst.suffix``.

    Supported: .wav (PCM s16), .flac, .mp3 (LAME), .ogg/.webm (Opus, 48 kHz),
    .m4a (AAC in an MP4/iPod container).
    """
    try:
        fmt, codec, sample_fmt, rate = _CODECS[dst.suffix.lower()]
    except KeyError:
        raise ValueError(f"unsupported output suffix {dst.suffix!r}") from None
    with av.open(str(src_wav)) as inp:
        src_rate = inp.streams.audio[0].rate
        encode(inp.decode(audio=0), str(dst), fmt, codec, sample_fmt, rate or src_rate)


def encode(
    frames: Iterable[av.AudioFrame],
    target: str | BinaryIO,
    fmt: str,
    codec: str,
    sample_fmt: str,
    rate: int,
) -> None:
    """Audio ``frames`` encoded as mono ``codec`` at ``rate`` into ``target`` (a path or a
    writable file) in container ``fmt``. No frames: the container's headers only."""
    with av.open(target, "w", format=fmt) as out:
        stream = out.add_stream(codec, rate=rate)
        assert isinstance(stream, AudioStream)
        stream.layout = "mono"
        stream.format = sample_fmt
        resampler = av.AudioResampler(
            format=sample_fmt,
            layout="mono",
            rate=rate,
            frame_size=stream.codec_context.frame_size or None,
        )
        encoded = False
        for frame in frames:
            encoded = True
            for res in resampler.resample(frame):
                out.mux(stream.encode(res))
        for res in resampler.resample(None) if encoded else ():  # flush the resampler
            out.mux(stream.encode(res))
        out.mux(stream.encode(None))


def _read_wav(path: Path) -> tuple[npt.NDArray[np.int16], int]:
    with wave.open(str(path), "rb") as w:
        return np.frombuffer(w.readframes(w.getnframes()), dtype=np.int16), w.getframerate()


def write_wav(path: Path, samples: npt.NDArray[np.int16], rate: int) -> None:
    """Mono 16-bit PCM samples as a WAV file."""
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(samples.tobytes())


def write_float_wav(path: Path, samples: npt.NDArray[np.floating], rate: int = 16000) -> Path:
    """Float samples (clipped to [-1, 1]) as a 16-bit mono WAV file at ``path``; ``path``."""
    write_wav(path, (np.clip(samples, -1.0, 1.0) * 32767).astype(np.int16), rate)
    return path


def _pick(durs: list[float], target: float, rng: random.Random) -> list[int]:
    """Pick 1-5 distinct sentence indices whose joined duration is near *target*."""
    order = rng.sample(range(len(durs)), len(durs))
    chosen: list[int] = []
    total = -GAP_SECONDS
    while len(chosen) < MAX_SENTENCES and (not chosen or target - total > 1.0):
        left = target - total - GAP_SECONDS
        slots = min(MAX_SENTENCES - len(chosen), max(1, math.ceil(left / 6.0)))
        best = min((i for i in order if i not in chosen), key=lambda i: abs(durs[i] - left / slots))
        if chosen and total + GAP_SECONDS + durs[best] > MAX_CLIP_S:
            break
        chosen.append(best)
        total += GAP_SECONDS + durs[best]
    return chosen


def _cached(out_dir: Path, params: dict[str, float]) -> list[Clip] | None:
    """Return the clips recorded in *out_dir* if that build is complete and current."""
    try:
        if (out_dir / "corpus.version").read_text().strip() != CORPUS_VERSION:
            return None
        meta = json.loads((out_dir / "clips.json").read_text(encoding="utf-8"))
        refs = load_refs(out_dir / "refs.json")
        clips = [Clip(out_dir / c["file"], c["text"], float(c["duration"])) for c in meta["clips"]]
        if meta["params"] != params or set(refs) != {c.path.name for c in clips}:
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return clips if all(c.path.is_file() for c in clips) else None


def build_corpus(
    out_dir: Path, *, n_clips: int = 12, long_clip_seconds: float = 130.0, seed: int = 0
) -> list[Clip]:
    """Build (or reuse a cached) corpus in *out_dir*; returns its clips.

    Produces *n_clips* clips of 2-30 s (1-5 sentences each, target durations
    spread evenly over the range, containers rotating through
    :data:`CONTAINERS`), then one WAV clip of at least *long_clip_seconds*.
    Writes ``refs.json`` ({filename: text}), ``clips.json`` (durations and
    build parameters) and ``corpus.version``. Deterministic for a given seed.
    """
    params: dict[str, float] = {"n_clips": n_clips, "long": long_clip_seconds, "seed": seed}
    cached = _cached(out_dir, params)
    if cached is not None:
        return cached
    with exclusive(out_dir):
        return _cached(out_dir, params) or _build(out_dir, params)


@contextlib.contextmanager
def exclusive(folder: Path) -> Iterator[None]:
    """One build of *folder* at a time, across processes (parallel test workers, two bench
    runs): the second waits for the first, then finds its build cached."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".build.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


def _build(out_dir: Path, params: dict[str, float]) -> list[Clip]:
    n_clips, long_clip_seconds = int(params["n_clips"]), params["long"]
    (out_dir / "corpus.version").unlink(missing_ok=True)
    rng = random.Random(params["seed"])
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        wavs = [tmp / f"s{i:02d}.wav" for i in range(len(SENTENCES))]
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(synthesize, SENTENCES, wavs))
        audio = [_read_wav(w) for w in wavs]
        rate = audio[0][1]
        durs = [len(a) / r for a, r in audio]
        gap = np.zeros(round(GAP_SECONDS * rate), dtype=np.int16)

        def join(idx: list[int], name: str) -> Clip:
            parts = [p for i in idx for p in (gap, audio[i][0])][1:]
            samples = np.concatenate(parts)
            src = tmp / f"{name}.src.wav"
            write_wav(src, samples, rate)
            convert(src, out_dir / name)
            text = " ".join(SENTENCES[i] for i in idx)
            return Clip(out_dir / name, text, len(samples) / rate)

        span = MAX_CLIP_S - MIN_CLIP_S - 3.0
        targets = [MIN_CLIP_S + 1.0 + span * k / max(1, n_clips - 1) for k in range(n_clips)]
        rng.shuffle(targets)
        clips = []
        for k, target in enumerate(targets):
            clip = join(_pick(durs, target, rng), f"clip_{k:02d}{CONTAINERS[k % len(CONTAINERS)]}")
            if not MIN_CLIP_S <= clip.duration <= MAX_CLIP_S:
                raise RuntimeError(f"clip {clip.path.name} is {clip.duration:.1f} s")
            clips.append(clip)
        long_idx: list[int] = []
        order: list[int] = []
        total = -GAP_SECONDS
        while total < long_clip_seconds:
            if not order:
                order = rng.sample(range(len(SENTENCES)), len(SENTENCES))
            long_idx.append(order.pop())
            total += GAP_SECONDS + durs[long_idx[-1]]
        clips.append(join(long_idx, "long_00.wav"))
    (out_dir / "refs.json").write_text(
        json.dumps({c.path.name: c.text for c in clips}, indent=1), encoding="utf-8"
    )
    meta = {
        "params": params,
        "clips": [{"file": c.path.name, "text": c.text, "duration": c.duration} for c in clips],
    }
    (out_dir / "clips.json").write_text(json.dumps(meta, indent=1), encoding="utf-8")
    (out_dir / "corpus.version").write_text(CORPUS_VERSION + "\n")
    return clips


def load_refs(path: Path) -> dict[str, str]:
    """Load a ``refs.json`` mapping of audio file name to reference text."""
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return {str(k): str(v) for k, v in data.items()}
