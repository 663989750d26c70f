"""OpenAPI descriptions of the multipart forms (parsed by hand, so FastAPI cannot infer them)."""

from __future__ import annotations

from typing import Any

from asrserve.subtitles import LIMITS

AUDIO = {
    "type": "string",
    "format": "binary",
    "description": "Audio in any container FFmpeg reads (flac, mp3, m4a, ogg, wav, webm, ...).",
}
KEEP_ALIVE = {
    "type": "string",
    "description": "How long the model stays loaded after this request: seconds or a duration"
    " (5m); -1 forever, 0 unloaded once done (Ollama's keep_alive).",
}

INCLUDE = {
    "type": "array",
    "items": {"type": "string", "enum": ["logprobs"]},
    "description": "logprobs: each text token's log probability (response_format=json only; "
    "decodes greedily, beam_size 1).",
}
CHUNKING = {
    "description": "How the file is split into speech: 'auto' (the default) or a server_vad "
    "object (as JSON, or as chunking_strategy[...] fields).",
    "oneOf": [
        {"type": "string", "enum": ["auto"]},
        {
            "type": "object",
            "properties": {
                "type": {"type": "string", "enum": ["server_vad"]},
                "threshold": {"type": "number", "minimum": 0, "maximum": 1},
                "silence_duration_ms": {"type": "integer", "minimum": 0, "maximum": 10000},
                "prefix_padding_ms": {"type": "integer", "minimum": 0, "maximum": 5000},
            },
            "required": ["type"],
        },
    ],
}


SHAPING: dict[str, Any] = {
    **{
        name: {
            "type": "integer" if name != "max_cue_seconds" else "number",
            "minimum": low,
            "maximum": high,
            "description": "srt and vtt only: a subtitle limit (README, Subtitles).",
        }
        for name, (low, high) in LIMITS.items()
    },
    "highlight_words": {"type": "boolean", "description": "srt and vtt only: karaoke cues."},
}


def transcription_form(*, sync: bool) -> dict[str, Any]:
    properties: dict[str, Any] = {
        "file": AUDIO,
        "model": {"type": "string", "description": "The served model id or 'whisper-1'."},
        "language": {"type": "string", "description": "ISO-639-1 code."},
        "prompt": {"type": "string"},
        "response_format": {
            "type": "string",
            "enum": ["json", "text", "srt", "verbose_json", "vtt"],
        },
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "timestamp_granularities[]": {
            "type": "array",
            "items": {"type": "string", "enum": ["word", "segment"]},
        },
        "beam_size": {"type": "integer", "minimum": 1, "maximum": 20},
        "include[]": INCLUDE,
        "chunking_strategy": CHUNKING,
        "deadline_s": {
            "type": "number",
            "description": "Drop the work (504) if no device "
            "has started it within this many seconds.",
        },
        "keep_alive": KEEP_ALIVE,
    }
    if sync:
        properties |= SHAPING
    else:
        properties["callback_url"] = {
            "type": "string",
            "format": "uri",
            "description": "POSTed the job JSON when it finishes.",
        }
    return _form(properties, "file")


def translation_form() -> dict[str, Any]:
    """OpenAI's translation form: no ``language`` (the speech is detected), English out."""
    properties: dict[str, Any] = {
        "file": AUDIO,
        "model": {
            "type": "string",
            "description": "A multilingual served model, or 'whisper-1' if the default is one.",
        },
        "prompt": {"type": "string", "description": "In English."},
        "response_format": {
            "type": "string",
            "enum": ["json", "text", "srt", "verbose_json", "vtt"],
        },
        "temperature": {"type": "number", "minimum": 0, "maximum": 1},
        "keep_alive": KEEP_ALIVE,
        "include[]": INCLUDE,
        "chunking_strategy": CHUNKING,
    }
    return _form(properties, "file")


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
