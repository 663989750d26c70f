"""The distributed mode: API and worker nodes sharing Redis (unset broker: embedded)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

from pydantic import BaseModel, Field

from asrserve.settings.fields import FLAG, MIB


class DistributedSettings(BaseModel):
    broker: str | None = Field(
        None,
        description="`redis://HOST:PORT/DB`: run as a node of the distributed mode (`serve`: API"
        " node, `--inference` to also infer; `worker`: worker node).",
        json_schema_extra=FLAG,
    )
    broker_password_file: Path | None = Field(
        None,
        description="A file holding the broker's password (a mounted Secret), for a `broker`"
        " URL that gives none (`redis://HOST:PORT/DB`; `rediss://` for TLS).",
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

    @property
    def broker_url(self) -> str | None:
        """``broker`` with the password of ``broker_password_file`` in it, if it has none
        (the file's content, one trailing newline dropped, as secrets are written)."""
        if self.broker is None or self.broker_password_file is None:
            return self.broker
        if urlsplit(self.broker).password is not None:
            return self.broker
        password = self.broker_password_file.read_text(encoding="utf-8").removesuffix("\n")
        return _with_password(self.broker, quote(password, safe=""))


def shown_url(url: str) -> str:
    """``url`` with its password, if any, as ``***`` (for messages and logs)."""
    return url if urlsplit(url).password is None else _with_password(url, "***")


def _with_password(url: str, password: str) -> str:
    """``url`` with ``password`` (as the URL writes it) after its user name, if any."""
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:{password}@{host}"))
