"""``GET /v1/models``: the served models, each with what it can do.

OpenAI's model object (``id``, ``object``, ``created``, ``owned_by``) plus what a client needs
to choose one: ``languages`` (``"multilingual"``, or ``["en"]`` for an English-only model),
``translate`` (into English: multilingual models only), ``default`` (the model a request
that names none, or names ``whisper-1``, gets) and ``aliases`` (``["whisper-1"]`` on the
default, empty elsewhere). ``whisper-1`` is not listed as a model of its own: it is a second
name of the default, which ``GET /v1/models/whisper-1`` answers with.

For the caller's key, each card also says ``allowed_languages`` (the key's languages this
model transcribes; null: any it transcribes) and ``default_language`` (what a request that
names none is transcribed in: the key's default, or its only language, else ``"en"`` on an
English-only model; null: detected).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from asrserve.api.access import caller
from asrserve.api.audio_routes import ready_model
from asrserve.api.deps import ApiContext
from asrserve.auth.principal import Principal
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import OPENAI_ALIAS, Catalog
from asrserve.engine.languages import LanguageRule
from asrserve.errors import NotFound, shown

router = APIRouter(prefix="/v1/models")
Ready = Annotated[ApiContext, Depends(ready_model)]
Caller = Annotated[Principal, Depends(caller)]


@router.get("")
async def list_models(ctx: Ready, principal: Caller) -> dict[str, Any]:
    assert ctx.catalog is not None
    catalog, rule = ctx.catalog, principal.languages
    cards = [model_card(model, catalog) | languages_for(model, rule) for model in catalog]
    return {"object": "list", "data": cards}


@router.get("/{model_id}")
async def get_model(model_id: str, ctx: Ready, principal: Caller) -> dict[str, Any]:
    assert ctx.catalog is not None
    model = ctx.catalog.get(model_id)
    if model is None:
        raise NotFound(f"no model '{shown(model_id)}'", param="model", code="model_not_found")
    return model_card(model, ctx.catalog) | languages_for(model, principal.languages)


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


def languages_for(model: ModelInfo, rule: LanguageRule) -> dict[str, Any]:
    """The languages a key may use this model in, and the one a request without
    ``language`` gets (see the module's doc)."""
    allowed = [code for code in rule.allowed if model.multilingual or code == "en"]
    default = rule.default or (rule.allowed[0] if len(rule.allowed) == 1 else None)
    if not model.multilingual:
        default = "en" if default in (None, "en") and rule.permits("en") else None
    return {"allowed_languages": allowed if rule.allowed else None, "default_language": default}
