"""``asrserve bench wyoming``'s pure parts: the events a satellite sends (read back by the
server's own reader), how utterances are split between satellites, the latency figures,
a row of the report and its table, and the scenario's command line."""

from __future__ import annotations

import argparse
import asyncio

from asrserve.bench.arguments import add_arguments, scenario_flags
from asrserve.bench.wyoming import (
    CHUNK_SAMPLES,
    Heard,
    Round,
    Spoken,
    latency_stats,
    queues,
    summary,
    utterance_events,
    wyoming_report,
)
from asrserve.wyoming.framing import read_event

SPOKEN = [Spoken(f"command {i}", bytes(2 * 100 * (i + 1))) for i in range(5)]


def events_read(raw: bytes) -> list[tuple[str, dict[str, object], bytes | None]]:
    """``raw`` read back, event by event, by the Wyoming server's framing."""

    async def read() -> list[tuple[str, dict[str, object], bytes | None]]:
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        got = []
        while (event := await read_event(reader)) is not None:
            got.append((event.type, event.data, event.payload))
        return got

    return asyncio.run(read())


def test_an_utterance_is_sent_as_a_satellite_sends_it() -> None:
    pcm = bytes(range(256)) * 20  # 5120 bytes: two chunks of 1024 samples and a rest
    events = events_read(b"".join(utterance_events(Spoken("lights on", pcm))))
    fmt = {"rate": 16000, "width": 2, "channels": 1}
    assert [kind for kind, _, _ in events] == ["transcribe", "audio-start"] + [
        "audio-chunk"
    ] * 3 + ["audio-stop"]
    assert events[0][1] == {"language": "en"} and events[1][1] == fmt
    chunks = [payload for kind, data, payload in events if kind == "audio-chunk" and data == fmt]
    assert [len(c or b"") for c in chunks] == [2 * CHUNK_SAMPLES, 2 * CHUNK_SAMPLES, 1024]
    assert b"".join(c or b"" for c in chunks) == pcm


def test_utterances_are_split_evenly_each_satellite_starting_elsewhere() -> None:
    split = queues(SPOKEN, satellites=2, utterances=6)
    assert [[s.text for s in q] for q in split] == [
        ["command 0", "command 1", "command 2"],
        ["command 3", "command 4", "command 0"],
    ]
    assert [len(q) for q in queues(SPOKEN, satellites=8, utterances=4)] == [1] * 8


def test_latency_stats_are_the_percentiles_and_the_largest() -> None:
    latencies = [float(i) for i in range(1, 101)]  # 1 … 100 s
    assert latency_stats(latencies) == {"p50_s": 50.5, "p95_s": 95.05, "max_s": 100.0}
    assert latency_stats([]) == {"p50_s": None, "p95_s": None, "max_s": None}


def test_a_row_counts_errors_apart_and_scores_what_was_answered() -> None:
    rounds = [
        Round(
            [Heard("turn on the lights", "Turn on the lights.", 0.2), Heard("x", None, 9.0)], 2.0
        ),
        Round([Heard("lock the door", "lock the floor", 0.4)], 2.0),
    ]
    row = summary("asrserve", 2, rounds)
    assert (row["utterances"], row["errors"]) == (3, 1)
    assert (row["p50_s"], row["max_s"]) == (0.3, 0.4)  # the error's 9 s left out
    assert row["utterances_per_s"] == 0.5  # 2 answered over 4 s of rounds
    assert row["wer"] == round(1 / 7, 4)  # "floor" for "door" in 7 words
    assert [r["utterances_per_s"] for r in row["rounds"]] == [0.5, 0.5]
    assert row["p50_s_by_text"] == {"turn on the lights": 0.2, "lock the door": 0.4}


def test_the_table_has_a_line_per_row() -> None:
    answered = summary("faster-whisper", 8, [Round([Heard("a b", "a b", 1.25)], 1.0)])
    failed = summary("asrserve", 1, [Round([Heard("a b", None, 1.0)], 1.0)])
    table = wyoming_report({"rows": [answered, failed]}).splitlines()
    assert table[2] == "| faster-whisper | 8 | 1 | 0 | 1.25 | 1.25 | 1.25 | 1.00 | 0.0000 |"
    assert table[3] == "| asrserve | 1 | 1 | 1 | – | – | – | 0.00 | – |"


def test_the_scenario_takes_satellite_counts_1_and_8_by_default() -> None:
    bench = argparse.ArgumentParser()
    add_arguments(bench)
    assert scenario_flags(bench.parse_args(["wyoming"])).wyoming == (1, 8)
    chosen = scenario_flags(bench.parse_args(["wyoming", "2,4", "--rounds", "5"]))
    assert (chosen.wyoming, chosen.rounds, chosen.against) == ((2, 4), 5, None)
