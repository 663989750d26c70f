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
