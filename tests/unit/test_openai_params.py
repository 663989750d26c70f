"""OpenAI's newer transcription parameters as asrserve reads them: ``include[]``,
``chunking_strategy`` (as the openai client sends it, and as JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from asrserve.audio.features import decode_audio, vad_config
from asrserve.batch_api.models import BatchItem
from asrserve.batch_api.output import split_lines
from asrserve.batch_lines import _fields
from asrserve.engine.base import SAMPLING_RATE, ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.jobs.models import Job, JobStatus
from asrserve.requests import parse_request
from asrserve.transcript import TokenLogprob
from asrserve.vocabulary import Chunking, Diarization, Task, TranscriptionOptions
from tests.support.fakes import transcript
from tests.support.payloads import wav_bytes

JFK = Path(__file__).parents[1] / "data" / "jfk.flac"

CATALOG = Catalog.of([ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)])


def options(fields: dict[str, list[str]]) -> TranscriptionOptions:
    return parse_request(fields, CATALOG).options


def refused(fields: dict[str, list[str]]) -> InvalidRequest:
    with pytest.raises(InvalidRequest) as caught:
        parse_request(fields, CATALOG)
    return caught.value


def test_logprobs_are_asked_for_by_include_and_decode_greedily() -> None:
    asked = options({"include[]": ["logprobs"]})
    assert (asked.logprobs, asked.beam_size) == (True, 1)
    plain = options({})
    assert (plain.logprobs, plain.beam_size) == (False, 5)
    assert options({"include": ["logprobs"], "beam_size": ["1"]}).logprobs is True


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"include[]": ["logprobs"], "response_format": ["verbose_json"]}, "include[]"),
        ({"include[]": ["logprobs"], "response_format": ["srt"]}, "include[]"),
        ({"include[]": ["logprobs"], "response_format": ["text"]}, "include[]"),
        ({"include[]": ["tokens"]}, "include[]"),
        ({"include[]": ["logprobs"], "beam_size": ["5"]}, "beam_size"),
    ],
)
def test_logprobs_the_answer_cannot_carry_are_refused_by_name(
    fields: dict[str, list[str]], param: str
) -> None:
    assert refused(fields).param == param


def test_chunking_strategy_as_the_openai_client_sends_it() -> None:
    fields = {
        "chunking_strategy[type]": ["server_vad"],
        "chunking_strategy[threshold]": ["0.35"],
        "chunking_strategy[silence_duration_ms]": ["700"],
        "chunking_strategy[prefix_padding_ms]": ["120"],
    }
    expected = Chunking(threshold=0.35, silence_duration_ms=700, prefix_padding_ms=120)
    assert options(fields).chunking == expected


def test_chunking_strategy_as_json_and_auto() -> None:
    given = '{"type": "server_vad", "silence_duration_ms": 900}'
    assert options({"chunking_strategy": [given]}).chunking == Chunking(silence_duration_ms=900)
    assert options({"chunking_strategy": ["auto"]}).chunking is None
    assert options({}).chunking is None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        ({"chunking_strategy": ["manual"]}, "chunking_strategy"),
        ({"chunking_strategy": ['{"type": "fixed"}']}, "chunking_strategy.type"),
        ({"chunking_strategy[threshold]": ["0.5"]}, "chunking_strategy.type"),
        (
            {"chunking_strategy[type]": ["server_vad"], "chunking_strategy[threshold]": ["1.5"]},
            "chunking_strategy.threshold",
        ),
        (
            {"chunking_strategy": ['{"type": "server_vad", "silence_duration_ms": 2.5}']},
            "chunking_strategy.silence_duration_ms",
        ),
        (
            {"chunking_strategy": ['{"type": "server_vad", "prefix_padding_ms": -1}']},
            "chunking_strategy.prefix_padding_ms",
        ),
        (
            {"chunking_strategy": ['{"type": "server_vad", "threshold": "NaN"}']},
            "chunking_strategy.threshold",
        ),
        (
            {"chunking_strategy": ['{"type": "server_vad", "min_speech_ms": 10}']},
            "chunking_strategy.min_speech_ms",
        ),
        (
            {"chunking_strategy": ["auto"], "chunking_strategy[type]": ["server_vad"]},
            "chunking_strategy",
        ),
    ],
)
def test_bad_chunking_strategies_are_refused_naming_the_field(
    fields: dict[str, list[str]], param: str
) -> None:
    assert refused(fields).param == param


def test_a_batch_line_body_carries_include_and_a_chunking_object() -> None:
    body = {
        "file": "file-1",
        "include": ["logprobs"],
        "chunking_strategy": {"type": "server_vad", "threshold": 0.6},
    }
    parsed = options(_fields(body))
    assert (parsed.logprobs, parsed.chunking) == (True, Chunking(threshold=0.6))


def three_readings(folder: Path) -> Path:
    """jfk.flac three times, 1.5 s of silence between the readings (36 s)."""
    from faster_whisper import decode_audio as read

    speech = read(str(JFK))
    pause = np.zeros(int(1.5 * SAMPLING_RATE), dtype=np.float32)
    clip = np.concatenate([speech, pause, speech, pause, speech])
    path = folder / "three.wav"
    path.write_bytes(wav_bytes(clip, SAMPLING_RATE))
    return path


def regions(path: Path, chunking: Chunking | None) -> list[tuple[float, float]]:
    decoded = decode_audio(path, max_seconds=600, vad=True, config=vad_config(chunking))
    try:
        return [
            (r["start"] / SAMPLING_RATE, r["end"] / SAMPLING_RATE) for r in decoded.layout.speech
        ]
    finally:
        decoded.close()


def test_silence_duration_ms_sets_the_pause_that_splits_the_speech(tmp_path: Path) -> None:
    """The VAD that splits a file takes the request's silence_duration_ms as its minimum
    silence: the auto split (160 ms) cuts each reading at its pauses; 2000 ms cuts only at
    the 1.5 s silences between the readings (none of which it keeps)."""
    clip = three_readings(tmp_path)
    assert len(regions(clip, None)) > 3
    found = regions(clip, Chunking(silence_duration_ms=2000))
    assert len(found) == 3
    gaps = [(11.0, 12.5), (23.5, 25.0)]  # the silences, on the clip's clock
    for (_, end), (start, _), (gap_start, gap_end) in zip(found, found[1:], gaps, strict=False):
        assert end <= gap_end and start >= gap_start


def test_prefix_padding_ms_and_threshold_reach_the_vad(tmp_path: Path) -> None:
    clip = three_readings(tmp_path)
    padded = regions(clip, Chunking(silence_duration_ms=2000))
    tight = regions(clip, Chunking(silence_duration_ms=2000, prefix_padding_ms=0))
    assert tight[1][0] - padded[1][0] == pytest.approx(0.4, abs=0.001)  # 400 ms less before
    speech = sum(end - start for start, end in regions(clip, None))
    strict = sum(end - start for start, end in regions(clip, Chunking(threshold=0.95)))
    assert strict < speech / 2


def test_a_batch_output_line_carries_the_logprobs_its_request_asked_for() -> None:
    token = TokenLogprob(token=" hi", logprob=-0.25, bytes=[32, 104, 105])
    result = transcript()
    result = result.model_copy(
        update={"segments": [result.segments[0].model_copy(update={"logprobs": [token]})]}
    )
    asked = TranscriptionOptions(logprobs=True, beam_size=1)
    jobs = {
        name: Job(id=name, status=JobStatus.SUCCEEDED, result=result, options=options)
        for name, options in (("job_x1_1", asked), ("job_x1_2", TranscriptionOptions()))
    }
    items = [
        BatchItem(batch_id="batch_x1", line=n, custom_id=f"c{n}", job_id=f"job_x1_{n}")
        for n in (1, 2)
    ]
    output, _ = split_lines(items, jobs, "batch_expired")
    bodies = [json.loads(row)["response"]["body"] for row in output]
    assert bodies == [
        {"text": "hi", "logprobs": [{"token": " hi", "logprob": -0.25, "bytes": [32, 104, 105]}]},
        {"text": "hi"},
    ]


def test_diarized_json_asks_for_speakers_and_the_word_times_they_are_joined_to() -> None:
    asked = options({"response_format": ["diarized_json"], "max_speakers": ["3"]})
    assert asked.diarization == Diarization(min_speakers=1, max_speakers=3)
    assert asked.word_timestamps
    assert options({}).diarization is None


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"response_format": ["diarized_json"], "min_speakers": ["3"], "max_speakers": ["2"]},
            "min_speakers",
        ),
        ({"response_format": ["diarized_json"], "max_speakers": ["99"]}, "max_speakers"),
        ({"min_speakers": ["2"]}, "min_speakers"),
    ],
)
def test_bad_speaker_hints_are_refused_by_name(fields: dict[str, list[str]], param: str) -> None:
    assert refused(fields).param == param


def test_a_translation_cannot_be_diarized() -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_request({"response_format": ["diarized_json"]}, CATALOG, task=Task.TRANSLATE)
    assert caught.value.param == "response_format"


WAV = "data:audio/wav;base64,UklGRg=="  # any bytes: they are decoded as audio where it runs
DIARIZED = {"response_format": ["diarized_json"]}


def test_known_speakers_travel_with_the_diarization() -> None:
    asked = options(
        {
            **DIARIZED,
            "known_speaker_names[]": ["Ana", "Bo"],
            "known_speaker_references[]": [WAV, WAV],
        }
    )
    assert asked.diarization is not None
    assert [k.name for k in asked.diarization.known] == ["Ana", "Bo"]
    assert asked.diarization.known[0].audio == "UklGRg=="


@pytest.mark.parametrize(
    ("fields", "param"),
    [
        (
            {"known_speaker_names[]": ["Ana"], "known_speaker_references[]": [WAV]},
            "known_speaker_names[]",
        ),
        ({"known_speaker_references[]": [WAV]}, "known_speaker_references[]"),
        ({**DIARIZED, "known_speaker_names[]": ["Ana"]}, "known_speaker_references[]"),
        ({**DIARIZED, "known_speaker_references[]": [WAV]}, "known_speaker_names[]"),
        (
            {
                **DIARIZED,
                "known_speaker_names[]": list("abcde"),
                "known_speaker_references[]": [WAV] * 5,
            },
            "known_speaker_names[]",
        ),
        (
            {
                **DIARIZED,
                "known_speaker_names[]": ["Ana", "Ana"],
                "known_speaker_references[]": [WAV] * 2,
            },
            "known_speaker_names[]",
        ),
        (
            {**DIARIZED, "known_speaker_names[]": [" "], "known_speaker_references[]": [WAV]},
            "known_speaker_names[]",
        ),
        (
            {
                **DIARIZED,
                "known_speaker_names[]": ["Ana"],
                "known_speaker_references[]": ["https://x/a.wav"],
            },
            "known_speaker_references[]",
        ),
        (
            {
                **DIARIZED,
                "known_speaker_names[]": ["Ana"],
                "known_speaker_references[]": ["data:audio/wav;base64,@@@"],
            },
            "known_speaker_references[]",
        ),
    ],
)
def test_bad_known_speakers_are_refused_by_name(fields: dict[str, list[str]], param: str) -> None:
    assert refused(fields).param == param
