"""Batches and their items in Redis: one JSON document per batch, indexes in the same MULTI.

Key layout (``P`` is the deployment's prefix; every zset member is a batch id, score 0, so
lexical order is creation order):

- ``P:batch:<id>``               the batch, ``Batch.model_dump_json()``
- ``P:batch:<id>:items``         hash: input line number → ``BatchItem.model_dump_json()``
- ``P:batches``                  every batch
- ``P:batches:owner:<owner>``    the batches of one API key
- ``P:batches:active``           batches not finished yet
- ``P:batches:webhooks``         batches whose webhook is pending

A batch in a final status with no webhook pending expires, items included, after
``retention_s``; index entries left behind are skipped by readers and removed when found.
"""

from __future__ import annotations

from collections.abc import Sequence

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from asrserve.batch_api.models import Batch, BatchItem
from asrserve.batch_api.store import BatchMutation, BatchStore
from asrserve.drivers.redis_documents import Docs, Raw, Writer, transact, ttl_ms
from asrserve.jobs.models import WebhookStatus


def _expirable(batch: Batch) -> bool:
    return batch.status.finished and batch.webhook_status is not WebhookStatus.PENDING


class RedisBatchStore(BatchStore):
    def __init__(self, client: Redis, prefix: str, retention_s: float | None = None) -> None:
        self._client = client
        self._p = prefix
        self._ttl = ttl_ms(retention_s)
        self._docs = Docs(client, f"{prefix}:batch", Batch.model_validate_json)

    def _indexes(self, batch: Batch) -> set[str]:
        p = self._p
        found = {f"{p}:batches"}
        if batch.owner is not None:
            found.add(f"{p}:batches:owner:{batch.owner}")
        if not batch.status.finished:
            found.add(f"{p}:batches:active")
        if batch.webhook_status is WebhookStatus.PENDING:
            found.add(f"{p}:batches:webhooks")
        return found

    def _items_key(self, batch_id: str) -> str:
        return f"{self._docs.key(batch_id)}:items"

    def _write(self, pipe: Pipeline, old: Batch | None, new: Batch) -> None:
        ttl = self._ttl if _expirable(new) else None
        pipe.set(self._docs.key(new.id), new.model_dump_json(), px=ttl)
        if ttl is not None:
            pipe.pexpire(self._items_key(new.id), ttl)
        else:
            pipe.persist(self._items_key(new.id))
        indexes = self._indexes(new)
        for index in (self._indexes(old) if old else set()) - indexes:
            pipe.zrem(index, new.id)
        for index in indexes:
            pipe.zadd(index, {new.id: 0})

    async def create(self, batch: Batch) -> None:
        key = self._docs.key(batch.id)

        async def plan(pipe: Pipeline) -> tuple[None, Writer | None]:
            if await pipe.exists(key):
                raise ValueError(f"batch {batch.id} already exists")
            return None, lambda tx: self._write(tx, None, batch)

        await transact(self._client, [key], plan)

    async def get(self, batch_id: str) -> Batch | None:
        return await self._docs.get(batch_id)

    async def update(self, batch_id: str, mutate: BatchMutation) -> Batch | None:
        return await self._docs.update(batch_id, mutate, self._write)

    async def page(
        self, *, limit: int = 20, after: str | None = None, owner: str | None = None
    ) -> list[Batch]:
        index = f"{self._p}:batches" if owner is None else f"{self._p}:batches:owner:{owner}"
        return await self._docs.page(
            index, limit=limit, after=after, keep=lambda b: owner is None or b.owner == owner
        )

    async def active(self) -> list[Batch]:
        batches = await self._docs.members(f"{self._p}:batches:active")
        return [batch for batch in batches if not batch.status.finished]

    async def webhooks_pending(self) -> list[Batch]:
        batches = await self._docs.members(f"{self._p}:batches:webhooks")
        return [batch for batch in batches if batch.webhook_status is WebhookStatus.PENDING]

    async def add_items(self, items: Sequence[BatchItem]) -> None:
        async with self._client.pipeline(transaction=True) as pipe:
            for item in items:
                pipe.hsetnx(self._items_key(item.batch_id), str(item.line), item.model_dump_json())
            await pipe.execute()

    async def items(self, batch_id: str) -> list[BatchItem]:
        stored: dict[Raw, Raw] = await self._client.hgetall(self._items_key(batch_id))
        lines = sorted(stored.items(), key=lambda pair: int(pair[0]))
        return [BatchItem.model_validate_json(data) for _, data in lines]
