"""One Wyoming connection: its events in order, each utterance answered.

``describe`` → ``info``; ``transcribe`` (optional) names the next utterance's language and
model; ``audio-start``, ``audio-chunk``s, ``audio-stop`` carry it. The answer streams:
``transcript-start``, a ``transcript-chunk`` each time more text is final, ``transcript``
(the whole text, for clients that read only that), ``transcript-stop``. The connection
stays open for the next utterance. ``ping`` → ``pong``; other event types are dropped, as
the protocol asks of a server.

What goes wrong is answered with an ``error`` event in this connection alone. A request
the service refuses (an unknown language, a spent quota, no active bound key) keeps the
connection; what breaks the stream (garbage, an event over the limits, audio without
``audio-start``, an utterance over ``wyoming_max_utterance_s``, the client's side closed
mid-utterance) closes it after the ``error``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import TypeVar

from wyoming.asr import Transcribe, Transcript, TranscriptChunk, TranscriptStart, TranscriptStop
from wyoming.audio import AudioChunk, AudioStart, AudioStop
from wyoming.error import Error
from wyoming.event import Event, Eventable
from wyoming.info import Describe
from wyoming.ping import Ping, Pong
from wyoming.server import AsyncEventHandler

from asrserve.errors import AsrError
from asrserve.wyoming import describe
from asrserve.wyoming.edge import Edge, Heard
from asrserve.wyoming.framing import BadEvent, Truncated, read_event
from asrserve.wyoming.utterance import TooLong, Utterance

log = logging.getLogger(__name__)
E = TypeVar("E", bound=Eventable)


class Connection(AsyncEventHandler):
    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, edge: Edge
    ) -> None:
        super().__init__(reader, writer)
        self.edge = edge
        self.request = Transcribe()
        self.utterance: Utterance | None = None
        self.answering = False  # an utterance is being transcribed
        self.stopping = False  # the server is stopping: close once this utterance is answered

    @property
    def busy(self) -> bool:
        """Inside an utterance: sending it, or waiting for its text."""
        return self.answering or self.utterance is not None

    async def run(self) -> None:
        """Events until the client closes, goes idle or breaks the stream."""
        try:
            while await self._next() and not (self.stopping and not self.busy):
                pass
        except ConnectionError:
            log.info("wyoming client gone")
        except Exception:  # a fault of this server's: this connection alone ends
            log.exception("wyoming connection failed")
            await self._error("server_error", "the server failed to handle this connection")
        finally:
            self.utterance = None
            self.writer.close()

    async def _next(self) -> bool:
        """Read and handle one event; False once the connection is to close."""
        idle = self.edge.settings.wyoming_idle_timeout_s
        try:
            try:
                event = await asyncio.wait_for(read_event(self.reader), idle)
            except TimeoutError:
                log.info("wyoming connection idle for %g s: closed", idle)
                return False
            if event is None and self.utterance is not None:
                raise Truncated("the connection ended inside an utterance")
            if event is None:
                return False
            await self.handle_event(event)
            return True
        except (BadEvent, Truncated) as exc:
            await self._error(exc.code if isinstance(exc, BadEvent) else "audio_truncated", exc)
        except TooLong:
            limit = self.edge.settings.wyoming_max_utterance_s
            await self._error("audio_too_long", f"the utterance is over {limit:g} s")
        return False

    async def handle_event(self, event: Event) -> bool:
        if AudioChunk.is_type(event.type):
            if self.utterance is None:
                raise BadEvent("an audio-chunk came before audio-start", "audio_without_start")
            self.utterance.add(_parsed(AudioChunk, event))
        elif AudioStart.is_type(event.type):
            start = _parsed(AudioStart, event)
            self.utterance = Utterance.begun(start, self.edge.settings.wyoming_max_utterance_s)
        elif AudioStop.is_type(event.type):
            if self.utterance is None:
                raise BadEvent("an audio-stop came before audio-start", "audio_without_start")
            utterance, self.utterance = self.utterance, None
            request, self.request = self.request, Transcribe()
            await self._answer(utterance, request)
        elif Transcribe.is_type(event.type):
            self.request = _transcribe(event)
        elif Describe.is_type(event.type):
            await self._describe()
        elif Ping.is_type(event.type):
            await self.write_event(Pong(text=_parsed(Ping, event).text).event())
        else:
            log.debug("wyoming event %.40r dropped", event.type)
        return True

    async def _describe(self) -> None:
        try:
            principal = await self.edge.principal()
        except AsrError as exc:
            await self._error(exc.code or exc.kind.value, exc.message)
            return
        await self.write_event(describe.info(self.edge.catalog, principal.languages).event())

    async def _answer(self, utterance: Utterance, request: Transcribe) -> None:
        self.answering = True
        try:
            if not utterance.pcm:  # nothing was said: nothing to submit
                await self._stream(_silence(), language=request.language)
                return
            principal = await self.edge.principal()
            job, timeout = await self.edge.submit(utterance, request, principal)
            audio_s = round(utterance.seconds, 3)
            log.info("wyoming utterance queued", extra={"job_id": job.id, "audio_s": audio_s})
            async with contextlib.aclosing(self.edge.follow(job, timeout)) as heard:
                await self._stream(heard, language=job.options.language)
        except AsrError as exc:
            await self._error(exc.code or exc.kind.value, exc.message)
        finally:
            self.answering = False

    async def _stream(self, heard: AsyncIterator[Heard], language: str | None) -> None:
        """``transcript-start``, each piece of text newly final as a ``transcript-chunk``
        (the pieces join to the whole), ``transcript`` with the whole, ``transcript-stop``."""
        sent = ""
        started = False
        async for text, final, final_language in heard:
            if not started:
                await self.write_event(TranscriptStart(language=language).event())
                started = True
            if text.startswith(sent) and len(text) > len(sent):
                await self.write_event(TranscriptChunk(text=text[len(sent) :]).event())
                sent = text
            if final:
                await self.write_event(Transcript(text=text, language=final_language).event())
                await self.write_event(TranscriptStop().event())

    async def _error(self, code: str, message: object) -> None:
        log.info("wyoming error %s: %s", code, message)
        with contextlib.suppress(ConnectionError):
            await self.write_event(Error(text=str(message), code=code).event())


async def _silence() -> AsyncIterator[Heard]:
    yield Heard("", True)


def _transcribe(event: Event) -> Transcribe:
    request = _parsed(Transcribe, event)
    if not all(isinstance(value, str | None) for value in (request.language, request.name)):
        raise BadEvent("transcribe's language and name are text or absent")
    for terms in (request.transcript_names, request.transcript_terms):
        if terms is not None and not (
            isinstance(terms, list) and all(isinstance(term, str) for term in terms)
        ):
            raise BadEvent("transcribe's transcript_names and transcript_terms are lists of text")
    return request


def _parsed(kind: type[E], event: Event) -> E:
    """The event as the library reads it; :class:`BadEvent` for data it cannot."""
    try:
        parsed = kind.from_event(event)
    except (KeyError, TypeError, ValueError, AttributeError):
        raise BadEvent(f"a {event.type[:40]} event's data is malformed") from None
    assert isinstance(parsed, kind)
    return parsed
