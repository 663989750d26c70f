"""The Files API's use cases: store an upload as a file, list, read and delete files.

A file's record is in the :class:`FileStore`; its bytes are at :meth:`Files.content_path`
(``Settings.files_dir``, named by the file's id). Each key sees only its own files: any
other answers :class:`FileNotFound`, exactly as if it did not exist.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

from asrserve.auth.principal import Principal
from asrserve.batch_lines import count_requests
from asrserve.errors import InvalidRequest, NotFound, TooLarge, shown
from asrserve.files.models import UPLOADABLE, FilePurpose, StoredFile, new_file_id
from asrserve.files.store import FileStore
from asrserve.settings.batch_api import BatchApiSettings

P = ParamSpec("P")
T = TypeVar("T")
SCAN_THREADS = 2


class ReceivedFile(Protocol):
    """An uploaded file as the HTTP edge stored it (None: no file part was sent)."""

    @property
    def path(self) -> Path | None: ...

    @property
    def filename(self) -> str: ...

    @property
    def size(self) -> int: ...

    def remove(self) -> None: ...


class FileNotFound(NotFound):
    default_code = "file_not_found"


class Files:
    def __init__(
        self,
        settings: BatchApiSettings,
        store: FileStore,
        *,
        files_dir: Path,
        max_job_upload_bytes: int,
    ) -> None:
        """``files_dir`` is ``Settings.files_dir``; ``max_job_upload_bytes`` the limits' (an
        upload may be as large as a job's audio or a batch file, whichever is larger)."""
        self.settings = settings
        self.store = store
        self.files_dir = files_dir
        self.max_job_upload_bytes = max_job_upload_bytes
        # blocking reads of whole uploaded files (a batch file's lines): threads of their
        # own, so that a large file never holds the threads the stores' calls run on
        self._scans = ThreadPoolExecutor(SCAN_THREADS, thread_name_prefix="asrserve-scan")

    def new_upload_path(self) -> tuple[str, Path]:
        """A new file's id and where its bytes go."""
        file_id = new_file_id()
        return file_id, self.content_path(file_id)

    def content_path(self, file_id: str) -> Path:
        return self.files_dir / file_id

    @property
    def upload_limit(self) -> int:
        """The most bytes an upload may hold, whatever its purpose."""
        return max(self.max_job_upload_bytes, self.settings.batch_api_max_file_bytes)

    async def create(
        self, file_id: str, upload: ReceivedFile, purpose: str | None, principal: Principal
    ) -> StoredFile:
        """Record the stored upload as a file of ``purpose``; a refused upload is removed."""
        try:
            kind = _purpose(purpose)
            path = self._checked(upload, kind)
            requests = (
                await self.scan(self.count_batch_requests, path)
                if kind is FilePurpose.BATCH
                else None
            )
        except BaseException:
            upload.remove()
            raise
        record = StoredFile(
            id=file_id,
            bytes=upload.size,
            filename=upload.filename or file_id,
            purpose=kind,
            owner=principal.owner,
            requests=requests,
        )
        await self.store.put(record)
        return record

    def _checked(self, upload: ReceivedFile, purpose: FilePurpose) -> Path:
        if upload.path is None:
            raise InvalidRequest("a 'file' part is required", param="file")
        if upload.size == 0:
            raise InvalidRequest("the uploaded file is empty", param="file", code="empty_file")
        limit = self.settings.batch_api_max_file_bytes
        if purpose is FilePurpose.BATCH and upload.size > limit:
            message = f"a batch file may be at most {limit} bytes"
            raise TooLarge(message, param="file", code="file_too_large")
        return upload.path

    async def page(
        self, principal: Principal, purpose: FilePurpose | None, limit: int, after: str | None
    ) -> list[StoredFile]:
        return await self.store.page(
            purpose=purpose, limit=limit, after=after, owner=principal.scope
        )

    async def found(self, file_id: str, principal: Principal, param: str = "file_id") -> StoredFile:
        """The file if the caller may see it; :class:`FileNotFound` otherwise."""
        missing = FileNotFound(f"no file '{shown(file_id)}'", param=param)
        return principal.visible(await self.store.get(file_id), missing)

    async def content(self, file_id: str, principal: Principal) -> tuple[StoredFile, Path]:
        """The file and where its bytes are; :class:`FileNotFound` if they are gone."""
        record = await self.found(file_id, principal)
        path = self.content_path(record.id)
        if not path.exists():
            raise FileNotFound(f"the content of '{record.id}' is gone")
        return record, path

    async def delete(self, file_id: str, principal: Principal) -> StoredFile:
        record = await self.found(file_id, principal)
        await self.store.delete(record.id)
        self.content_path(record.id).unlink(missing_ok=True)
        return record

    async def batch_requests(self, record: StoredFile, param: str) -> int:
        """A batch file's requests, as counted at upload (a file stored before uploads were
        counted is counted now); :class:`InvalidRequest` ``too_many_requests`` over
        ``batch_api_max_requests``."""
        count = record.requests
        if count is None:
            try:
                count = await self.scan(self.count_batch_requests, self.content_path(record.id))
            except FileNotFoundError:
                message = f"the content of '{record.id}' is gone"
                raise FileNotFound(message, param=param) from None
        limit = self.settings.batch_api_max_requests
        if count > limit:
            message = f"the input file has more than {limit} requests, the most a batch holds"
            raise InvalidRequest(message, param=param, code="too_many_requests")
        return count

    def count_batch_requests(self, path: Path) -> int:
        """A batch file's requests as validation will find them, counted up to the limit + 1
        (blocking: run it with :meth:`scan`)."""
        with path.open("rb") as handle:
            limit = self.settings.batch_api_max_requests
            return count_requests(handle, self.settings.batch_api_max_line_bytes, limit)

    async def scan(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """``fn(*args, **kwargs)`` on the scan threads."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._scans, functools.partial(fn, *args, **kwargs))

    def close(self) -> None:
        self._scans.shutdown(wait=False, cancel_futures=True)


def _purpose(value: str | None) -> FilePurpose:
    allowed = ", ".join(p.value for p in UPLOADABLE)
    try:
        purpose = FilePurpose(value or "")
    except ValueError:
        raise InvalidRequest(f"purpose must be one of {allowed}", param="purpose") from None
    if purpose not in UPLOADABLE:
        raise InvalidRequest(f"purpose must be one of {allowed}", param="purpose")
    return purpose
