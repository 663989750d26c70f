"""What a Wyoming utterance does with the service: who it is (the bound key, or the open
caller), its options validated as any request's (``transcribe``'s ``language`` and
``name``), its audio submitted at interactive priority as a synchronous HTTP request is,
and its text followed as it becomes final."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import NamedTuple

from wyoming.asr import Transcribe

from asrserve.auth.keys import hash_secret
from asrserve.auth.principal import OPEN, Principal
from asrserve.engine.catalog import Catalog
from asrserve.errors import AsrError, DeadlineExceeded, StoredError, Unauthenticated
from asrserve.jobs.models import Job, JobStatus
from asrserve.request_schema import MAX_KEYWORD_BYTES, MAX_KEYWORDS, keyword_refused
from asrserve.requests import parse_request
from asrserve.service.jobs import Service
from asrserve.settings import Settings
from asrserve.vocabulary import KEYWORD_SEPARATOR
from asrserve.wyoming.utterance import Utterance

FOLLOW_TICK_S = 5.0  # the store is read at least this often while a job runs


class Heard(NamedTuple):
    text: str  # the text so far
    final: bool  # the whole text
    language: str | None = None  # once it is final


@dataclass(frozen=True)
class Edge:
    service: Service
    catalog: Catalog
    settings: Settings

    async def principal(self) -> Principal:
        """The bound key's caller (``ASRSERVE_WYOMING_KEY``: its id or its secret), read
        anew for each utterance so that a revoked key stops at once; the open caller when
        none is bound."""
        bound = self.settings.wyoming_key
        if bound is None:
            return OPEN
        keys = self.service.keys
        key = await keys.get(bound) or await keys.find(hash_secret(bound))
        if key is None or key.revoked_at is not None:
            raise Unauthenticated("ASRSERVE_WYOMING_KEY names no active API key")
        return Principal.of(key, self.settings)

    async def submit(
        self, utterance: Utterance, request: Transcribe, principal: Principal
    ) -> tuple[Job, float]:
        """The utterance's job, accepted (validated, admitted, charged, queued), and the
        seconds it has to finish."""
        fields: dict[str, list[str]] = {}
        if request.language:
            fields["language"] = [_whisper_code(request.language)]
        if request.name and self.catalog.get(request.name) is not None:
            fields["model"] = [request.name]  # else the program's name: the default model
        fields["keywords[]"] = keywords(request)
        parsed = parse_request(fields, self.catalog, languages=principal.languages)
        job_id, dest = self.service.new_upload_path()
        try:
            stored = await utterance.store(dest)
        except BaseException:
            dest.unlink(missing_ok=True)
            raise
        return await self.service.submit_interactive(job_id, stored, parsed, principal)

    async def follow(self, job: Job, timeout: float) -> AsyncGenerator[Heard, None]:
        """The job's text so far each time more of it is final (no language yet); the
        finished job's whole text and language last. Its error if it fails or is not done
        in ``timeout`` seconds (the job is then cancelled, as it is if the caller stops
        following)."""
        last = job
        try:
            async for last in self.service.follow(job.id, timeout + 1.0, FOLLOW_TICK_S):
                if last.status is JobStatus.SUCCEEDED and last.result is not None:
                    yield Heard(last.result.text, True, last.result.language)
                    return
                if last.progress is not None:
                    segments = last.progress.segments
                    yield Heard("".join(segment.text for segment in segments).strip(), False)
            raise _failure(last, timeout)
        finally:
            if not last.status.finished:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.service.cancel(job.id))


def _failure(job: Job, timeout: float) -> AsrError:
    if job.status is JobStatus.FAILED and job.error is not None:
        error = job.error
        return StoredError(error.status, error.message, code=error.code, param=error.param)
    if job.status is JobStatus.CANCELLED:
        return StoredError(409, "the transcription was cancelled", code="job_cancelled")
    return DeadlineExceeded(f"transcription did not finish within {timeout:g} s")


def keywords(request: Transcribe) -> list[str]:
    """``transcript_names`` then ``transcript_terms`` (names come first) as the request's
    ``keywords[]``: each stripped, those the request schema refuses
    (:func:`~asrserve.request_schema.keyword_refused`) left out, and no more than fit its
    limits in that order (Home Assistant may send every name it knows: the first that fit
    are kept)."""
    kept: list[str] = []
    for term in (*(request.transcript_names or ()), *(request.transcript_terms or ())):
        term = term.strip()
        if keyword_refused(term) is not None:
            continue
        joined = KEYWORD_SEPARATOR.join([*kept, term])
        if len(kept) == MAX_KEYWORDS or len(joined.encode()) > MAX_KEYWORD_BYTES:
            break
        kept.append(term)
    return kept


def _whisper_code(language: str) -> str:
    """Home Assistant's language tags (``en-US``, ``pt_BR``) as Whisper's codes (``en``);
    validation refuses what Whisper does not know."""
    return language.replace("_", "-").split("-")[0].strip().lower()
