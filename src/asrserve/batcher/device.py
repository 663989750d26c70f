"""A device the scheduler runs batches on: its replica of each served model, and the one
thread its inference runs in (off the event loop)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from asrserve.engine.base import Engine
from asrserve.errors import InvalidRequest
from asrserve.speakers.embedder import NoSpeakerModel, SpeakerEmbedder


@dataclass
class Device:
    """One device and its replica of each served model (by model id; the first is the
    default model's, which options naming no model run on), and the speaker model that
    diarization's embedding passes run on (shared by a node's devices: it holds no state)."""

    name: str
    engines: dict[str, Engine]
    speakers: SpeakerEmbedder = field(default_factory=NoSpeakerModel)
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
