"""File records in Redis: one JSON document per file, sorted-set indexes in the same MULTI.

Key layout (``P`` is the deployment's prefix; every zset member is a file id, score 0, so
lexical order is creation order):

- ``P:file:<id>``                  the record as JSON, ``owner`` included (the model's own
  JSON leaves it out)
- ``P:files``                      every file
- ``P:files:owner:<owner>``        the files of one API key
- ``P:files:purpose:<purpose>``    the files of one purpose

Records do not expire: a file's bytes live elsewhere and leave only through ``delete``
(``retention_s`` is accepted for a constructor like the other stores', and unused).
"""

from __future__ import annotations

import json

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline

from asrserve.drivers.redis_documents import Docs, Raw, Writer, transact
from asrserve.files.models import FilePurpose, StoredFile
from asrserve.files.store import FileStore


def _dump(record: StoredFile) -> str:
    return json.dumps({**record.model_dump(mode="json"), "owner": record.owner})


class RedisFileStore(FileStore):
    def __init__(self, client: Redis, prefix: str) -> None:
        """No retention: file records stay until deleted, as OpenAI's files do."""
        self._client = client
        self._p = prefix
        self._docs = Docs(client, f"{prefix}:file", StoredFile.model_validate_json)

    def _indexes(self, record: StoredFile) -> set[str]:
        found = {f"{self._p}:files", f"{self._p}:files:purpose:{record.purpose.value}"}
        if record.owner is not None:
            found.add(f"{self._p}:files:owner:{record.owner}")
        return found

    async def _replace(self, file_id: str, new: StoredFile | None) -> bool:
        """Store ``new`` under ``file_id`` (None: delete it); whether there was a record."""
        key = self._docs.key(file_id)

        async def plan(pipe: Pipeline) -> tuple[bool, Writer | None]:
            raw: Raw | None = await pipe.get(key)
            old = None if raw is None else StoredFile.model_validate_json(raw)
            if old is None and new is None:
                return False, None
            stale = self._indexes(old) if old else set()
            fresh = self._indexes(new) if new else set()

            def write(tx: Pipeline) -> None:
                if new is None:
                    tx.delete(key)
                else:
                    tx.set(key, _dump(new))
                for index in stale - fresh:
                    tx.zrem(index, file_id)
                for index in fresh:
                    tx.zadd(index, {file_id: 0})

            return old is not None, write

        return await transact(self._client, [key], plan)

    async def put(self, record: StoredFile) -> None:
        await self._replace(record.id, record)

    async def get(self, file_id: str) -> StoredFile | None:
        return await self._docs.get(file_id)

    async def delete(self, file_id: str) -> bool:
        return await self._replace(file_id, None)

    async def page(
        self,
        *,
        purpose: FilePurpose | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[StoredFile]:
        index = f"{self._p}:files"
        if owner is not None:
            index = f"{self._p}:files:owner:{owner}"
        elif purpose is not None:
            index = f"{self._p}:files:purpose:{purpose.value}"

        def keep(record: StoredFile) -> bool:
            return (purpose is None or record.purpose is purpose) and (
                owner is None or record.owner == owner
            )

        return await self._docs.page(index, limit=limit, after=after, keep=keep)
