"""The consumer: claims jobs from the queue and carries each one through the scheduler.

Per job: decode + VAD + features in the preprocessing pool, chunks to the scheduler,
results back in order, the transcript stored once, the queue entry acked only after that.

Online jobs (interactive, async) and offline Batch API items are claimed by two loops with
their own in-flight budgets and preprocessing pools, so a backlog of batch items can
never hold the slots or the decode threads an online request needs.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from asrserve.backends.backend import Backend
from asrserve.batcher.device import RunTimeout
from asrserve.batcher.scheduler import Scheduler
from asrserve.errors import AsrError, InternalError, StoreUnavailable
from asrserve.events import Finished
from asrserve.inference.preprocess_stats import PreprocessStats
from asrserve.inference.priority_pool import PriorityPool
from asrserve.inference.progress import ProgressWriter
from asrserve.inference.transcriber import Transcriber
from asrserve.jobs.models import Job, JobError
from asrserve.queue.base import Delivery
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import Priority
from asrserve.waiting import cancel_all

log = logging.getLogger(__name__)

CLAIM_BLOCK_S = 5.0
HAND_BACK_S = 5.0  # drain: how long cancelled jobs may take to hand themselves back
RETRY_MIN_S = 0.5
RETRY_MAX_S = 30.0
# What a store or queue raises while its storage fails (and may come back): retried.
TRANSIENT_ERRORS: tuple[type[Exception], ...] = (OSError, StoreUnavailable)
T = TypeVar("T")


@dataclass
class Lane:
    """A claim loop's share: which priorities, how many jobs in flight, which decode pool."""

    priorities: tuple[Priority, ...]
    capacity: int
    preprocess: PriorityPool
    # Distributed: claim only while fewer of the lane's chunks than this wait in the
    # scheduler (counting claimed jobs not decoded yet as one each), so that a worker node
    # holds what keeps its devices busy and no more: the rest stays in the shared queue
    # for other nodes. None: claim up to ``capacity`` (embedded: no one else to leave it to).
    ahead: int | None = None
    # What the pool's threads spent per job (a lane built without one measures into its own).
    stats: PreprocessStats = field(default_factory=lambda: PreprocessStats(1))
    in_flight: int = 0
    held: Counter[Priority] = field(default_factory=Counter)  # in flight, by priority
    unsubmitted: set[str] = field(default_factory=set)  # claimed, chunks not yet submitted
    changed: asyncio.Event = field(default_factory=asyncio.Event)  # a job ended, chunks left


def _limits(lane: Lane, room: int) -> dict[Priority, int]:
    """What the lane may claim of each priority: its first (most urgent) may take all the
    room; the others leave a quarter of its capacity to it, so that a backlog of async jobs
    (one tenant's flood) never holds every slot an interactive request needs."""
    top, *rest = lane.priorities
    kept = lane.capacity // 4 if rest else 0  # none under 4 slots: async would get none
    lower = lane.capacity - kept - sum(lane.held[priority] for priority in rest)
    return {top: room} | {priority: min(room, lower) for priority in rest}


class Isolation:
    """Jobs run side by side (shared), or one alone (nothing else on this worker runs
    meanwhile; new ones wait until it is done)."""

    def __init__(self) -> None:
        self._changed = asyncio.Condition()
        self._running = 0
        self._alone = False
        self._waiting_alone = 0  # they go first: shared jobs must not starve them

    @contextlib.asynccontextmanager
    async def shared(self) -> AsyncIterator[None]:
        async with self._changed:
            await self._changed.wait_for(lambda: not self._alone and not self._waiting_alone)
            self._running += 1
        try:
            yield
        finally:
            async with self._changed:
                self._running -= 1
                self._changed.notify_all()

    @contextlib.asynccontextmanager
    async def alone(self) -> AsyncIterator[None]:
        async with self._changed:
            self._waiting_alone += 1
            try:
                await self._changed.wait_for(lambda: not self._alone and self._running == 0)
            finally:
                self._waiting_alone -= 1
            self._alone = True
        try:
            yield
        finally:
            async with self._changed:
                self._alone = False
                self._changed.notify_all()


class Consumer:
    def __init__(
        self,
        settings: Settings,
        backend: Backend,
        scheduler: Scheduler,
        lanes: list[Lane],
        on_finished: Callable[[Job], Awaitable[None]],
    ) -> None:
        self._settings = settings
        self._store = backend.store
        self._queue = backend.queue
        self._events = backend.events
        self._scheduler = scheduler
        self._lanes = lanes
        self._on_finished = on_finished
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._deliveries: dict[str, Delivery] = {}
        self._user_cancelled: set[str] = set()
        self._claiming = True
        self._isolation = Isolation()
        self._transcriber = Transcriber(settings, backend, scheduler, self.durably)
        backend.events.on_cancel(self.cancel)

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def held(self, priority: Priority) -> int:
        """This priority's jobs claimed and not finished, over every lane: counted at the
        claim, uncounted when the job's task ends (its result stored and acknowledged, or the
        job handed back). Safe from another thread (a scrape): it reads, never iterates."""
        return sum(lane.held[priority] for lane in self._lanes)

    async def run(self) -> None:
        """Every lane's claim loop, until :meth:`stop_claiming` (then cancel it to end a
        blocking claim at once). It returns only when every loop has ended: with ``gather``
        it returned when the first did, and a loop whose cancellation was lost below it
        (seen under load on Python 3.11) went on claiming jobs after the drain."""
        async with asyncio.TaskGroup() as loops:
            for lane in self._lanes:
                loops.create_task(self._claim(lane))

    def stop_claiming(self) -> None:
        """The first shutdown phase: no job is claimed after this."""
        self._claiming = False
        for lane in self._lanes:
            lane.changed.set()

    async def _claim(self, lane: Lane) -> None:
        """Keep up to ``lane.capacity`` of the lane's jobs in flight (see ``Lane.ahead``)."""
        self._scheduler.on_taken(lane.changed.set)
        while self._claiming:
            lane.changed.clear()
            room = self._room(lane)
            if room <= 0:
                await lane.changed.wait()
                continue
            claim = functools.partial(self._queue.get, _limits(lane, room), CLAIM_BLOCK_S, room)
            claimed = await self.durably("claim", claim)
            if not self._claiming:  # stopped while the claim was on its way: not started
                for delivery in claimed:
                    await self.durably("release", functools.partial(self._queue.release, delivery))
                return
            for delivery in claimed:
                lane.in_flight += 1
                lane.held[delivery.priority] += 1
                lane.unsubmitted.add(delivery.job_id)
                self._deliveries[delivery.job_id] = delivery
                task = asyncio.create_task(self._handle(delivery, lane), name=delivery.job_id)
                self._tasks[delivery.job_id] = task
                done = functools.partial(self._done, delivery.job_id, lane, delivery.priority)
                task.add_done_callback(done)

    def _room(self, lane: Lane) -> int:
        room = lane.capacity - lane.in_flight
        if lane.ahead is None:
            return room
        waiting = self._scheduler.pending_count(lane.priorities) + len(lane.unsubmitted)
        return min(room, lane.ahead - waiting)

    async def heartbeat(self) -> None:
        """Renew the lease on every entry in flight, a third of a lease apart, so that no
        other node reclaims a job this one is still working on."""
        period = self._settings.lease_s / 3
        while True:
            await asyncio.sleep(period)  # a lease timer: there is no event to wait on
            try:
                await self._queue.extend(list(self._deliveries.values()))
            except TRANSIENT_ERRORS as exc:
                log.warning("lease renewal failed (%s)", exc)

    async def drain(self, grace: float) -> None:
        """Second shutdown phase: let in-flight jobs finish for ``grace`` s, then cancel them.

        Cancelled jobs go back to the queue and run again after the restart.
        """
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:  # each hands its job back: a few round trips
            _, pending = await asyncio.wait(pending, timeout=HAND_BACK_S)
        left = await cancel_all(pending, HAND_BACK_S)  # those that lost their cancellation
        if left:
            log.error("%d job(s) did not hand themselves back; their leases expire", len(left))

    def cancel(self, job_id: str) -> None:
        task = self._tasks.get(job_id)
        if task is not None:
            self._user_cancelled.add(job_id)
            task.cancel()

    def _done(self, job_id: str, lane: Lane, priority: Priority, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            # a bug, not a storage failure (those are retried): the entry stays claimed and
            # is handed out again at the next start.
            log.error("job %s: worker error", job_id, exc_info=task.exception())
        self._tasks.pop(job_id, None)
        self._deliveries.pop(job_id, None)
        self._user_cancelled.discard(job_id)
        lane.in_flight -= 1
        lane.held[priority] -= 1
        lane.unsubmitted.discard(job_id)
        lane.changed.set()

    async def durably(self, what: str, operation: Callable[[], Awaitable[T]]) -> T:
        """Run a store or queue operation, retrying with backoff while storage is failing
        (a full disk, a read-only or unreachable database). The job's state stays in
        memory meanwhile: nothing accepted is lost, nothing is done twice."""
        delay = RETRY_MIN_S
        while True:
            try:
                return await operation()
            except TRANSIENT_ERRORS as exc:
                log.warning("%s failed (%s); retrying in %.1f s", what, exc, delay)
                await asyncio.sleep(delay)  # a backoff: there is nothing to wait on
                delay = min(delay * 2, RETRY_MAX_S)

    async def _handle(self, delivery: Delivery, lane: Lane) -> None:
        job = await self.durably("read", lambda: self._store.get(delivery.job_id))
        if job is None or job.status.finished:
            await self.durably("ack", lambda: self._queue.ack(delivery))
            return
        if job.attempts >= self._settings.max_attempts:
            await self._give_up(delivery, job.attempts)
            return
        # A redelivered job may be what killed its last worker: it runs alone, so that if
        # it does so again, no other job is charged an attempt for it.
        redelivered = delivery.deliveries > 1
        try:
            async with self._isolation.alone() if redelivered else self._isolation.shared():
                started = await self.durably("start", lambda: self._store.start(job.id))
                if started is None:
                    await self.durably("ack", lambda: self._queue.ack(delivery))
                    return
                result = await self._run(started, lane)
        except asyncio.CancelledError:
            await self._hand_back(delivery, attempt=job.attempts + 1)
            raise
        # The work is done: storing, acknowledging and logging it takes a few round trips,
        # and shutdown lets them finish (bounded by the drain) rather than hand the job
        # back half-recorded, stored but neither acknowledged nor logged.
        await _to_the_end(self._conclude(delivery, job.id, result))

    async def _hand_back(self, delivery: Delivery, *, attempt: int) -> None:
        """Cancelled: by its user (done with it), or by shutdown: back to the queue, and
        ``attempt`` not counted if this worker got as far as starting it."""
        if delivery.job_id in self._user_cancelled:
            await self._queue.ack(delivery)
            return
        with contextlib.suppress(Exception):
            await asyncio.shield(self._store.requeue(delivery.job_id, attempt))
            await asyncio.shield(self._queue.release(delivery))

    async def _give_up(self, delivery: Delivery, attempts: int) -> None:
        """A job that was started too often without finishing (it crashed or hung its
        worker each time) is failed and dead-lettered, so that it stops taking workers down."""
        message = f"the job was started {attempts} times and never finished"
        error = JobError.of(InternalError(message, code="too_many_attempts"))
        failed = await self.durably("store", lambda: self._store.fail(delivery.job_id, error))
        reason = f"started {attempts} times without finishing"
        await self.durably("dead-letter", lambda: self._queue.dead_letter(delivery, reason))
        log.error("job %s dead-lettered: %s", delivery.job_id, reason)
        if failed is not None:
            await self._finished(failed)

    async def _store_result(self, job_id: str, result: Transcript | JobError) -> Job | None:
        if isinstance(result, JobError):
            return await self._store.fail(job_id, result)
        return await self._store.succeed(job_id, result)

    async def _run(self, job: Job, lane: Lane) -> Transcript | JobError:
        writer = ProgressWriter(self._store, self._events, job.id)
        try:
            return await self._transcriber.transcribe(
                job,
                lane.preprocess,
                functools.partial(self._submitted, job.id),
                lane.stats,
                writer,
            )
        except RunTimeout as exc:
            log.error("job %s failed: %s", job.id, exc)
            error = JobError.of(exc)
        except AsrError as exc:  # the audio, the owner's quota, a deadline passed
            error = JobError.of(exc)
        except Exception as exc:
            log.exception("job %s failed", job.id)
            message = f"transcription failed: {type(exc).__name__}"
            error = JobError.of(InternalError(message))
        finally:
            await writer.close()
        return error

    async def _conclude(
        self, delivery: Delivery, job_id: str, result: Transcript | JobError
    ) -> None:
        outcome = await self.durably("store", lambda: self._store_result(job_id, result))
        await self.durably("ack", lambda: self._queue.ack(delivery))
        if outcome is not None:
            log.info("job %s", outcome.status.value, extra=_job_fields(outcome))
            await self._finished(outcome)

    async def _finished(self, job: Job) -> None:
        self._events.finished(Finished(job.id, job.batch_id, bool(job.callback_url)))
        await self.durably("finish", lambda: self._on_finished(job))

    def _submitted(self, job_id: str) -> None:
        for lane in self._lanes:
            lane.unsubmitted.discard(job_id)


async def _to_the_end(step: Awaitable[None]) -> None:
    """Await ``step``; if the caller is cancelled meanwhile, still let it finish, then pass
    the cancellation on."""
    task = asyncio.ensure_future(step)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        await task
        raise


def _job_fields(job: Job) -> dict[str, object]:
    fields: dict[str, object] = {
        "job_id": job.id,
        "status": job.status.value,
        "priority": job.priority.name.lower(),
        "attempts": job.attempts,
        "audio_s": job.audio_duration,
    }
    if job.started_at is not None and job.finished_at is not None:
        fields["queue_ms"] = round((job.started_at - job.created_at) * 1000, 1)
        fields["run_ms"] = round((job.finished_at - job.started_at) * 1000, 1)
    if job.error is not None:
        fields["error"] = job.error.code
    return fields
