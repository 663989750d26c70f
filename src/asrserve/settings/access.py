"""Who may call: API keys from the environment, and the hosts and origins answered."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode

from asrserve.settings.fields import FLAG, AuthMode, names


class AccessSettings(BaseModel):
    auth: AuthMode = Field(
        AuthMode.AUTO,
        description="API keys on `/v1`: `auto` (on unless bound to loopback), `on`, `off`.",
        json_schema_extra=FLAG,
    )
    api_key: str | None = Field(
        None,
        repr=False,
        min_length=32,
        description="A tenant key's secret (32+ characters) from the environment (a"
        " container's Secret), stored hashed at `serve` start as the key named `env`; a new"
        " value rotates it, and unset it revokes that key.",
    )
    admin_api_key: str | None = Field(
        None,
        repr=False,
        min_length=32,
        description="An admin key (`/metrics`, the scheduler) stored the same way, as `env-admin`.",
    )
    api_key_file: Path | None = Field(
        None, description="A file holding `api_key`'s secret (a mounted Secret); wins over it."
    )
    admin_api_key_file: Path | None = Field(
        None, description="A file holding `admin_api_key`'s secret (what Prometheus reads too)."
    )
    allowed_hosts: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="`Host` names answered besides the bind address and loopback"
        " (comma-separated; `*`: any); others get `421`. Checked with auth off, and with auth"
        " on once set.",
    )
    allowed_origins: Annotated[tuple[str, ...], NoDecode] = Field(
        (),
        description="Origins (`scheme://host[:port]`) whose pages may open live WebSockets"
        " besides this server's own (comma-separated; `*`: any); others get"
        " `403 cross_origin_websocket`.",
    )

    _access_names = field_validator("allowed_hosts", "allowed_origins", mode="before")(names)
