"""``describe`` → ``info``: one ``asr`` program, asrserve, with each served model and the
languages it transcribes (a multilingual model: Whisper's; an English-only one: ``en``),
within the bound key's languages where it names some."""

from __future__ import annotations

from wyoming.info import AsrModel, AsrProgram, Attribution, Info

from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import Catalog
from asrserve.languages import LANGUAGE_NAMES, LanguageRule

PROGRAM = "asrserve"
ASRSERVE = Attribution(name="asrserve", url="")  # no public address to name
WHISPER = Attribution(name="OpenAI", url="https://github.com/openai/whisper")
VERSION = "0.1.0"


def info(catalog: Catalog, rule: LanguageRule) -> Info:
    models = [_model(model, rule) for model in catalog]
    program = AsrProgram(
        name=PROGRAM,
        attribution=ASRSERVE,
        installed=True,
        description="Whisper, batched with every other request this server runs",
        version=VERSION,
        models=[model for model in models if model.languages],
        supports_transcript_streaming=True,
    )
    return Info(asr=[program])


def languages(model: ModelInfo, rule: LanguageRule) -> list[str]:
    spoken = list(LANGUAGE_NAMES) if model.multilingual else ["en"]
    return [code for code in spoken if rule.permits(code)]


def _model(model: ModelInfo, rule: LanguageRule) -> AsrModel:
    return AsrModel(
        name=model.id,
        attribution=WHISPER,
        installed=True,
        description=f"Whisper {model.id}",
        version=None,
        languages=languages(model, rule),
    )
