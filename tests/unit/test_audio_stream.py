"""Decoding, speech detection and windows a block at a time (memory bounded by design)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from faster_whisper.vad import VadOptions, get_speech_timestamps

from asrserve.audio import pcm as pcm_module
from asrserve.audio.decode import MAX_FRAME_S, decode, stream
from asrserve.audio.features import VAD, decode_audio
from asrserve.audio.pcm import CHECK_BYTES, IN_MEMORY_BYTES, Pcm
from asrserve.audio.vad import SpeechDetector
from asrserve.bench.corpus import write_wav
from asrserve.drivers.disk import DISK_RESERVE_BYTES
from asrserve.errors import StorageFull
from tests.support.servers import REAL_SPEECH


@pytest.fixture(scope="module")
def speech() -> np.ndarray:
    """Real speech with pauses of every length between its pieces: 101 s."""
    jfk = decode(REAL_SPEECH / "jfk.flac", 3600)
    pause = np.zeros(16000 * 3, dtype=np.float32)
    gap = np.zeros(16000 * 40, dtype=np.float32)
    return np.concatenate([jfk, pause, jfk, jfk[:50_000], gap, jfk, jfk, jfk])


@pytest.mark.parametrize("block", [1000, 16000 * 7 + 3, 10**7])
def test_streamed_speech_regions_are_faster_whispers(speech: np.ndarray, block: int) -> None:
    """Fed in blocks of any size, the detector finds exactly the regions faster-whisper
    finds over the whole array at once."""
    expected = get_speech_timestamps(
        speech, VadOptions(max_speech_duration_s=30, min_silence_duration_ms=160)
    )
    detector = SpeechDetector(VAD)
    for start in range(0, speech.shape[0], block):
        detector.feed(speech[start : start + block])
    assert detector.finish() == expected
    assert len(expected) == 26


def test_a_low_sample_rate_never_decodes_more_than_a_frame_bound_at_once(tmp_path: Path) -> None:
    """A 1 Hz WAV (3 h in 21 KB): each block stays within MAX_FRAME_S of 16 kHz audio."""
    rng = np.random.default_rng(1)
    path = tmp_path / "slow.wav"
    write_wav(path, rng.normal(0, 1000, 10_800).astype(np.int16), rate=1)
    sizes = [block.shape[0] for block in stream(path, 4 * 3600)]
    assert sum(sizes) == 3 * 3600 * 16000
    assert max(sizes) <= (MAX_FRAME_S + 0.01) * 16000 * 2


def test_decoded_audio_spills_to_an_unnamed_file_and_reads_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pcm_module, "IN_MEMORY_BYTES", 64_000)  # 2 s in memory, the rest on disk
    rng = np.random.default_rng(2)
    samples = rng.integers(-20_000, 20_000, 16000 * 10).astype(np.int16)
    folder = tmp_path / "spool"
    folder.mkdir()
    pcm = Pcm(folder)
    for start in range(0, samples.shape[0], 5000):
        pcm.append(samples[start : start + 5000])
    assert pcm.samples == samples.shape[0]
    np.testing.assert_array_equal(pcm.read(70_000, 90_000), samples[70_000:90_000] / 32768.0)
    assert list(folder.iterdir()) == []  # unnamed: nothing to leave behind after a crash
    pcm.close()


def test_decode_audio_finds_the_windows_of_real_speech(tmp_path: Path, speech: np.ndarray) -> None:
    path = tmp_path / "speech.wav"
    write_wav(path, (speech * 32767).astype(np.int16), rate=16000)
    decoded = decode_audio(path, max_seconds=3600, vad=True, folder=tmp_path)
    try:
        spans = decoded.layout.spans
        assert decoded.duration == pytest.approx(speech.shape[0] / 16000)
        assert all(span.duration <= 30.0 for span in spans)
        covered = sum(end - start for span in spans for start, end in span.pieces)
        regions = decoded.layout.speech
        assert covered == sum(region["end"] - region["start"] for region in regions)
        assert [span.offset for span in spans] == pytest.approx(
            np.cumsum([0.0] + [span.duration for span in spans[:-1]]).tolist()
        )
    finally:
        decoded.close()


def test_decoded_audio_spills_to_the_spool_only_beyond_the_reserve(tmp_path: Path) -> None:
    """The spool grows while the data dir keeps its reserve free (checked each MiB, on a
    disk the spool alone fills); the append that would eat into it raises StorageFull, and
    what was held stays readable. Audio held in memory is never checked."""
    empty = DISK_RESERVE_BYTES + IN_MEMORY_BYTES + 3 * CHECK_BYTES  # free before the spool
    checks = 0

    def room(folder: Path) -> int:
        nonlocal checks
        checks += 1
        held = pcm.samples * 2
        return empty - (held if held > IN_MEMORY_BYTES else 0)

    pcm = Pcm(tmp_path, free=room)
    second = np.ones(16_000, dtype=np.int16)  # 32,000 bytes
    while pcm.samples * 2 + 32_000 <= IN_MEMORY_BYTES:
        pcm.append(second)
    assert checks == 0
    with pytest.raises(StorageFull):
        for _ in range(10 * CHECK_BYTES // 32_000):
            pcm.append(second)
    assert IN_MEMORY_BYTES < pcm.samples * 2 <= empty - DISK_RESERVE_BYTES
    assert checks == 3
    assert pcm.read(0, 16_000).tolist() == (second / 32768.0).astype(np.float32).tolist()
    pcm.close()
