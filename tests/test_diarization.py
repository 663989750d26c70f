"""Diarization on real voices: conversations built from recordings of five people
(``bench/conversations.py``), run through the speaker model and the clustering as the
service runs them, judged against who spoke when."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Sequence
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
from asrserve.speakers import diarize as diarize_module
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import Floats, diarize, embed
from asrserve.speakers.embedder import CamPlusPlusEmbedder, SpeakerEmbedder, installed
from asrserve.speakers.turns import Span, Turn, clips
from asrserve.vocabulary import Diarization

pytestmark = pytest.mark.slow

CONVERSATIONS = range(100, 110)  # not among the seeds the clustering was tuned on (0-39)


@dataclass(frozen=True)
class Diarized:
    """One conversation through :func:`diarize`: its turns, and the clips and embeddings
    they were found from (for naming the voices without embedding them again)."""

    conversation: Conversation
    found: list[Turn]
    spans: list[Span]
    embeddings: Floats


def diarized_noting(model: SpeakerEmbedder, conversation: Conversation) -> Diarized:
    """``diarize`` as it is, its clips and embeddings noted on their way through."""
    spans: list[list[Span]] = []
    embeddings: list[Floats] = []

    def noted_clips(found: Sequence[Span]) -> list[Span]:
        spans.append(clips(found))
        return spans[-1]

    def noted_embed(embedder: Callable[[Floats], Floats], banks: Sequence[Floats]) -> Floats:
        embeddings.append(embed(embedder, banks))
        return embeddings[-1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(diarize_module, "clips", noted_clips)
        patch.setattr(diarize_module, "embed", noted_embed)
        found = diarize(model.embed, conversation.samples)
    ((clipped,), (embedded,)) = spans, embeddings  # one file: one pass each
    return Diarized(conversation, found, clipped, embedded)


@pytest.fixture(scope="module")
def diarized() -> list[Diarized]:
    """The ten conversations diarized once, for both tests below (the embedding passes are
    the costly step)."""
    model = installed()
    assert isinstance(model, CamPlusPlusEmbedder)
    return [diarized_noting(model, build(seed)) for seed in CONVERSATIONS]


def test_ten_conversations_are_diarized_within_the_bounds(diarized: list[Diarized]) -> None:
    errors = speech = 0.0
    right = 0
    for one in diarized:
        found, conversation = one.found, one.conversation
        result = score(conversation.turns, [Labelled(t.start, t.end, t.speaker) for t in found])
        errors += result.der * result.speech
        speech += result.speech
        right += len({turn.speaker for turn in found}) == len(conversation.speakers)
    assert errors / speech <= 0.10
    assert right >= 9


class Remembering(SpeakerEmbedder):
    """The speaker model, each distinct input embedded once: a voice's reference is the
    same recording in most conversations (29 references here, 7 recordings)."""

    def __init__(self, model: SpeakerEmbedder) -> None:
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


def test_known_speakers_are_named_on_ninety_percent_of_their_speech(
    diarized: list[Diarized],
) -> None:
    """Every voice of each of the ten conversations (2-4) named from another recording of
    the same person: the share of all their speech under the right name (their clips'
    embeddings those the diarization test's run made)."""
    model = Remembering(installed())
    named = speech = 0.0
    for one in diarized:
        labels = cluster(one.embeddings)
        got, said = named_speech(model, one.conversation, one.spans, one.embeddings, labels)
        named, speech = named + got, speech + said
    assert named / speech >= 0.9


class Device:
    """A scheduler's ``submit_embed`` on the real speaker model, one clip a pass, noting
    how many clips each call hands it."""

    def __init__(self, model: SpeakerEmbedder) -> None:
        self.model = model
        self.calls: list[int] = []

    def submit_embed(
        self,
        job_id: str,
        priority: int,
        banks: list[np.ndarray],
        deadline: float | None,
        tenant: str = "",
    ) -> list[asyncio.Future[np.ndarray]]:
        loop = asyncio.get_running_loop()
        self.calls.append(len(banks))
        futures = [loop.create_future() for _ in banks]
        for future, bank in zip(futures, banks, strict=True):
            future.set_result(self.model.embed(bank[None])[0])
        return futures


def test_a_file_is_embedded_a_group_at_a_time_to_the_same_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Clips go to the device in groups of at most GROUP (what bounds a long file's
    filterbanks in memory), and the turns are those of the file embedded at once."""
    conversation = build(100)
    path = write_float_wav(tmp_path / "talk.wav", conversation.samples)
    model = installed()

    def run(group: int) -> tuple[list[Turn], list[int]]:
        monkeypatch.setattr(diarizing, "GROUP", group)
        device = Device(model)
        with ThreadPoolExecutor(1) as pool:
            found, _ = asyncio.run(
                diarizing.speaker_turns(
                    cast(Scheduler, device),
                    Job(id="job_x"),
                    Diarization(),
                    path,
                    JobPool(pool),
                    3600.0,
                    None,
                )
            )
        return found, device.calls

    whole, at_once = run(10**6)
    grouped, calls = run(8)
    assert at_once == [0, sum(calls)] and sum(calls) > 24  # references, then every clip
    assert calls[1:] == [8] * (len(calls) - 2) + [calls[-1]] and calls[-1] <= 8
    assert grouped == whole
