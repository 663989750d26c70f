"""A distributed deployment on loopback, as separate processes: redis-server, API nodes
(``asrserve serve --broker``) and worker nodes (``asrserve worker --broker``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from redis import Redis

from asrserve.bench.redis_process import RedisProcess
from asrserve.cli.server_process import ServerProcess, WorkerProcess


@dataclass
class WorkerNode(WorkerProcess):
    """A worker node (or a test wrapper around one, ``module``) that the tests can read."""

    def full_log(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def finished_jobs(self) -> list[tuple[str, str]]:
        """(job id, status) of every job this node stored a result for, from its JSON log."""
        done = []
        for line in self.full_log().splitlines():
            try:
                record: dict[str, Any] = json.loads(line)
            except ValueError:
                continue
            is_job = str(record.get("msg", "")).startswith("job ") and "job_id" in record
            if is_job and record.get("status") in ("succeeded", "failed", "cancelled"):
                done.append((str(record["job_id"]), str(record["status"])))
        return done


@dataclass
class Cluster:
    root: Path
    redis: RedisProcess
    env: dict[str, str] = field(default_factory=dict)
    apis: list[ServerProcess] = field(default_factory=list)
    workers: list[WorkerNode] = field(default_factory=list)

    @property
    def shared_env(self) -> dict[str, str]:
        return {
            "ASRSERVE_BROKER": self.redis.url,
            "ASRSERVE_SHARED_DIR": str(self.root / "shared"),
            "ASRSERVE_RECORD_TRAFFIC": "false",
            "ASRSERVE_CPU_THREADS": "1",
            "ASRSERVE_WEBHOOK_ALLOW": "127.0.0.1",
            **self.env,
        }

    def api(self, env: Mapping[str, str] | None = None) -> ServerProcess:
        """An API node, once ready; ``env`` adds to the shared settings."""
        data = self.root / f"api{len(self.apis)}" / "data"
        node = ServerProcess(data, env={**self.shared_env, **(env or {})})
        self.apis.append(node)
        return node.start()

    def worker(self, module: str = "asrserve.cli", *, wait: bool = True) -> WorkerNode:
        """A worker node, once ready (``wait``: it is ready only once Redis answers)."""
        node = WorkerNode(self.root / f"worker{len(self.workers)}" / "data", self.shared_env)
        node.module = module
        self.workers.append(node)
        node.spawn()
        if wait:
            node.wait_ready(120)
        return node

    def client(self) -> Redis:
        return Redis.from_url(self.redis.url)

    def stop(self) -> None:
        for worker in self.workers:
            worker.stop()
        for api in self.apis:
            api.stop()

    def logs(self) -> str:
        parts = [f"--- worker {w.port}\n{w.log()[-3000:]}" for w in self.workers]
        parts += [f"--- api {a.port}\n{a.log()}" for a in self.apis]
        return "\n".join(parts)
