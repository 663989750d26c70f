"""Which models' weights stay in memory: each model's ``keep_alive`` (Ollama's: ``-1``
always, ``0`` released once its work is done, ``N`` after N idle seconds), the replicas it
releases when that runs out, and an operator's load and unload.

A model's keep_alive starts as its default (its ``models`` entry's, else ``model_idle_s``'s
meaning); each job that ends sets it to the job's own ``keep_alive``, or back to the
default if the job named none: the latest request wins, as in Ollama. Its idle time counts
from the later of its last batch on the device and its last job's end. A model is never
released while a job of it is running (:meth:`Residency.begin`/:meth:`Residency.end`), any
of its work is pending, or a batch of it runs; the release itself runs in the device's
thread, so never under a running batch.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import Counter
from collections.abc import Callable, Mapping, Sequence

from asrserve.batcher.clock import Clock
from asrserve.batcher.device import Device
from asrserve.errors import Conflict
from asrserve.settings.keep_alive import FOREVER

log = logging.getLogger(__name__)

# A tenant's keep_alive keeps a model at most this long (or its default, if longer): past
# it, a tenant's ``-1`` or ``1e308`` would pin the model's memory for good.
TENANT_LONGEST_S = 3600.0
# A release the engine could not do (it kept its weights: a batch of them was still active)
# is tried again this much later, not at once.
RETRY_RELEASE_S = 5.0


class ModelBusy(Conflict):
    """An unload asked for while the model has work pending or running."""

    default_code = "model_busy"


class Residency:
    def __init__(
        self,
        devices: Sequence[Device],
        clock: Clock,
        pending: Callable[[str], int],
        defaults: Mapping[str, float],
        fallback: float,
    ) -> None:
        """``pending(model)``: its pending items; ``defaults``: keep_alive by model id,
        ``fallback`` for the others (s; negative: forever)."""
        self.devices = devices
        self.clock = clock
        self._pending = pending
        self._defaults = dict(defaults)
        self._fallback = fallback
        self._keep: dict[str, float] = {}
        self._users: Counter[str] = Counter()
        self._released: dict[str, float] = {}  # model id → when its last job ended
        self._retry_at: dict[tuple[str, str], float] = {}  # (device, model) → next try
        self._started = -math.inf  # when run() started: idle time counts from there
        self.changed = asyncio.Event()  # wakes the release loop: a job ended, a batch ran

    def model_id(self, model: str) -> str:
        return self.devices[0].model_id(model)

    def default(self, model: str) -> float:
        keep = self._defaults.get(self.model_id(model), self._fallback)
        return FOREVER if keep < 0 else keep

    def keep_alive(self, model: str) -> float:
        """The model's keep_alive now (s; -1: forever)."""
        model = self.model_id(model)
        return self._keep.get(model, self.default(model))

    def loaded(self, model: str) -> bool:
        """Whether any device holds the model's weights now."""
        model = self.model_id(model)
        return any(device.engines[model].loaded for device in self.devices)

    def begin(self, model: str) -> None:
        """A job of ``model`` runs: the model stays loaded until it :meth:`end`\\ s."""
        self._users[self.model_id(model)] += 1

    def end(self, model: str, keep_alive: float | None, *, tenant: bool = False) -> None:
        """A job of ``model`` ended; the model's keep_alive is now ``keep_alive`` (None:
        its default), counted from now. A ``tenant``'s job (not an operator's) may keep the
        model longer than its default, never shorter (one tenant's ``0`` would make every
        other tenant's next request pay the reload), and no longer than
        :data:`TENANT_LONGEST_S` past a finite default (nor for good)."""
        model = self.model_id(model)
        self._users[model] -= 1
        default = self.default(model)
        if keep_alive is None or (tenant and not _longer(keep_alive, default)):
            keep_alive = default
        elif tenant and _longer(keep_alive, max(default, TENANT_LONGEST_S)) and default >= 0:
            keep_alive = max(default, TENANT_LONGEST_S)
        self._keep[model] = keep_alive
        self._released[model] = self.clock.now()
        self.changed.set()

    def busy(self, model: str) -> bool:
        """A job of the model runs, its work is pending or a device runs a batch of it."""
        model = self.model_id(model)
        running = any(device.running == model for device in self.devices)
        return self._users[model] > 0 or self._pending(model) > 0 or running

    def release_at(self, device: Device, model: str) -> float | None:
        """When the device's replica of ``model`` is to be released (None: not now, for
        good or while the model is busy; the loop looks again when something changes)."""
        keep = self.keep_alive(model)
        if keep < 0 or not device.engines[model].loaded or self.busy(model):
            return None
        used = device.last_used.get(model, self._started)
        return max(used, self._released.get(model, -math.inf)) + keep

    async def run(self) -> None:
        """Release each replica when its model's keep_alive runs out, until cancelled."""
        self._started = self.clock.now()
        loop = asyncio.get_running_loop()
        while True:
            self.changed.clear()
            now, wake = self.clock.now(), math.inf
            for device in self.devices:
                for model, engine in device.engines.items():
                    when = self.release_at(device, model)
                    if when is None:
                        continue
                    when = max(when, self._retry_at.get((device.name, model), -math.inf))
                    if when > now:
                        wake = min(wake, when)
                        continue
                    await loop.run_in_executor(device.executor, engine.unload)
                    if engine.loaded:
                        self._retry_at[device.name, model] = now + RETRY_RELEASE_S
                        wake = min(wake, now + RETRY_RELEASE_S)
                        continue
                    keep = self.keep_alive(model)
                    log.info("model %s unloaded on %s: keep_alive %g s", model, device.name, keep)
            if math.isinf(wake):
                await self.changed.wait()
            else:
                await self.clock.wait(self.changed, wake)

    async def load(self, model: str, keep_alive: float | None = None) -> None:
        """Load the model's replica on every device now (each in its device's thread, after
        the batch it may be running); its idle time counts from now, and its keep_alive is
        ``keep_alive`` if given."""
        model = self.model_id(model)
        if keep_alive is not None:
            self._keep[model] = keep_alive
        loop = asyncio.get_running_loop()
        for device in self.devices:
            await loop.run_in_executor(device.executor, device.engines[model].ensure_loaded)
        self._released[model] = self.clock.now()
        self.changed.set()

    async def unload(self, model: str) -> None:
        """Release the model's replicas now; :class:`ModelBusy` while it has work pending
        or running (nothing is released then). Its next work loads it again."""
        model = self.model_id(model)
        if self.busy(model):
            raise ModelBusy(
                f"model '{model}' has work pending or running: unload it once it is idle",
                param="model",
            )
        loop = asyncio.get_running_loop()
        for device in self.devices:
            engine = device.engines[model]
            if engine.loaded:
                await loop.run_in_executor(device.executor, engine.unload)
        kept = [device.name for device in self.devices if device.engines[model].loaded]
        if kept:  # the release loop tries again only where its keep_alive runs out
            log.warning("model %s kept loaded on %s: a batch was still active", model, kept)
        else:
            log.info("model %s unloaded on every device: asked for", model)


def _longer(keep_alive: float, than: float) -> bool:
    """Whether ``keep_alive`` keeps a model at least as long as ``than`` (-1: forever)."""
    if than < 0:
        return keep_alive < 0
    return keep_alive < 0 or keep_alive >= than
