"""Fast tests for the synthetic corpus builder and the WER helpers (no ASR model)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from asrserve.bench.corpus import SENTENCES, build_corpus, load_refs
from asrserve.bench.wer import normalize, wer, wer_one
from tests.support.corpus_languages import LANGUAGES, build_language_corpus
from tests.support.corpus_languages import SENTENCES as LANGUAGE_SENTENCES

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Hello, World!", "hello world"),
        ("  The   library\topens\n", "the library opens"),
        ("Don't stop", "dont stop"),
        ("Don\u2019t stop", "dont stop"),
        ("well-known fact.", "well known fact"),
        ("\uff21BC", "abc"),  # NFKC folds full-width letters
        ("", ""),
        ("?!...", ""),
        ("¿Dónde está la estación?", "dónde está la estación"),
        ("Do\u0301nde ESTÁ", "dónde está"),  # a combining accent is the composed letter
        ("Kannst du das Fenster SCHLIEẞEN?", "kannst du das fenster schliessen"),
        ("Non te esqueças do guarda-chuva!", "non te esqueças do guarda chuva"),
        ("Il libro è sul tavolo, c'è pane.", "il libro è sul tavolo cè pane"),
    ],
)
def test_normalize(text: str, expected: str) -> None:
    assert normalize(text) == expected


def test_wer_basic() -> None:
    assert wer(["The cat sat down."], ["the cat sat down"]) == 0.0
    assert wer_one("the cat sat down", "the dog sat down") == pytest.approx(0.25)
    assert wer_one("the cat sat down", "") == 1.0
    assert wer([], []) == 0.0
    # corpus level: 1 edit over 4 + 2 reference words
    assert wer(["a b c d", "e f"], ["a b x d", "e f"]) == pytest.approx(1 / 6)
    assert wer_one("a b", "a b c") == pytest.approx(0.5)  # insertion
    with pytest.raises(ValueError):
        wer(["a"], [])


def test_sentences_plain() -> None:
    assert len(set(SENTENCES)) == len(SENTENCES) >= 30
    assert not any(ch.isdigit() for s in SENTENCES for ch in s)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_build_corpus_and_cache(tmp_path: Path) -> None:
    from faster_whisper import decode_audio

    clips = build_corpus(tmp_path, n_clips=5, long_clip_seconds=40.0)
    assert len(clips) == 6
    short, long_clip = clips[:-1], clips[-1]
    assert len({c.path.suffix for c in clips}) >= 4
    for clip in short:
        assert 2.0 <= clip.duration <= 30.0, clip
    assert long_clip.duration >= 40.0
    for clip in clips:
        assert clip.path.parent == tmp_path and clip.text
        decoded = decode_audio(str(clip.path))
        assert abs(len(decoded) / 16000 - clip.duration) < 0.3, clip.path.name
    assert load_refs(tmp_path / "refs.json") == {c.path.name: c.text for c in clips}

    mtimes = {c.path: c.path.stat().st_mtime_ns for c in clips}
    again = build_corpus(tmp_path, n_clips=5, long_clip_seconds=40.0)
    assert again == clips
    assert {c.path: c.path.stat().st_mtime_ns for c in again} == mtimes


def test_language_sentences_plain() -> None:
    assert set(LANGUAGE_SENTENCES) == set(LANGUAGES) == {"de", "es", "it", "pt"}
    for pairs in LANGUAGE_SENTENCES.values():
        assert len(pairs) == 8, pairs  # four clips of two sentences
        texts = [text for pair in pairs for text in pair]
        assert len(set(texts)) == len(texts)
        assert not any(ch.isdigit() for text in texts for ch in text)


@pytest.mark.skipif(shutil.which("espeak-ng") is None, reason="espeak-ng not installed")
def test_build_language_corpus_and_cache(tmp_path: Path) -> None:
    from faster_whisper import decode_audio

    clips = build_language_corpus(tmp_path)
    assert [c.language for c in clips] == [
        lang for lang in ("de", "es", "it", "pt") for _ in "1234"
    ]
    assert {c.path.suffix for c in clips} == {".wav", ".flac", ".mp3", ".ogg"}
    pairs = LANGUAGE_SENTENCES["es"]
    assert clips[5].text == f"{pairs[2][0]} {pairs[3][0]}"
    assert clips[5].english == f"{pairs[2][1]} {pairs[3][1]}"
    for clip in clips:
        assert clip.path.parent == tmp_path
        decoded = decode_audio(str(clip.path))
        assert 2.0 < clip.duration < 10.0, clip
        assert abs(len(decoded) / 16000 - clip.duration) < 0.1, clip.path.name

    mtimes = {c.path: c.path.stat().st_mtime_ns for c in clips}
    again = build_language_corpus(tmp_path)
    assert again == clips
    assert {c.path: c.path.stat().st_mtime_ns for c in again} == mtimes
