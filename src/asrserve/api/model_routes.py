"""``GET /v1/models``: the served models, each with what it can do.

OpenAI's model object (``id``, ``object``, ``created``, ``owned_by``) plus what a client needs
to choose one: ``languages`` (``"multilingual"``, or ``["en"]`` for an English-only model),
``translate`` (into English: multilingual models only), ``default`` (the model a request
that names none, or names ``whisper-1``, gets) and ``aliases`` (``["whisper-1"]`` on the
default, empty elsewhere). ``whisper-1`` is not listed as a model of its own: it is a second
name of the default, which ``GET /v1/models/whisper-1`` answers with.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from asrserve.api.audio_routes import ready_model
from asrserve.api.deps import ApiContext
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import OPENAI_ALIAS, Catalog
from asrserve.errors import NotFound, shown

router = APIRouter(prefix="/v1/models")
Ready = Annotated[ApiContext, Depends(ready_model)]


@router.get("")
async def list_models(ctx: Ready) -> dict[str, Any]:
    assert ctx.catalog is not None
    catalog = ctx.catalog
    return {"object": "list", "data": [model_card(model, catalog) for model in catalog]}


@router.get("/{model_id}")
async def get_model(model_id: str, ctx: Ready) -> dict[str, Any]:
    assert ctx.catalog is not None
    model = ctx.catalog.get(model_id)
    if model is None:
        raise NotFound(f"no model '{shown(model_id)}'", param="model", code="model_not_found")
    return model_card(model, ctx.catalog)


def model_card(model: ModelInfo, catalog: Catalog) -> dict[str, Any]:
    default = model == catalog.default
    return {
        "id": model.id,
        "object": "model",
        "created": 0,
        "owned_by": "asrserve",
        "languages": "multilingual" if model.multilingual else ["en"],
        "translate": model.multilingual,
        "default": default,
        "aliases": [OPENAI_ALIAS] if default else [],
    }
