"""How much of a batch's audio is transcribed while it runs: what ``GET /v1/batches/{id}``
shows as ``audio_seconds_done`` and ``asrserve batch run``'s bar counts."""

from __future__ import annotations

from asrserve.batch_api.models import Batch, BatchStatus
from asrserve.jobs.models import BatchBacklog, Job, JobStatus, Progress


def _batch(audio_seconds: float) -> Batch:
    return Batch(
        id="batch_1",
        input_file_id="file-a",
        expires_at=10,
        status=BatchStatus.IN_PROGRESS,
        audio_seconds=audio_seconds,
    )


def test_finished_jobs_count_whole_and_running_ones_by_their_windows() -> None:
    """100 s accepted: a 60 s job running with 3 of its 12 s of speech done (a quarter),
    30 s in queued jobs: the other 10 s is done."""
    running = Job(
        id="j1",
        status=JobStatus.RUNNING,
        admitted_s=60.0,
        progress=Progress(chunks_done=1, chunks_total=4, audio_done_s=3.0, audio_total_s=12.0),
    )
    assert _batch(100.0).audio_done(BatchBacklog(30.0, [running])) == 10.0 + 60.0 * 0.25


def test_a_running_job_that_knows_no_windows_yet_counts_as_not_started() -> None:
    starting = Job(id="j1", status=JobStatus.RUNNING, admitted_s=40.0)
    assert _batch(40.0).audio_done(BatchBacklog(0.0, [starting])) == 0.0


def test_a_batch_without_unfinished_jobs_is_all_done() -> None:
    assert _batch(75.5).audio_done(BatchBacklog(0.0, [])) == 75.5
