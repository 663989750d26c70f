"""Running a batch the scheduler chose: on its device's own thread, within the hang bound
(:meth:`Device.run`), as the batch's task asks (a whole file, Whisper windows, language
detection, speaker embeddings, speaker segmentation). It decides nothing: which items, on
which device and when is the scheduler's, and what a finished batch means for the queue is
the scheduler's too.

A batch of windows that raises is run again one window at a time, so the window that broke
it fails alone; windows final before the rest of their batch resolve at once; windows paused
between fallback passes come back as :class:`Paused` for the scheduler to queue again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from asrserve.batcher.clock import Clock
from asrserve.batcher.device import Device, RunTimeout, on_loaded
from asrserve.batcher.work import WorkItem, samples_of
from asrserve.batcher.yielding import Wanted
from asrserve.vocabulary import Task

log = logging.getLogger(__name__)

Timeout = Callable[[Sequence[WorkItem]], float]  # how long a batch may run before it is hung


class BatchExecutor:
    """Runs batches: one output per item, in order (its result, its exception, or
    :class:`Paused`). ``pending`` and ``recent`` tell a running batch of windows whether
    to give its device up between fallback passes (``yielding.Wanted``)."""

    def __init__(
        self,
        clock: Clock,
        timeout: Timeout,
        pending: Callable[[], list[WorkItem]],
        recent: Callable[[str], float],
    ) -> None:
        self.clock = clock
        self._timeout = timeout
        self._pending = pending
        self._recent = recent

    async def run(self, device: Device, batch: list[WorkItem]) -> list[Any]:
        """Each item's output; a failure of the whole batch is every item's."""
        try:
            if batch[0].chunk is None:
                audio, options = batch[0].audio, batch[0].options
                assert audio is not None
                engine = device.engine_for(options.model)
                run = on_loaded(engine, engine.transcribe)
                return [await device.run(self.clock, self._timeout(batch), run, audio, options)]
            return await self._chunks(device, batch)
        except Exception as exc:  # one bad batch must not stop the device loop
            log.exception("batch of %d failed on %s", len(batch), device.name)
            return [exc] * len(batch)

    async def _chunks(self, device: Device, batch: list[WorkItem]) -> list[Any]:
        chunks = [item.chunk for item in batch if item.chunk is not None]
        options, timeout = batch[0].options, self._timeout(batch)
        if options.task is Task.EMBED:
            banks = np.stack([chunk.features.T for chunk in chunks])
            return list(await device.run(self.clock, timeout, device.speakers.embed, banks))
        if options.task is Task.SEGMENT:
            audio = np.stack([samples_of(chunk.features) for chunk in chunks])
            return list(await device.run(self.clock, timeout, device.speakers.segment, audio))
        engine = device.engine_for(options.model)
        if options.task is Task.DETECT:
            detect = on_loaded(engine, engine.detect_language)
            features = [chunk.features for chunk in chunks]
            among = options.languages
            return list(await device.run(self.clock, timeout, detect, features, among))
        run = on_loaded(engine, engine.transcribe_batch)
        loop = asyncio.get_running_loop()
        pause = Wanted(batch, self._pending, self._recent, self.clock.now)

        def settled(index: int, segments: list[Any]) -> None:
            # a chunk final while the others of its batch are decoded again: its caller
            # need not wait for them
            loop.call_soon_threadsafe(_resolve, batch[index].future, segments)

        try:
            outputs = await device.run(self.clock, timeout, run, chunks, options, settled, pause)
            return pause.outputs(outputs)
        except RunTimeout:
            raise  # running its chunks again one by one would hang the device again
        except Exception:
            if len(batch) == 1:
                raise
        # Isolate the chunk that broke the batch: the others still get their results.
        results: list[Any] = []
        for item, chunk in zip(batch, chunks, strict=True):
            try:
                alone = self._timeout([item])
                results.extend(await device.run(self.clock, alone, run, [chunk], options))
            except Exception as exc:
                results.append(exc)
        return results


def _resolve(future: asyncio.Future[Any], result: Any) -> None:
    if not future.done():
        future.set_result(result)
