"""Daily quotas per key (UTC days): audio, charged when work is accepted; device time,
charged after each forward pass (``inference/device_meter.py``) and checked when work is
accepted."""

from __future__ import annotations

import datetime as dt

from asrserve.auth.keys import KeyStore
from asrserve.auth.principal import Principal
from asrserve.errors import QuotaExceeded


async def charge(keys: KeyStore, principal: Principal, seconds: float) -> None:
    """Count ``seconds`` of audio against the caller's daily quota, or raise
    :class:`QuotaExceeded` (nothing counted) if they do not fit in what is left of today's,
    or if the caller's device seconds of today are used up."""
    if principal.key_id is None:
        return
    now = dt.datetime.now(dt.UTC)
    day = now.date().isoformat()
    device = principal.device_seconds_per_day
    if device and (await keys.spent(principal.key_id, day)).device_s >= device:
        message = f"the daily quota of {device:g} device seconds is used up (resets 00:00 UTC)"
        raise QuotaExceeded(message, retry_after=_until_midnight(now))
    minutes = principal.audio_minutes_per_day
    if minutes and await keys.charge(principal.key_id, day, seconds, minutes * 60) is None:
        message = f"the daily quota of {minutes:g} audio minutes is used up (resets 00:00 UTC)"
        raise QuotaExceeded(message, retry_after=_until_midnight(now))


def _until_midnight(now: dt.datetime) -> int:
    midnight = dt.datetime.combine(now.date() + dt.timedelta(days=1), dt.time(), dt.UTC)
    return max(int((midnight - now).total_seconds()) + 1, 1)
