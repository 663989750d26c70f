"""The quality gate of adaptive encoder windows: accuracy as with Whisper's 30 s window."""

from __future__ import annotations

import dataclasses
import json
import os
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from asrserve.audio.decode import decode
from asrserve.audio.features import prepare
from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer
from asrserve.engine.base import Engine
from asrserve.inference.direct import transcribe_prepared
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import TranscriptionOptions
from tests.support.real_speech import english
from tests.support.servers import REAL_SPEECH, ROOT

pytestmark = pytest.mark.slow
ADAPTIVE = Settings().encoder_windows_s
FULL = (30.0,)


def real_speech(tmp: Path) -> list[tuple[Path, str]]:
    """jfk.flac, and each channel of the stereo file as its own clip."""
    refs = json.loads((REAL_SPEECH / "references.json").read_text())
    clips = [(REAL_SPEECH / "jfk.flac", refs["jfk.flac"])]
    for channel, side in enumerate(("left", "right")):
        samples = decode(REAL_SPEECH / "stereo_two_speakers.wav", 60, channel=channel)
        path = tmp / f"stereo_{side}.wav"
        with wave.open(str(path), "wb") as out:
            out.setnchannels(1)
            out.setsampwidth(2)
            out.setframerate(16000)
            out.writeframes((samples * 32767).astype(np.int16).tobytes())
        clips.append((path, refs[f"stereo_two_speakers.wav#{side}"]))
    return clips


def transcribe(
    engine: Engine, path: Path, windows: tuple[float, ...], options: TranscriptionOptions
) -> Transcript:
    prepared = prepare(path, engine, max_seconds=3600, vad=True, windows=windows)
    return transcribe_prepared(engine, prepared, options, batch_size=16)


def own_text(model: Any, path: Path) -> str:
    """faster-whisper's ``transcribe`` with its own defaults, beam 5 (as the service's)."""
    segments, _ = model.transcribe(str(path), beam_size=5)
    return "".join(segment.text for segment in segments).strip()


def check_timestamps(transcript: Transcript) -> None:
    starts = [s.start for s in transcript.segments]
    assert starts == sorted(starts)
    for segment in transcript.segments:
        assert 0 <= segment.start <= segment.end <= transcript.duration
        for word in segment.words or ():
            assert 0 <= word.start <= word.end <= transcript.duration


# The gate runs two corners that between them take both decoding paths (greedy and beam
# search) and both timestamp paths; ASRSERVE_TEST_SWEEPS=1 runs all four combinations.
CORNERS = [(1, False), (5, True)]
SWEEP = [(beam, words) for beam in (1, 5) for words in (False, True)]


@pytest.mark.parametrize(
    ("beam", "words"), SWEEP if os.environ.get("ASRSERVE_TEST_SWEEPS") == "1" else CORNERS
)
def test_adaptive_windows_keep_accuracy(
    engine: Engine, corpus: list[Clip], tmp_path: Path, beam: int, words: bool
) -> None:
    options = TranscriptionOptions(beam_size=beam, word_timestamps=words)
    sets = {"synthetic": [(c.path, c.text) for c in corpus], "real": real_speech(tmp_path)}
    report = {}
    for name, clips in sets.items():
        refs = [text for _, text in clips]
        scores = {}
        for label, windows in (("full", FULL), ("adaptive", ADAPTIVE)):
            transcripts = [transcribe(engine, path, windows, options) for path, _ in clips]
            for transcript in transcripts:
                check_timestamps(transcript)
            scores[label] = wer(refs, [t.text for t in transcripts])
        report[name] = scores
        print(
            f"beam {beam}, words {words}, {name}: WER full {scores['full']:.4f}, "
            f"adaptive {scores['adaptive']:.4f}"
        )
        assert abs(scores["adaptive"] - scores["full"]) <= 0.01
    out = ROOT / ".corpus" / "window-gate.json"
    results = json.loads(out.read_text()) if out.exists() else {}
    results[f"beam{beam}-words{int(words)}"] = report
    out.write_text(json.dumps(results, indent=1))


def test_a_window_that_loops_on_a_short_window_is_decoded_on_the_full_one(
    engine: Engine,
) -> None:
    """JFK's first words alone (2.8 s) on a 5 s window: Whisper tiny.en repeats them sixteen
    times there (seen while building live turns), and says them once on 30 s. The engine
    notices the repetition and decodes that window again on the full one; a chunk that asks
    for no rescue (a live interim) comes back empty instead. Each chunk goes alone: a batch
    is padded to its widest window."""
    from faster_whisper.transcribe import get_compression_ratio

    from asrserve.engine.base import ChunkInput

    audio = decode(REAL_SPEECH / "jfk.flac", 60)[int(0.02 * 16000) : int(2.8 * 16000)]
    options = TranscriptionOptions(model="tiny.en")
    short = ChunkInput(features=engine.features(audio, 500), offset=0.0, duration=2.78)
    full = ChunkInput(features=engine.features(audio, 3000), offset=0.0, duration=2.78)
    [on_short] = engine.transcribe_batch([short], options)
    [on_full] = engine.transcribe_batch([full], options)
    text = "".join(segment.text for segment in on_short)
    assert get_compression_ratio(text) <= 2.4, text
    assert text == "".join(segment.text for segment in on_full)
    assert "fellow Americans" in text
    unrescued = dataclasses.replace(short, rescue_loops=False)
    assert engine.transcribe_batch([unrescued], options) == [[]]


ENGLISH_PROMPTS = 30  # with the five LibriVox sentences: 35 recordings, 103 s


def test_real_speech_is_heard_as_faster_whisper_hears_it(engine: Engine) -> None:
    """Read sentences and recorded prompts (Debian's, ``tests/support/real_speech.py``):
    the served path, on adaptive and on full windows, within 0.01 WER of faster-whisper's
    own ``transcribe`` (its defaults: temperature fallback, beam 5) on the same model, and
    no answer of ours that loops (compresses over 2.4, or repeats a phrase)."""
    from faster_whisper import WhisperModel

    from asrserve.engine.fallback import compression_ratio, repeats_phrase
    from asrserve.engine.whisper import bundled_model_path

    clips = english(ENGLISH_PROMPTS)
    refs = [clip.text for clip in clips]
    model = WhisperModel(str(bundled_model_path()), device="cpu", compute_type="int8")
    texts = {"faster-whisper": [own_text(model, clip.path) for clip in clips]}
    options = TranscriptionOptions(beam_size=5)
    for label, windows in (("full", FULL), ("adaptive", ADAPTIVE)):
        texts[label] = [transcribe(engine, clip.path, windows, options).text for clip in clips]
    scores = {label: wer(refs, hyps) for label, hyps in texts.items()}
    print("real English speech, tiny.en: " + ", ".join(f"{k} {v:.4f}" for k, v in scores.items()))
    for label in ("full", "adaptive"):
        assert abs(scores[label] - scores["faster-whisper"]) <= 0.01, scores
    served = [text for label in ("full", "adaptive") for text in texts[label]]
    assert [t for t in served if compression_ratio(t) > 2.4 or repeats_phrase(t)] == []
