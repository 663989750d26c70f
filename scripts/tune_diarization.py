"""How the diarization's thresholds were chosen: a grid over the clustering's ``LINK``, the
bridge across a speaker's pauses and whether clips keep out of overlaps, the naming's
``SAME_VOICE``, and the long file's first-stage ``FIRST_LINK`` (``--long N``: N meetings
of ``--long-minutes`` each, clustered in windows at each value and in one pass), on
conversations of the tuning speakers (never the gating ones).

    python scripts/tune_diarization.py --source /path/to/audio_data [--count 40] [--long 4]

``--source`` is Resemblyzer's ``audio_data`` (scripts/librispeech_voices.py). The same grid
on the gating speakers (``--gating``) shows how the choice carries over; it chooses
nothing. Each conversation's segmentation and embeddings are made once, the grid reuses
them. The log of the run the docs quote is ``docs/logs/diarization-tuning.log``.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import asrserve.speakers.cluster as clustering
import asrserve.speakers.naming as naming
from asrserve.bench.conversations import Conversation, build, build_long, reference
from asrserve.bench.der import Labelled, named_seconds, score
from asrserve.bench.voices import Voice, gating, tuning
from asrserve.speakers.diarize import embed, features, regions
from asrserve.speakers.models import SpeakerModel, installed
from asrserve.speakers.overlap import chunk, chunk_starts, overlaps, with_overlaps, without
from asrserve.speakers.turns import Span, clips, turns

LINKS = (0.30, 0.35, 0.40, 0.45, 0.50)
BRIDGES = (0.3, 0.4, 0.5, 0.7)
SAME_VOICES = (0.40, 0.45, 0.50, 0.55, 0.60, 0.65)
FIRST_LINKS = (0.45, 0.50, 0.55, 0.60, 0.65, 0.70)


@dataclass
class Heard:
    """One conversation's segmentation, clips and embeddings, with and without the
    overlaps kept out of the clips."""

    conversation: Conversation
    overlapped: bool
    both: list[Span]
    spans: dict[bool, list[Span]]
    embeddings: dict[bool, np.ndarray]
    references: list[tuple[str, np.ndarray]]


def heard(model: SpeakerModel, conversation: Conversation, overlapped: bool) -> Heard:
    samples = conversation.samples
    starts = chunk_starts(len(samples))
    activity = model.segment(np.stack([chunk(samples, s) for s in starts]))
    both = overlaps(starts, list(activity))
    speech = regions(samples)
    spans = {True: clips(without(speech, both)), False: clips(speech)}
    embeddings = {k: embed(model.embed, features(samples, v)) for k, v in spans.items()}
    references = []
    for voice in conversation.speakers:
        sample = reference(voice, conversation)
        references.append((voice, embed(model.embed, features(sample, clips(regions(sample))))))
    return Heard(conversation, overlapped, both, spans, embeddings, references)


def row(found: list[Heard], link: float, bridge: float, out: bool) -> str:
    clustering.LINK = link
    cells = []
    for overlapped in (False, True):
        errors = {0.0: [0.0, 0.0], 0.25: [0.0, 0.0]}
        right = total = 0
        for one in (h for h in found if h.overlapped == overlapped):
            labels = clustering.cluster(one.embeddings[out])
            said = with_overlaps(turns(one.spans[out], labels.tolist()), one.both, bridge)
            hypothesis = [Labelled(t.start, t.end, t.speaker) for t in said]
            for collar, sums in errors.items():
                result = score(one.conversation.turns, hypothesis, collar)
                sums[0] += result.der * result.speech
                sums[1] += result.speech
            right += len(set(labels.tolist())) == len(one.conversation.speakers)
            total += 1
        der0, der25 = (e / s for e, s in errors.values())
        kind = "overlap" if overlapped else "none"
        cells.append(f"{kind}: DER {der0:.4f} at 0, {der25:.4f} at 0.25, count {right}/{total}")
    return f"LINK {link:.2f} bridge {bridge:.1f} clips out of overlaps {out!s:5}  " + " | ".join(
        cells
    )


def named(found: list[Heard], same_voice: float) -> float:
    naming.SAME_VOICE = same_voice
    right = speech = 0.0
    for one in found:
        labels = clustering.cluster(one.embeddings[True])
        names = naming.name_speakers(one.embeddings[True], labels, one.references)
        said = with_overlaps(turns(one.spans[True], labels.tolist()), one.both)
        hypothesis = [Labelled(t.start, t.end, names.get(t.speaker, "")) for t in said]
        got, total = named_seconds(one.conversation.turns, hypothesis)
        right, speech = right + got, speech + total
    return right / speech


def long_rows(pool: Sequence[Voice], count: int, minutes: float) -> list[str]:
    """``count`` meetings of 4 voices, ``minutes`` each: DER of the two-stage clustering at
    each ``FIRST_LINK``, and of one pass over all of each meeting's clips."""
    model = installed()
    meetings = []
    for seed in range(count):
        talk = build_long(seed, minutes * 60, pool=pool)
        spans = clips(regions(talk.samples))
        meetings.append((talk, spans, embed(model.embed, features(talk.samples, spans))))
    rows = []
    for first_link in (*FIRST_LINKS, None):
        clustering.FIRST_LINK = first_link or 0.0
        window = clustering.WINDOW if first_link else 10**9  # None: one pass
        errors = {0.0: [0.0, 0.0], 0.25: [0.0, 0.0]}
        right = 0
        for talk, spans, embeddings in meetings:
            together = clustering.Clustering(window)
            for first in range(0, len(embeddings), 256):  # as the groups come back
                together.add(embeddings[first : first + 256])
            labels = together.finish()
            said = with_overlaps(turns(spans, labels.tolist()), [])
            hypothesis = [Labelled(t.start, t.end, t.speaker) for t in said]
            for collar, sums in errors.items():
                result = score(talk.turns, hypothesis, collar)
                sums[0] += result.der * result.speech
                sums[1] += result.speech
            right += len(set(labels.tolist())) == len(talk.speakers)
        der0, der25 = (e / s for e, s in errors.values())
        name = f"FIRST_LINK {first_link:.2f}" if first_link else "one pass       "
        rows.append(f"{name}: DER {der0:.4f} at 0, {der25:.4f} at 0.25, count {right}/{count}")
    clustering.FIRST_LINK = 0.55
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--source", type=Path, help="Resemblyzer's audio_data (tuning set)")
    source.add_argument("--gating", action="store_true", help="the gating set instead")
    parser.add_argument("--count", type=int, default=40, help="conversations of each kind")
    parser.add_argument("--long", type=int, default=0, help="long meetings for FIRST_LINK")
    parser.add_argument("--long-minutes", type=float, default=20.0, help="each one's length")
    args = parser.parse_args()
    pool = gating() if args.gating else tuning(args.source)
    print(f"{'gating' if args.gating else 'tuning'} speakers, {args.count} conversations each")
    if args.count:
        model = installed()
        found = [
            heard(model, build(seed, pool, with_overlap=overlapped), overlapped)
            for overlapped in (False, True)
            for seed in range(args.count)
        ]
        for link, bridge, out in itertools.product(LINKS, BRIDGES, (True, False)):
            print(row(found, link, bridge, out), flush=True)
        clustering.LINK = 0.35
        for same_voice in SAME_VOICES:
            print(f"SAME_VOICE {same_voice:.2f}: named right {named(found, same_voice):.4f}")
    if args.long:
        print(f"{args.long} meetings of {args.long_minutes:g} minutes, 4 voices each")
        for line in long_rows(pool, args.long, args.long_minutes):
            print(line, flush=True)


if __name__ == "__main__":
    main()
