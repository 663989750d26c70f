"""The served models: what a request's ``model`` field may name.

Known before (or without) loading any model, so an API node that runs no inference still
validates requests. The first model is the default, which ``whisper-1`` (the name OpenAI's
clients send), ``gpt-4o-transcribe-diarize`` (OpenAI's diarizing model: its field rules are
``requests.py``'s) and an omitted ``model`` mean; for an API key whose requests are never
English, they mean the first multilingual model when the default is English-only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from asrserve.engine.base import ModelInfo
from asrserve.errors import InvalidRequest
from asrserve.languages import ANY_LANGUAGE, LanguageRule

OPENAI_ALIAS = "whisper-1"
DIARIZE_ALIAS = "gpt-4o-transcribe-diarize"
ALIASES = (OPENAI_ALIAS, DIARIZE_ALIAS)


@dataclass(frozen=True)
class Catalog:
    models: tuple[ModelInfo, ...]

    def __post_init__(self) -> None:
        if not self.models:
            raise ValueError("a catalog serves at least one model")
        ids = [model.id for model in self.models]
        if len(set(ids)) != len(ids):
            raise ValueError(f"model ids served twice: {ids}")

    @classmethod
    def of(cls, models: Sequence[ModelInfo]) -> Catalog:
        return cls(tuple(models))

    @property
    def default(self) -> ModelInfo:
        return self.models[0]

    @property
    def ids(self) -> list[str]:
        return [model.id for model in self.models]

    def __iter__(self) -> Iterator[ModelInfo]:
        return iter(self.models)

    def default_for(self, languages: LanguageRule) -> ModelInfo:
        """The model a request that names none means for a key with ``languages``: the
        default, or where it is English-only and the key's requests are not English, the
        first multilingual model served (the default if none is: validation says why)."""
        if self.default.multilingual or languages.english_only_serves:
            return self.default
        return self.first_multilingual or self.default

    @property
    def first_multilingual(self) -> ModelInfo | None:
        """The first served model that is not English-only, if any."""
        return next((model for model in self.models if model.multilingual), None)

    def get(self, name: str | None, languages: LanguageRule = ANY_LANGUAGE) -> ModelInfo | None:
        """The model ``name`` means (None, "" and an alias: :meth:`default_for` the key's
        ``languages``), or None."""
        if not name or name in ALIASES:
            return self.default_for(languages)
        return next((model for model in self.models if model.id == name), None)

    def resolve(
        self, name: str | None, param: str = "model", languages: LanguageRule = ANY_LANGUAGE
    ) -> ModelInfo:
        """:meth:`get`, or :class:`InvalidRequest` ``model_not_found`` naming what is served."""
        model = self.get(name, languages)
        if model is None:
            served = ", ".join(f"'{i}'" for i in [*self.ids, *ALIASES])
            raise InvalidRequest(
                f"model {str(name)[:100]!r} is not served here; use one of {served}",
                param=param,
                code="model_not_found",
            )
        return model
