"""``GET /v1/webhooks/secret``: the secret the caller's webhooks are signed with."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.auth.principal import Principal

router = APIRouter(prefix="/v1/webhooks")


@router.get(
    "/secret",
    response_description='`{"object": "webhook_secret", "secret": "whsec_...", '
    '"scheme": "standard-webhooks-v1"}`.',
)
async def webhook_secret(
    ctx: Annotated[ApiContext, Depends(context)], principal: Annotated[Principal, Depends(caller)]
) -> dict[str, Any]:
    """Verify a webhook's ``webhook-signature`` with it (Standard Webhooks: the base64
    after ``whsec_`` is the HMAC-SHA256 key; docs/calling.md#webhooks, docs/security.md).

    ``{"object": "webhook_secret", "secret": "whsec_...", "scheme": "standard-webhooks-v1"}``:
    the secret the caller's webhooks are signed with."""
    return {
        "object": "webhook_secret",
        "secret": ctx.service.signer.shown(principal.owner),
        "scheme": "standard-webhooks-v1",
    }
