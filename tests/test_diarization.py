"""Diarization on real voices: conversations built from recordings of five people
(``bench/conversations.py``), run through the speaker model and the clustering as the
service runs them, judged against who spoke when."""

from __future__ import annotations

from asrserve.bench.conversations import build
from asrserve.bench.der import Labelled, score
from asrserve.speakers.cluster import cluster
from asrserve.speakers.diarize import embed, features, regions
from asrserve.speakers.embedder import CamPlusPlusEmbedder, installed
from asrserve.speakers.turns import clips, turns

CONVERSATIONS = range(100, 110)  # not among the seeds the clustering was tuned on (0-39)


def test_ten_conversations_are_diarized_within_the_bounds() -> None:
    model = installed()
    assert isinstance(model, CamPlusPlusEmbedder)
    errors = speech = 0.0
    right = 0
    for seed in CONVERSATIONS:
        conversation = build(seed)
        spans = clips(regions(conversation.samples))
        labels = cluster(embed(model.embed, features(conversation.samples, spans)))
        found = [Labelled(t.start, t.end, t.speaker) for t in turns(spans, labels.tolist())]
        result = score(conversation.turns, found)
        errors += result.der * result.speech
        speech += result.speech
        right += len(set(labels.tolist())) == len(conversation.speakers)
    assert errors / speech <= 0.10
    assert right >= 9
