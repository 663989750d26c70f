"""Where the node listens, how it logs, how it stops."""

from __future__ import annotations

from pydantic import BaseModel, Field

from asrserve.settings.fields import FLAG


class ServerSettings(BaseModel):
    host: str = Field(
        "127.0.0.1",
        description="Bind address (API keys are on by default unless it is loopback only).",
        json_schema_extra=FLAG,
    )
    port: int = Field(8000, ge=0, le=65535, description="Port.", json_schema_extra=FLAG)
    log_level: str = Field("info", description="debug, info, warning.", json_schema_extra=FLAG)
    log_format: str = Field(
        "json",
        pattern="^(json|text)$",
        description="json (one object per line) or text.",
        json_schema_extra=FLAG,
    )
    shutdown_grace_s: float = Field(
        30.0, ge=0, description="On shutdown, in-flight jobs get this long to finish."
    )
