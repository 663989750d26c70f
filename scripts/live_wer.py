"""Live WER against file WER, clip by clip: each corpus clip and jfk.flac replayed over one
live session (16 kHz, 100 ms frames, default server VAD, at PACE × real time, then 1 s of
silence and a commit), and the same file sent to /v1/audio/transcriptions.

    ASRSERVE_LIVE_BURST_S=1000 .venv/bin/asrserve serve --port 8123 &   # allow PACE > 1
    .venv/bin/python scripts/live_wer.py http://127.0.0.1:8123 4 [CLIPS]

CLIPS: only the corpus's first CLIPS clips (default all); jfk.flac is always replayed.

Server VAD works on the audio, not the clock, so the turns are those of a real-time replay.
"""

from __future__ import annotations

import base64
import json
import sys
import time
from pathlib import Path

import httpx
import numpy as np
from websockets.sync.client import connect

from asrserve.audio.decode import decode
from asrserve.bench.wer import wer

ROOT = Path(__file__).resolve().parent.parent


def live(url: str, path: Path, pace: float) -> list[str]:
    audio = np.concatenate([decode(path, 1e9), np.zeros(16000, dtype=np.float32)])
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
    done: list[str] = []
    with connect(url.replace("http", "ws", 1) + "/v1/realtime?intent=transcription") as ws:
        ws.recv()
        fmt = {"type": "audio/pcm", "rate": 16000}
        ws.send(
            json.dumps(
                {"type": "transcription_session.update", "session": {"input_audio_format": fmt}}
            )
        )
        start = time.monotonic()
        for at in range(0, len(pcm), 1600):
            chunk = base64.b64encode(pcm[at : at + 1600].tobytes()).decode()
            ws.send(json.dumps({"type": "input_audio_buffer.append", "audio": chunk}))
            time.sleep(max(0.0, start + (at + 1600) / 16000 / pace - time.monotonic()))
        ws.send(json.dumps({"type": "input_audio_buffer.commit"}))
        while True:
            try:
                event = json.loads(ws.recv(timeout=2))
            except TimeoutError:
                return done
            if event["type"].endswith("input_audio_transcription.completed"):
                done.append(event["transcript"])


def main(url: str, pace: float, count: int | None = None) -> None:
    corpus = ROOT / ".corpus"
    clips = json.loads((corpus / "clips.json").read_text())["clips"][:count]
    items = [(corpus / c["file"], c["text"]) for c in clips]
    real = ROOT / "tests" / "data"
    items.append(
        (real / "jfk.flac", json.loads((real / "references.json").read_text())["jfk.flac"])
    )
    refs, heard, filed = [], [], []
    for path, ref in items:
        text = " ".join(live(url, path, pace))
        with path.open("rb") as handle:
            answer = httpx.post(
                f"{url}/v1/audio/transcriptions", files={"file": handle}, timeout=120
            )
        refs.append(ref)
        heard.append(text)
        filed.append(answer.json()["text"])
        print(f"{path.name}: live {wer([ref], [text]):.3f}, file {wer([ref], [filed[-1]]):.3f}")
    print(f"all: live {wer(refs, heard):.4f}, file {wer(refs, filed):.4f}")


if __name__ == "__main__":
    main(
        sys.argv[1],
        float(sys.argv[2]) if len(sys.argv) > 2 else 1.0,
        int(sys.argv[3]) if len(sys.argv) > 3 else None,
    )
