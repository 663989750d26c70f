"""Response formats and timestamp restoration, without the model."""

from __future__ import annotations

import json

import numpy as np

from asrserve.audio.chunk import assemble, fixed_regions, layout, restore
from asrserve.audio.features import VAD, window_frames
from asrserve.audio.vad import SpeechDetector
from asrserve.engine.base import RawSegment, RawWord
from asrserve.engine.decoding import stack_padded
from asrserve.formats import ResponseFormat, WhisperOutput, render, render_whisper, timestamp
from asrserve.transcript import Segment, Transcript, Word
from asrserve.vocabulary import TranscriptionOptions
from tests.support.fakes import raw_segment


def seg(i: int, start: float, end: float, text: str, words: list[Word] | None = None) -> Segment:
    return Segment(
        id=i,
        seek=0,
        start=start,
        end=end,
        text=text,
        tokens=[1, 2],
        temperature=0.0,
        avg_logprob=-0.2,
        compression_ratio=1.1,
        no_speech_prob=0.01,
        words=words,
    )


TRANSCRIPT = Transcript(
    language="en",
    duration=3725.5,
    segments=[
        seg(
            0,
            0.0,
            1.5,
            " Hello there.",
            [Word(word=" Hello", start=0.0, end=0.6), Word(word=" there.", start=0.7, end=1.5)],
        ),
        seg(1, 3661.25, 3662.0, " Later on."),
    ],
)


def test_timestamps() -> None:
    assert timestamp(3661.25, decimal=",") == "01:01:01,250"
    assert timestamp(0.0005, decimal=".") == "00:00:00.000"
    assert timestamp(59.9996, decimal=".") == "00:01:00.000"


def test_srt_and_vtt() -> None:
    srt = render(TRANSCRIPT, ResponseFormat.SRT)
    assert srt == (
        "1\n00:00:00,000 --> 00:00:01,500\nHello there.\n\n"
        "2\n01:01:01,250 --> 01:01:02,000\nLater on.\n"
    )
    vtt = render(TRANSCRIPT, ResponseFormat.VTT)
    assert isinstance(vtt, str) and vtt.startswith("WEBVTT\n\n00:00:00.000 --> 00:00:01.500\n")


def test_json_text_and_verbose() -> None:
    assert render(TRANSCRIPT, ResponseFormat.JSON) == {"text": "Hello there. Later on."}
    assert render(TRANSCRIPT, ResponseFormat.TEXT) == "Hello there. Later on.\n"
    verbose = render(TRANSCRIPT, ResponseFormat.VERBOSE_JSON, words=True)
    assert isinstance(verbose, dict)
    json.dumps(verbose)
    assert verbose["duration"] == 3725.5 and verbose["language"] == "en"
    assert set(verbose["segments"][0]) == {
        "id",
        "seek",
        "start",
        "end",
        "text",
        "tokens",
        "temperature",
        "avg_logprob",
        "compression_ratio",
        "no_speech_prob",
    }
    assert verbose["words"][0] == {"word": "Hello", "start": 0.0, "end": 0.6}
    assert "words" not in render(TRANSCRIPT, ResponseFormat.VERBOSE_JSON)


def test_whisper_outputs_as_whisper_asr_webservice_writes_them() -> None:
    tab = TRANSCRIPT.model_copy(update={"segments": [seg(0, 0.0004, 1.2345, " a\tb")]})
    assert render_whisper(tab, WhisperOutput.TSV) == "start\tend\ttext\n0\t1234\ta b\n"
    assert render_whisper(TRANSCRIPT, WhisperOutput.TSV).splitlines()[2] == (
        "3661250\t3662000\tLater on."
    )
    assert render_whisper(TRANSCRIPT, WhisperOutput.TXT) == "Hello there.\nLater on.\n"
    assert render_whisper(TRANSCRIPT, WhisperOutput.SRT) == render(TRANSCRIPT, ResponseFormat.SRT)
    assert render_whisper(TRANSCRIPT, WhisperOutput.VTT) == render(TRANSCRIPT, ResponseFormat.VTT)
    result = json.loads(render_whisper(TRANSCRIPT, WhisperOutput.JSON))
    assert result["text"] == " Hello there. Later on." and result["language"] == "en"
    first, second = result["segments"]
    assert first["words"][1] == {"word": " there.", "start": 0.7, "end": 1.5, "probability": 0.0}
    assert second["words"] is None and second["start"] == 3661.25
    assert set(first) == {
        "id",
        "seek",
        "start",
        "end",
        "text",
        "tokens",
        "temperature",
        "avg_logprob",
        "compression_ratio",
        "no_speech_prob",
        "words",
    }


def raw(start: float, end: float, words: list[RawWord] | None = None) -> RawSegment:
    return raw_segment(start, end, " x", words)


def test_restore_puts_speech_times_back_on_the_file_clock() -> None:
    sr = 16000
    speech = [{"start": 2 * sr, "end": 4 * sr}, {"start": 10 * sr, "end": 12 * sr}]
    # Speech-only timeline: [0, 2) is file [2, 4), [2, 4) is file [10, 12).
    segments = restore([[raw(0.0, 1.5)], [raw(2.5, 3.5)]], speech, duration=20.0)
    assert [(s.id, s.start, s.end) for s in segments] == [(0, 2.0, 3.5), (1, 10.5, 11.5)]
    worded = restore([[raw(0, 0, [RawWord(" a", 2.2, 2.6, 0.9)])]], speech, duration=20.0)
    assert worded[0].words is not None and worded[0].words[0].start == 10.2


def test_restore_clamps_and_keeps_starts_monotonic() -> None:
    segments = restore([[raw(5.0, 9.0), raw(4.0, 30.0)]], [], duration=8.0)
    assert [(s.start, s.end) for s in segments] == [(5.0, 8.0), (5.0, 8.0)]


def test_assemble_restores_times_and_rounds_the_duration() -> None:
    options = TranscriptionOptions(task="translate")
    transcript = assemble([[raw(5.0, 9.0)]], [], 8.00049, options, multilingual=False)
    assert transcript == Transcript(
        language="en",
        duration=8.0,
        segments=restore([[raw(5.0, 9.0)]], [], 8.00049),
        task="translate",
    )


def test_assemble_defaults_the_language_to_english_for_english_only_models() -> None:
    chosen = TranscriptionOptions(language="de")
    assert assemble([], [], 1.0, TranscriptionOptions(), multilingual=False).language == "en"
    assert assemble([], [], 1.0, TranscriptionOptions(), multilingual=True).language == ""
    assert assemble([], [], 1.0, chosen, multilingual=True).language == "de"


def test_without_vad_files_are_cut_into_30s_windows() -> None:
    samples = 16000 * 65
    spans = layout(fixed_regions(samples), samples).spans
    assert [round(s.duration, 2) for s in spans] == [30.0, 30.0, 5.0]
    assert [s.offset for s in spans] == [0.0, 30.0, 60.0]
    assert [s.pieces for s in spans] == [((0, 480000),), ((480000, 960000),), ((960000, 1040000),)]


def silence_regions(seconds: int) -> list[dict[str, int]]:
    detector = SpeechDetector(VAD)
    detector.feed(np.zeros(16000 * seconds, dtype=np.float32))
    return detector.finish()


def test_short_audio_is_one_window_and_silence_has_no_chunks() -> None:
    short = layout(fixed_regions(16000 * 5), 16000 * 5)
    assert [(s.offset, s.duration) for s in short.spans] == [(0.0, 5.0)]
    assert layout(silence_regions(5), 16000 * 5).spans == []
    assert layout(silence_regions(65), 16000 * 65).spans == []


def test_window_buckets_hold_the_chunk_with_a_margin() -> None:
    windows = (5.0, 10.0, 15.0, 20.0, 30.0)
    assert window_frames(2.0, windows) == 500
    assert window_frames(4.6, windows) == 1000  # 4.6 s + 0.5 s margin does not fit 5 s
    assert window_frames(14.5, windows) == 1500
    assert window_frames(29.9, windows) == 3000
    assert window_frames(12.0, (30.0,)) == 3000  # full windows


def test_batches_are_padded_to_their_widest_window() -> None:
    stacked = stack_padded([np.ones((2, 3), np.float32), np.ones((2, 5), np.float32)])
    assert stacked.shape == (2, 2, 5)
    assert stacked[0, :, 3:].sum() == 0 and stacked[1].sum() == 10
