"""Callbacks: where they may go, how they are retried and signed."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from asrserve.settings.fields import names


class WebhookSettings(BaseModel):
    webhook_allow: Annotated[tuple[str, ...], NoDecode] = Field(
        (), description="Hosts or CIDRs callbacks may reach although private (`10.0.0.0/8`)."
    )
    webhook_max_attempts: int = Field(6, ge=1, description="Deliveries of one webhook at most.")
    webhook_backoff_s: float = Field(
        1.0, gt=0, description="The wait before the second delivery, doubled for each next."
    )
    webhook_timeout_s: float = Field(
        10.0, gt=0, description="The deadline of one delivery: lookup, connect, send, answer."
    )
    webhook_concurrency: int = Field(8, ge=1, description="Deliveries in progress at once.")
    webhook_signing_key: str | None = Field(
        None,
        repr=False,
        description="The key each API key's webhook secret is derived from"
        " (`GET /v1/webhooks/secret`); unset: one made at first start, kept in"
        " `webhook-signing.key` beside the stored files.",
    )

    _webhook_names = field_validator("webhook_allow", mode="before")(names)
