"""The distributed mode as users run it: redis-server, API nodes and worker nodes as
separate processes on loopback, the real model, real speech."""

from __future__ import annotations

import concurrent.futures
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import httpx
import openai
import pytest
from wyoming.asr import Transcript, TranscriptChunk

from asrserve.bench.conversations import build
from asrserve.bench.corpus import Clip, write_float_wav
from asrserve.bench.redis_process import RedisProcess
from asrserve.bench.voices import debian
from asrserve.bench.wer import wer_one
from asrserve.cli.server_process import ServerProcess, free_port
from tests.support.api import submit_job, transcribe_text, wait_job
from tests.support.batches import create_batch, line, upload_audio
from tests.support.cluster import Cluster
from tests.support.servers import Receiver
from tests.support.wait import wait_until
from tests.support.wyoming import pcm16, transcribed

pytestmark = pytest.mark.slow

TIMEOUT = httpx.Timeout(120.0, connect=10.0)


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisProcess]:
    """One redis-server (AOF on) for the module; a test that stops or kills it starts it
    again itself, as an operator would."""
    server = RedisProcess(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def cluster(tmp_path: Path, redis: RedisProcess) -> Iterator[Cluster]:
    """The module's redis-server, emptied, and nodes started by the test (all stopped at
    its end, so nothing of one test writes into the next)."""
    deployment = Cluster(tmp_path, redis, env={"ASRSERVE_LEASE_S": "3"})
    client = deployment.client()
    try:
        client.flushall()
    finally:
        client.close()
    try:
        yield deployment
    finally:
        deployment.stop()


@pytest.fixture(scope="module")
def short_clips(corpus: list[Clip]) -> list[Clip]:
    return sorted((c for c in corpus if c.duration <= 8), key=lambda c: c.duration)[:3]


def logged_jobs(cluster: Cluster, count: int) -> Counter[str]:
    """How often the workers logged each job as finished, once ``count`` jobs are logged (a
    worker logs a job just after storing the result that a client may have read already)."""

    def logged() -> Counter[str]:
        return Counter(job_id for w in cluster.workers for job_id, _ in w.finished_jobs())

    wait_until(lambda: len(logged()) >= count, 30, f"{count} jobs in the workers' logs")
    return logged()


def exactly_once(cluster: Cluster, job_ids: set[str], *, others: int = 0) -> None:
    """Every job of ``job_ids``, and ``others`` more (synchronous requests: the client never
    sees their ids), had its result stored by exactly one worker, once."""
    stored = logged_jobs(cluster, len(job_ids) + others)
    assert job_ids <= set(stored) and len(stored) == len(job_ids) + others, cluster.logs()
    assert max(stored.values()) == 1, [j for j, n in stored.items() if n > 1]


def queue_is_empty(cluster: Cluster) -> bool:
    client = cluster.client()
    try:
        streams = [f"asrserve:q:{name}" for name in ("interactive", "async", "batch")]
        return all(client.xlen(s) == 0 for s in streams) and not client.hlen("asrserve:queued")
    finally:
        client.close()


def batch_jobs(cluster: Cluster, batch_id: str) -> dict[str, dict[str, Any]]:
    """Each job of the batch, as stored in Redis."""
    client = cluster.client()
    try:
        members = cast(list[bytes], client.zrange(f"asrserve:jobs:batch:{batch_id}", 0, -1))
        ids = [member.decode() for member in members]
        docs = client.mget([f"asrserve:job:{i}" for i in ids]) if ids else []
    finally:
        client.close()
    return {i: json.loads(doc) for i, doc in zip(ids, docs, strict=True) if doc}


def statuses(cluster: Cluster, batch_id: str) -> dict[str, str]:
    return {i: job["status"] for i, job in batch_jobs(cluster, batch_id).items()}


def in_the_aof(cluster: Cluster, job_ids: list[str]) -> bool:
    """Whether redis-server has written every one of the jobs to its append-only file (what
    a SIGKILL of redis-server, unlike a power cut, cannot take back)."""
    aof = b"".join(path.read_bytes() for path in cluster.redis.dir.rglob("*.aof*"))
    return all(job_id.encode() in aof for job_id in job_ids)


REQUESTS = 24  # more than the 16 clients at a time, so the queue holds work for all three


def test_two_api_nodes_three_workers_24_requests_exactly_once(
    cluster: Cluster, short_clips: list[Clip]
) -> None:
    """Requests through both API nodes, taken by three workers: each stored exactly once,
    read back through the other node, listed by either node over more than one page.
    (The listing's paging itself, up to the 100 a page allowed, against redis-server:
    tests/unit/test_backends.py::TestRedisJobStore::test_page_newest_first_with_cursor_and_filter
    and ::test_pages_match_sqlite; through the HTTP API: tests/test_api_inprocess.py::
    test_job_listing.)"""
    apis = [cluster.api(), cluster.api()]
    for _ in range(3):
        cluster.worker()

    def one(n: int) -> tuple[str, str, Clip]:
        api, clip = apis[n % 2], short_clips[n % len(short_clips)]
        with httpx.Client(base_url=api.url, timeout=TIMEOUT) as http:
            if n % 4 == 0:  # a quarter synchronous, the rest async jobs
                return "", transcribe_text(http, clip.path), clip
            job = submit_job(http, clip.path)
            other = apis[(n + 1) % 2]  # read it back through the other API node
        with httpx.Client(base_url=other.url, timeout=TIMEOUT) as http:
            done = wait_job(http, job["id"], wait=30)
        assert done["status"] == "succeeded" and done["attempts"] == 1, done
        return job["id"], done["result"]["text"], clip

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        results = list(pool.map(one, range(REQUESTS)))
    assert len(results) == REQUESTS
    for _, text, clip in results:
        assert wer_one(clip.text, text) <= 0.25, (clip.text, text)
    with httpx.Client(base_url=apis[0].url, timeout=TIMEOUT) as http:
        page = REQUESTS - 1  # one job past the first page
        listed = http.get("/v1/jobs", params={"limit": page, "status": "succeeded"}).json()
    assert len(listed["data"]) == page and listed["has_more"]
    jobs = {job_id for job_id, _, _ in results if job_id}
    exactly_once(cluster, jobs, others=REQUESTS - len(jobs))
    assert all(len(w.finished_jobs()) > 0 for w in cluster.workers)  # all three took work
    assert queue_is_empty(cluster)


def test_kill_9_worker_mid_batch(cluster: Cluster, short_clips: list[Clip]) -> None:
    api = cluster.api()
    doomed = cluster.worker()
    client = openai.OpenAI(base_url=f"{api.url}/v1", api_key="unused", max_retries=0)
    file_ids = upload_audio(client, [clip.path for clip in short_clips])
    lines = [line(f"r{i}", file_ids[i % len(file_ids)]) for i in range(36)]
    batch_id = create_batch(client, lines, cluster.root)

    def progress() -> int:
        counts = client.batches.retrieve(batch_id).request_counts
        return counts.completed if counts is not None else 0

    def under_way() -> bool:  # jobs done, and others running
        now = list(statuses(cluster, batch_id).values())
        return now.count("succeeded") >= 4 and "running" in now

    wait_until(under_way, 180, "the batch to be under way, a job running")
    doomed.kill()
    # Read after the kill: a job still "running" now was in flight when the worker died (a
    # read before the kill could see a job that then finished before the signal landed).
    running = {j for j, status in statuses(cluster, batch_id).items() if status == "running"}
    assert running, "no job was in flight at the kill"
    assert not running & {job_id for job_id, _ in doomed.finished_jobs()}, running
    assert progress() < 36, "the batch finished before the worker could be killed"
    successor = cluster.worker()
    wait_until(lambda: client.batches.retrieve(batch_id).status == "completed", 240, "the batch")
    done = client.batches.retrieve(batch_id)
    assert done.request_counts is not None
    assert (done.request_counts.total, done.request_counts.completed) == (36, 36), done
    assert done.output_file_id is not None
    output = [json.loads(x) for x in client.files.content(done.output_file_id).text.splitlines()]
    assert [entry["custom_id"] for entry in output] == [f"r{i}" for i in range(36)]
    assert all(entry["response"]["status_code"] == 200 for entry in output)
    for i, entry in enumerate(output):
        text = entry["response"]["body"]["text"]
        assert wer_one(short_clips[i % len(short_clips)].text, text) <= 0.25
    # Only the interrupted jobs ran twice. (The doomed worker's log is no record of what it
    # stored: the kill can land between storing a forward pass's results and logging them.)
    attempts = {j: job["attempts"] for j, job in batch_jobs(cluster, batch_id).items()}
    assert len(attempts) == 36
    assert attempts == {j: 2 if j in running else 1 for j in attempts}, running
    # ... and ran again on the successor, which ran nothing the doomed worker had logged.
    wait_until(lambda: running <= {j for j, _ in successor.finished_jobs()}, 30, "the rerun")
    again = {job_id for job_id, _ in successor.finished_jobs()}
    assert not again & {job_id for job_id, _ in doomed.finished_jobs()}, again
    assert queue_is_empty(cluster)


def test_redis_restart_with_queued_jobs_and_503_while_down(
    cluster: Cluster, short_clips: list[Clip]
) -> None:
    api = cluster.api()
    http = httpx.Client(base_url=api.url, timeout=TIMEOUT)
    jobs = [submit_job(http, short_clips[n % 3].path)["id"] for n in range(12)]  # no worker yet
    cluster.redis.stop()  # SIGTERM: Redis writes its AOF out and exits
    with short_clips[0].path.open("rb") as audio:
        down = http.post("/v1/jobs", files={"file": ("a.wav", audio)})
    assert down.status_code == 503, down.text
    assert down.json()["error"]["code"] == "broker_unavailable"
    assert down.headers["retry-after"] == "5"
    assert http.get(f"/v1/jobs/{jobs[0]}").status_code == 503
    assert http.get("/healthz").status_code == 200
    assert http.get("/readyz").status_code == 503  # a load balancer stops sending here
    cluster.worker(wait=False)  # starts while Redis is down: backs off, retries
    cluster.redis.start()
    for job_id in jobs:
        done = wait_job(http, job_id, wait=30)
        assert done["status"] == "succeeded", done
    assert transcribe_text(http, short_clips[1].path).strip()  # the sync path works again
    exactly_once(cluster, set(jobs), others=1)  # and the synchronous request
    http.close()


def test_a_job_that_kills_its_worker_every_time_is_dead_lettered(
    cluster: Cluster, short_clips: list[Clip], tmp_path: Path
) -> None:
    cluster.env["ASRSERVE_MAX_ATTEMPTS"] = "2"
    api = cluster.api()
    for _ in range(2):
        cluster.worker(module="tests.support.crashing_worker")
    http = httpx.Client(base_url=api.url, timeout=TIMEOUT)
    poison = tmp_path / "poison.wav"
    poison.write_bytes(short_clips[0].path.read_bytes())
    bad = submit_job(http, poison)["id"]
    good = [submit_job(http, short_clips[n % 3].path)["id"] for n in range(8)]

    def dead_lettered() -> dict[str, Any] | None:  # a supervisor: restart the workers that died
        for worker in cluster.workers:
            if not worker.alive:
                worker.start()
        job: dict[str, Any] = http.get(f"/v1/jobs/{bad}").json()
        return job if job["status"] == "failed" else None

    job = wait_until(dead_lettered, 180, cluster.logs, every=0.3)
    assert job["error"]["code"] == "too_many_attempts", job
    for job_id in good:
        assert wait_job(http, job_id, wait=30)["status"] == "succeeded"
    client = cluster.client()
    dead = cast(list[tuple[bytes, dict[bytes, bytes]]], client.xrange("asrserve:dead"))
    client.close()
    assert [entry[b"job_id"].decode() for _, entry in dead] == [bad]
    assert dead[0][1][b"reason"] == b"started 2 times without finishing"
    assert sum(w.starts for w in cluster.workers) >= 2 + 2  # each delivery killed a worker
    http.close()


def test_a_stopped_worker_hands_its_jobs_back(cluster: Cluster, short_clips: list[Clip]) -> None:
    cluster.env["ASRSERVE_SHUTDOWN_GRACE_S"] = "0"  # hand back at once, nothing drains
    cluster.env["ASRSERVE_MAX_BATCH_SIZE"] = "1"  # 16 passes: the claimed jobs outlast the stop
    api = cluster.api()
    first = cluster.worker()
    with httpx.Client(base_url=api.url, timeout=TIMEOUT) as http:  # closed if an assert fails
        jobs = [submit_job(http, short_clips[n % 3].path)["id"] for n in range(16)]
        wait_until(
            lambda: any(http.get(f"/v1/jobs/{j}").json()["status"] == "running" for j in jobs),
            60,
            "a running job",
        )
        first.stop()  # SIGTERM: stop claiming, cancel in-flight jobs, hand them back
        assert first.proc is not None and first.proc.returncode == 0, first.log()[-2000:]
        handed_back = [j for j in jobs if http.get(f"/v1/jobs/{j}").json()["status"] != "succeeded"]
        assert handed_back, "every job finished before the worker stopped"
        statuses = {j: http.get(f"/v1/jobs/{j}").json()["status"] for j in handed_back}
        assert set(statuses.values()) == {"queued"}, (statuses, first.log()[-3000:])
        cluster.worker()
        for job_id in jobs:
            done = wait_job(http, job_id, wait=30)
            assert done["status"] == "succeeded" and done["attempts"] == 1, done  # not counted
        exactly_once(cluster, set(jobs))
        assert queue_is_empty(cluster)


def test_audio_travels_in_redis_or_through_the_shared_dir(
    cluster: Cluster, short_clips: list[Clip]
) -> None:
    small, large = sorted(short_clips[:2], key=lambda c: c.path.stat().st_size)
    limit = (small.path.stat().st_size + large.path.stat().st_size) // 2
    cluster.env["ASRSERVE_REDIS_BLOB_MAX_BYTES"] = str(limit)
    api = cluster.api()
    cluster.worker()
    with httpx.Client(base_url=api.url, timeout=TIMEOUT) as http:
        in_redis, shared = submit_job(http, small.path)["id"], submit_job(http, large.path)["id"]
        for job_id, clip in ((in_redis, small), (shared, large)):
            done = wait_job(http, job_id, wait=30)
            assert done["status"] == "succeeded", done
            assert wer_one(clip.text, done["result"]["text"]) <= 0.25
    client = cluster.client()
    assert client.get(f"asrserve:blob:{in_redis}") == small.path.read_bytes()
    assert client.get(f"asrserve:blob:{shared}") is None
    client.close()
    assert (cluster.root / "shared" / "audio" / shared).read_bytes() == large.path.read_bytes()
    assert not list((cluster.root / "api0" / "data" / "audio").iterdir())  # nothing left behind


def test_a_diarized_job_and_request_are_answered_by_the_worker_node(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Diarization is work for the workers: a job asked for ``diarized_json`` and a
    synchronous diarized request, sent to an API node, come back with the conversation's
    two speakers, the job's subtitles with voice tags."""
    conversation = build(104, debian(), voices=["reader", "allison"])
    path = write_float_wav(tmp_path / "talk.wav", conversation.samples)
    api = cluster.api()
    worker = cluster.worker()
    with httpx.Client(base_url=api.url, timeout=TIMEOUT) as http:
        job_id = submit_job(http, path, response_format="diarized_json")["id"]
        done = wait_job(http, job_id)
        assert done["status"] == "succeeded", done
        speakers = [segment["speaker"] for segment in done["result"]["segments"]]
        assert (sorted(set(speakers)), speakers[0]) == (["A", "B"], "A")
        vtt = http.get(f"/v1/jobs/{job_id}/transcript", params={"format": "vtt"})
        assert vtt.status_code == 200 and "<v A>" in vtt.text and "<v B>" in vtt.text, vtt.text
        with path.open("rb") as audio:
            answer = http.post(
                "/v1/audio/transcriptions",
                files={"file": (path.name, audio)},
                data={"model": "whisper-1", "response_format": "diarized_json"},
            )
        assert answer.status_code == 200, answer.text
        assert [s["speaker"] for s in answer.json()["segments"]] == speakers
    assert (job_id, "succeeded") in worker.finished_jobs()


def test_a_wyoming_utterance_to_an_api_node_is_transcribed_by_a_worker(cluster: Cluster) -> None:
    """The API node's Wyoming server submits the utterance to the queue and follows the
    job in Redis: the worker's text comes back streamed, then whole."""
    port = free_port()
    cluster.api({"ASRSERVE_WYOMING_PORT": str(port)})
    worker = cluster.worker()
    events = transcribed(port, pcm16(Path(__file__).parent / "data" / "jfk.flac"))
    kinds = [e.type for e in events]
    assert (kinds[0], kinds[-2:]) == ("transcript-start", ["transcript", "transcript-stop"])
    chunks = [TranscriptChunk.from_event(e).text for e in events if e.type == "transcript-chunk"]
    text = Transcript.from_event(events[-2]).text
    assert "".join(chunks) == text
    assert "ask not what your country can do for you" in text.lower()
    (done,) = worker.finished_jobs()
    assert done[1] == "succeeded"


def test_the_leader_api_node_dies_and_another_takes_over(
    cluster: Cluster, short_clips: list[Clip], receiver: tuple[Receiver, str]
) -> None:
    """Webhooks (and the Batch API runner) run on the node holding the lease; when it is
    killed, another API node takes the lease and the duties go on."""
    record, hook_url = receiver
    apis = [cluster.api(), cluster.api()]
    cluster.worker()

    def leading(api: ServerProcess) -> bool:
        return api.log_path is not None and "leading:" in api.log_path.read_text()

    wait_until(lambda: any(leading(api) for api in apis), 30, "a leader")
    leader = next(api for api in apis if leading(api))
    other = next(api for api in apis if api is not leader)
    leader.kill()
    with httpx.Client(base_url=other.url, timeout=TIMEOUT) as http:
        job = submit_job(http, short_clips[0].path, callback_url=hook_url)
        assert wait_job(http, job["id"], wait=30)["status"] == "succeeded"
        wait_until(lambda: record.answered_ok(), 60, "the webhook, from the new leader")
    assert leading(other)
    assert json.loads(record.answered_ok()[0][2])["id"] == job["id"]


def test_queued_jobs_survive_a_redis_crash(cluster: Cluster, short_clips: list[Clip]) -> None:
    """SIGKILL, not a clean shutdown: accepted jobs that redis-server has written to its
    append-only file (``appendfsync everysec``) are there after the crash, and run once Redis
    is back."""
    api = cluster.api()
    with httpx.Client(base_url=api.url, timeout=TIMEOUT) as http:
        jobs = [submit_job(http, short_clips[n % 3].path)["id"] for n in range(8)]
        wait_until(lambda: in_the_aof(cluster, jobs), 10, "the jobs in the append-only file")
        cluster.redis.kill()
        cluster.redis.start()
        cluster.worker()
        for job_id in jobs:
            assert wait_job(http, job_id, wait=30)["status"] == "succeeded", job_id
    exactly_once(cluster, set(jobs))
