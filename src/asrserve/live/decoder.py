"""Live audio through the scheduler: a window of a session's audio becomes one chunk at a
priority above interactive requests, with a deadline of its own, so live windows of many
sessions (and whatever else is pending for the same model) share forward passes."""

from __future__ import annotations

import asyncio
import functools

import numpy as np

from asrserve.audio.features import window_frames
from asrserve.batcher.scheduler import Scheduler
from asrserve.engine.base import CHUNK_SECONDS, SAMPLING_RATE, ChunkInput, Engine, RawSegment
from asrserve.settings.engine import EngineSettings
from asrserve.vocabulary import TranscriptionOptions

# Scheduler classes ahead of interactive requests (0); live audio never becomes a job. A
# turn's final decode goes before interim ones: its text is what a caption keeps.
FINAL_PRIORITY = -2
INTERIM_PRIORITY = -1


class LiveDecoder:
    def __init__(self, scheduler: Scheduler, settings: EngineSettings) -> None:
        self._scheduler = scheduler
        self._settings = settings

    def engine(self, model: str) -> Engine:
        """Where a model's features are made (:class:`InvalidRequest` if not served here)."""
        return self._scheduler.devices[0].features_engine(model, "here")

    async def _chunk(
        self, engine: Engine, audio: np.ndarray, full: bool, context: str = "", rescue: bool = True
    ) -> ChunkInput:
        duration = audio.shape[0] / SAMPLING_RATE
        windows = (CHUNK_SECONDS,) if full else engine.capabilities.windows(self._settings.windows)
        frames = window_frames(duration, windows)
        features = await asyncio.to_thread(functools.partial(engine.features, audio, frames))
        return ChunkInput(
            features=features, offset=0.0, duration=duration, context=context, rescue_loops=rescue
        )

    async def decode(
        self,
        session: str,
        options: TranscriptionOptions,
        audio: np.ndarray,
        deadline_s: float,
        context: str = "",
        *,
        final: bool,
        tenant: str = "",
    ) -> asyncio.Future[list[RawSegment]]:
        """The window's segments (conditioned on ``context``, the text said before it), once
        a device has run it; the future fails with ``DeadlineExceeded`` if none has started
        it within ``deadline_s``, and cancelling it before then drops the window unrun. An
        interim window whose text loops comes back empty (the final one is rescued)."""
        chunk = await self._chunk(self.engine(options.model), audio, False, context, final)
        deadline = self._scheduler.clock.now() + deadline_s
        priority = FINAL_PRIORITY if final else INTERIM_PRIORITY
        [future] = self._scheduler.submit_chunks(
            session, priority, options, [chunk], deadline, tenant=tenant
        )
        return future

    async def detect(
        self,
        session: str,
        model: str,
        audio: np.ndarray,
        deadline_s: float,
        among: tuple[str, ...] = (),
        tenant: str = "",
    ) -> tuple[str, float]:
        """The spoken language of ``audio`` (a multilingual model, no language given), the
        most probable of ``among`` if it names some (the caller's key allows no other),
        decided on a full 30 s window as Whisper's own detection is."""
        chunk = await self._chunk(self.engine(model), audio, full=True)
        deadline = self._scheduler.clock.now() + deadline_s
        return await self._scheduler.submit_detect(
            session, FINAL_PRIORITY, model, chunk, deadline, among, tenant=tenant
        )


def text_of(segments: list[RawSegment]) -> str:
    return "".join(segment.text for segment in segments).strip()
