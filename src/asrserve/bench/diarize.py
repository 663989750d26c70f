"""``asrserve bench diarize [COUNT]``: how well and at what cost speakers are told apart.

COUNT conversations of real voices (``bench/conversations.py``, seeds from 100: not those
the clustering was tuned on) are, first, diarized by the speaker pipeline alone (speech
regions, CAM++ on every clip, the clustering), the embedding passes run one clip at a time
and in batches of 32 (what batching the speaker model buys), judged by their DER (0.25 s
collar) and speaker counts, and with each voice's reference (another recording of the
person: ``conversations.reference``) by how much of the speech gets its speaker's name
(:func:`named_speech`). Then a fresh server answers, for each seed, a conversation of
the two English voices (speech an English-only model transcribes, so that texts can be
compared) plain (``json``), diarized (``diarized_json``) and plain again, one after the
other, one client: the report gives the medians and the ratio of a diarized answer's time
to a plain one's, the WER of the diarized text against the plain text, and of the plain
text asked again against the first (the windows the temperature fallback decodes again
are sampled, so two plain answers may differ: that is the floor).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import numpy.typing as npt

from asrserve.bench.conversations import SAMPLE_RATE, Conversation, build, reference
from asrserve.bench.corpus import write_float_wav
from asrserve.bench.der import Labelled, named_seconds, score
from asrserve.bench.wer import wer_one
from asrserve.cli.server_process import ServerProcess
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import Floats, embed, features, regions
from asrserve.speakers.embedder import SpeakerEmbedder, installed
from asrserve.speakers.naming import name_speakers
from asrserve.speakers.turns import Span, clips, turns

TIMEOUT = httpx.Timeout(600.0, connect=10.0)
FIRST_SEED = 100  # the clustering's threshold was chosen on seeds 0-39
ENGLISH = ("reader", "allison")  # the voices of the served conversations
BATCHES = (1, 32)


def named_speech(
    model: SpeakerEmbedder,
    conversation: Conversation,
    spans: list[Span],
    embeddings: Floats,
    labels: npt.NDArray[np.int64],
) -> tuple[float, float]:
    """Seconds of the conversation's speech under their speaker's name, and of its speech,
    when every voice is a known speaker named from its reference, as the service names
    them (``embeddings`` and ``labels``: the conversation's clips', at ``spans``)."""
    known = []
    for voice in conversation.speakers:
        sample = reference(voice, conversation)
        known.append((voice, embed(model.embed, features(sample, clips(regions(sample))))))
    names = name_speakers(embeddings, labels, known)
    found = [
        Labelled(t.start, t.end, names.get(t.speaker, "")) for t in turns(spans, labels.tolist())
    ]
    return named_seconds(conversation.turns, found)


def _alone(conversations: list[Conversation]) -> dict[str, Any]:
    model = installed()
    errors = speech = audio = named = known = 0.0
    right = 0
    seconds = {batch: 0.0 for batch in BATCHES}
    for conversation in conversations:
        spans = clips(regions(conversation.samples))
        banks = features(conversation.samples, spans)
        found = np.zeros((0, model.dimension), dtype=np.float32)
        for batch in BATCHES:
            start = time.perf_counter()
            found = embed(model.embed, banks, batch)
            seconds[batch] += time.perf_counter() - start
        labels = cluster(found)
        hypothesis = [Labelled(t.start, t.end, t.speaker) for t in turns(spans, labels.tolist())]
        result = score(conversation.turns, hypothesis)
        errors += result.der * result.speech
        speech += result.speech
        audio += len(conversation.samples) / SAMPLE_RATE
        right += len(set(labels.tolist())) == len(conversation.speakers)
        got, said = named_speech(model, conversation, spans, found, labels)
        named, known = named + got, known + said
    return {
        "der": round(errors / speech, 4),
        "speakers_right": right,
        "named_right": round(named / known, 4),
        "conversations": len(conversations),
        "audio_s": round(audio, 1),
        "embedding_audio_s_per_s": {
            str(batch): round(audio / spent, 1) for batch, spent in seconds.items()
        },
    }


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


def _served(conversations: list[Conversation], env: dict[str, str]) -> dict[str, Any]:
    plain: list[float] = []
    diarized: list[float] = []
    wers: list[float] = []
    floor: list[float] = []  # plain against plain again: the temperature fallback samples
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


def measure_diarize(count: int, env: dict[str, str]) -> dict[str, Any]:
    seeds = range(FIRST_SEED, FIRST_SEED + count)
    english = [build(seed, voices=list(ENGLISH)) for seed in seeds]
    return {"alone": _alone([build(seed) for seed in seeds]), "served": _served(english, env)}


def diarize_report(body: dict[str, Any]) -> str:
    alone, served = body["alone"], body["served"]
    speeds = alone["embedding_audio_s_per_s"]
    return "\n".join(
        [
            f"{alone['conversations']} conversations, {alone['audio_s']} s of audio",
            f"speaker pipeline alone: DER {alone['der']:.4f} (0.25 s collar), speakers right "
            f"in {alone['speakers_right']} of {alone['conversations']}; every voice known "
            f"from another recording: {alone['named_right']:.1%} of the speech named right",
            "embedding passes, audio s per s: "
            + ", ".join(f"batch {batch}: {speed}" for batch, speed in speeds.items()),
            f"served, one client: plain p50 {served['plain_p50_s']} s, diarized p50 "
            f"{served['diarized_p50_s']} s; diarized / plain (total time) "
            f"{served['diarized_over_plain']}x",
            f"WER of the diarized text against the plain one, each conversation: "
            f"{served['wer_diarized_vs_plain']}",
            f"WER of the plain text asked again against the first (what the fallback's "
            f"sampling changes): {served['wer_plain_vs_plain']}",
        ]
    )
