"""A device the scheduler runs batches on: its replica of each served model, and the one
thread its inference runs in (off the event loop), where a call that hangs is left behind."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from asrserve.batcher.clock import Clock
from asrserve.engine.base import Engine
from asrserve.errors import InternalError, InvalidRequest
from asrserve.speakers.models import NoSpeakerModel, SpeakerModel

log = logging.getLogger(__name__)


class RunTimeout(InternalError):
    """A batch ran far longer than the device's measured speed allows: it hangs. Its
    chunks fail with this; the device goes on in a fresh thread."""

    default_code = "run_timeout"


@dataclass
class Device:
    """One device and its replica of each served model (by model id; the first is the
    default model's, which options naming no model run on), and the speaker model that
    diarization's embedding passes run on (shared by a node's devices: it holds no state)."""

    name: str
    engines: dict[str, Engine]
    speakers: SpeakerModel = field(default_factory=NoSpeakerModel)
    executor: ThreadPoolExecutor = field(init=False)
    last_used: dict[str, float] = field(default_factory=dict)  # model id → clock time
    running: str | None = None  # the model id of the batch it runs now

    def __post_init__(self) -> None:
        if not self.engines:
            raise ValueError(f"device {self.name} has no model")
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"device-{self.name}")

    @classmethod
    def of(cls, name: str, *engines: Engine) -> Device:
        return cls(name, {engine.model_id: engine for engine in engines})

    @property
    def engine(self) -> Engine:
        """The default model's replica."""
        return next(iter(self.engines.values()))

    def model_id(self, model: str) -> str:
        """The id of the model that ``model`` means ("": the default)."""
        return model or next(iter(self.engines))

    def engine_for(self, model: str) -> Engine:
        return self.engines[self.model_id(model)]

    def features_engine(self, model: str, where: str) -> Engine:
        """Where ``model``'s log-mel features are made (thread-safe, no weights needed);
        :class:`InvalidRequest` ``model_not_found`` if this device does not serve it (API and
        worker nodes disagree), the message saying ``where`` it is missing."""
        if self.model_id(model) not in self.engines:
            served = ", ".join(self.engines)
            message = f"model {model!r} is not served {where} ({served})"
            raise InvalidRequest(message, param="model", code="model_not_found")
        return self.engine_for(model)

    def replace_executor(self) -> None:
        """A fresh thread for the device: the old one is stuck in a call that hangs."""
        stuck = self.executor
        self.executor = ThreadPoolExecutor(1, thread_name_prefix=f"device-{self.name}")
        stuck.shutdown(wait=False, cancel_futures=True)

    async def run(self, clock: Clock, timeout: float, call: Callable[..., Any], *args: Any) -> Any:
        """``call(*args)`` in the device's thread, or :class:`RunTimeout` after ``timeout``
        (on ``clock``). A hung call cannot be stopped: its thread is left to itself, and the
        device goes on in a new one."""
        future = asyncio.get_running_loop().run_in_executor(self.executor, call, *args)
        done = asyncio.Event()
        future.add_done_callback(lambda _: done.set())
        await clock.wait(done, clock.now() + timeout)
        if not future.done():
            log.error("a batch on %s ran past %.0f s; leaving its thread", self.name, timeout)
            self.replace_executor()
            future.cancel()
            raise RunTimeout(f"the engine ran past {timeout:.0f} s on {self.name} (hung)")
        return future.result()


def on_loaded(engine: Engine, call: Callable[..., Any]) -> Callable[..., Any]:
    """``call`` (one of ``engine``'s methods), after loading the engine's weights again if
    they were released for idleness."""

    def run(*args: Any) -> Any:
        engine.ensure_loaded()
        return call(*args)

    return run
