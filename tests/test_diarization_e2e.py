"""Diarization through the service, as OpenAI's users call it: the official ``openai``
client against a real server with the real models, on a conversation of two real voices:
``diarized_json`` parsed by the client's own type, the text the plain answer's, streamed
segments, speakers on whisper-asr-webservice's ``/asr``, known speakers named, and bad
references refused at intake. The requests that cannot carry speakers are refused by name
in validation, before any decode: the app in this process (``tests/support/inprocess.py``)."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from asrserve.bench.conversations import build, reference
from asrserve.bench.corpus import write_float_wav
from asrserve.bench.der import Labelled, named_seconds, score
from asrserve.bench.voices import debian
from asrserve.bench.wer import wer_one
from tests.support.inprocess import in_process
from tests.support.servers import JFK, Server


@pytest.mark.slow
def test_diarized_json_and_streamed_through_the_openai_client(
    server: Server, tmp_path: Path
) -> None:
    # two English voices; timing its words once moved where a window was continued (0.027 WER)
    conversation = build(104, debian(), voices=["reader", "allison"])
    path = write_float_wav(tmp_path / "talk.wav", conversation.samples)
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as oai:
        with path.open("rb") as audio:
            diarized = oai.audio.transcriptions.create(
                model="whisper-1", file=audio, response_format="diarized_json"
            )
        with path.open("rb") as audio:
            plain = oai.audio.transcriptions.create(model="whisper-1", file=audio)

        assert diarized.task == "transcribe"
        assert wer_one(plain.text, diarized.text) <= 0.02
        speakers = [segment.speaker for segment in diarized.segments]
        assert sorted(set(speakers)) == ["A", "B"] and speakers[0] == "A"
        assert all(segment.type == "transcript.text.segment" for segment in diarized.segments)
        found = [Labelled(s.start, s.end, s.speaker) for s in diarized.segments]
        assert score(conversation.turns, found).der <= 0.15  # segments' spans, not turns'

        with path.open("rb") as audio:
            events = list(
                oai.audio.transcriptions.create(
                    model="whisper-1", file=audio, response_format="diarized_json", stream=True
                )
            )
        segments = [e for e in events if e.type == "transcript.text.segment"]
        assert events[-1].type == "transcript.text.done"
        assert [(s.speaker, s.text) for s in segments] == [
            (s.speaker, s.text) for s in diarized.segments
        ]

    # whisper-asr-webservice's /asr: diarize=true, speakers in the formats that carry them
    def asr(**params: str) -> httpx.Response:
        with path.open("rb") as audio:
            files = {"audio_file": ("talk.wav", audio, "audio/wav")}
            return httpx.post(f"{server.url}/asr", params=params, files=files, timeout=120)

    vtt = asr(diarize="true", output="vtt", max_speakers="2")
    assert vtt.status_code == 200
    voices = re.findall(r"^<v ([A-Z])>", vtt.text, flags=re.MULTILINE)
    assert voices[0] == "A" and set(voices) == {"A", "B"}
    whisper_json = asr(diarize="true", output="json").json()
    assert {s["speaker"] for s in whisper_json["segments"]} == {"A", "B"}


def test_what_cannot_carry_speakers_is_refused_by_name(tmp_path: Path) -> None:
    """In this process (validation, before any decode): a diarized translation, and on
    ``/asr`` a diarized txt or a diarized translation, are 400s naming the field."""

    def refused(route: str, part: str, fields: dict[str, str]) -> tuple[int, str]:
        """Form fields on the OpenAI route, query parameters on whisper-asr-webservice's."""
        form, query = (fields, None) if part == "file" else (None, fields)
        with JFK.open("rb") as audio:
            response = app.client.post(
                route, files={part: ("jfk.flac", audio)}, data=form, params=query
            )
        return response.status_code, response.json()["error"]["param"]

    with in_process(tmp_path / "data") as app:
        # translations: the client's own method is deprecated
        diarized = {"model": "whisper-1", "response_format": "diarized_json"}
        assert refused("/v1/audio/translations", "file", diarized) == (400, "response_format")
        txt = {"diarize": "true", "output": "txt"}
        assert refused("/asr", "audio_file", txt) == (400, "output")
        translated = {"diarize": "true", "output": "json", "task": "translate"}
        assert refused("/asr", "audio_file", translated) == (400, "diarize")
        (engine,) = app.engines
    assert engine.batches == []


def data_url(samples: np.ndarray, folder: Path, name: str) -> str:
    return (
        "data:audio/wav;base64,"
        + base64.b64encode(write_float_wav(folder / name, samples).read_bytes()).decode()
    )


@pytest.mark.slow
def test_known_speakers_are_named_from_their_references(server: Server, tmp_path: Path) -> None:
    voices = ["reader", "allison"]
    conversation = build(5, debian(), voices=voices)
    path = write_float_wav(tmp_path / "talk.wav", conversation.samples)
    used = {turn.speaker for turn in conversation.turns}
    assert used == set(voices)
    # another recording of each voice as its reference
    references = [
        data_url(reference(voice, conversation), tmp_path, f"{voice}.wav") for voice in voices
    ]
    names = {"reader": "Elinor", "allison": "Allison"}
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as oai:
        with path.open("rb") as audio:
            answer = oai.audio.transcriptions.create(
                model="whisper-1",
                file=audio,
                response_format="diarized_json",
                known_speaker_names=[names[v] for v in voices],
                known_speaker_references=references,
            )
        assert {segment.speaker for segment in answer.segments} == set(names.values())
        found = [Labelled(s.start, s.end, s.speaker) for s in answer.segments]
        right, said = named_seconds(
            [Labelled(t.start, t.end, names[str(t.speaker)]) for t in conversation.turns], found
        )
        assert right / said >= 0.9

        short = data_url(np.zeros(16000, dtype=np.float32), tmp_path, "short.wav")
        with path.open("rb") as audio, pytest.raises(openai.BadRequestError) as refused:
            oai.audio.transcriptions.create(
                model="whisper-1",
                file=audio,
                response_format="diarized_json",
                known_speaker_names=["Elinor"],
                known_speaker_references=[short],
            )
        assert refused.value.param == "known_speaker_references[]"


@pytest.mark.slow
def test_a_job_with_a_bad_reference_is_refused_at_submit(server: Server, tmp_path: Path) -> None:
    """References are probed at intake, as the upload is: a job whose reference is too long
    or not audio is a 400 naming the field, never a queued job that fails later."""
    path = write_float_wav(
        tmp_path / "talk.wav", build(5, debian(), voices=["reader", "allison"]).samples
    )
    long = data_url(np.zeros(12 * 16000, dtype=np.float32), tmp_path, "long.wav")
    text = "data:audio/wav;base64," + base64.b64encode(b"not audio at all, " * 64).decode()
    answers = []
    for bad in (long, text):
        with path.open("rb") as audio:
            answers.append(
                httpx.post(
                    f"{server.url}/v1/jobs",
                    files={"file": (path.name, audio)},
                    data={
                        "response_format": "diarized_json",
                        "known_speaker_names[]": ["Elinor"],
                        "known_speaker_references[]": [bad],
                    },
                    timeout=60,
                )
            )
    errors = [(a.status_code, a.json()["error"]["param"]) for a in answers]
    assert errors == [(400, "known_speaker_references[]")] * 2
    long_error, text_error = (a.json()["error"]["message"] for a in answers)
    assert long_error == "the reference of 'Elinor' is 12.0 s: give 2-10 s"
    assert text_error.startswith("the reference of 'Elinor' is not audio of 2-10 s: ")
