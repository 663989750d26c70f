"""OpenAPI descriptions of the multipart forms (read as a stream, so FastAPI cannot infer them):
the request schema's JSON schema (``request_schema.py``), field by field."""

from __future__ import annotations

from typing import Any

from asrserve.request_schema import DIARIZATION, CueForm, RequestForm

AUDIO = {
    "type": "string",
    "format": "binary",
    "description": "Audio in any container FFmpeg reads (flac, mp3, m4a, ogg, wav, webm, ...).",
}
_SCHEMA = RequestForm.model_json_schema(by_alias=True)
_SHAPING = set(CueForm.model_fields)
# the request's own fields, then those that shape subtitles
_FORM = dict(sorted(_SCHEMA["properties"].items(), key=lambda item: item[0] in _SHAPING))
# as the form names them (a list's alias)
_DIARIZATION = {RequestForm.model_fields[name].alias or name for name in DIARIZATION}


def _property(schema: dict[str, Any]) -> dict[str, Any]:
    """A form field's schema: never null (a field left out is its default), no title."""
    shown = {key: value for key, value in schema.items() if key not in ("title", "default")}
    ref = shown.pop("$ref", None)  # an enum, defined once in the model's schema
    if ref is not None:
        shown = _SCHEMA["$defs"][ref.rsplit("/", 1)[-1]] | shown
        shown.pop("title", None)
    variants = [v for v in shown.pop("anyOf", []) if v.get("type") != "null"]
    if len(variants) == 1:
        shown = variants[0] | shown
    elif variants:
        shown["anyOf"] = variants
    if schema.get("default") not in (None, [], False):
        shown["default"] = schema["default"]
    return shown


def _fields(leave_out: set[str]) -> dict[str, Any]:
    return {name: _property(schema) for name, schema in _FORM.items() if name not in leave_out}


def transcription_form(*, sync: bool) -> dict[str, Any]:
    """The request schema's fields (``request_schema.py``): a synchronous request's may
    shape subtitles or stream; an async job's may name a webhook."""
    leave_out = {"callback_url"} if sync else {*_SHAPING, "stream"}
    return _form({"file": AUDIO, **_fields(leave_out)}, "file")


def translation_form() -> dict[str, Any]:
    """A transcription's fields but those of diarization (a transcription's alone) and of
    jobs: English out."""
    properties = _fields({"callback_url", "languages[]", *_DIARIZATION})
    properties["prompt"] = properties["prompt"] | {"description": "In English."}
    return _form({"file": AUDIO, **properties}, "file")


def audio_file_form() -> dict[str, Any]:
    """whisper-asr-webservice's form: the audio alone, as ``audio_file`` (options are query
    parameters)."""
    return _form({"audio_file": AUDIO}, "audio_file")


def _form(properties: dict[str, Any], file_field: str) -> dict[str, Any]:
    return {
        "requestBody": {
            "required": True,
            "content": {
                "multipart/form-data": {
                    "schema": {
                        "type": "object",
                        "properties": properties,
                        "required": [file_field],
                    }
                }
            },
        }
    }


ERROR_BODY = {
    "type": "object",
    "description": "OpenAI's error shape.",
    "properties": {
        "error": {
            "type": "object",
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": "string", "nullable": True},
                "code": {"type": "string", "nullable": True},
            },
        }
    },
}
COMMON_ERRORS: dict[int, str] = {
    401: "With auth on, no valid key (`Authorization: Bearer <key>`) on `/v1`, `/asr`, "
    "`/detect-language`, `/metrics` and the API docs.",
    421: "A `Host` this server does not answer for (`ASRSERVE_ALLOWED_HOSTS`).",
    422: "A parameter failed its schema's validation (`param` names it).",
    429: "The key's requests per minute (`rate_limit_exceeded`, with `X-RateLimit-*` headers).",
    503: "A distributed API node cannot reach Redis (with `Retry-After`).",
}
"""What any route may answer, besides its own errors (the middleware's refusals)."""
WORK_ERRORS: dict[int, str] = {
    400: "Empty file (`empty_file`), audio without a single sample (`empty_audio`), missing "
    "file, bad parameter (`param` names it), not multipart, a model not served "
    "(`model_not_found`, naming the served ones), a `language` the key does not allow "
    "(`language_not_allowed`, naming the allowed ones).",
    408: "An upload that sends nothing for `ASRSERVE_UPLOAD_IDLE_TIMEOUT_S`, or too slowly.",
    413: "Upload over the byte limit (checked while streaming: `file_too_large`), audio over "
    "the duration limit (`audio_too_long`), a request more than its class may hold even "
    "empty (`over_queue_limit`).",
    415: "Not decodable audio, no audio stream, a codec without a decoder or an impossible "
    "sample rate (`unsupported_audio`).",
    429: "The class's backlog is full, or the key's share of it (`queue_full`, `Retry-After` "
    "from the measured throughput); the key's daily audio or device quota "
    "(`quota_exceeded`).",
    503: "The model is still loading; too many uploads at once (`Retry-After`).",
}
"""What a request that uploads audio for work may answer."""
SYNC_ERRORS: dict[int, str] = {
    504: "The request outlived its `deadline_s` or `ASRSERVE_SYNC_TIMEOUT_S` "
    "(`deadline_exceeded`; its windows that no device had started are dropped).",
    499: "Logged only: the client closed the connection first; its job is cancelled "
    "(`client_closed_request`).",
}
"""What a synchronous transcription may answer besides :data:`WORK_ERRORS`."""


TRANSCRIPT: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The transcript in `response_format`; with `stream=true`, "
        "server-sent events.",
        "content": {
            media: {}
            for media in (
                "application/json",
                "text/plain",
                "application/x-subrip",
                "text/vtt",
                "text/event-stream",
            )
        },
    }
}
"""A synchronous transcription's answer: each format's media type, or the event stream."""


def answer(description: str, *media: str) -> dict[int | str, dict[str, Any]]:
    """A route's 200 answer that is not JSON: what it holds and its media types (the route
    sets ``response_class=Response``, so that the schema adds no ``application/json``)."""
    return {200: {"description": description, "content": {m: {} for m in media}}}


def errors(*tables: dict[int, str], **by_status: str) -> dict[int | str, dict[str, Any]]:
    """A route's error responses in OpenAI's shape: the tables merged, then ``by_status``
    (``s404="unknown job"``) for what is the route's own."""
    merged: dict[int, str] = {}
    for table in tables:
        merged |= table
    merged |= {int(name.removeprefix("s")): text for name, text in by_status.items()}
    return {
        status: {
            "description": text,
            "content": {"application/json": {"schema": ERROR_BODY}},
        }
        for status, text in sorted(merged.items())
    }
