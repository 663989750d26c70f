"""What ``POST /v1/models/{id}/unload`` gives back: the RSS of a real embedded server
(``asrserve serve``, tiny.en and base, auth off) read from /proc, over cycles of a
transcription of jfk.flac (which loads the model) and an unload through HTTP.

    PYTHONPATH=src:. .venv/bin/python scripts/unload_memory.py [CYCLES] [CPU_REPLICAS]

Prints a Markdown table (MiB): the server as started (both models loaded, nothing run),
with both unloaded (the baseline without weights), then per model and cycle the RSS loaded
after a transcription and after its unload.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx

from asrserve.bench.soak import rss_bytes
from asrserve.cli.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
JFK = ROOT / "tests" / "data" / "jfk.flac"
MODELS = ("tiny.en", "base")
MIB = 2**20


def main(cycles: int, replicas: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        env = {"ASRSERVE_MODELS": ",".join(MODELS), "ASRSERVE_CPU_REPLICAS": replicas}
        server = ServerProcess(Path(folder) / "data", env=env).start(timeout=180)
        try:
            run(server, cycles)
        finally:
            server.stop()


def run(server: ServerProcess, cycles: int) -> None:
    assert server.proc is not None
    pid = server.proc.pid
    client = httpx.Client(base_url=server.url, timeout=120)

    def rss() -> float:
        return rss_bytes(pid) / MIB

    def unload(model: str) -> None:
        card = client.post(f"/v1/models/{model}/unload").raise_for_status().json()
        assert card["loaded"] is False, card

    weights = {card["id"]: card for card in client.get("/v1/models").json()["data"]}
    print(f"started, both loaded, nothing run: {rss():.0f} MiB")
    for model in MODELS:
        unload(model)
    print(f"both unloaded: {rss():.0f} MiB\n")
    print("| model | cycle | loaded, after a transcription | after /unload | released |")
    print("|---|---|---|---|---|")
    for model in MODELS:
        assert model in weights
        for cycle in range(1, cycles + 1):
            with JFK.open("rb") as audio:
                answer = client.post(
                    "/v1/audio/transcriptions",
                    files={"file": audio},
                    data={"model": model, "response_format": "text"},
                )
            assert "country" in answer.raise_for_status().text, answer.text
            loaded = rss()
            unload(model)
            after = rss()
            print(f"| {model} | {cycle} | {loaded:.0f} | {after:.0f} | {loaded - after:.0f} |")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 3, sys.argv[2] if len(sys.argv) > 2 else "1")
