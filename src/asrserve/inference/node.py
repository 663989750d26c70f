"""``asrserve worker``: a worker node of the distributed mode, with no HTTP.

It claims jobs from the shared Redis, runs them on its model replicas (one per device)
and stores the results, until SIGTERM or SIGINT; then it stops claiming, drains what is
in flight for ``shutdown_grace_s`` and hands back what is left.
"""

from __future__ import annotations

import asyncio
import faulthandler
import logging
import signal
from collections.abc import Callable

from asrserve.backends.backend import Backend, open_backend
from asrserve.batcher.recording import TrafficRecorder
from asrserve.engine.registry import load_engines
from asrserve.errors import StoreUnavailable
from asrserve.inference.probe_server import ProbeServer
from asrserve.inference.runtime import STOP_BOUND_S, EngineFactory, start_inference
from asrserve.metrics import Metrics
from asrserve.settings import Settings
from asrserve.waiting import cancel_all

log = logging.getLogger(__name__)
# Past the drain (``shutdown_grace_s``), what shutdown may take: the claim loops ending,
# cancelled jobs handing themselves back (up to 10 s), the other tasks ending (each step
# bounded by STOP_BOUND_S), Redis closing.
SHUTDOWN_SLACK_S = 20.0


def _log_tasks() -> None:
    for task in asyncio.all_tasks():
        where = " <- ".join(_awaits(task))
        log.error("shutdown stuck: task %s waits in %s", task.get_name(), where)


def _awaits(task: asyncio.Task[object]) -> list[str]:
    """Where a suspended task waits: its coroutine, what that awaits, ..., innermost last."""
    where: list[str] = []
    awaited: object = task.get_coro()
    while awaited is not None and len(where) < 64:
        frame = getattr(awaited, "cr_frame", None) or getattr(awaited, "ag_frame", None)
        if frame is None:
            where.append(repr(awaited)[:300])  # a future, or a coroutine that has finished
            break
        code = frame.f_code
        where.append(f"{code.co_qualname} ({code.co_filename}:{frame.f_lineno})")
        awaited = getattr(awaited, "cr_await", None) or getattr(awaited, "ag_await", None)
    return where


_UNREACHABLE: tuple[type[Exception], ...] = (TimeoutError, StoreUnavailable)


def _pinger(backend: Backend, loop: asyncio.AbstractEventLoop) -> Callable[[], bool]:
    """The probe server's readiness check, from its own thread: the broker answers a ping
    sent on the node's loop within a second (a stuck loop is not ready either)."""

    async def ping() -> None:
        await backend.ping()

    def reachable() -> bool:
        try:
            asyncio.run_coroutine_threadsafe(ping(), loop).result(timeout=1.0)
        except _UNREACHABLE:
            return False
        return True

    return reachable


async def run_worker(settings: Settings, engine_factory: EngineFactory = load_engines) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    backend = open_backend(settings)
    tasks = [asyncio.create_task(run(), name=run.__name__) for run in backend.background]
    metrics = Metrics()
    probes = None
    if settings.metrics_port:  # the scheduler's and jobs' metrics, as an API node has them
        # No key: aggregate counters only (no job ids, keys or text), on --host (loopback by
        # default); expose it to the scraper only (docs/security.md). Probes beside them.
        probes = ProbeServer(
            settings.host, settings.metrics_port, metrics.registry, _pinger(backend, loop)
        )
        log.info("worker metrics and probes on http://%s:%d", settings.host, probes.port)
    try:
        inference = await start_inference(
            settings, backend, engine_factory, metrics, TrafficRecorder.from_settings(settings)
        )
        log.info("worker node %s ready", backend.node)
        if probes is not None:
            probes.ready.set()
        await stop.wait()
        if probes is not None:
            probes.ready.clear()  # draining: no longer ready, still alive
        log.info("worker node %s stopping: draining in-flight jobs", backend.node)
        # A shutdown stuck past its bound writes every thread's stack to the log and ends
        # the process (exit status 1), instead of hanging until someone kills it.
        bound = settings.shutdown_grace_s + SHUTDOWN_SLACK_S
        faulthandler.dump_traceback_later(bound, exit=True)
        # The threads' stacks say little when the loop itself is idle, waiting on a task
        # that never ends: log every unfinished task's coroutine stack first.
        loop.call_later(bound - 1.0, _log_tasks)
        await inference.stop()
    finally:
        await cancel_all(tasks, STOP_BOUND_S)
        await backend.aclose()
        if probes is not None:
            probes.close()
        log.info("worker node %s stopped", backend.node)
