"""OpenAI's newer transcription parameters end to end: the official ``openai`` client against
a real server with the real model on real speech (``jfk.flac``): ``include=["logprobs"]``
in the JSON answer and in the streamed events, ``chunking_strategy`` reaching the VAD that
splits the file, and the parameters asrserve cannot honour refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import openai
import pytest

from tests.support.servers import Server

pytestmark = pytest.mark.slow
JFK = Path(__file__).parent / "data" / "jfk.flac"


def joined(tokens: list[Any]) -> str:
    return "".join(token.token for token in tokens)


def refused_param(oai: openai.OpenAI, **params: Any) -> str | None:
    with pytest.raises(openai.BadRequestError) as caught, JFK.open("rb") as audio:
        oai.audio.transcriptions.create(model="whisper-1", file=audio, **params)
    return caught.value.param


def test_logprobs_chunking_and_refusals_through_the_openai_client(server: Server) -> None:
    with openai.OpenAI(base_url=server.url + "/v1", api_key="x", max_retries=0) as oai:
        with JFK.open("rb") as audio:
            answer = oai.audio.transcriptions.create(
                model="whisper-1", file=audio, include=["logprobs"]
            )
        # the tokens of the decode that wrote the text: joined, they are the text
        tokens = answer.logprobs or []
        assert joined(tokens).strip() == answer.text
        assert "fellow Americans" in answer.text
        assert all(t.logprob is not None and t.logprob <= 0 for t in tokens)
        assert b"".join(bytes(int(b) for b in t.bytes or ()) for t in tokens).decode() == (
            joined(tokens)
        )
        assert any(t.logprob is not None and t.logprob < -0.01 for t in tokens)  # not all sure

        with JFK.open("rb") as audio:
            plain = oai.audio.transcriptions.create(model="whisper-1", file=audio)
        assert plain.logprobs is None  # not asked for: not there

        with JFK.open("rb") as audio:
            events = list(
                oai.audio.transcriptions.create(
                    model="whisper-1", file=audio, include=["logprobs"], stream=True
                )
            )
        deltas = [e for e in events if e.type == "transcript.text.delta"]
        done = events[-1]
        assert done.type == "transcript.text.done"
        assert deltas and all(d.logprobs for d in deltas)
        for delta in deltas:  # each delta's tokens are its text
            assert joined(delta.logprobs or []).strip() == delta.delta.strip()
        assert done.text == answer.text
        assert [t.token for t in done.logprobs or []] == [t.token for t in tokens]

        # chunking_strategy reaches the VAD that splits the file: at a strict speech
        # threshold it finds speech only from 6.1 s on (the VAD alone tells so), so the
        # first sentence is not decoded; "auto" is the default split
        with JFK.open("rb") as audio:
            strict = oai.audio.transcriptions.create(
                model="whisper-1",
                file=audio,
                response_format="verbose_json",
                chunking_strategy={"type": "server_vad", "threshold": 0.95},
            )
        assert "country" in strict.text and "Americans" not in strict.text, strict.text
        assert strict.segments and strict.segments[0].start >= 6.0
        with JFK.open("rb") as audio:
            tuned = oai.audio.transcriptions.create(
                model="whisper-1",
                file=audio,
                chunking_strategy={
                    "type": "server_vad",
                    "silence_duration_ms": 500,
                    "prefix_padding_ms": 300,
                    "threshold": 0.5,
                },
            )
        assert "fellow Americans" in tuned.text
        with JFK.open("rb") as audio:
            auto = oai.audio.transcriptions.create(
                model="whisper-1", file=audio, chunking_strategy="auto"
            )
        assert auto.text == plain.text

        # what asrserve cannot honour is a 400 naming the parameter
        assert refused_param(oai, known_speaker_names=["agent"]) == "known_speaker_names[]"
        references = {"known_speaker_references": ["data:audio/wav;base64,UklGRg=="]}
        assert refused_param(oai, **references) == "known_speaker_references[]"
        logprobs_in_srt = {"include": ["logprobs"], "response_format": "srt"}
        assert refused_param(oai, **logprobs_in_srt) == "include[]"
        bad_threshold = {"chunking_strategy": {"type": "server_vad", "threshold": 2}}
        assert refused_param(oai, **bad_threshold) == "chunking_strategy.threshold"
