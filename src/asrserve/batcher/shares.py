"""Each tenant's device time: what the scheduler's fair queueing across API keys reads.

Every forward pass is charged to the tenants of its windows, its device seconds split by
the encoder frames each window holds (a looping window that runs the fallback costs its
batch more, and the batch's tenants pay for it together). A tenant's account decays with
a half-life of :data:`HALF_LIFE_S`, so it says what the tenant took lately, not ever.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

HALF_LIFE_S = 10.0
NOBODY = ""  # the tenant of work no key sent (auth off): one tenant, no fairness to keep


def split(tenants: Sequence[str], frames: Sequence[int]) -> dict[str, float]:
    """Each tenant's part of a pass over windows of ``tenants`` holding ``frames`` encoder
    frames each (parts sum to 1; none if the pass holds no frames)."""
    total = sum(frames)
    parts: dict[str, float] = {}
    if total <= 0:
        return parts
    for tenant, held in zip(tenants, frames, strict=True):
        parts[tenant] = parts.get(tenant, 0.0) + held / total
    return parts


@dataclass
class DeviceShares:
    half_life: float = HALF_LIFE_S
    _accounts: dict[str, tuple[float, float]] = field(default_factory=dict)  # (s, as of)
    # told each charge as it is made (the tenant, its device seconds, the audio seconds of
    # its windows decoded for the first time): a daily meter
    listeners: list[Callable[[str, float, float], None]] = field(default_factory=list)

    def charge(
        self,
        tenants: Sequence[str],
        frames: Sequence[int],
        seconds: float,
        now: float,
        new_audio: Sequence[float] = (),
    ) -> None:
        """One pass of ``seconds`` on a device, over windows of ``tenants`` each holding
        ``frames`` encoder frames and ``new_audio`` seconds of audio not decoded before
        (none given: no audio, as for CPU steps)."""
        if seconds <= 0:
            return
        audio: dict[str, float] = {}
        for tenant, held in zip(tenants, new_audio or [0.0] * len(tenants), strict=True):
            audio[tenant] = audio.get(tenant, 0.0) + held
        for tenant, part in split(tenants, frames).items():
            share = seconds * part
            self._accounts[tenant] = (self.used(tenant, now) + share, now)
            for listener in self.listeners:
                listener(tenant, share, audio[tenant])

    def used(self, tenant: str, now: float) -> float:
        """Device seconds ``tenant`` took lately (decayed to ``now``)."""
        seconds, at = self._accounts.get(tenant, (0.0, now))
        return seconds * math.exp2(-max(now - at, 0.0) / self.half_life)

    def recent(self, now: float, within: float) -> Mapping[str, float]:
        """The device seconds (decayed to ``now``) of each tenant charged in the last
        ``within`` s: the tenants about, whether or not they have work waiting."""
        return {t: self.used(t, now) for t, (_, at) in self._accounts.items() if now - at < within}

    def standing(self, tenants: Iterable[str], now: float) -> Mapping[str, float]:
        """Each of ``tenants``' recent device seconds; accounts decayed to nothing go."""
        for tenant in [t for t in self._accounts if self.used(t, now) < 1e-3]:
            del self._accounts[tenant]
        return {tenant: self.used(tenant, now) for tenant in set(tenants)}
