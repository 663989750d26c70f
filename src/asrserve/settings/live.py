"""Live (WebSocket) sessions: how many, how idle, how their turns are decoded."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LiveSettings(BaseModel):
    live_max_sessions: int = Field(
        64,
        ge=0,
        description="Live sessions a node holds at once (more: `error` `too_many_sessions`,"
        " close 1013).",
    )
    live_max_sessions_per_key: int = Field(
        0,
        ge=0,
        description="Live sessions one API key (auth off: one client address) may hold open on"
        " a node; 0: a quarter of `live_max_sessions`, at least 1.",
    )
    live_idle_timeout_s: float = Field(
        60.0,
        gt=0,
        description="A session whose client sends nothing this long is closed"
        " (`session_idle_timeout`).",
    )
    live_interim_s: float = Field(
        1.0, gt=0, description="New audio between two interim decodes of an open turn."
    )
    live_interim_growth: float = Field(
        0.25,
        ge=0,
        le=1,
        description="...and at least this share of the turn so far: each interim decodes"
        " the whole turn, so a long turn is decoded less often (0: every `live_interim_s`).",
    )
    live_interim_deadline_s: float = Field(
        1.0, gt=0, description="An interim decode no device started by then is dropped."
    )
    live_final_deadline_s: float = Field(
        10.0,
        gt=0,
        description="A turn's final decode must start by then (else `...transcription.failed`).",
    )
    live_max_turn_s: float = Field(
        15.0,
        ge=5.0,
        le=29.0,
        description="With server VAD, a turn still going after this long is committed at its"
        " best pause in the last 3 s before it (the quietest 160 ms), and the speech goes on"
        " as the next turn; a session may set its own.",
    )
    live_burst_s: float = Field(
        10.0,
        gt=0,
        description="How far ahead of real time a client may send audio (more:"
        " `input_too_fast`, the session ends).",
    )
