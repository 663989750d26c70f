"""``asrserve_worker_requests_in_flight{priority}``, the worker's gauge for scaling worker
pods: it counts the jobs this node's consumer has claimed from the queue and not finished,
so a worker whose job slots (``ASRSERVE_PREFETCH_JOBS``) are full shows them all, and a job
still waiting in the queue is not counted.

The app runs in this process (``tests/support/inprocess.py``): the stores, queue, uploads,
decoding and scheduler real, the forward pass a :class:`FakeEngine` held at a
:class:`~tests.support.turnstile.Turnstile`. The worker node's own metrics port shows the
same gauge: ``tests/test_modes.py::test_sync_endpoint_and_keys`` (distributed).
"""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from asrserve.bench.corpus import Clip
from tests.support.api import job_status, submit_job, wait_job
from tests.support.inprocess import in_process
from tests.support.turnstile import Turnstile
from tests.support.wait import wait_until

GAUGE = re.compile(r'^asrserve_worker_requests_in_flight\{priority="(\w+)"\} (\S+)$', re.M)
IDLE = {"interactive": 0.0, "async": 0.0, "offline": 0.0}


def in_flight(http: TestClient) -> dict[str, float]:
    """The gauge's value for each priority, as ``/metrics`` shows it now."""
    return {priority: float(value) for priority, value in GAUGE.findall(http.get("/metrics").text)}


def test_in_flight_counts_the_jobs_a_worker_holds(corpus: list[Clip], tmp_path: Path) -> None:
    clips = [clip for clip in corpus if clip.duration <= 30][:3]
    with in_process(tmp_path / "data", {"ASRSERVE_PREFETCH_JOBS": "2"}) as app:
        http = app.client
        (engine,) = app.engines
        engine.gate = turnstile = Turnstile()
        turnstile.hold()  # the device keeps the first window: nothing claimed finishes
        try:
            ids = [submit_job(http, clip.path)["id"] for clip in clips]

            def statuses() -> list[str]:
                return sorted(job_status(http, job_id) for job_id in ids)

            claimed = ["queued", "running", "running"]
            wait_until(lambda: statuses() == claimed, 60, lambda: f"{statuses()} to be {claimed}")
            turnstile.until_waiting(1)
            # two job slots, both taken: the third job waits in the queue, not on the worker
            assert in_flight(http) == IDLE | {"async": 2.0}
        finally:
            turnstile.set()
        for job_id in ids:
            assert wait_job(http, job_id)["status"] == "succeeded", job_id
        # a job leaves the gauge once its result is stored and its queue entry acknowledged
        wait_until(lambda: in_flight(http) == IDLE, 30, lambda: f"{in_flight(http)} to be 0")
