"""Diarization on real voices: conversations built from recordings of five people
(``bench/conversations.py``), run through the speaker model and the clustering as the
service runs them, judged against who spoke when."""

from __future__ import annotations

from asrserve.bench.conversations import build
from asrserve.bench.der import Labelled, score
from asrserve.bench.diarize import named_speech
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import diarize, embed, features, regions
from asrserve.speakers.embedder import CamPlusPlusEmbedder, installed
from asrserve.speakers.turns import clips

CONVERSATIONS = range(100, 110)  # not among the seeds the clustering was tuned on (0-39)


def test_ten_conversations_are_diarized_within_the_bounds() -> None:
    model = installed()
    assert isinstance(model, CamPlusPlusEmbedder)
    errors = speech = 0.0
    right = 0
    for seed in CONVERSATIONS:
        conversation = build(seed)
        found = diarize(model.embed, conversation.samples)
        result = score(conversation.turns, [Labelled(t.start, t.end, t.speaker) for t in found])
        errors += result.der * result.speech
        speech += result.speech
        right += len({turn.speaker for turn in found}) == len(conversation.speakers)
    assert errors / speech <= 0.10
    assert right >= 9


def test_known_speakers_are_named_on_ninety_percent_of_their_speech() -> None:
    """Every voice of each of the ten conversations (2-4) named from another recording of
    the same person: the share of all their speech under the right name."""
    model = installed()
    named = speech = 0.0
    for seed in CONVERSATIONS:
        conversation = build(seed)
        spans = clips(regions(conversation.samples))
        embeddings = embed(model.embed, features(conversation.samples, spans))
        got, said = named_speech(model, conversation, spans, embeddings, cluster(embeddings))
        named, speech = named + got, speech + said
    assert named / speech >= 0.9
