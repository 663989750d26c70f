"""OpenAI-compatible Files API: request files and audio for batches, and batch outputs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import FileResponse

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.errors import ApiError
from asrserve.api.schemas import page_body
from asrserve.api.uploads import receive_upload
from asrserve.auth.principal import Principal
from asrserve.batch_api.requests import count_requests
from asrserve.errors import shown
from asrserve.files.models import UPLOADABLE, FilePurpose, StoredFile, new_file_id
from asrserve.settings import Settings

router = APIRouter(prefix="/v1/files")
Ctx = Annotated[ApiContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]
JSONL = "application/jsonl"


@router.post("")
async def upload_file(request: Request, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Multipart ``file`` and ``purpose`` (``batch``: JSONL requests; ``audio``: audio that
    batch requests name by id). Streamed to disk; limits are enforced while reading."""
    settings = ctx.service.settings
    file_id = new_file_id()
    limit = max(settings.max_job_upload_bytes, settings.batch_api_max_file_bytes)
    upload = await receive_upload(request, settings.files_dir / file_id, limit, ctx.uploads)
    try:
        purpose = _purpose(upload.get("purpose"))
        if upload.path is None:
            raise ApiError(400, "a 'file' part is required", param="file")
        if upload.size == 0:
            raise ApiError(400, "the uploaded file is empty", param="file", code="empty_file")
        if purpose is FilePurpose.BATCH and upload.size > settings.batch_api_max_file_bytes:
            message = f"a batch file may be at most {settings.batch_api_max_file_bytes} bytes"
            raise ApiError(413, message, param="file", code="file_too_large")
    except ApiError:
        upload.remove()
        raise
    requests = None
    if purpose is FilePurpose.BATCH:
        requests = await ctx.scan(count_batch_requests, upload.path, settings)
    record = StoredFile(
        id=file_id,
        bytes=upload.size,
        filename=upload.filename or file_id,
        purpose=purpose,
        owner=principal.owner,
        requests=requests,
    )
    await ctx.files.put(record)
    return record.view()


@router.get("")
async def list_files(
    ctx: Ctx,
    principal: Caller,
    purpose: FilePurpose | None = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 20,
    after: str | None = None,
) -> dict[str, Any]:
    files = await ctx.files.page(
        purpose=purpose, limit=limit + 1, after=after, owner=principal.scope
    )
    return page_body([f.view() for f in files], limit)


@router.get("/{file_id}")
async def get_file(file_id: str, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    return (await found(ctx, file_id, principal)).view()


@router.get("/{file_id}/content")
async def file_content(file_id: str, ctx: Ctx, principal: Caller) -> FileResponse:
    record = await found(ctx, file_id, principal)
    path = ctx.service.settings.files_dir / record.id
    if not path.exists():
        message = f"the content of '{record.id}' is gone"
        raise ApiError(404, message, code="file_not_found")
    audio = record.purpose is FilePurpose.AUDIO
    media_type = "application/octet-stream" if audio else JSONL
    return FileResponse(path, media_type=media_type, filename=record.filename)


@router.delete("/{file_id}")
async def delete_file(file_id: str, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    record = await found(ctx, file_id, principal)
    await ctx.files.delete(record.id)
    (ctx.service.settings.files_dir / record.id).unlink(missing_ok=True)
    return {"id": record.id, "object": "file", "deleted": True}


async def found(ctx: ApiContext, file_id: str, principal: Principal) -> StoredFile:
    """The file if the caller may see it; 404 otherwise, as if it did not exist."""
    record = await ctx.files.get(file_id)
    if record is None or not principal.sees(record.owner):
        message = f"no file '{shown(file_id)}'"
        raise ApiError(404, message, param="file_id", code="file_not_found")
    return record


def count_batch_requests(path: Path, settings: Settings) -> int:
    """A batch file's requests as validation will find them, counted up to the limit + 1
    (blocking: on the context's scan threads)."""
    with path.open("rb") as handle:
        limit = settings.batch_api_max_requests
        return count_requests(handle, settings.batch_api_max_line_bytes, limit)


def _purpose(value: str | None) -> FilePurpose:
    allowed = ", ".join(p.value for p in UPLOADABLE)
    try:
        purpose = FilePurpose(value or "")
    except ValueError:
        raise ApiError(400, f"purpose must be one of {allowed}", param="purpose") from None
    if purpose not in UPLOADABLE:
        raise ApiError(400, f"purpose must be one of {allowed}", param="purpose")
    return purpose
