"""Fuzzing the intake probe and the decoder: whatever the bytes, the answer is audio within
the limits or an ``AudioError`` with a 4xx status; never another exception, never a hang,
never unbounded memory.

Inputs: random bytes, random bytes behind a real container's magic, and small real files
made here with PyAV (WAV: s16, float stereo, 6-channel 8 kHz; MP3, Ogg/Opus, FLAC, M4A,
WebM) with bit flips, byte and header-field overwrites, truncation, insertions and
deletions. Deterministic and bounded (``ASRSERVE_FUZZ_EXAMPLES`` examples, 1000 by default,
a few seconds) and no example database (Hypothesis keeps only its cache of source
constants, in ``.hypothesis/``, which it git-ignores itself).
"""

from __future__ import annotations

import functools
import os
import resource
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from asrserve.audio.decode import decode, probe
from asrserve.audio.errors import AudioError
from asrserve.errors import STATUS_OF_KIND
from tests.support.payloads import encode_bytes, wav_bytes

MAX_SECONDS = 5.0
# Deterministic (derandomized) examples; raise it for a longer hunt.
EXAMPLES = int(os.environ.get("ASRSERVE_FUZZ_EXAMPLES", "1000"))
MAX_SAMPLES = int(MAX_SECONDS * 16_000)
EXAMPLE_TIMEOUT_S = 10.0
# Python-side allocations of one probe + decode (numpy arrays included): the decoded audio
# as float32 plus its int16 parts and their join, with room to spare.
MAX_TRACED_BYTES = 16 * MAX_SAMPLES * 4
# Native (FFmpeg) memory is not traced: the process's peak RSS may not grow past this.
MAX_RSS_GROWTH = 128 * 1024 * 1024
INTERESTING_INTS = (0, 1, 2, 0x7F, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000)
MAGICS = (b"RIFF\xff\xff\xff\xffWAVEfmt ", b"fLaC", b"OggS\x00\x02", b"ID3\x04\x00", b"\xff\xfb")


def _signal(rate: int, seconds: float = 0.5) -> np.ndarray:
    """A speech-like test signal: a warbling tone with a syllable-rate envelope."""
    t = np.arange(int(rate * seconds)) / rate
    tone = np.sin(2 * np.pi * (220 + 80 * np.sin(2 * np.pi * 3 * t)) * t)
    return (0.5 * tone * (0.5 + 0.5 * np.sin(2 * np.pi * 4 * t))).astype(np.float32)


def _encode(fmt: str, codec: str, sample_fmt: str, rate: int) -> bytes:
    return encode_bytes(_signal(16_000), 16_000, fmt, codec, sample_fmt, rate)


SEEDS: dict[str, Callable[[], bytes]] = {
    "wav": lambda: wav_bytes(_signal(16_000), 16_000),
    "wav-float-stereo": lambda: wav_bytes(np.stack([_signal(44_100)] * 2, 1), 44_100, float32=True),
    "wav-6ch-8k": lambda: wav_bytes(np.stack([_signal(8_000)] * 6, 1), 8_000),
    "mp3": lambda: _encode("mp3", "libmp3lame", "s16p", 16_000),
    "ogg": lambda: _encode("ogg", "libopus", "s16", 48_000),
    "flac": lambda: _encode("flac", "flac", "s16", 16_000),
    "m4a": lambda: _encode("ipod", "aac", "fltp", 16_000),
    "webm": lambda: _encode("webm", "libopus", "s16", 48_000),
}


@functools.cache
def seed(name: str) -> bytes:
    return SEEDS[name]()


def test_seeds_decode(work_file: Path) -> None:
    """The unmutated seeds are good audio, so the mutations start from real files."""
    for name in SEEDS:
        work_file.write_bytes(seed(name))
        assert probe(work_file, MAX_SECONDS) == pytest.approx(0.5, abs=0.1), name
        assert decode(work_file, MAX_SECONDS).size == pytest.approx(8000, abs=1600), name


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    data = bytearray(seed(draw(st.sampled_from(sorted(SEEDS)))))
    for _ in range(draw(st.integers(1, 4))):
        if not data:
            break
        kind = draw(st.sampled_from(["flip", "byte", "int", "truncate", "insert", "delete"]))
        # Half the edits land in the first 64 bytes, where the headers are.
        pos = draw(st.integers(0, min(63, len(data) - 1)) | st.integers(0, len(data) - 1))
        if kind == "flip":
            data[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "byte":
            data[pos] = draw(st.integers(0, 255))
        elif kind == "int":
            value = draw(st.sampled_from(INTERESTING_INTS) | st.integers(0, 2**32 - 1))
            order: Literal["little", "big"] = draw(st.sampled_from(["little", "big"]))
            field = value.to_bytes(4, order)
            data[pos : pos + 4] = field[: len(data[pos : pos + 4])]
        elif kind == "truncate":
            del data[pos:]
        elif kind == "insert":
            data[pos:pos] = draw(st.binary(min_size=1, max_size=64))
        else:
            del data[pos : pos + draw(st.integers(1, 256))]
    return bytes(data)


PAYLOADS = st.one_of(
    st.binary(max_size=2048),
    st.tuples(st.sampled_from(MAGICS), st.binary(max_size=2048)).map(b"".join),
    mutated(),
)


def _check(path: Path) -> None:
    """The property, for probe and decode each on their own."""
    try:
        duration = probe(path, MAX_SECONDS)
    except AudioError as exc:
        assert 400 <= STATUS_OF_KIND[exc.kind] < 500, (exc.kind, exc.code, exc.message)
        assert exc.code and exc.message
    else:
        assert duration is None or 0 < duration <= MAX_SECONDS, duration
    try:
        audio = decode(path, MAX_SECONDS)
    except AudioError as exc:
        assert 400 <= STATUS_OF_KIND[exc.kind] < 500, (exc.kind, exc.code, exc.message)
        assert exc.code and exc.message
    else:
        assert audio.dtype == np.float32 and audio.ndim == 1, (audio.dtype, audio.shape)
        assert 0 < audio.size <= MAX_SAMPLES, audio.size
        assert np.isfinite(audio).all() and np.abs(audio).max() <= 1.0


def _bounded(path: Path) -> int:
    """Run the check under tracemalloc; the Python-side peak in bytes."""
    tracemalloc.start()
    try:
        _check(path)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


@pytest.fixture(scope="module")
def pool() -> Any:
    with ThreadPoolExecutor(max_workers=1) as executor:
        yield executor


@pytest.fixture(scope="module")
def work_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "upload"


@pytest.mark.timeout(240)
@settings(
    max_examples=EXAMPLES,
    deadline=None,  # the hard per-example bound is EXAMPLE_TIMEOUT_S below
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(payload=PAYLOADS)
def test_probe_and_decode_never_crash(pool: Any, work_file: Path, payload: bytes) -> None:
    work_file.write_bytes(payload)
    rss_before = _max_rss()
    future = pool.submit(_bounded, work_file)
    try:
        peak = future.result(timeout=EXAMPLE_TIMEOUT_S)
    except FutureTimeout:
        pytest.fail(f"probe/decode hung for {EXAMPLE_TIMEOUT_S} s on {payload[:64]!r}...")
    assert peak <= MAX_TRACED_BYTES, peak
    assert _max_rss() - rss_before <= MAX_RSS_GROWTH
