"""A transcription form as received (multipart fields) → the core's validated request."""

from __future__ import annotations

from asrserve.api.uploads import Upload
from asrserve.engine.base import ModelInfo
from asrserve.errors import AsrError
from asrserve.requests import TranscriptionRequest, parse_request


def parse_form(upload: Upload, model: ModelInfo, *, callback: bool = False) -> TranscriptionRequest:
    """The form's fields as a transcription request (see :func:`asrserve.requests.parse_request`);
    if they are not one, the uploaded file is not kept."""
    try:
        return parse_request(upload.fields, model, callback=callback)
    except AsrError:
        upload.remove()
        raise
