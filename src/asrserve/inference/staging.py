"""A job's staged decode driven from the event loop: each stage a step in the job's pool,
the audio it decoded charged to the owner's quota before any of it runs."""

from __future__ import annotations

import functools
import sys
from collections.abc import Awaitable, Callable, Sequence

from asrserve.audio.chunk import Span
from asrserve.audio.staged import Known, StagedDecode
from asrserve.engine.base import ChunkInput, Engine
from asrserve.inference.preprocess_stats import JobPool

ALL = sys.maxsize  # windows to read on for: the whole file

# Charges the owner for the seconds decoded beyond those already paid for (the second).
Charge = Callable[[float, float], Awaitable[None]]


class Staging:
    def __init__(self, decode: StagedDecode, pool: JobPool, paid: float, charge: Charge) -> None:
        self._decode = decode
        self._pool = pool
        self._paid = paid  # seconds the owner has been charged for
        self._charge = charge

    @property
    def known(self) -> Known:
        return self._decode.known

    async def advance(self, windows: int) -> Known:
        """Read on until ``windows`` windows are known or the file has ended, and
        charge what was decoded beyond what was paid for."""
        known = await self._pool.run(functools.partial(self._decode.advance, windows))
        if known.duration > self._paid:
            await self._charge(known.duration, self._paid)
            self._paid = known.duration
        return known

    async def inputs(
        self, spans: Sequence[Span], engine: Engine, windows: tuple[float, ...]
    ) -> list[ChunkInput]:
        """The model inputs of known windows, counted as handed on to the scheduler."""
        chunks = await self._pool.run(
            functools.partial(self._decode.inputs, spans, engine, windows)
        )
        self._pool.handed_on(sum(chunk.duration for chunk in chunks))
        return chunks
