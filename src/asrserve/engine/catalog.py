"""The served models: what a request's ``model`` field may name.

Known before (or without) loading any model, so an API node that runs no inference still
validates requests. The first model is the default, which ``whisper-1`` (the name OpenAI's
clients send) and an omitted ``model`` mean.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from asrserve.engine.base import ModelInfo
from asrserve.errors import InvalidRequest

OPENAI_ALIAS = "whisper-1"


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

    def get(self, name: str | None) -> ModelInfo | None:
        """The model ``name`` means (None, "" and ``whisper-1``: the default), or None."""
        if not name or name == OPENAI_ALIAS:
            return self.default
        return next((model for model in self.models if model.id == name), None)

    def resolve(self, name: str | None, param: str = "model") -> ModelInfo:
        """:meth:`get`, or :class:`InvalidRequest` ``model_not_found`` naming what is served."""
        model = self.get(name)
        if model is None:
            served = ", ".join(f"'{i}'" for i in [*self.ids, OPENAI_ALIAS])
            raise InvalidRequest(
                f"model {str(name)[:100]!r} is not served here; use one of {served}",
                param=param,
                code="model_not_found",
            )
        return model
