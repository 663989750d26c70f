"""One job through the scheduler: its audio decoded once (a frame at a time), the decoded
length charged to the owner's quota, its windows submitted with a bounded look-ahead, and
their results put back on the file's clock."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Protocol, TypeVar

from asrserve.audio.chunk import Timeline, assemble
from asrserve.audio.decode import decode
from asrserve.audio.features import vad_config
from asrserve.audio.staged import StagedDecode
from asrserve.auth import quota
from asrserve.auth.principal import Principal
from asrserve.backends.backend import Backend
from asrserve.batcher.scheduler import Scheduler
from asrserve.batcher.shares import NOBODY
from asrserve.engine.base import CHUNK_SECONDS, SAMPLING_RATE, Engine, RawSegment
from asrserve.inference.diarizing import Audio, speaker_turns
from asrserve.inference.preprocess_stats import JobPool, PreprocessStats
from asrserve.inference.priority_pool import PriorityPool
from asrserve.inference.progress import Report, WindowProgress, ignore
from asrserve.inference.staging import ALL, Staging
from asrserve.jobs.models import Job, Progress
from asrserve.settings import Settings
from asrserve.speakers.join import join
from asrserve.transcript import Transcript
from asrserve.vocabulary import KnownSpeaker, Task, TranscriptionOptions

T = TypeVar("T")
# Windows of one job waiting or running at once, in batches (max_batch_size each): enough to
# fill a batch while the previous one runs, and what bounds a long file's memory.
WINDOWS_AHEAD = 2


class Durably(Protocol):
    """Runs a storage operation, retrying while storage fails (``Consumer.durably``)."""

    async def __call__(self, what: str, operation: Callable[[], Awaitable[T]]) -> T: ...


class Transcriber:
    def __init__(
        self, settings: Settings, backend: Backend, scheduler: Scheduler, durably: Durably
    ) -> None:
        self._settings = settings
        self._blobs = backend.blobs
        self._keys = backend.keys
        self._scheduler = scheduler
        self._durably = durably

    async def transcribe(
        self,
        job: Job,
        preprocess: PriorityPool,
        submitted: Callable[[], None],
        stats: PreprocessStats,
        report: Report = ignore,
    ) -> Transcript:
        """The job's transcript; ``submitted`` is called once its first windows (or its
        whole file) are in the scheduler, ``report`` with its progress each time the text
        that is final grows. Blocking steps run in ``preprocess``, at the job's priority; a
        job that succeeds adds its time there and the audio it handed on to ``stats``."""
        pool = JobPool(preprocess.at(job.priority, job.owner or NOBODY))
        residency = self._scheduler.residency  # its model stays loaded while the job runs
        residency.begin(job.options.model)
        try:
            transcript = await self._transcribe(job, pool, submitted, report)
        finally:
            residency.end(job.options.model, job.keep_alive, tenant=job.keep_alive_floor)
        stats.record(pool.audio_seconds, pool.busy_seconds)
        return transcript

    async def _transcribe(
        self, job: Job, pool: JobPool, submitted: Callable[[], None], report: Report
    ) -> Transcript:
        if self._scheduler.policy.whole_files and job.options.task is not Task.DETECT:
            return await self._transcribe_whole(job, pool, submitted, report)
        settings = self._settings
        async with self._blobs.local(job.audio_path) as audio:
            staged = StagedDecode(
                audio,
                max_seconds=settings.max_audio_seconds,
                # a chunking_strategy object asks for the VAD even where it is off
                vad=settings.vad_filter or job.options.chunking is not None,
                folder=settings.spool_dir,
                config=vad_config(job.options.chunking),
                first_window_s=settings.first_window_s,
            )
            charge = functools.partial(self._charge_decoded, job)
            staging = Staging(staged, pool, job.admitted_s, charge)
            transcribe = functools.partial(self._run, job, staging, submitted, report)
            try:
                return await self._with_speakers(job, audio, pool, transcribe)
            finally:
                staged.close()

    async def _with_speakers(
        self, job: Job, audio: Path, pool: JobPool, transcribe: Callable[[], Awaitable[Transcript]]
    ) -> Transcript:
        """What ``transcribe`` gives, its segments joined to the job's speakers if it asked
        for them: its diarization runs beside the transcription, started first."""
        diarization = job.options.diarization
        if diarization is None:
            return await transcribe()
        self._scheduler.devices[0].speakers.require()  # fail now, not after the transcription
        async with contextlib.AsyncExitStack() as held:
            references = [
                await held.enter_async_context(self._reference(known, audio.parent))
                for known in diarization.known
            ]
            turns = speaker_turns(
                self._scheduler,
                job,
                diarization,
                Audio(audio, references, self._settings.spool_dir),
                pool,
                self._settings.max_audio_seconds,
                self._deadline(job),
            )
            speakers = asyncio.create_task(turns, name=f"speakers-{job.id}")
            try:
                transcript = await transcribe()
                return join(transcript, *await speakers)
            finally:
                speakers.cancel()

    @contextlib.asynccontextmanager
    async def _reference(self, known: KnownSpeaker, folder: Path) -> AsyncIterator[Path]:
        """A known speaker's reference as a local file: its blob, or (a job stored before
        references were blobs) its base64 written out."""
        if known.audio_path:
            async with self._blobs.local(known.audio_path) as path:
                yield path
            return
        with tempfile.NamedTemporaryFile(dir=folder, suffix=".reference") as file:
            await asyncio.to_thread(Path(file.name).write_bytes, base64.b64decode(known.audio))
            yield Path(file.name)

    async def _run(
        self, job: Job, staging: Staging, submitted: Callable[[], None], report: Report
    ) -> Transcript:
        """Detect the language first where the model must (a multilingual model, no
        language given: once per job, from its first window), then run every window in it."""
        # the split is the staged decode's, the speakers are found beside: windows of jobs split
        # differently, or diarized or not, share batches
        options = job.options.model_copy(update={"chunking": None, "diarization": None})
        features = self._features(options.model)
        if not self._settings.staged_decode or options.task is Task.DETECT:
            await staging.advance(ALL)  # the whole file first (detect: its length is asked)
        detected: tuple[str, float] | None = None
        if options.task is Task.DETECT or (features.multilingual and options.language is None):
            detected = await self._detect(job, staging)
            submitted()
        if options.task is Task.DETECT:
            language, probability = detected or ("", 0.0)
            return Transcript(
                language=language,
                duration=round(staging.known.duration, 3),
                segments=[],
                task=options.task.value,
                language_probability=probability,
            )
        if detected is not None:
            options = options.model_copy(update={"language": detected[0], "languages": ()})
        per_chunk = await self._run_windows(job, options, staging, submitted, report)
        known = staging.known
        transcript = assemble(
            per_chunk, known.speech, known.duration, options, multilingual=features.multilingual
        )
        if detected is None:
            return transcript
        return transcript.model_copy(update={"language_probability": detected[1]})

    async def _detect(self, job: Job, staging: Staging) -> tuple[str, float] | None:
        """The language of the job's first window of speech (None: it has no speech),
        decided on a full 30 s encoder window as Whisper's own detection is, among the
        languages its key allows (one allowed language needs no detection)."""
        spans, among = (await staging.advance(1)).spans[:1], job.options.languages
        if not spans:
            return None
        if len(among) == 1:
            return among[0], 1.0
        features = self._features(job.options.model)
        chunks = await staging.inputs(spans, features, (CHUNK_SECONDS,))
        return await self._scheduler.submit_detect(
            job.id,
            job.priority,
            job.options.model,
            chunks[0],
            self._deadline(job),
            among,
            tenant=job.owner or "",
        )

    def _features(self, model: str) -> Engine:
        """Where a model's log-mel features are made (thread-safe, no weights needed)."""
        return self._scheduler.devices[0].features_engine(model, "by the node that ran the job")

    async def _run_windows(
        self,
        job: Job,
        options: TranscriptionOptions,
        staging: Staging,
        submitted: Callable[[], None],
        report: Report,
    ) -> list[list[RawSegment]]:
        """Submit the job's windows to the scheduler, at most ``lookahead`` of them waiting
        or running at once: a window's features are made when it is about to be needed, so
        a long file never holds more than that many in memory. The file is read on only as
        far as the windows to submit next need (:class:`StagedDecode`): the first window
        runs once it is known, the rest of the file decoded meanwhile. Progress is reported
        as the windows finish."""
        features = self._features(options.model)
        windows = features.capabilities.windows(self._settings.windows)
        lookahead = WINDOWS_AHEAD * self._settings.max_batch_size
        deadline = self._deadline(job)
        futures: list[asyncio.Future[list[RawSegment]]] = []
        known = await staging.advance(1)
        timeline = Timeline(known.speech, known.duration, complete=known.complete)
        progress = WindowProgress([span.duration for span in known.spans], timeline, report)
        try:
            while True:
                running = [future for future in futures if not future.done()]
                if len(running) >= lookahead:
                    await asyncio.wait(running, return_when=asyncio.FIRST_COMPLETED)
                    _raise_failed(futures)
                    continue
                # The first window goes alone: an idle device starts it while the others'
                # features are made (and the rest of the file is read), and its text (the
                # first a streamed answer shows) is not held back by a batch of the file.
                room = 1 if not futures else lookahead - len(running)
                if len(known.spans) - len(futures) < room and not known.complete:
                    known = await staging.advance(len(futures) + room)
                    timeline.update(known.speech, known.duration, complete=known.complete)
                    progress.grow([span.duration for span in known.spans])
                    continue
                batch = known.spans[len(futures) : len(futures) + room]
                if not batch:
                    break  # every window is in
                chunks = await staging.inputs(batch, features, windows)
                submitted_now = self._scheduler.submit_chunks(
                    job.id, job.priority, options, chunks, deadline, tenant=job.owner or ""
                )
                progress.watch(submitted_now)
                futures += submitted_now
                submitted()
            return list(await asyncio.gather(*futures))
        finally:
            submitted()
            for future in futures:
                future.cancel()  # no-op for the finished ones; drops the rest from pending

    async def _transcribe_whole(
        self, job: Job, pool: JobPool, submitted: Callable[[], None], report: Report
    ) -> Transcript:
        """The sequential baseline (policy ``none``, not the ``unbatched`` policy, which keeps
        this service's windows): the whole file through the engine's plain path, which takes
        the file's samples at once."""
        async with self._blobs.local(job.audio_path) as audio:
            samples = await pool.run(
                functools.partial(decode, audio, self._settings.max_audio_seconds)
            )
            seconds = samples.shape[0] / SAMPLING_RATE
            pool.handed_on(seconds)
            await self._charge_decoded(job, seconds)
            report(Progress(chunks_total=1, audio_total_s=round(seconds, 3)))  # one piece
            options = job.options.model_copy(update={"diarization": None})

            async def whole() -> Transcript:
                whole_job = self._scheduler.submit_whole(
                    job.id, job.priority, options, samples, self._deadline(job), job.owner or ""
                )
                submitted()
                result: Transcript = await whole_job
                return result

            return await self._with_speakers(job, audio, pool, whole)

    async def _charge_decoded(self, job: Job, seconds: float, paid: float = 0.0) -> None:
        """The owner's daily quota was charged what the file's header said at intake (and
        ``paid`` seconds since); charge what was decoded beyond that now, before any of it
        runs (:class:`QuotaExceeded` if it does not fit)."""
        extra = seconds - max(job.admitted_s, paid)
        if extra <= 0 or job.owner is None:
            return
        key = await self._durably("read key", lambda: self._keys.get(job.owner or ""))
        if key is None:
            return
        await quota.charge(self._keys, Principal.of(key, self._settings), extra)

    def _deadline(self, job: Job) -> float | None:
        if job.deadline_at is None:
            return None
        # wall clock → the scheduler's monotonic clock
        return self._scheduler.clock.now() + (job.deadline_at - time.time())


def _raise_failed(futures: list[asyncio.Future[list[RawSegment]]]) -> None:
    """A window failed: the job fails now, without running the rest of it."""
    for future in futures:
        if future.done() and not future.cancelled():
            error = future.exception()
            if error is not None:
                raise error
