"""The bench's DER and JER against pyannote.metrics' own, on random diarizations with
overlap: the figures the diarization gates and ``asrserve bench diarize`` report are the
field's (a collar of c seconds here is pyannote.metrics' ``collar=2c``)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyannote.core import Annotation, Segment, Timeline
from pyannote.metrics.diarization import DiarizationErrorRate, JaccardErrorRate

from asrserve.bench.der import Labelled, jer, score

Turns = list[Labelled]


def turns(speakers: str) -> st.SearchStrategy[Turns]:
    turn = st.builds(
        lambda start, length, who: Labelled(start, start + length, who),
        st.floats(0.0, 30.0).map(lambda t: round(t, 2)),
        st.floats(0.05, 6.0).map(lambda t: round(t, 2)),
        st.sampled_from(speakers),
    )
    return st.lists(turn, min_size=1, max_size=14)


def annotation(found: Turns) -> Annotation:
    out = Annotation()
    for index, turn in enumerate(found):
        out[Segment(turn.start, turn.end), index] = turn.speaker
    return out.support()  # one speaker's overlapping turns joined, as ours count them


def everywhere(*found: Turns) -> Timeline:
    """The evaluated time: all of it (pyannote warns when it must guess)."""
    return Timeline([Segment(0.0, max(t.end for turns in found for t in turns) + 1.0)])


def joined(found: Turns) -> Turns:
    """A speaker's overlapping turns as one (pyannote's ``support``)."""
    return [
        Labelled(segment.start, segment.end, label)
        for segment, _, label in annotation(found).itertracks(yield_label=True)
    ]


@settings(max_examples=150, deadline=None)
@given(turns("ABCD"), turns("wxyz"), st.sampled_from([0.0, 0.125, 0.25]))
def test_der_is_pyannotes(reference: Turns, hypothesis: Turns, collar: float) -> None:
    ref, hyp = joined(reference), joined(hypothesis)
    theirs = DiarizationErrorRate(collar=2 * collar, skip_overlap=False)(
        annotation(reference),
        annotation(hypothesis),
        uem=everywhere(reference, hypothesis),
        detailed=True,
    )
    ours = score(ref, hyp, collar)
    assert ours.speech == pytest.approx(theirs["total"], abs=1e-6)
    assert ours.missed == pytest.approx(theirs["missed detection"], abs=1e-6)
    assert ours.false_alarm == pytest.approx(theirs["false alarm"], abs=1e-6)
    assert ours.confusion == pytest.approx(theirs["confusion"], abs=1e-6)
    assert ours.der == pytest.approx(theirs["diarization error rate"], abs=1e-6)


@settings(max_examples=100, deadline=None)
@given(turns("ABCD"), turns("wxyz"))
def test_jer_is_pyannotes(reference: Turns, hypothesis: Turns) -> None:
    theirs = JaccardErrorRate()(  # type: ignore[no-untyped-call]
        annotation(reference), annotation(hypothesis), uem=everywhere(reference, hypothesis)
    )
    assert jer(joined(reference), joined(hypothesis)) == pytest.approx(theirs, abs=1e-6)


def test_overlap_is_scored_and_a_collar_forgives_only_edges() -> None:
    """Two voices at once, the hypothesis hearing one: the other's second is missed, at
    collar 0 and past a collar's reach."""
    reference = [Labelled(0.0, 4.0, "A"), Labelled(3.0, 7.0, "B")]
    hypothesis = [Labelled(0.0, 4.0, "x"), Labelled(4.0, 7.0, "y")]
    strict = score(reference, hypothesis, collar=0.0)
    assert (strict.missed, strict.false_alarm, strict.confusion) == (1.0, 0.0, 0.0)
    assert strict.der == pytest.approx(1 / 8)
    assert score(reference, hypothesis, collar=0.25).missed == pytest.approx(0.5)
