"""The Wyoming protocol server beside HTTP: Home Assistant's speech-to-text (docs/wyoming.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field, model_validator

from asrserve.settings.fields import FLAG, LOOPBACK_HOSTS


class WyomingSettings(BaseModel):
    wyoming_port: int | None = Field(
        None,
        ge=0,
        le=65535,
        description="Serve the Wyoming protocol (Home Assistant's speech-to-text) on this TCP"
        " port too, 10300 by custom (unset: no Wyoming server; 0: a free port, logged).",
        json_schema_extra=FLAG,
    )
    wyoming_host: str = Field(
        "127.0.0.1",
        description="The Wyoming server's bind address. Wyoming has no authentication: bound"
        " beyond loopback, whoever reaches the port transcribes (a warning is logged).",
        json_schema_extra=FLAG,
    )
    wyoming_zeroconf: str | None = Field(
        None,
        min_length=1,
        max_length=63,
        pattern=r"^[^.\x00-\x1f\x7f]+$",
        description="Announce the Wyoming server on the local network (mDNS, zeroconf) under"
        " this name, as Home Assistant discovers Wyoming servers; needs ASRSERVE_WYOMING_HOST"
        " beyond loopback (unset: not announced).",
        json_schema_extra=FLAG,
    )
    wyoming_key: str | None = Field(
        None,
        repr=False,
        description="An API key's id or secret: Wyoming requests are that key's (its quotas,"
        " its languages); unset: the open caller's.",
    )
    wyoming_max_utterance_s: float = Field(
        60.0,
        gt=0,
        le=600,
        description="The longest utterance a Wyoming client may send (more: `error`"
        " `audio_too_long`, the connection closed).",
    )
    wyoming_idle_timeout_s: float = Field(
        60.0, gt=0, description="A Wyoming connection that sends nothing this long is closed."
    )

    @model_validator(mode="after")
    def _announced_beyond_loopback(self) -> WyomingSettings:
        if self.wyoming_zeroconf is not None and self.wyoming_host in LOOPBACK_HOSTS:
            raise ValueError(
                "wyoming_zeroconf announces the Wyoming server to the network, but it is bound"
                " to loopback: set wyoming_host (ASRSERVE_WYOMING_HOST) to an address others reach"
            )
        return self
