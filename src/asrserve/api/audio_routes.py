"""OpenAI-compatible ``POST /v1/audio/transcriptions`` and ``/v1/audio/translations``."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from asrserve.api.access import caller
from asrserve.api.deps import ApiContext
from asrserve.api.intake import (
    ready_model,
    receive_transcription,
    run_interactive,
    stream_interactive,
)
from asrserve.api.openapi import (
    SYNC_ERRORS,
    TRANSCRIPT,
    WORK_ERRORS,
    errors,
    transcription_form,
    translation_form,
)
from asrserve.api.responses import transcript_response
from asrserve.auth.principal import Principal
from asrserve.vocabulary import Task

router = APIRouter(prefix="/v1")


async def _answer(request: Request, ctx: ApiContext, principal: Principal, task: Task) -> Response:
    """The synchronous OpenAI routes: one intake, one wait, the transcript as asked for (or
    streamed as it becomes final)."""
    limit = ctx.service.settings.max_sync_upload_bytes
    job_id, upload, parsed = await receive_transcription(
        request, ctx, limit, task=task, languages=principal.languages
    )
    if parsed.stream:
        return await stream_interactive(ctx, job_id, upload, parsed, principal)
    done = await run_interactive(request, ctx, job_id, upload, parsed, principal)
    return await transcript_response(
        ctx.renders, done, parsed.response_format, words=parsed.words, cues=parsed.cues
    )


@router.post(
    "/audio/transcriptions",
    openapi_extra=transcription_form(sync=True),
    responses=TRANSCRIPT | errors(WORK_ERRORS, SYNC_ERRORS),
)
async def create_transcription(
    request: Request,
    ctx: ApiContext = Depends(ready_model),  # noqa: B008
    principal: Principal = Depends(caller),  # noqa: B008
) -> Response:
    """Transcribe an uploaded file and answer when done (interactive priority).

    OpenAI-compatible: the official ``openai`` client works unchanged. ``model``: a served
    model id, or ``whisper-1`` for the default; another: 400 ``model_not_found`` naming the
    served ones. ``language`` omitted: the key's default language if it has one, else
    detected on a multilingual model, among the key's languages if it is limited to some;
    not ``en`` on an English-only one: 400 ``unsupported_language``; off the key's list:
    400 ``language_not_allowed``. ``languages[]``: detected among these only (one: that
    language), within the key's list (400 ``language_not_allowed`` naming ``languages[]``
    past it); not with ``language``. ``prompt``: at most 1000 characters (400
    ``prompt_too_long`` past it): Whisper uses only its last 223 tokens. ``beam_size``,
    ``deadline_s``, ``keep_alive`` and the subtitle limits are extensions of OpenAI's form.

    ``temperature`` 0, the default: Whisper's temperature fallback, each window decoded again
    at a higher temperature while its text loops or is unlikely, and ``verbose_json``
    segments report the ``temperature``, ``avg_logprob`` and ``compression_ratio`` their
    window ended at; above 0: sampled at it (docs/decoding.md).

    ``include[]=logprobs`` (``response_format=json`` only, as OpenAI allows it, else 400
    naming ``include[]``): the answer gains ``logprobs``, each text token's ``token``,
    ``logprob`` and ``bytes`` from the decode that wrote the text, joined they are the text;
    streamed, each ``transcript.text.delta`` carries its tokens' and ``transcript.text.done``
    all; the decode is greedy, so a ``beam_size`` over 1 with it is a 400.

    ``chunking_strategy``: ``auto``, the default, or ``{"type": "server_vad", "threshold",
    "silence_duration_ms", "prefix_padding_ms"}`` as the openai client sends it or as one JSON
    field: the speech threshold (0-1, default 0.5), the pause that splits speech (0-10000 ms,
    default 160) and the padding kept each side (0-5000 ms, default 400) of the VAD that
    splits the file, which then splits even a file of 30 s or less; a bad value: 400 naming
    ``chunking_strategy.<field>``.

    ``diarized_json``: segments labelled with their speakers (docs/diarization.md);
    ``known_speaker_names[]`` and ``known_speaker_references[]`` (up to 4, data URLs of
    2-10 s clips) name the speakers they match. The subtitle limits (``max_line_width``
    default 42, ``max_line_count`` 2, ``max_words_per_cue`` no limit, ``max_cue_seconds`` 7,
    ``highlight_words``: karaoke) shape ``srt`` and ``vtt`` only; any of them with another
    format: 400 naming it (docs/calling.md#subtitles).

    ``stream=true``: ``text/event-stream`` in OpenAI's shape, a ``transcript.text.delta``
    event as each piece of text becomes final, then ``transcript.text.done`` with the whole
    ``text`` and ``usage``; the ``X-Job-Id`` header names the job
    (docs/calling.md#streaming)."""
    return await _answer(request, ctx, principal, Task.TRANSCRIBE)


@router.post(
    "/audio/translations",
    openapi_extra=translation_form(),
    responses=TRANSCRIPT | errors(WORK_ERRORS, SYNC_ERRORS),
)
async def create_translation(
    request: Request,
    ctx: ApiContext = Depends(ready_model),  # noqa: B008
    principal: Principal = Depends(caller),  # noqa: B008
) -> Response:
    """Translate an uploaded file's speech into English and answer when done (interactive
    priority). An English-only model cannot: 400 ``translation_unsupported``.

    OpenAI-compatible: speech in any language to English text. The fields of a
    transcription but the diarization fields and ``languages[]``; ``language`` is the
    speech's (detected if left out); ``verbose_json`` says ``"task": "translate"``. Same
    intake, limits and interactive priority as transcriptions. A multilingual model only: on
    an English-only one, 400 ``translation_unsupported`` (``param: model``)."""
    return await _answer(request, ctx, principal, Task.TRANSLATE)
