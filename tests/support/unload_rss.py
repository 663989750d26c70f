"""Run as a script: the packaged tiny.en loaded, one transcription, then unload/reload
cycles (each with a transcription) through the engine; prints the RSS (MiB) loaded and
after the last unload, and the weights' size, as JSON. Its own process: no other test's
memory in the figures."""

from __future__ import annotations

import json
import sys

from asrserve.audio.decode import decode
from asrserve.engine.loading import load
from asrserve.engine.whisper import FasterWhisperEngine
from asrserve.settings import Settings
from tests.support.servers import JFK


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def main(cycles: int) -> None:
    settings = Settings(cpu_replicas=1, cpu_threads=2)
    engine = load(settings, settings.model_cache)[0]["tiny.en"]  # sole holder
    assert isinstance(engine, FasterWhisperEngine)
    audio = decode(JFK, 60.0)

    def transcribe() -> None:
        segments, _ = engine.weights.model.transcribe(audio, beam_size=5, language="en")
        assert "country" in " ".join(segment.text for segment in segments)

    transcribe()
    loaded = rss_mib()
    for _ in range(cycles):
        engine.unload()
        engine.load()
        transcribe()
    engine.unload()
    weights = engine.weights_bytes / 2**20
    print(json.dumps({"loaded": loaded, "unloaded": rss_mib(), "weights": weights}))


if __name__ == "__main__":
    main(int(sys.argv[1]))
