"""The distributed mode: API and worker nodes sharing Redis (unset broker: embedded)."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from asrserve.settings.fields import FLAG, MIB


class DistributedSettings(BaseModel):
    broker: str | None = Field(
        None,
        description="`redis://HOST:PORT/DB`: run as a node of the distributed mode (`serve`: API"
        " node, `--inference` to also infer; `worker`: worker node).",
        json_schema_extra=FLAG,
    )
    shared_dir: Path | None = Field(
        None,
        description="A directory every node mounts (Files API content, audio over the blob"
        " limit); default: `data_dir`.",
        json_schema_extra=FLAG,
    )
    redis_blob_max_bytes: int = Field(
        8 * MIB, ge=0, description="Audio up to this size travels inside Redis."
    )
    lease_s: float = Field(
        30.0,
        gt=0,
        description="A silent worker's jobs are reclaimed after this; the leader lease too.",
        json_schema_extra=FLAG,
    )
    result_retention_s: float = Field(
        7 * 86400.0, gt=0, description="Finished jobs and batches expire from Redis after this."
    )
    metrics_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="Worker node: serve Prometheus `/metrics`, `/healthz` and `/readyz` here, on"
        " the host, with no key (aggregate counters only); 0: off.",
        json_schema_extra=FLAG,
    )
    redis_prefix: str = Field(
        "asrserve",
        pattern=r"^[A-Za-z0-9_.-]+$",
        description="The key prefix (several deployments per Redis).",
    )

    @property
    def distributed(self) -> bool:
        return self.broker is not None
