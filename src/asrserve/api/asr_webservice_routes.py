"""whisper-asr-webservice's routes, ``POST /asr`` and ``POST /detect-language``, so that tools
written for that service (subtitle managers call ``/asr``) work by changing only the URL.

Its parameters, defaults and answers: the audio as the multipart part ``audio_file``, the
options as query parameters. ``/asr`` answers the transcript in ``output``'s format as a
download (``text/plain`` whatever the format, ``Content-Disposition: attachment;
filename="<upload name>.<output>"``, and an ``Asr-Engine`` header); ``/detect-language``
answers ``{"detected_language", "language_code", "confidence"}``. ``encode=false`` means the
body is raw PCM (s16le, 16 kHz, mono): it is given a WAV header on arrival, so the one decode
path reads it. ``vad_filter`` is accepted and changes nothing: every request here is already
cut at the silences Silero VAD finds (``ASRSERVE_VAD_FILTER``, on by default). ``model``
(ours, not the peer's) picks a served model; omitted, the default.

Both run as an interactive job through the same intake, limits, API keys, scheduler and
errors as ``/v1/audio/transcriptions`` (OpenAI's error shape, ``param`` naming
``audio_file`` or the query parameter at fault).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import PlainTextResponse, Response

from asrserve.api.access import caller
from asrserve.api.asr_params import (
    Encode,
    Language,
    MaxSpeakers,
    MinSpeakers,
    Model,
    Output,
    Prompt,
    TaskParam,
    WordTimestamps,
)
from asrserve.api.cue_params import cue_fields
from asrserve.api.deps import ApiContext
from asrserve.api.intake import ready_model, run_interactive
from asrserve.api.openapi import SYNC_ERRORS, WORK_ERRORS, audio_file_form, errors
from asrserve.api.responses import finished_transcript
from asrserve.api.uploads import Upload, receive_upload, storage_error
from asrserve.audio.raw import wrap_raw_pcm
from asrserve.auth.principal import Principal
from asrserve.errors import AsrError, InvalidRequest
from asrserve.formats import WhisperOutput, render_whisper
from asrserve.jobs.models import Job
from asrserve.languages import LanguageRule, language_name
from asrserve.requests import Fields, parse_cue_limits, parse_request
from asrserve.vocabulary import Task

router = APIRouter(tags=["whisper-asr-webservice"])
Ctx = Annotated[ApiContext, Depends(ready_model)]
Caller = Annotated[Principal, Depends(caller)]

FILE_FIELD = "audio_file"
PARAMS = {"file": FILE_FIELD, "prompt": "initial_prompt"}  # the core's names → this route's
ENGINE = {"Asr-Engine": "faster_whisper"}
CUES = (WhisperOutput.SRT, WhisperOutput.VTT, WhisperOutput.TSV)  # outputs cut into cues
SPEAKERS = (WhisperOutput.JSON, WhisperOutput.SRT, WhisperOutput.VTT)  # outputs with speakers


@router.post(
    "/asr",
    response_class=PlainTextResponse,
    response_description="The transcript in `output`'s format as a download (`text/plain` "
    'whatever the format, `Content-Disposition: attachment; filename="<name>.<output>"`), '
    "with an `Asr-Engine` header.",
    openapi_extra=audio_file_form(),
    responses=errors(WORK_ERRORS, SYNC_ERRORS),
)
async def asr(
    request: Request,
    ctx: Ctx,
    principal: Caller,
    shaping: Annotated[Fields, Depends(cue_fields)],
    encode: Encode = True,
    task: TaskParam = "transcribe",
    language: Language = None,
    initial_prompt: Prompt = None,
    vad_filter: Annotated[
        bool, Query(description="Accepted; VAD always cuts speech at silences here")
    ] = False,
    word_timestamps: WordTimestamps = False,
    output: Output = WhisperOutput.TXT,
    model: Model = None,
    diarize: Annotated[bool, Query(description="Label each segment with its speaker")] = False,
    min_speakers: MinSpeakers = None,
    max_speakers: MaxSpeakers = None,
) -> Response:
    """Transcribe (or translate into English) ``audio_file``; the transcript as a file
    (srt, vtt and tsv cut into cues from word timestamps, as the shaping parameters say).
    ``diarize``: each segment (json) or cue (srt: the speaker before its text; vtt: a
    ``<v A>`` voice tag) says who speaks; txt and tsv cannot carry speakers.

    whisper-asr-webservice's route (github.com/ahmetoner/whisper-asr-webservice), so tools
    written for it (subtitle managers) need only the new URL. ``output``: ``txt`` (the
    default), ``vtt``, ``srt``, ``tsv`` (a row a cue), ``json`` (Whisper's result dict with
    ``text``, ``segments``, ``language``). ``diarize=true`` with ``txt`` or ``tsv``: 400
    naming ``output``. The subtitle limits shape ``srt``, ``vtt`` and ``tsv``;
    ``highlight_words`` (ours, named as Whisper's writer names them) ``srt`` and ``vtt``
    only. The answer is a download (``text/plain``, ``Content-Disposition: attachment;
    filename="<name>.<output>"``). Same auth, limits, scheduler and error shape as
    ``/v1``."""
    highlight = output in (WhisperOutput.SRT, WhisperOutput.VTT)
    cues = parse_cue_limits(
        shaping, output in CUES, needs="output srt, vtt or tsv", highlight=highlight
    )
    needs_languages = _needs_languages(task, language, principal.languages)
    model = model or _peer_model(ctx, multilingual=needs_languages)
    fields = _fields(model=model, language=language, prompt=initial_prompt)
    if not diarize and (min_speakers is not None or max_speakers is not None):
        raise InvalidRequest("min_speakers and max_speakers need diarize=true", param="diarize")
    if diarize:  # speakers come with word timestamps
        fields |= _diarized(task, output, min_speakers, max_speakers)
    elif word_timestamps or cues:  # the core asks for the verbose format with word timestamps
        fields |= {"response_format": ["verbose_json"], "timestamp_granularities[]": ["word"]}
    job = await _run(request, ctx, principal, fields, Task(task), encode=encode)
    transcript = finished_transcript(job, FILE_FIELD)
    body = await ctx.renders.run(lambda: render_whisper(transcript, output, cues).encode())
    name = quote(job.filename or "audio")
    disposition = f'attachment; filename="{name}.{output.value}"'
    return PlainTextResponse(body, headers={**ENGINE, "Content-Disposition": disposition})


@router.post(
    "/detect-language",
    response_description='`{"detected_language", "language_code", "confidence"}`: the '
    "language's name (in English, lower case), its code and the model's probability of it.",
    openapi_extra=audio_file_form(),
    responses=errors(WORK_ERRORS, SYNC_ERRORS),
)
async def detect_language(
    request: Request, ctx: Ctx, principal: Caller, encode: Encode = True, model: Model = None
) -> dict[str, Any]:
    """The language spoken in ``audio_file``, judged from its first speech; a multilingual
    model only (an English-only one: 400 ``detection_unsupported``).

    Answers ``{"detected_language": "english", "language_code": "en", "confidence": 0.97}``.
    Same auth, limits, scheduler and error shape as ``/v1``."""
    model = model or _peer_model(ctx, multilingual=True)
    job = await _run(request, ctx, principal, _fields(model=model), Task.DETECT, encode=encode)
    transcript = finished_transcript(job, FILE_FIELD)
    return {
        "detected_language": language_name(transcript.language),
        "language_code": transcript.language,
        "confidence": transcript.language_probability,
    }


def _diarized(
    task: str, output: WhisperOutput, low: int | None, high: int | None
) -> dict[str, list[str]]:
    """The core's fields for a diarized ``/asr`` request: a transcription, in a format that
    carries speakers."""
    if task != Task.TRANSCRIBE:
        raise InvalidRequest(f"diarize is for task=transcribe, not {task}", param="diarize")
    if output not in SPEAKERS:
        carriers = ", ".join(o.value for o in SPEAKERS)
        message = f"output={output.value} cannot carry speakers; with diarize use {carriers}"
        raise InvalidRequest(message, param="output")
    pairs = (("min_speakers", low), ("max_speakers", high))
    hints = {name: [str(value)] for name, value in pairs if value is not None}
    return {"response_format": ["diarized_json"], **hints}


async def _run(
    request: Request,
    ctx: ApiContext,
    principal: Principal,
    fields: Fields,
    task: Task,
    *,
    encode: bool,
) -> Job:
    """Receive ``audio_file``, validate the options, run one interactive job to its end."""
    assert ctx.catalog is not None
    job_id, dest = ctx.service.new_upload_path()
    limit = ctx.service.settings.max_sync_upload_bytes
    with _route_params():
        upload = await receive_upload(request, dest, limit, ctx.uploads, file_field=FILE_FIELD)
        try:
            parsed = parse_request(fields, ctx.catalog, task=task, languages=principal.languages)
            await _prepare(upload, encode=encode)
        except BaseException:
            upload.remove()
            raise
        return await run_interactive(request, ctx, job_id, upload, parsed, principal)


async def _prepare(upload: Upload, *, encode: bool) -> None:
    """A part is there; raw PCM (``encode=false``) becomes a WAV file in place."""
    if upload.path is None:
        message = f"a '{FILE_FIELD}' part with the audio is required"
        raise InvalidRequest(message, param=FILE_FIELD)
    if not encode and upload.size:
        try:
            upload.size = await asyncio.to_thread(wrap_raw_pcm, upload.path)
        except OSError as exc:
            raise storage_error(exc) from exc


@contextlib.contextmanager
def _route_params() -> Iterator[None]:
    """Errors name this route's parameters (``audio_file``, ``initial_prompt``)."""
    try:
        yield
    except AsrError as exc:
        exc.param = PARAMS.get(exc.param or "", exc.param)
        raise


def _needs_languages(task: str, language: str | None, rule: LanguageRule) -> bool:
    """Whether a request needs a multilingual model: a translation, a language other than
    English (given, or the key's default), or a key that does not allow English."""
    if task == "translate" or not rule.permits("en"):
        return True
    return (language or rule.default or "en").lower() != "en"


def _peer_model(ctx: ApiContext, *, multilingual: bool) -> str | None:
    """The model a peer route uses when none is named: the default, unless the request
    needs a multilingual model and the default is English-only (the peer serves one model,
    so its clients never name one): then the first multilingual model served, if any."""
    assert ctx.catalog is not None
    if not multilingual or ctx.catalog.default.multilingual:
        return None
    model = ctx.catalog.first_multilingual
    return None if model is None else model.id


def _fields(**values: str | None) -> dict[str, list[str]]:
    return {name: [value] for name, value in values.items() if value is not None}
