"""The batch store protocol: batches change through one atomic ``update``."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from asrserve.batch_api.models import Batch, BatchItem

BatchMutation = Callable[[Batch], Batch | None]


class BatchStore(ABC):
    @abstractmethod
    async def create(self, batch: Batch) -> None: ...

    @abstractmethod
    async def get(self, batch_id: str) -> Batch | None: ...

    @abstractmethod
    async def update(self, batch_id: str, mutate: BatchMutation) -> Batch | None:
        """Atomically apply ``mutate`` (None leaves the batch as is); the new batch or None."""

    @abstractmethod
    async def page(
        self, *, limit: int = 20, after: str | None = None, owner: str | None = None
    ) -> list[Batch]:
        """Newest first; ``after`` is the id of the last batch of the previous page;
        ``owner`` keeps only that key's batches."""

    @abstractmethod
    async def active(self) -> list[Batch]:
        """Batches not finished yet, oldest first."""

    @abstractmethod
    async def webhooks_pending(self) -> list[Batch]: ...

    @abstractmethod
    async def add_items(self, items: Sequence[BatchItem]) -> None:
        """Store items not stored yet (safe to repeat)."""

    @abstractmethod
    async def items(self, batch_id: str) -> list[BatchItem]:
        """A batch's items in input-line order."""
