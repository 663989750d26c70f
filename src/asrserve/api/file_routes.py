"""OpenAI-compatible Files API: request files and audio for batches, and batch outputs.
The use cases are :class:`asrserve.service.files.Files`."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Path, Query, Request
from fastapi.responses import FileResponse, Response

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext, context
from asrserve.api.openapi import answer, errors
from asrserve.api.schemas import page_body
from asrserve.api.uploads import receive_upload
from asrserve.auth.principal import Principal
from asrserve.files.models import FilePurpose

router = APIRouter(prefix="/v1/files")
Ctx = Annotated[ApiContext, Depends(context)]
Caller = Annotated[Principal, Depends(caller)]
JSONL = "application/jsonl"
UNKNOWN = "No such file, or not the caller's."
FileId = Annotated[
    str,
    Path(
        description="The file's `id`: from its upload, or a batch's `output_file_id` or "
        "`error_file_id`."
    ),
]
Purpose = Annotated[
    FilePurpose | None, Query(description="Only the files of this purpose; omitted, any.")
]
Limit = Annotated[int, Query(ge=1, le=10_000, description="The most files the page holds.")]
After = Annotated[
    str | None,
    Query(
        description="The previous page's `last_id`: the page goes on with the files after it; "
        "omitted, from the newest."
    ),
]
FILE = (
    "The file's object: `id`, `object`, `bytes`, `created_at`, `filename`, `purpose`, "
    "`status` (`processed`), `expires_at`, `status_details`"
)


@router.post(
    "",
    response_description=f"{FILE}.",
    responses=errors(s413="Over the byte limit of its purpose (`file_too_large`)."),
)
async def upload_file(request: Request, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Multipart ``file`` and ``purpose`` (``batch``: JSONL requests; ``audio``: audio that
    batch requests name by id). Streamed to disk; limits are enforced while reading.

    A ``batch`` file is at most ``ASRSERVE_BATCH_API_MAX_FILE_BYTES``; any file at most the
    larger of that and ``ASRSERVE_MAX_JOB_UPLOAD_BYTES``. An empty file: 400 ``empty_file``."""
    file_id, path = ctx.files.new_upload_path()
    upload = await receive_upload(request, path, ctx.files.upload_limit, ctx.uploads)
    record = await ctx.files.create(file_id, upload, upload.get("purpose"), principal)
    return record.view()


@router.get(
    "",
    response_description='`{"object": "list", "data", "first_id", "last_id", "has_more"}`: '
    "up to `limit` file objects, newest first; `has_more` when more follow `last_id`.",
)
async def list_files(
    ctx: Ctx,
    principal: Caller,
    purpose: Purpose = None,
    limit: Limit = 20,
    after: After = None,
) -> dict[str, Any]:
    """The caller's files, newest first; output and error files have purpose
    ``batch_output``."""
    files = await ctx.files.page(principal, purpose, limit=limit + 1, after=after)
    return page_body([f.view() for f in files], limit)


@router.get("/{file_id}", response_description=f"{FILE}.", responses=errors(s404=UNKNOWN))
async def get_file(file_id: FileId, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """The file's object."""
    return (await ctx.files.found(file_id, principal)).view()


@router.get(
    "/{file_id}/content",
    response_class=Response,
    responses=answer(
        "The file's bytes as stored, as a download named as the file (`Content-Disposition`): "
        f"`application/octet-stream` for audio, `{JSONL}` for the others.",
        "application/octet-stream",
        JSONL,
    )
    | errors(s404=UNKNOWN),
)
async def file_content(file_id: FileId, ctx: Ctx, principal: Caller) -> FileResponse:
    """The file's bytes: audio as it was uploaded, JSONL for the others."""
    record, path = await ctx.files.content(file_id, principal)
    media_type = "application/octet-stream" if record.purpose is FilePurpose.AUDIO else JSONL
    return FileResponse(path, media_type=media_type, filename=record.filename)


@router.delete(
    "/{file_id}",
    response_description='`{"id", "object": "file", "deleted": true}`.',
    responses=errors(s404=UNKNOWN),
)
async def delete_file(file_id: FileId, ctx: Ctx, principal: Caller) -> dict[str, Any]:
    """Delete the file."""
    record = await ctx.files.delete(file_id, principal)
    return {"id": record.id, "object": "file", "deleted": True}
