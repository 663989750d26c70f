"""The accuracy figure behind ``first_window_s`` (docs/benchmarks.md, "Streamed transcription"):
tiny.en's WER on long files with each first-window length, through the path the server and
``asrserve transcribe`` take (Silero VAD, regions packed into windows, adaptive encoder
windows, beam 5, int8 on this machine's cores).

The files: the real English recordings of ``tests/support/real_speech.py`` (LibriVox
sentences and Asterisk prompts) in a seeded shuffle, and the bench corpus's espeak clips
(``asrserve.bench.corpus``), each set joined with seeded pauses of 0.3-1.5 s into files of
about SECONDS (default 64); every file starts with other speech, so each has a first window
of its own. The WER is over every file's whole text, so it counts the first window and the
later windows it shifts.

    .venv/bin/python scripts/first_window_wer.py [--files N] [SECONDS] [FIRST_WINDOW_S ...]

``--files N``: only each set's first N files (default all).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.real_speech import english  # noqa: E402

from asrserve.audio.decode import decode  # noqa: E402
from asrserve.bench.corpus import build_corpus, write_wav  # noqa: E402
from asrserve.bench.wer import wer  # noqa: E402
from asrserve.engine.base import SAMPLING_RATE  # noqa: E402
from asrserve.engine.whisper import EngineConfig, FasterWhisperEngine, bundled_model_path  # noqa: E402
from asrserve.inference.direct import transcribe_file  # noqa: E402
from asrserve.settings import Settings  # noqa: E402
from asrserve.vocabulary import TranscriptionOptions  # noqa: E402


def joined(
    clips: list[tuple[Path, str]],
    seconds: float,
    folder: Path,
    name: str,
    seed: int,
    limit: int | None = None,
) -> list[tuple[Path, str]]:
    """The clips in a seeded order, joined with seeded pauses into files of ``seconds``
    (at most ``limit`` of them)."""
    rng = random.Random(seed)
    order = clips[:]
    rng.shuffle(order)
    files: list[tuple[Path, str]] = []
    pieces: list[np.ndarray] = []
    texts: list[str] = []
    length = 0
    for path, text in order:
        samples = decode(path, 1e9)
        gap = np.zeros(int(rng.uniform(0.3, 1.5) * SAMPLING_RATE), dtype=np.float32)
        pieces += [samples, gap]
        texts.append(text)
        length += samples.shape[0] + gap.shape[0]
        if length >= seconds * SAMPLING_RATE:
            out = folder / f"{name}-{len(files):02d}.wav"
            pcm = (np.clip(np.concatenate(pieces), -1.0, 1.0) * 32767).astype(np.int16)
            write_wav(out, pcm, SAMPLING_RATE)
            files.append((out, " ".join(texts)))
            pieces, texts, length = [], [], 0
            if len(files) == limit:
                break
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=None, help="per set (default: all)")
    parser.add_argument("seconds", nargs="?", type=float, default=64.0, metavar="SECONDS")
    parser.add_argument(
        "firsts", nargs="*", type=float, default=[30.0, 10.0, 8.0, 5.0], metavar="FIRST_WINDOW_S"
    )
    args = parser.parse_args()
    seconds, firsts = args.seconds, args.firsts
    engine = FasterWhisperEngine(EngineConfig(bundled_model_path(), "tiny.en", "cpu", 0, "int8", 2))
    windows = engine.capabilities.windows(Settings().windows)
    options = TranscriptionOptions(model=engine.model_id)
    corpus = build_corpus(ROOT / ".corpus", n_clips=12, long_clip_seconds=130.0)
    with tempfile.TemporaryDirectory() as tmp:
        sets = {
            "real English": joined(
                [(r.path, r.text) for r in english(1000)], seconds, Path(tmp), "real", 0, args.files
            ),
            "bench corpus (espeak)": joined(
                [(c.path, c.text) for c in corpus[:-1]] * 4,
                seconds,
                Path(tmp),
                "espeak",
                1,
                args.files,
            ),
        }
        print(f"files of about {seconds:.0f} s; WER by first_window_s")
        print("| set | files | audio s | " + " | ".join(f"{f:g} s" for f in firsts) + " |")
        print("|---|---|---|" + "---|" * len(firsts))
        for label, files in sets.items():
            refs = [text for _, text in files]
            audio = sum(decode(path, 1e9).shape[0] for path, _ in files) / SAMPLING_RATE
            cells = []
            for first in firsts:
                started = time.monotonic()
                hyps = [
                    transcribe_file(
                        engine,
                        path,
                        options,
                        max_seconds=3600,
                        windows=windows,
                        first_window_s=first,
                    ).text
                    for path, _ in files
                ]
                cells.append(f"{wer(refs, hyps):.4f}")
                print(f"  ({label}, {first:g} s: {time.monotonic() - started:.0f} s)", flush=True)
            print(f"| {label} | {len(files)} | {audio:.0f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
