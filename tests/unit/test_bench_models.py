"""``asrserve bench --models``: its figures and report from given numbers."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from asrserve.bench.load import AudioFile
from asrserve.bench.models import Share, _closed_loops, models_body, models_report, split

# tiny.en alone 40 audio s / s, base alone 10; together tiny.en 16 and base 5: 0.4 + 0.5
SHARES = [
    Share("alone", "tiny.en", 16, 20, 0, 400.0, 10.0, 0.05),
    Share("alone", "base", 16, 20, 0, 200.0, 20.0, 0.02),
    Share("together", "tiny.en", 8, 24, 0, 480.0, 30.0, 0.05),
    Share("together", "base", 8, 21, 1, 200.0, 40.0, None),
]


def test_each_model_together_is_a_share_of_its_figure_alone() -> None:
    rows = models_body(SHARES)["rows"]
    assert [(r["run"], r["model"], r["audio_s_per_wall_s"], r["x_alone"]) for r in rows] == [
        ("alone", "tiny.en", 40.0, None),
        ("alone", "base", 10.0, None),
        ("together", "tiny.en", 16.0, 0.4),
        ("together", "base", 5.0, 0.5),
    ]


def test_the_total_together_sums_audio_over_the_longest_wall_and_the_shares() -> None:
    total = models_body(SHARES)["together"]
    assert total == {
        "run": "together",
        "model": "all",
        "clients": 16,
        "requests": 45,
        "errors": 1,
        "audio_s": 680.0,
        "wall_s": 40.0,
        "audio_s_per_wall_s": 17.0,
        "x_alone": 0.9,
        "wer": None,
    }


def test_the_report_is_a_markdown_table_then_the_total() -> None:
    assert models_report(SHARES).splitlines() == [
        "| run | model | clients | req | err | audio s | wall s | audio s / wall s "
        "| × alone | WER |",
        "|---|---|---|---|---|---|---|---|---|---|",
        "| alone | tiny.en | 16 | 20 | 0 | 400.0 | 10.0 | 40.00 | – | 0.0500 |",
        "| alone | base | 16 | 20 | 0 | 200.0 | 20.0 | 10.00 | – | 0.0200 |",
        "| together | tiny.en | 8 | 24 | 0 | 480.0 | 30.0 | 16.00 | 0.40× | 0.0500 |",
        "| together | base | 8 | 21 | 1 | 200.0 | 40.0 | 5.00 | 0.50× | – |",
        "| together | all | 16 | 45 | 1 | 680.0 | 40.0 | 17.00 | Σ 0.90× | – |",
        "",
        "together: 17.00 audio s / wall s in all; the models' shares of their alone figures "
        "sum to 0.90 (1.00: no capacity lost to sharing the devices)",
    ]


def test_clients_split_evenly_the_first_models_taking_the_rest() -> None:
    assert split(16, ["tiny.en", "base"]) == {"tiny.en": 8, "base": 8}
    assert split(7, ["a", "b", "c"]) == {"a": 3, "b": 2, "c": 2}


async def _loops(requests: int) -> dict[str, list[str]]:
    """A client per model against an in-process answerer where a ``base`` answer takes ten
    turns of the event loop and a ``tiny.en`` one one turn: the models answered, per model."""

    async def answer(request: httpx.Request) -> httpx.Response:
        slow = b'name="model"\r\n\r\nbase\r\n' in request.content
        for _ in range(10 if slow else 1):
            await asyncio.sleep(0)  # yields to the other client: no time passes
        return httpx.Response(200, json={"text": "base" if slow else "tiny.en"})

    files = [AudioFile(Path("a.wav"), 2.0, "a", b"RIFF")]
    fields = {model: {"model": model} for model in ("tiny.en", "base")}
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), base_url="http://x") as c:
        results = await _closed_loops(c, files, {"tiny.en": 1, "base": 1}, requests, fields)
    return {model: [s.text for s in samples] for model, (samples, _) in results.items()}


def test_the_faster_model_keeps_competing_until_the_slower_has_its_answers() -> None:
    answered = asyncio.run(_loops(3))
    assert answered["base"] == ["base"] * 3
    assert len(answered["tiny.en"]) > 3
    assert set(answered["tiny.en"]) == {"tiny.en"}
