"""A transcription form as received (multipart fields) → the core's validated request."""

from __future__ import annotations

from asrserve.api.uploads import Upload
from asrserve.engine.catalog import Catalog
from asrserve.errors import AsrError
from asrserve.languages import ANY_LANGUAGE, LanguageRule
from asrserve.requests import TranscriptionRequest, parse_request
from asrserve.vocabulary import Task


def parse_form(
    upload: Upload,
    catalog: Catalog,
    *,
    callback: bool = False,
    task: Task = Task.TRANSCRIBE,
    shaping: bool = True,
    languages: LanguageRule = ANY_LANGUAGE,
) -> TranscriptionRequest:
    """The form's fields as a transcription request (see :func:`asrserve.requests.parse_request`);
    if they are not one, the uploaded file is not kept."""
    try:
        return parse_request(
            upload.fields,
            catalog,
            callback=callback,
            task=task,
            shaping=shaping,
            languages=languages,
        )
    except AsrError:
        upload.remove()
        raise
