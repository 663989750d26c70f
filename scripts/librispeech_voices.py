"""Split LibriSpeech speakers into the diarization tuning and gating sets, and copy the gating
speakers' recordings into the repository (``src/asrserve/bench/voices/``).

The source is the ``audio_data`` folder of resemble-ai/Resemblyzer (its ``git archive``):
``librispeech_train-clean-100/*.flac``, one read utterance of each of 251 speakers, and
``librispeech_test-other/<speaker>/*.flac``, ten utterances of each of 10 speakers. Every
file is LibriSpeech's (CC BY 4.0), 16 kHz mono FLAC, copied unchanged.

    python scripts/librispeech_voices.py --source /path/to/audio_data

- The train-clean speakers with an utterance of at least ``MIN_UTTERANCE_S`` are ordered by
  the SHA-256 of their id; the first ``GATING`` are the gating set, the rest the tuning
  set. Thresholds are chosen on the tuning set only (``asrserve bench diarize --tune``
  reads it from the same source folder; it is not copied).
- The test-other speakers are gating speakers too, ``TEST_OTHER`` utterances each (one of
  them their known-speaker reference: another recording of the person).
- Each speaker's median pitch (autocorrelation over voiced 40 ms frames) puts them in the
  ``low`` or ``high`` group, for conversations of voices alike.

``voices.json`` lists every speaker of both sets with its set, group, pitch and files.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

import numpy as np

from asrserve.audio.decode import decode

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "src" / "asrserve" / "bench" / "voices"
TRAIN, OTHER = "librispeech_train-clean-100", "librispeech_test-other"
MIN_UTTERANCE_S = 11.0  # turns and a reference from one utterance
GATING = 48
TEST_OTHER = 4  # utterances kept per test-other speaker
OTHER_S = (4.0, 16.0)  # the lengths of those kept
LOW_HZ = 165.0  # a median pitch under this is the "low" group
RATE = 16000


def pitch(samples: np.ndarray) -> float:
    """The median fundamental frequency of the voiced 40 ms frames, Hz."""
    frame, hop = 640, 320
    peak = float(np.abs(samples).max()) or 1.0
    found = []
    for start in range(0, len(samples) - frame, hop):
        x = samples[start : start + frame].astype(np.float64)
        if np.sqrt(np.mean(x**2)) < 0.05 * peak:
            continue
        x = x - x.mean()
        corr = np.correlate(x, x, "full")[frame - 1 :]
        low, high = RATE // 400, RATE // 60  # 60-400 Hz
        lag = low + int(np.argmax(corr[low:high]))
        if corr[lag] > 0.4 * corr[0]:
            found.append(RATE / lag)
    return float(np.median(found)) if found else 0.0


def order(speaker: str) -> str:
    return hashlib.sha256(speaker.encode()).hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--source", type=Path, required=True, help="Resemblyzer's audio_data")
    parser.add_argument("--target", type=Path, default=TARGET, help=f"where (default {TARGET})")
    args = parser.parse_args()
    speakers: list[dict[str, object]] = []
    train = sorted((args.source / TRAIN).glob("*.flac"))
    long_enough = [p for p in train if len(decode(p, 60.0)) / RATE >= MIN_UTTERANCE_S]
    for rank, path in enumerate(sorted(long_enough, key=lambda p: order(p.name.split("-")[0]))):
        speakers.append(
            {"id": path.name.split("-")[0], "set": "gating" if rank < GATING else "tuning",
             "corpus": TRAIN, "files": [path.name]}
        )  # fmt: skip
    for folder in sorted(p for p in (args.source / OTHER).iterdir() if p.is_dir()):
        kept = []
        for path in sorted(folder.glob("*.flac")):
            if OTHER_S[0] <= len(decode(path, 60.0)) / RATE <= OTHER_S[1]:
                kept.append(f"{folder.name}/{path.name}")
        speakers.append(
            {"id": folder.name, "set": "gating", "corpus": OTHER, "files": kept[:TEST_OTHER]}
        )
    args.target.mkdir(parents=True, exist_ok=True)
    for speaker in speakers:
        paths = [args.source / str(speaker["corpus"]) / str(f) for f in speaker["files"]]  # type: ignore[attr-defined]
        hz = pitch(np.concatenate([decode(p, 60.0) for p in paths]))
        speaker["pitch_hz"] = round(hz, 1)
        speaker["group"] = "low" if hz < LOW_HZ else "high"
        if speaker["set"] == "gating":
            for path in paths:
                copy = (
                    args.target
                    / str(speaker["corpus"])
                    / path.relative_to(args.source / str(speaker["corpus"]))
                )
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(path, copy)
    manifest = {"source": "resemble-ai/Resemblyzer audio_data (LibriSpeech, CC BY 4.0)",
                "speakers": speakers}  # fmt: skip
    (args.target / "voices.json").write_text(json.dumps(manifest, indent=1) + "\n")
    sets = {s: sum(1 for v in speakers if v["set"] == s) for s in ("tuning", "gating")}
    groups = {g: sum(1 for v in speakers if v["group"] == g) for g in ("low", "high")}
    print(f"speakers: {sets}; pitch groups: {groups}")


if __name__ == "__main__":
    main()
