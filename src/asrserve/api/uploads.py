"""Streaming multipart intake: the audio part goes straight to disk, limits enforced as bytes
arrive (never the whole body in memory, never past the limit)."""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from asrserve.api.errors import ApiError

MAX_FIELD_BYTES = 64 * 1024
MAX_FIELDS = 64
MULTIPART_OVERHEAD = 64 * 1024


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

    def __init__(self, upload: Upload, dest: Path, max_bytes: int, file_field: str) -> None:
        self.upload, self.dest, self.max_bytes, self.file_field = (
            upload,
            dest,
            max_bytes,
            file_field,
        )
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
                raise ApiError(400, "only one file may be uploaded", param=self.file_field)
            self.upload.filename = Path(self.part.filename).name
            self.upload.path = self.dest
            self.file = self.dest.open("wb")

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        chunk = data[start:end]
        if self.part.filename is not None and self.part.name == self.file_field:
            self.upload.size += len(chunk)
            if self.upload.size > self.max_bytes:
                raise too_large(self.max_bytes)
            self.pending.append(chunk)
        elif self.part.filename is None:
            if len(self.part.data) + len(chunk) > MAX_FIELD_BYTES:
                raise ApiError(
                    400, f"form field '{self.part.name}' is too long", param=self.part.name
                )
            self.part.data.extend(chunk)

    def on_part_end(self) -> None:
        if self.part.filename is None:
            values = self.upload.fields.setdefault(self.part.name, [])
            if sum(map(len, self.upload.fields.values())) >= MAX_FIELDS:
                raise ApiError(400, "too many form fields")
            values.append(self.part.data.decode("utf-8", "replace"))

    def flush(self) -> None:
        if self.file is not None and self.pending:
            self.file.write(b"".join(self.pending))
        self.pending.clear()


def too_large(limit: int) -> ApiError:
    return ApiError(
        413, f"the upload exceeds the limit of {limit} bytes", param="file", code="file_too_large"
    )


async def receive_upload(
    request: Request, dest: Path, max_bytes: int, *, file_field: str = "file"
) -> Upload:
    """Parse a multipart/form-data body; the file part is streamed to ``dest``."""
    content_type, params = parse_options_header(request.headers.get("content-type", ""))
    if content_type != b"multipart/form-data" or b"boundary" not in params:
        raise ApiError(400, "the request body must be multipart/form-data")
    declared = request.headers.get("content-length")
    if (
        declared is not None
        and declared.isdigit()
        and int(declared) > max_bytes + MULTIPART_OVERHEAD
    ):
        raise too_large(max_bytes)
    upload = Upload()
    receiver = _Receiver(upload, dest, max_bytes, file_field)
    parser = MultipartParser(
        params[b"boundary"],
        callbacks={  # type: ignore[arg-type]
            name: getattr(receiver, name)
            for name in (
                "on_part_begin",
                "on_part_data",
                "on_part_end",
                "on_header_field",
                "on_header_value",
                "on_header_end",
                "on_headers_finished",
            )
        },
    )
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        async for chunk in request.stream():
            parser.write(chunk)
            if receiver.pending:
                await asyncio.to_thread(receiver.flush)
        parser.finalize()
        await asyncio.to_thread(receiver.flush)
    except ApiError:
        _discard(receiver, upload)
        raise
    except ClientDisconnect:
        _discard(receiver, upload)
        raise
    except Exception as exc:  # malformed multipart
        _discard(receiver, upload)
        raise ApiError(400, f"malformed multipart body: {type(exc).__name__}") from exc
    finally:
        if receiver.file is not None:
            receiver.file.close()
    return upload


def _discard(receiver: _Receiver, upload: Upload) -> None:
    if receiver.file is not None:
        with contextlib.suppress(OSError):
            receiver.file.close()
    upload.remove()
