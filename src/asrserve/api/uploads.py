"""Streaming multipart intake: the audio part goes straight to disk, limits enforced as bytes
arrive (never the whole body in memory, never past the limit).

Also the intake's protections, all answered before or while the body is read:

* at most ``max_concurrent_uploads`` bodies are received at once, and at most
  ``max_uploads_per_key`` of them for one API key (auth off: one client address); the next
  gets ``503`` ``too_many_uploads`` with ``Retry-After`` before a byte of it is read;
* a body that stalls for ``upload_idle_timeout_s``, arrives slower than
  ``upload_min_rate_bytes_s`` on average (after ``upload_rate_grace_s`` of slack), or takes
  longer than ``upload_timeout_s`` in all, gets ``408`` ``upload_timeout`` and its
  connection closed;
* a multipart boundary longer than RFC 2046's 70 characters is ``400``; a client that
  disconnects mid-body is logged on one info line (nothing is answered: no one listens);
* storage: uploads stop short of :data:`DISK_RESERVE_BYTES` of free space (the database
  keeps room to record results of the jobs already accepted); a full disk (``ENOSPC``,
  ``EDQUOT``) is ``507`` ``insufficient_storage``, any other error of the data dir (read-only,
  permissions) ``503`` ``storage_unavailable``.

Whatever the outcome, a refused upload leaves no file behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from asrserve.api.access import caller
from asrserve.api.json_body import lift as lift_body_limit
from asrserve.drivers.disk import DISK_RESERVE_BYTES, free_bytes
from asrserve.errors import (
    AsrError,
    InvalidRequest,
    RequestTimeout,
    StorageFull,
    StoreUnavailable,
    TooLarge,
    Unavailable,
)
from asrserve.known_speakers import MAX_KNOWN, MAX_REFERENCE_BYTES, REFERENCES
from asrserve.settings.limits import LimitsSettings

log = logging.getLogger(__name__)

MIB = 1024 * 1024
MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 64
# A known speaker's reference is a data URL of up to 1 MiB of audio (known_speakers.py): its
# field may hold that, at most MAX_KNOWN times a request.
REFERENCE_FIELDS = {REFERENCES, REFERENCES.removesuffix("[]")}
MAX_REFERENCE_FIELD = MAX_REFERENCE_BYTES * 4 // 3 + 1024
MULTIPART_OVERHEAD = 64 * 1024 + MAX_KNOWN * MAX_REFERENCE_FIELD
MAX_BOUNDARY_CHARS = 70  # RFC 2046, section 5.1.1
BUSY_RETRY_AFTER_S = 2
FULL_RETRY_AFTER_S = 60
UNAVAILABLE_RETRY_AFTER_S = 10
FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
CALLBACKS = (
    "on_part_begin",
    "on_part_data",
    "on_part_end",
    "on_header_field",
    "on_header_value",
    "on_header_end",
    "on_headers_finished",
)


@dataclass(frozen=True)
class UploadLimits:
    """The intake's limits (the settings' ``max_concurrent_uploads``,
    ``max_uploads_per_key``, ``upload_idle_timeout_s``, ``upload_timeout_s``,
    ``upload_min_rate_bytes_s`` and ``upload_rate_grace_s``; the disk reserve is fixed)."""

    max_concurrent: int = 64
    per_key: int = 16
    idle_timeout_s: float = 30.0
    total_timeout_s: float = 900.0
    min_rate_bytes_s: int = 16 * 1024
    rate_grace_s: float = 10.0
    min_free_bytes: int = DISK_RESERVE_BYTES

    @classmethod
    def from_settings(cls, settings: LimitsSettings) -> UploadLimits:
        share = settings.max_uploads_per_key or max(1, settings.max_concurrent_uploads // 4)
        return cls(
            max_concurrent=settings.max_concurrent_uploads,
            per_key=share,
            idle_timeout_s=settings.upload_idle_timeout_s,
            total_timeout_s=settings.upload_timeout_s,
            min_rate_bytes_s=settings.upload_min_rate_bytes_s,
            rate_grace_s=settings.upload_rate_grace_s,
        )


class UploadGate:
    """The process's uploads in progress: admits at most ``limits.max_concurrent`` at once,
    and at most ``limits.per_key`` of them for one caller, so that one caller's slow
    uploads cannot lock every other one out.

    Entered and left on the event loop only, so plain counters need no lock."""

    def __init__(self, limits: UploadLimits | None = None) -> None:
        self.limits = limits or UploadLimits()
        self.active = 0
        self.by_key: dict[str, int] = {}

    @contextlib.contextmanager
    def slot(self, key: str = "") -> Iterator[None]:
        if self.active >= self.limits.max_concurrent:
            raise _busy(f"the server is receiving {self.active} uploads, its limit")
        held = self.by_key.get(key, 0)
        if held >= self.limits.per_key:
            raise _busy(f"you are sending {held} uploads at once, your share of the server")
        self.active += 1
        self.by_key[key] = held + 1
        try:
            yield
        finally:
            self.active -= 1
            left = self.by_key.pop(key) - 1
            if left:
                self.by_key[key] = left


def _busy(reason: str) -> Unavailable:
    return Unavailable(
        f"{reason}; retry shortly", code="too_many_uploads", retry_after=BUSY_RETRY_AFTER_S
    )


def upload_key(request: Request) -> str:
    """Whose share an upload counts against: its API key, or with auth off its client's
    address (``""`` when the server does not know it)."""
    key_id = caller(request).key_id
    if key_id is not None:
        return f"key:{key_id}"
    return f"addr:{request.client.host}" if request.client is not None else ""


@dataclass
class Upload:
    fields: dict[str, list[str]] = field(default_factory=dict)
    path: Path | None = None
    filename: str = ""
    size: int = 0

    def get(self, name: str) -> str | None:
        values = self.fields.get(name)
        return values[-1] if values else None

    def remove(self) -> None:
        if self.path is not None:
            self.path.unlink(missing_ok=True)


@dataclass
class _Part:
    name: str = ""
    filename: str | None = None
    data: bytearray = field(default_factory=bytearray)
    headers: dict[bytes, bytes] = field(default_factory=dict)


class _Receiver:
    """python-multipart callbacks; file bytes are queued and written between chunks."""

    def __init__(
        self, upload: Upload, dest: Path, max_bytes: int, file_field: str, reserve: int
    ) -> None:
        self.upload, self.dest, self.max_bytes, self.file_field = (
            upload,
            dest,
            max_bytes,
            file_field,
        )
        self.reserve = reserve
        self.part = _Part()
        self.header_name = b""
        self.header_value = b""
        self.pending: list[bytes] = []
        self.file: BinaryIO | None = None

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self.header_name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self.header_value += data[start:end]

    def on_header_end(self) -> None:
        self.part.headers[self.header_name.lower()] = self.header_value
        self.header_name, self.header_value = b"", b""

    def on_headers_finished(self) -> None:
        _, options = parse_options_header(self.part.headers.get(b"content-disposition", b""))
        self.part.name = options.get(b"name", b"").decode("utf-8", "replace")
        if b"filename" in options:
            self.part.filename = options[b"filename"].decode("utf-8", "replace")
        if self.part.filename is not None and self.part.name == self.file_field:
            if self.file is not None:
                raise InvalidRequest("only one file may be uploaded", param=self.file_field)
            # Shown back only (the audio is stored under the job id): the last path component
            # (/ or \), without control or format characters, at most 255 of them.
            name = self.part.filename.replace("\\", "/").rsplit("/", 1)[-1]
            name = "".join(ch for ch in name if ch.isprintable())[:255]
            self.upload.filename = "" if name in (".", "..") else name
            self.file = self.dest.open("wb")
            self.upload.path = self.dest

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self.part.filename is not None and self.part.name == self.file_field:
            self.upload.size += len(chunk)
            if self.upload.size > self.max_bytes:
                raise too_large(self.max_bytes)
            self.pending.append(chunk)
        elif self.part.filename is None:
            reference = self.part.name in REFERENCE_FIELDS
            if len(self.part.data) + len(chunk) > (
                MAX_REFERENCE_FIELD if reference else MAX_FIELD_BYTES
            ):
                message = f"form field '{self.part.name}' is too long"
                raise InvalidRequest(message, param=self.part.name)
            if reference and not self.part.data:
                given = sum(len(self.upload.fields.get(name, ())) for name in REFERENCE_FIELDS)
                if given >= MAX_KNOWN:
                    message = f"at most {MAX_KNOWN} known speakers' references"
                    raise InvalidRequest(message, param=self.part.name)
            self.part.data.extend(chunk)

    def on_part_end(self) -> None:
        if self.part.filename is None:
            values = self.upload.fields.setdefault(self.part.name, [])
            if sum(map(len, self.upload.fields.values())) >= MAX_FIELDS:
                raise InvalidRequest("too many form fields")
            values.append(self.part.data.decode("utf-8", "replace"))

    def flush(self) -> None:
        """Write the queued bytes (in a worker thread), keeping the disk reserve free."""
        if self.file is not None and self.pending:
            data = b"".join(self.pending)
            check_room(self.dest.parent, len(data), self.reserve)
            self.file.write(data)
        self.pending.clear()

    def finish(self) -> None:
        """The last bytes, then flushed to the device: a 202 must survive a power cut."""
        self.flush()
        if self.file is not None:
            self.file.flush()
            os.fsync(self.file.fileno())
            self.file.close()


def too_large(limit: int) -> TooLarge:
    message = f"the upload exceeds the limit of {limit} bytes"
    return TooLarge(message, param="file", code="file_too_large")


def storage_full() -> StorageFull:
    return StorageFull(
        "the server's storage is full, so the upload could not be stored; retry later",
        retry_after=FULL_RETRY_AFTER_S,
    )


def storage_error(exc: OSError) -> StoreUnavailable:
    """Storage full for a full disk or quota, unavailable for any other failure of the
    data dir."""
    if exc.errno in FULL_ERRNOS:
        return storage_full()
    reason = exc.strerror or type(exc).__name__
    return StoreUnavailable(
        f"the server cannot store uploads right now ({reason}); retry later",
        code="storage_unavailable",
        retry_after=UNAVAILABLE_RETRY_AFTER_S,
    )


def check_room(folder: Path, incoming: int, reserve: int) -> None:
    """``507`` unless ``incoming`` more bytes still leave ``reserve`` bytes free."""
    if not reserve:
        return
    free = free_bytes(folder)
    if free - incoming < reserve:
        log.warning(
            "upload refused: %d MiB free on the data dir, %d MiB kept in reserve",
            free // MIB,
            reserve // MIB,
        )
        raise storage_full()


def timeout_error(message: str) -> RequestTimeout:
    # The client is stuck mid-body: the edge closes the connection rather than wait.
    return RequestTimeout(message, code="upload_timeout")


@dataclass
class _Deadlines:
    """When the next chunk of a body is due: the idle timeout, the total timeout, and the
    minimum rate (``rate_grace_s`` plus ``1 / min_rate_bytes_s`` s per byte received since
    the start: a drip feed falls behind once the grace is spent, however often it sends)."""

    limits: UploadLimits
    start: float = field(default_factory=time.monotonic)
    received: int = 0

    def next_wait(self, now: float | None = None) -> tuple[float, str]:
        """How long the next chunk may take, and what the ``408`` says if it takes longer."""
        limits = self.limits
        now = time.monotonic() if now is None else now
        waits = [
            (limits.idle_timeout_s, f"the upload sent nothing for {limits.idle_timeout_s:g} s"),
            (
                self.start + limits.total_timeout_s - now,
                f"the upload took longer than {limits.total_timeout_s:g} s",
            ),
        ]
        if limits.min_rate_bytes_s:
            due = self.start + limits.rate_grace_s + self.received / limits.min_rate_bytes_s
            reason = f"the upload arrived slower than {limits.min_rate_bytes_s} bytes/s"
            waits.append((due - now, reason))
        wait, reason = min(waits, key=lambda item: item[0])
        return max(wait, 0.0), reason


async def _chunks(request: Request, limits: UploadLimits) -> AsyncGenerator[bytes, None]:
    """The body's chunks; ``408`` when the next one is later than :class:`_Deadlines` allow."""
    deadlines = _Deadlines(limits)
    async with contextlib.aclosing(request.stream()) as stream:
        while True:
            wait, reason = deadlines.next_wait()
            try:
                async with asyncio.timeout(wait):
                    chunk = await anext(stream)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise timeout_error(reason) from None
            deadlines.received += len(chunk)
            yield chunk


def _declared_length(request: Request) -> int | None:
    declared = request.headers.get("content-length")
    return int(declared) if declared is not None and declared.isdigit() else None


def _check_request(request: Request, max_bytes: int) -> bytes:
    """The multipart boundary, after the checks that need no body: type and declared size."""
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in params:
        raise InvalidRequest("the request body must be multipart/form-data")
    if not 0 < len(params[b"boundary"]) <= MAX_BOUNDARY_CHARS:
        message = f"malformed multipart: the boundary must be 1 to {MAX_BOUNDARY_CHARS} characters"
        raise InvalidRequest(message)
    declared = _declared_length(request)
    if declared is not None and declared > max_bytes + MULTIPART_OVERHEAD:
        raise too_large(max_bytes)
    return params[b"boundary"]


async def _prepare_dir(dest: Path, declared: int | None, reserve: int) -> None:
    def prepare() -> None:
        dest.parent.mkdir(parents=True, exist_ok=True)
        check_room(dest.parent, declared or 0, reserve)

    try:
        await asyncio.to_thread(prepare)
    except OSError as exc:
        raise storage_error(exc) from exc


async def receive_upload(
    request: Request,
    dest: Path,
    max_bytes: int,
    gate: UploadGate,
    *,
    file_field: str = "file",
) -> Upload:
    """Parse a multipart/form-data body; the file part is streamed to ``dest``."""
    boundary = _check_request(request, max_bytes)
    lift_body_limit(request)  # the limits below hold instead, as the bytes arrive
    with gate.slot(upload_key(request)):
        limits = gate.limits
        await _prepare_dir(dest, _declared_length(request), limits.min_free_bytes)
        upload = Upload()
        receiver = _Receiver(upload, dest, max_bytes, file_field, limits.min_free_bytes)
        callbacks = {name: getattr(receiver, name) for name in CALLBACKS}
        parser = MultipartParser(boundary, callbacks=callbacks)  # type: ignore[arg-type]
        try:
            await _receive(request, limits, parser, receiver)
        except ClientDisconnect:
            _discard(receiver, upload)
            raise _aborted(request, upload) from None
        except BaseException:
            _discard(receiver, upload)
            raise
    return upload


def _aborted(request: Request, upload: Upload) -> InvalidRequest:
    """The client went away mid-body: one info line, and an answer nobody reads (raised
    rather than ``ClientDisconnect``, which the server would log with a traceback)."""
    client = f"{request.client.host}:{request.client.port}" if request.client else "?"
    log.info(
        "upload aborted by the client on %s %s after %d file bytes (%s)",
        request.method,
        request.url.path,
        upload.size,
        client,
    )
    return InvalidRequest("the client closed the connection mid-upload", code="upload_aborted")


async def _receive(
    request: Request, limits: UploadLimits, parser: MultipartParser, receiver: _Receiver
) -> None:
    """Feed the body to the parser, writing file bytes as they come; errors as AsrError."""
    try:
        async with contextlib.aclosing(_chunks(request, limits)) as chunks:
            async for chunk in chunks:
                parser.write(chunk)
                if receiver.pending:
                    await asyncio.to_thread(receiver.flush)
        parser.finalize()
        await asyncio.to_thread(receiver.finish)
    except (AsrError, ClientDisconnect):
        raise
    except OSError as exc:  # the data dir: full, read-only, gone
        raise storage_error(exc) from exc
    except Exception as exc:  # malformed multipart
        raise InvalidRequest(f"malformed multipart body: {type(exc).__name__}") from exc


def _discard(receiver: _Receiver, upload: Upload) -> None:
    if receiver.file is not None:
        with contextlib.suppress(OSError):
            receiver.file.close()
    with contextlib.suppress(OSError):  # unlink fails too on a read-only file system
        upload.remove()
