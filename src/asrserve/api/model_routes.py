"""``GET /v1/models``: the served models, each with what it can do.

OpenAI's model object (``id``, ``object``, ``created``, ``owned_by``) plus what a client needs
to choose one: ``languages`` (``"multilingual"``, or ``["en"]`` for an English-only model),
``translate`` (into English: multilingual models only), ``default`` (the model a request
that names none, or names an alias, gets) and ``aliases`` (``["whisper-1",
"gpt-4o-transcribe-diarize"]`` on the default, empty elsewhere). An alias is not listed as a
model of its own: it is another name of the default, which ``GET /v1/models/whisper-1``
answers with. Each card also has
``keep_alive`` (seconds its weights stay loaded after their last use; -1 forever) and
``loaded`` (whether they are in memory now; null on a distributed node, whose models live on
the worker nodes).

``POST /v1/models/{id}/load`` (``?keep_alive=`` optional) and ``/unload``, admin keys only:
load the model's replicas now, or release them now (409 ``model_busy`` while it has work
pending or running; its next request loads it again). Embedded mode only: a distributed
node answers 409 ``models_on_workers`` (docs/models.md).

For the caller's key, each card also says ``allowed_languages`` (the key's languages this
model transcribes; null: any it transcribes) and ``default_language`` (what a request that
names none is transcribed in: the key's default, or its only language, else ``"en"`` on an
English-only model; null: detected).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext
from asrserve.api.intake import ready_model
from asrserve.api.openapi import errors
from asrserve.auth.principal import Principal
from asrserve.batcher.residency import Residency
from asrserve.engine.base import ModelInfo
from asrserve.engine.catalog import ALIASES, Catalog
from asrserve.errors import Conflict, Forbidden, NotFound, shown
from asrserve.languages import LanguageRule
from asrserve.requests import keep_alive_field

router = APIRouter(prefix="/v1/models")
Ready = Annotated[ApiContext, Depends(ready_model)]
Caller = Annotated[Principal, Depends(caller)]
ModelId = Annotated[str, Path(description="A served model's id, or an alias of the default model.")]
KeepAlive = Annotated[
    str | None,
    Query(
        description="How long its replicas stay loaded once idle: seconds or a duration "
        "(`5m`), -1 forever (as a request's `keep_alive`); omitted, its keep_alive is unchanged."
    ),
]
CARD = "The model's card, as `GET /v1/models` lists it"
OPERATED = errors(  # what loading and unloading a model (an operator's) may answer
    s403="Not an admin key (`admin_required`).",
    s404="Not a served model (`model_not_found`).",
    s409="`model_busy`: it has work pending or running (unload); `models_on_workers`: a "
    "distributed node, whose models live on the worker nodes.",
)


@router.get(
    "",
    response_description='`{"object": "list", "data": [...]}`: a card per served model, each '
    "with the fields above.",
)
async def list_models(ctx: Ready, principal: Caller) -> dict[str, Any]:
    """Every served model: OpenAI's card (``id``, ``object``, ``created``, ``owned_by``) plus
    ``languages`` (``"multilingual"`` or ``["en"]``), ``translate``, ``default`` and
    ``aliases``, and for the calling key ``allowed_languages`` (null: any) and
    ``default_language`` (null: detected). ``whisper-1`` is not a model of its own: it is
    listed as the default model's alias. Also ``keep_alive`` (seconds its weights stay
    loaded once idle, -1 forever: Ollama's, set per model by
    ``ASRSERVE_MODELS=base:keep_alive=5m`` and by each request's ``keep_alive`` field, an
    extension on transcriptions, translations, ``/v1/jobs`` and Batch API lines; the latest
    request wins) and ``loaded`` (in memory now; null on a distributed node;
    docs/models.md)."""
    assert ctx.catalog is not None
    return {"object": "list", "data": [_card(model, ctx, principal) for model in ctx.catalog]}


@router.get(
    "/{model_id}",
    response_description=f"{CARD}.",
    responses=errors(s404="Not a served model (`model_not_found`)."),
)
async def get_model(model_id: ModelId, ctx: Ready, principal: Caller) -> dict[str, Any]:
    """The model's card, as ``GET /v1/models`` lists it; ``GET /v1/models/whisper-1`` answers
    the default's card."""
    return _card(_served(model_id, ctx), ctx, principal)


@router.post(
    "/{model_id}/load",
    response_description=f"{CARD}, once its replicas are loaded on every device.",
    responses=OPERATED,
)
async def load_model(
    model_id: ModelId, ctx: Ready, principal: Caller, keep_alive: KeepAlive = None
) -> dict[str, Any]:
    """Load the model's replicas on every device now (admin keys); ``keep_alive`` sets
    how long they stay loaded once idle (as a request's does)."""
    model, residency = _operated(model_id, ctx, principal)
    await residency.load(model.id, keep_alive_field(keep_alive))
    return _card(model, ctx, principal)


@router.post(
    "/{model_id}/unload",
    response_description=f"{CARD}, once its replicas are released.",
    responses=OPERATED,
)
async def unload_model(model_id: ModelId, ctx: Ready, principal: Caller) -> dict[str, Any]:
    """Release the model's replicas now (admin keys); 409 while it has work. Its next
    request loads it again; the answer is its card."""
    model, residency = _operated(model_id, ctx, principal)
    await residency.unload(model.id)
    return _card(model, ctx, principal)


def _card(model: ModelInfo, ctx: ApiContext, principal: Principal) -> dict[str, Any]:
    """The model's card with its memory state and the caller's languages."""
    assert ctx.catalog is not None
    card = model_card(model, ctx.catalog) | memory_state(model, ctx)
    return card | languages_for(model, principal.languages)


def _served(model_id: str, ctx: ApiContext) -> ModelInfo:
    assert ctx.catalog is not None
    model = ctx.catalog.get(model_id)
    if model is None:
        raise NotFound(f"no model '{shown(model_id)}'", param="model", code="model_not_found")
    return model


def _operated(model_id: str, ctx: ApiContext, principal: Principal) -> tuple[ModelInfo, Residency]:
    """The model an operator loads or unloads, and what does it: 403 for a key that is not
    an admin's, 404 for a model not served, 409 on a distributed node."""
    if not principal.admin:
        raise Forbidden("loading and unloading models needs an admin key", code="admin_required")
    model = _served(model_id, ctx)
    if ctx.residency is None:
        raise Conflict(
            "models are loaded on the worker nodes in distributed mode: this node cannot load"
            " or unload them; set keep_alive on requests, or a model's default"
            " (ASRSERVE_MODELS=NAME:keep_alive=...) on the workers",
            param="model",
            code="models_on_workers",
        )
    return model, ctx.residency


def memory_state(model: ModelInfo, ctx: ApiContext) -> dict[str, Any]:
    """``keep_alive`` (s; -1 forever) and ``loaded``: the model's now in embedded mode; its
    configured default and null (not known here) on a distributed node."""
    if ctx.residency is not None:
        return {
            "keep_alive": ctx.residency.keep_alive(model.id),
            "loaded": ctx.residency.loaded(model.id),
        }
    default = ctx.service.settings.keep_alive
    return {"keep_alive": default if model.keep_alive is None else model.keep_alive, "loaded": None}


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
        "aliases": list(ALIASES) if default else [],
    }


def languages_for(model: ModelInfo, rule: LanguageRule) -> dict[str, Any]:
    """The languages a key may use this model in, and the one a request without
    ``language`` gets (see the module's doc)."""
    allowed = [code for code in rule.allowed if model.multilingual or code == "en"]
    default = rule.default or (rule.allowed[0] if len(rule.allowed) == 1 else None)
    if not model.multilingual:
        default = "en" if default in (None, "en") and rule.permits("en") else None
    return {"allowed_languages": allowed if rule.allowed else None, "default_language": default}
