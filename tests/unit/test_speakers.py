"""The diarization's pure parts: clips and turns, the clustering, the join of words to
speakers, the DER, and the torch-free state dict reader (speakers/, bench/der.py)."""

from __future__ import annotations

import io
import pickle
import zipfile
from pathlib import Path

import numpy as np
import pytest

from asrserve.api.schemas import job_view
from asrserve.bench.der import Labelled, score
from asrserve.errors import InvalidRequest
from asrserve.formats import to_diarized, to_srt, to_vtt
from asrserve.jobs.models import Job
from asrserve.speakers import state_dict
from asrserve.speakers.cluster import Clustering, cluster
from asrserve.speakers.fbank import fbank, frames
from asrserve.speakers.join import join, label
from asrserve.speakers.naming import name_speakers
from asrserve.speakers.turns import CLIP_S, HOP_S, Span, Turn, clips, turns
from asrserve.transcript import Segment, Transcript, Word
from asrserve.vocabulary import Diarization, KnownSpeaker, TranscriptionOptions


def test_a_region_is_cut_into_overlapping_clips_the_last_ending_with_it() -> None:
    cut = clips([Span(10.0, 13.0)])
    assert [(round(c.start, 2), round(c.end, 2)) for c in cut] == [
        (10.0, 10.0 + CLIP_S),
        (10.0 + HOP_S, 10.0 + HOP_S + CLIP_S),
        (13.0 - CLIP_S, 13.0),
    ]


def test_a_short_region_is_one_clip_and_a_blip_none() -> None:
    assert clips([Span(1.0, 2.0), Span(5.0, 5.1)]) == [Span(1.0, 2.0)]


def test_overlapping_clips_of_two_speakers_change_turn_in_the_middle() -> None:
    spans = [Span(0.0, 1.5), Span(0.75, 2.25), Span(1.5, 3.0), Span(5.0, 6.0)]
    assert turns(spans, [0, 0, 1, 1]) == [
        Turn(0.0, 1.875, 0),
        Turn(1.875, 3.0, 1),
        Turn(5.0, 6.0, 1),
    ]


def voices(per_speaker: list[int], seed: int = 0) -> np.ndarray:
    """Embeddings of speakers far apart, each speaker's spread around its own direction."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(len(per_speaker), 192))
    return np.concatenate(
        [c + 0.3 * rng.normal(size=(n, 192)) for c, n in zip(centres, per_speaker, strict=True)]
    ).astype(np.float32)


def test_clustering_finds_three_voices_numbered_by_first_appearance() -> None:
    embeddings = voices([12, 20, 9])
    order = np.random.default_rng(1).permutation(len(embeddings))
    labels = cluster(embeddings[order])
    truth = np.repeat([0, 1, 2], [12, 20, 9])[order]
    assert len(set(labels.tolist())) == 3
    pairs = {(int(t), int(lab)) for t, lab in zip(truth, labels, strict=True)}
    assert len(pairs) == 3  # one label per voice, one voice per label
    assert labels[0] == 0


def test_one_voice_is_one_speaker() -> None:
    assert set(cluster(voices([30])).tolist()) == {0}


def test_the_hints_bound_the_count() -> None:
    # two alike voices (their directions 0.6 apart): one speaker unless two are asked for
    rng = np.random.default_rng(3)
    centre = rng.normal(size=192)
    other = 0.6 * centre + 0.8 * np.linalg.norm(centre) * _orthogonal(centre, rng)
    alike = np.concatenate([c + 0.3 * rng.normal(size=(15, 192)) for c in (centre, other)]).astype(
        np.float32
    )
    assert set(cluster(alike).tolist()) == {0}
    split = cluster(alike, min_speakers=2)
    assert split.tolist() == [0] * 15 + [1] * 15
    assert len(set(cluster(voices([12, 20, 9]), max_speakers=2).tolist())) == 2


@pytest.mark.parametrize("count", [1, 2, 5, 8, 15])
def test_min_and_max_speakers_together_are_honoured_exactly(count: int) -> None:
    """min = max = N gives N speakers, whether the voices say fewer or more."""
    embeddings = voices([6, 5, 7, 6, 4, 6])  # six voices
    labels = cluster(embeddings, min_speakers=count, max_speakers=count)
    assert len(set(labels.tolist())) == count


def test_a_long_file_clustered_in_windows_gets_the_speakers_of_one_pass() -> None:
    """Clips fed a window at a time (two stages: windows, then their groups) are labelled
    as the whole file's clips clustered at once: the same speakers, numbered alike."""
    rng = np.random.default_rng(5)
    embeddings = voices([120, 90, 150, 60])
    turns = np.repeat(np.arange(len(embeddings)).reshape(-1, 10), 1, axis=0)
    order = np.concatenate(rng.permutation(turns))  # turns of ten clips, shuffled
    at_once = cluster(embeddings[order])
    windowed = Clustering(window=64)
    for first in range(0, len(order), 50):
        windowed.add(embeddings[order[first : first + 50]])
    assert windowed.finish().tolist() == at_once.tolist()
    assert len(set(at_once.tolist())) == 4


def _orthogonal(direction: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    other = rng.normal(size=direction.shape)
    other -= other @ direction / (direction @ direction) * direction
    return other / np.linalg.norm(other)


def word(text: str, start: float, end: float) -> Word:
    return Word(word=text, start=start, end=end, probability=0.9)


def segment(index: int, words: list[Word]) -> Segment:
    return Segment(
        id=index,
        seek=0,
        start=words[0].start,
        end=words[-1].end,
        text="".join(w.word for w in words),
        tokens=[1, 2, 3],
        temperature=0.0,
        avg_logprob=-0.2,
        compression_ratio=1.2,
        no_speech_prob=0.01,
        words=words,
    )


def test_a_segment_spoken_by_two_is_cut_between_their_words() -> None:
    said = [word(" Hello", 0.0, 0.5), word(" there.", 0.5, 1.0), word(" Hi!", 1.3, 1.6)]
    transcript = Transcript(language="en", duration=2.0, segments=[segment(0, said)])
    joined = join(transcript, [Turn(0.0, 1.1, 3), Turn(1.2, 2.0, 1)])
    assert [(s.speaker, s.text, s.start, s.end) for s in joined.segments] == [
        ("A", " Hello there.", 0.0, 1.0),
        ("B", " Hi!", 1.3, 1.6),
    ]
    assert [s.id for s in joined.segments] == [0, 1]


def test_a_word_outside_every_turn_goes_to_the_nearest() -> None:
    said = [word(" Yes.", 5.0, 5.4)]
    transcript = Transcript(language="en", duration=6.0, segments=[segment(0, said)])
    joined = join(transcript, [Turn(0.0, 1.0, 0), Turn(5.6, 6.0, 1)], names={1: "Ana"})
    assert joined.segments[0].speaker == "Ana"


def test_labels_run_past_z() -> None:
    assert [label(i) for i in (0, 25, 26, 27, 701, 702)] == ["A", "Z", "AA", "AB", "ZZ", "AAA"]


def test_der_counts_missed_false_alarm_and_confusion_outside_the_collar() -> None:
    reference = [Labelled(0.0, 10.0, "x"), Labelled(10.0, 20.0, "y")]
    hypothesis = [Labelled(0.0, 12.0, "b"), Labelled(12.0, 18.0, "a"), Labelled(25.0, 26.0, "a")]
    result = score(reference, hypothesis, collar=0.0)
    assert (result.missed, result.false_alarm, result.confusion) == (2.0, 1.0, 2.0)
    assert result.der == pytest.approx(5.0 / 20.0)
    assert result.mapping == {"b": "x", "a": "y"}


def test_the_collar_forgives_a_late_change_of_speaker() -> None:
    reference = [Labelled(0.0, 10.0, "x"), Labelled(10.0, 20.0, "y")]
    hypothesis = [Labelled(0.0, 10.2, "b"), Labelled(10.2, 20.0, "a")]
    assert score(reference, hypothesis).der == 0.0


def test_filterbank_frames_are_kaldis_and_each_bin_is_centred() -> None:
    tone = np.sin(2 * np.pi * 440 * np.arange(16000) / 16000).astype(np.float32)
    bank = fbank(tone)
    assert bank.shape == (frames(tone), 80) == (98, 80)
    assert np.abs(bank.mean(axis=0)).max() < 1e-4


def test_state_dict_reader_reads_tensors_and_refuses_anything_else(tmp_path: Path) -> None:
    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("ran",))

    path = tmp_path / "evil.pt"
    with zipfile.ZipFile(path, "w") as archive:
        buffer = io.BytesIO()
        pickle.dump({"w": Evil()}, buffer, protocol=2)
        archive.writestr("archive/data.pkl", buffer.getvalue())
    with pytest.raises(state_dict.StateDictError, match=r"\.print"):
        state_dict.load(path)


def test_state_dict_reader_reads_what_torch_saves(tmp_path: Path) -> None:
    import torch

    weights = {
        "conv.weight": torch.arange(24, dtype=torch.float32).reshape(2, 3, 4),
        "conv.weight_t": torch.arange(6, dtype=torch.float32).reshape(2, 3).t(),  # strided
        "bn.num_batches_tracked": torch.tensor(7),
    }
    path = tmp_path / "weights.pt"
    torch.save(weights, path)
    read = state_dict.load(path)
    assert sorted(read) == sorted(weights)
    for name, tensor in weights.items():
        assert np.array_equal(read[name], tensor.numpy())


def test_subtitles_carry_speakers_and_no_cue_holds_two() -> None:
    said = [word(" Hello", 0.0, 0.5), word(" there.", 0.5, 1.0), word(" Hi!", 1.1, 1.4)]
    transcript = Transcript(language="en", duration=2.0, segments=[segment(0, said)])
    joined = join(transcript, [Turn(0.0, 1.05, 0), Turn(1.05, 2.0, 1)])
    assert to_vtt(joined).split("\n\n")[1:] == [
        "00:00:00.000 --> 00:00:01.000\n<v A>Hello there.",
        "00:00:01.100 --> 00:00:01.400\n<v B>Hi!\n",
    ]
    assert "1\n00:00:00,000 --> 00:00:01,000\nA: Hello there.\n" in to_srt(joined)
    assert [s["speaker"] for s in to_diarized(joined)["segments"]] == ["A", "B"]


def test_a_transcript_without_speakers_has_no_diarized_form() -> None:
    said = [word(" Hello", 0.0, 0.5)]
    plain = Transcript(language="en", duration=1.0, segments=[segment(0, said)])
    with pytest.raises(InvalidRequest) as caught:
        to_diarized(plain)
    assert caught.value.param == "response_format"


def test_references_name_the_speakers_most_alike_and_no_other() -> None:
    embeddings = voices([10, 10, 10])
    labels = np.repeat([0, 1, 2], 10)
    rng = np.random.default_rng(7)
    reference_of_1 = embeddings[10:13] + 0.1 * rng.normal(size=(3, 192)).astype(np.float32)
    stranger = rng.normal(size=(3, 192)).astype(np.float32)  # nobody in the file
    names = name_speakers(embeddings, labels, [("Bo", reference_of_1), ("Zed", stranger)])
    assert names == {1: "Bo"}


def test_a_jobs_view_names_its_known_speakers_without_their_audio() -> None:
    known = (KnownSpeaker(name="Ana", audio="UklGRg=="),)
    options = TranscriptionOptions(diarization=Diarization(known=known))
    view = job_view(Job(id="job_1", options=options))
    assert list(view["options"]["diarization"]["known"]) == [{"name": "Ana"}]
