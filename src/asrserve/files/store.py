"""Where file records live. The bytes are in ``Settings.files_dir``, named by file id."""

from __future__ import annotations

from abc import ABC, abstractmethod

from asrserve.files.models import FilePurpose, StoredFile


class FileStore(ABC):
    @abstractmethod
    async def put(self, record: StoredFile) -> None:
        """Create or replace the record (replacing makes a retried write idempotent)."""

    @abstractmethod
    async def get(self, file_id: str) -> StoredFile | None: ...

    @abstractmethod
    async def delete(self, file_id: str) -> bool:
        """True if there was such a file."""

    @abstractmethod
    async def page(
        self,
        *,
        purpose: FilePurpose | None = None,
        limit: int = 20,
        after: str | None = None,
        owner: str | None = None,
    ) -> list[StoredFile]:
        """Newest first; ``after`` is the id of the last file of the previous page;
        ``owner`` keeps only that key's files."""
