"""Translation, model cards and whisper-asr-webservice's routes, piece by piece: no server."""

from __future__ import annotations

import wave
from pathlib import Path

import numpy as np
import pytest

from asrserve.api.model_routes import model_card
from asrserve.audio.decode import decode
from asrserve.audio.raw import wrap_raw_pcm
from asrserve.batch_api.models import ENDPOINT, TRANSLATIONS
from asrserve.cli.batch import Ask
from asrserve.cli.main import local_options, parser
from asrserve.cli.main import transcribe as transcribe_command
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.errors import InvalidRequest
from asrserve.languages import LANGUAGE_NAMES, language_name
from asrserve.requests import parse_request
from asrserve.settings import Settings
from asrserve.vocabulary import Task

ENGLISH = ModelInfo(id="tiny.en", multilingual=False, default_beam_size=5)
BASE = ModelInfo(id="base", multilingual=True, default_beam_size=5)


def test_model_cards_say_what_each_model_can_do() -> None:
    catalog = Catalog.of([ENGLISH, BASE])
    assert model_card(ENGLISH, catalog) == {
        "id": "tiny.en",
        "object": "model",
        "created": 0,
        "owned_by": "asrserve",
        "languages": ["en"],
        "translate": False,
        "default": True,
        "aliases": ["whisper-1", "gpt-4o-transcribe-diarize"],
    }
    card = model_card(BASE, catalog)
    assert (card["languages"], card["translate"], card["default"], card["aliases"]) == (
        "multilingual",
        True,
        False,
        [],
    )


def test_translation_needs_a_multilingual_model_and_names_it() -> None:
    catalog = Catalog.of([ENGLISH, BASE])
    options = parse_request({"model": ["base"]}, catalog, task=Task.TRANSLATE).options
    assert (options.model, options.task, options.language) == ("base", Task.TRANSLATE, None)
    with pytest.raises(InvalidRequest) as caught:
        parse_request({"model": ["whisper-1"]}, catalog, task=Task.TRANSLATE)
    assert (caught.value.code, caught.value.param) == ("translation_unsupported", "model")
    assert "English-only" in caught.value.message


def test_raw_pcm_becomes_a_wav_file_with_the_same_samples(tmp_path: Path) -> None:
    samples = (np.sin(np.arange(16_000) / 7.0) * 12_000).astype("<i2")
    path = tmp_path / "upload"
    path.write_bytes(samples.tobytes() + b"\x01")  # and half a sample, dropped
    size = wrap_raw_pcm(path)
    assert size == path.stat().st_size == 44 + samples.nbytes
    with wave.open(str(path)) as wav:
        rate, channels, width = wav.getframerate(), wav.getnchannels(), wav.getsampwidth()
        assert (rate, channels, width, wav.getnframes()) == (16_000, 1, 2, 16_000)
    decoded = decode(path, max_seconds=10)
    assert np.array_equal(np.round(decoded * 32768).astype(np.int16), samples)
    assert [p.name for p in tmp_path.iterdir()] == ["upload"]  # no leftover part file


def test_language_names_are_whispers() -> None:
    from faster_whisper.tokenizer import _LANGUAGE_CODES

    assert set(LANGUAGE_NAMES) == set(_LANGUAGE_CODES)
    assert (language_name("en"), language_name("ht"), language_name("yue")) == (
        "english",
        "haitian creole",
        "cantonese",
    )
    assert language_name("xx") == "xx"


def test_local_transcribe_checks_task_and_language_before_loading(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parser().parse_args(["transcribe", "a.wav", "--task", "translate", "--language", "de"])
    assert (args.task, args.language) == ("translate", "de")
    settings = Settings()
    assert local_options(settings, "transcribe", "en").language == "en"
    with pytest.raises(InvalidRequest) as caught:
        local_options(settings, "transcribe", "de")
    assert caught.value.code == "unsupported_language"
    missing = Path("never-read.wav")
    assert transcribe_command(settings, [missing], "txt", None, task="translate") == 2
    assert "English-only and cannot translate" in capsys.readouterr().err


def test_batch_run_asks_for_the_task_and_language() -> None:
    args = parser().parse_args(
        ["batch", "run", "dir", "--task", "translate", "--language", "de", "--format", "srt"]
    )
    assert Ask.of(args) == Ask(TRANSLATIONS, {"response_format": "srt", "language": "de"})
    plain = parser().parse_args(["batch", "run", "dir"])
    assert Ask.of(plain) == Ask(ENDPOINT, {"response_format": "text"})
