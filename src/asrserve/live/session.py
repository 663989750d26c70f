"""One live session: audio in as it is spoken, turns out as they end.

Audio is appended in frames; with turn detection (``server_vad``) a turn opens when speech
starts and closes when it stops, without it the client commits the buffer. While a turn is
open, its audio so far is decoded again (an interim decode, whose agreed words go out as
deltas) every ``interim_s`` of new audio, and no sooner than ``interim_growth`` of the turn
so far has come since the last one: each interim decodes the whole turn, so a long turn is
decoded less often and a second of audio costs at most about 1 / ``interim_growth``
seconds of decoded audio. A newer interim replaces one that no device has started yet, and
one that cannot start within its deadline is dropped. When the turn closes, it is
decoded once more (the final decode) and its text goes out as the completed transcript,
which starts with the deltas already sent (the words the final decode adds go out as one
last delta first: a turn's deltas, joined, are its transcript). A turn with server VAD that
outlasts its longest is cut at its best pause, and the speech goes on as the next turn.
Server events are put on :attr:`LiveSession.events` as dicts in OpenAI's realtime shapes,
without ``event_id`` (the edge numbers them).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import math
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from asrserve.engine.base import SAMPLING_RATE, RawSegment
from asrserve.errors import AsrError, DeadlineExceeded, InternalError
from asrserve.formats import logprobs_view
from asrserve.live import events
from asrserve.live.agreement import Agreement, completed
from asrserve.live.audio import PCM16, PcmInput
from asrserve.live.buffer import PcmBuffer
from asrserve.live.decoder import LiveDecoder, text_of
from asrserve.live.errors import LiveError, error_event
from asrserve.live.turns import Edge, TurnDetection, TurnDetector
from asrserve.vocabulary import TranscriptionOptions

Event = dict[str, Any]
CONTEXT_CHARS = 400  # of the text said before, the most a turn's decode is conditioned on
INTERIM_BEAM = 1  # interim text is a preview: greedy decoding, a fraction of beam 5's work
# Audio is charged against the daily quota ahead of its arrival, this much at a time: at
# open (a key with less left is refused), then whenever what was received passes what was
# charged. Interim text is served on audio already paid for, committed or not.
CHARGE_STEP_S = 2.0
# A turn outlasting its longest (``max_turn_s``) is cut at the quietest point of its last
# seconds, this many; deltas hold back the words of that stretch, which may go to the next turn.
CUT_SEARCH_S = 3.0
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LiveLimits:
    interim_s: float = 1.0  # new audio between two interim decodes of an open turn
    interim_growth: float = 0.0  # ...and at least this share of the turn so far
    interim_deadline_s: float = 1.0  # an interim no device started by then is dropped
    final_deadline_s: float = 10.0  # a turn's final decode must start by then
    max_turn_s: float = 29.0  # a turn this long is closed (one window holds it)
    long_turn_s: float = 15.0  # with server VAD, a turn this long is cut at its best pause
    burst_s: float = 10.0  # how far ahead of real time a client may send
    max_append_s: float = 10.0  # audio in one append


@dataclass(frozen=True)
class SessionConfig:
    options: TranscriptionOptions
    turn_detection: TurnDetection | None = field(default_factory=TurnDetection)
    input_rate: int = 24000
    input_encoding: str = PCM16  # or G.711's "pcmu", "pcma" (at 8000 Hz)
    # accepted and shown, not applied: {"type": "near_field" | "far_field", ...} or None
    noise_reduction: dict[str, Any] | None = None
    logprobs: bool = False  # include: ["item.input_audio_transcription.logprobs"]
    max_turn_s: float | None = None  # a server-VAD turn's longest; None: ``long_turn_s``


def _logprobs(segments: list[RawSegment]) -> list[dict[str, Any]]:
    """The final decode's text tokens, as OpenAI's ``logprobs`` (``token``, ``logprob``,
    ``bytes``)."""
    return logprobs_view(token for segment in segments for token in segment.logprobs or ())


def _ms(samples: int) -> int:
    return samples * 1000 // SAMPLING_RATE


class LiveSession:
    def __init__(
        self,
        session_id: str,
        decoder: LiveDecoder,
        config: SessionConfig,
        limits: LiveLimits,
        charge: Callable[[float], Awaitable[None]],
        clock: Callable[[], float] = time.monotonic,
        tenant: str = "",
    ) -> None:
        self.id = session_id
        self.tenant = tenant  # whose share of the devices its decodes count in
        self.events: asyncio.Queue[Event] = asyncio.Queue()
        self._decoder = decoder
        self._limits = limits
        self._charge = charge
        self._clock = clock
        self._started = clock()
        self._pcm = PcmBuffer()
        self._tasks: set[asyncio.Task[None]] = set()
        self._interim: tuple[asyncio.Future[list[RawSegment]], asyncio.Task[None]] | None = None
        self._last_final: asyncio.Task[None] | None = None
        self._turn: _Turn | None = None
        self._cut_at: int | None = None  # a cut turn's end, while no speech has followed
        self._previous_item: str | None = None
        self._said = ""  # the latest completed turns' text, which the next decodes follow
        self._received = 0.0  # seconds of audio the client sent (whatever its rate)
        self._charged = 0.0  # seconds of audio charged to the quota: received, and ahead
        self.config = config
        self._input = PcmInput(config.input_rate, config.input_encoding)
        detection = config.turn_detection
        self._detector = TurnDetector(detection) if detection is not None else None

    # --- what the client does ---------------------------------------------------------
    async def open(self) -> None:
        """Charge the first seconds: raises (a used-up quota) before the session is served."""
        await self._charge(CHARGE_STEP_S)
        self._charged = CHARGE_STEP_S

    def configure(self, config: SessionConfig) -> None:
        """A session update. The VAD goes on under the new rules (its model state, the open
        turn and the session's clock kept); switched on, it starts at the newest sample,
        in speech if a turn is open; the input converter is kept unless its format changed."""
        if (config.input_rate, config.input_encoding) != (self._input.rate, self._input.encoding):
            self._input = PcmInput(config.input_rate, config.input_encoding)
        detection = config.turn_detection
        if detection is None:
            self._detector = None
        elif self._detector is None:
            opened = self._turn is not None
            self._detector = TurnDetector(detection, origin=self._pcm.end, speaking=opened)
        else:
            self._detector.retune(detection)
        self.config = config

    async def append(self, data: bytes) -> None:
        seconds = self._input.seconds(len(data))
        if seconds > self._limits.max_append_s:
            raise LiveError(
                f"an append holds at most {self._limits.max_append_s:g} s of audio",
                code="input_audio_too_long",
                fatal=True,
            )
        now = self._clock()
        # time the client spent sending nothing banks no credit: it is at real time at most
        self._started = max(self._started, now - self._received)
        ahead = self._received + seconds - (now - self._started)
        if ahead > self._limits.burst_s:
            raise LiveError(
                f"audio arrives {ahead:.1f} s ahead of real time (at most "
                f"{self._limits.burst_s:g} s): send it as it is spoken",
                code="input_too_fast",
                fatal=True,
            )
        if self._received + seconds > self._charged:
            steps = math.ceil((self._received + seconds - self._charged) / CHARGE_STEP_S)
            await self._charge(steps * CHARGE_STEP_S)  # raises: a used-up quota ends the session
            self._charged += steps * CHARGE_STEP_S
        self._received += seconds
        samples, edges = await asyncio.to_thread(self._convert, data)
        start = self._pcm.end
        self._pcm.append(samples)
        for edge in edges:
            if edge.edge is Edge.STARTED:
                at = max(edge.at - self._prefix, self._pcm.start)
                self._open(at, speech_at=edge.at)
            elif self._turn is not None:
                self._emit_stopped(edge.at)
                await self._close()
        if self._detector is None and self._turn is None and self._pcm.end > start:
            self._open(start, speech_at=None)
        await self._follow()

    async def commit(self) -> None:
        """Close the open turn now (without turn detection: the buffer)."""
        if self._turn is None or self._pcm.end <= self._turn.start:
            raise LiveError(
                "the input audio buffer is empty: nothing to commit",
                code="input_audio_buffer_commit_empty",
            )
        await self._close()

    def clear(self) -> None:
        """Drop the open turn's audio."""
        self._cancel_interim()
        self._turn = self._cut_at = None
        self._pcm.drop_before(self._pcm.end)
        self.events.put_nowait({"type": "input_audio_buffer.cleared"})

    async def drain(self) -> None:
        """Wait for every decode asked for so far to end (its events are out then)."""
        while self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def close(self) -> None:
        """The client is gone: nothing it asked for runs any more."""
        self._cancel_interim()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # --- turns ------------------------------------------------------------------------
    @property
    def _prefix(self) -> int:
        detection = self.config.turn_detection
        return detection.prefix_samples if detection else 0

    def _convert(self, data: bytes) -> tuple[np.ndarray, list[Any]]:
        samples = self._input.convert(data)
        edges = self._detector.feed(samples) if self._detector is not None else []
        return samples, edges

    @property
    def _longest(self) -> int:
        """Samples a server-VAD turn may hold before it is cut at its best pause."""
        seconds = self.config.max_turn_s or self._limits.long_turn_s
        return int(min(seconds, self._limits.max_turn_s) * SAMPLING_RATE)

    def _open(self, at: int, speech_at: int | None) -> _Turn:
        hold = None
        if self._detector is not None:  # the words a cut may give the next turn wait
            hold = at + self._longest - int(CUT_SEARCH_S * SAMPLING_RATE)
        self._turn = _Turn(item=f"item_{secrets.token_hex(8)}", start=at, hold_after=hold)
        self._cut_at = None
        if speech_at is not None:
            self.events.put_nowait(
                {
                    "type": "input_audio_buffer.speech_started",
                    "audio_start_ms": _ms(speech_at),
                    "item_id": self._turn.item,
                }
            )
        return self._turn

    def _emit_stopped(self, at: int) -> None:
        assert self._turn is not None
        self.events.put_nowait(
            {
                "type": "input_audio_buffer.speech_stopped",
                "audio_end_ms": _ms(at),
                "item_id": self._turn.item,
            }
        )

    async def _follow(self) -> None:
        """Keep the open turn within one window, and its interim text fresh."""
        turn = self._turn if self._turn is not None else self._resume()
        if turn is None:
            if self._detector is not None:  # keep only what a turn may start with
                keep = self._pcm.end - self._prefix
                self._pcm.drop_before(keep if self._cut_at is None else min(keep, self._cut_at))
            return
        length = (self._pcm.end - turn.start) / SAMPLING_RATE
        if self._detector is None and length >= self._limits.max_turn_s:
            raise LiveError(
                f"commit the input audio buffer at least every {self._limits.max_turn_s:g} s",
                code="input_audio_buffer_too_long",
                fatal=True,
            )
        if self._detector is not None and self._pcm.end - turn.start >= self._longest:
            await self._cut(turn, self._detector)
            return
        if (self._pcm.end - turn.decoded) / SAMPLING_RATE >= self._interim_every(length):
            turn.decoded = self._pcm.end
            await self._submit_interim(turn, self._pcm.since(turn.start))

    def _interim_every(self, length: float) -> float:
        """New audio an open turn of ``length`` s waits for before its next interim."""
        return max(self._limits.interim_s, self._limits.interim_growth * length)

    async def _cut(self, turn: _Turn, detector: TurnDetector) -> None:
        """Commit a turn at its longest at the best pause of its last seconds; the speech
        after the pause goes on as the next turn (a speaker who never stops)."""
        while self._pcm.end - turn.start >= self._longest:
            limit = turn.start + self._longest
            at = detector.pause(limit - int(CUT_SEARCH_S * SAMPLING_RATE), limit)
            self._emit_stopped(at)
            await self._close(end=at)
            self._cut_at = at
            resumed = self._resume()
            if resumed is None:
                return
            turn = resumed

    def _resume(self) -> _Turn | None:
        """After a cut, the next turn: from the cut, once speech follows it (the speaker
        may have stopped there: then no turn, and the VAD's stop ends the wait)."""
        if self._cut_at is None or self._detector is None:
            return None
        if not self._detector.speaking:
            self._cut_at = None
            return None
        speech = self._detector.speech_since(self._cut_at)
        return None if speech is None else self._open(self._cut_at, speech_at=speech)

    async def _close(self, end: int | None = None) -> None:
        """Commit the open turn: its audio up to ``end`` (the newest sample if None)."""
        turn, self._turn = self._turn, None
        if turn is None:
            return
        self._cancel_interim()
        audio = self._pcm.since(turn.start)
        if end is not None:
            audio = audio[: max(end - max(turn.start, self._pcm.start), 0)]
        turn.end = self._pcm.end if end is None else end
        self._pcm.drop_before(self._pcm.end - self._prefix if end is None else end)
        self.events.put_nowait(
            {
                "type": "input_audio_buffer.committed",
                "previous_item_id": self._previous_item,
                "item_id": turn.item,
            }
        )
        self._previous_item = turn.item
        previous, self._last_final = self._last_final, None
        task = self._spawn(self._decode_final(turn, audio, previous))
        self._last_final = task

    # --- decodes ----------------------------------------------------------------------
    async def _options(self, audio: np.ndarray) -> TranscriptionOptions:
        options = self.config.options
        engine = self._decoder.engine(options.model)
        if options.language is None and engine.multilingual:
            deadline = self._limits.final_deadline_s
            language, _ = await self._decoder.detect(
                self.id, options.model, audio, deadline, options.languages, tenant=self.tenant
            )
            options = options.model_copy(update={"language": language, "languages": ()})
            self.config = dataclasses.replace(self.config, options=options)
        return options

    async def _decode(
        self, options: TranscriptionOptions, audio: np.ndarray, *, final: bool
    ) -> asyncio.Future[list[RawSegment]]:
        """A window of this session into the scheduler: conditioned on what was said before,
        in its key's share of the devices, within the interim's or the final's deadline."""
        limits = self._limits
        deadline = limits.final_deadline_s if final else limits.interim_deadline_s
        return await self._decoder.decode(
            self.id, options, audio, deadline, self._said, final=final, tenant=self.tenant
        )

    async def _submit_interim(self, turn: _Turn, audio: np.ndarray) -> None:
        """The turn so far into the scheduler, in place of the interim before it (dropped
        unrun if no device has started it: a newer window is queued)."""
        options = self.config.options
        if options.language is None and self._decoder.engine(options.model).multilingual:
            return  # no interim text before the session's language is known
        self._cancel_interim()
        quick = options.model_copy(update={"beam_size": INTERIM_BEAM})
        future = await self._decode(quick, audio, final=False)
        task = self._spawn(self._interim_text(turn, future, self._pcm.end))
        self._interim = (future, task)

    async def _interim_text(
        self, turn: _Turn, future: asyncio.Future[list[RawSegment]], end: int
    ) -> None:
        try:
            segments = await future
        except DeadlineExceeded:
            return  # a newer interim, or the final, will do
        if self._turn is not turn:
            return  # committed meanwhile: its final decode has the text
        delta = turn.agreement.delta(text_of(segments), end)
        if delta:
            self.events.put_nowait(events.delta(turn.item, delta, _ms(end)))

    async def _decode_final(
        self, turn: _Turn, audio: np.ndarray, previous: asyncio.Task[None] | None
    ) -> None:
        # The turn before is decoded first: this one is conditioned on its text (and a
        # multilingual model's language, detected once), and turns complete in the order
        # they were spoken. Decoded without it, JFK's "ask not" (1.9 s) came out "S NOT".
        if previous is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await previous
        try:
            options = await self._options(audio)
            if self.config.logprobs:  # include: the final decode's tokens (a greedy one)
                options = options.model_copy(update={"logprobs": True, "beam_size": 1})
            segments = await (await self._decode(options, audio, final=True))
            text = completed(turn.agreement.sent, text_of(segments))
        except Exception as exc:  # this turn has no text; the session goes on
            self.events.put_nowait(events.failed(turn.item, _turn_error(self.id, exc)))
            return
        self._said = (self._said + " " + text).strip()[-CONTEXT_CHARS:]
        sent = turn.agreement.sent
        if len(text) > len(sent):  # what the interims had not shown yet
            self.events.put_nowait(events.delta(turn.item, text[len(sent) :], _ms(turn.end)))
        seconds = audio.shape[0] / SAMPLING_RATE
        logprobs = _logprobs(segments) if self.config.logprobs else None
        self.events.put_nowait(events.completed(turn.item, text, seconds, logprobs))

    def _cancel_interim(self) -> None:
        """The scheduler drops a cancelled window no device has started (one running is let
        finish, its text unused)."""
        if self._interim is not None:
            for waiting in self._interim:
                waiting.cancel()
            self._interim = None

    def _spawn(self, work: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._done)
        return task

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        if isinstance(exc, AsrError):
            self.events.put_nowait(error_event(exc))
            return
        log.error("live session %s: decode failed", self.id, exc_info=exc)
        self.events.put_nowait(error_event(InternalError("the decode failed")))


def _turn_error(session: str, exc: Exception) -> AsrError:
    """Why a turn's final decode failed, as the client is told it."""
    if isinstance(exc, DeadlineExceeded):
        return DeadlineExceeded("no device could run the turn in time")
    if isinstance(exc, AsrError):
        return exc
    log.error("live session %s: a turn's decode failed", session, exc_info=exc)
    return InternalError("the turn's decode failed")


class _Turn:
    def __init__(self, item: str, start: int, hold_after: int | None = None) -> None:
        self.item = item
        self.start = start  # sample where its audio begins
        self.end = start  # sample where it ends, once committed
        self.decoded = start  # end of the audio of its latest interim decode
        self.agreement = Agreement(hold_after)
