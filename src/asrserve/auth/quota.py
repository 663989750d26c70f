"""Daily audio quotas per key (UTC days), charged when work is accepted."""

from __future__ import annotations

import datetime as dt

from asrserve.auth.keys import KeyStore
from asrserve.auth.principal import Principal
from asrserve.errors import QuotaExceeded


async def charge(keys: KeyStore, principal: Principal, seconds: float) -> None:
    """Count ``seconds`` of audio against the caller's daily quota, or raise
    :class:`QuotaExceeded` (nothing counted) if they do not fit in what is left of today's."""
    minutes = principal.audio_minutes_per_day
    if principal.key_id is None or not minutes:
        return
    now = dt.datetime.now(dt.UTC)
    if await keys.charge(principal.key_id, now.date().isoformat(), seconds, minutes * 60) is None:
        midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
        retry = max(int((midnight - now).total_seconds()) + 1, 1)
        message = f"the daily quota of {minutes:g} audio minutes is used up (resets 00:00 UTC)"
        raise QuotaExceeded(message, retry_after=retry)
