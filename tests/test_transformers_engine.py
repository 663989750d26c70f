"""The transformers engine held to CTranslate2 on the same models and real recordings.

English (tiny.en): the LibriVox sentences and 30 recorded prompts (``real_speech.py``),
each file's windows batched across files as the scheduler batches them. Against
CTranslate2 as it is served (int8): WER within 0.01, adaptive and full windows alike, and
word timestamps within 0.1 s on the same words for 99 in 100. Against CTranslate2 at float32
(the same arithmetic as PyTorch's on the CPU): every word within 0.1 s, and the same token
log probabilities. Multilingual (base): the recorded Spanish, French, Italian and Russian
prompts detected, transcribed and translated as CTranslate2 at float32 does (int8 alone moves
these six-clip languages' WER by up to 0.06, measured: docs/engines.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pytest

from asrserve.bench.corpus import Clip
from asrserve.bench.wer import wer
from asrserve.engine.base import Engine
from asrserve.engine.fallback import compression_ratio, repeats_phrase
from asrserve.settings import Settings
from asrserve.transcript import Transcript
from asrserve.vocabulary import Task, TranscriptionOptions
from tests.support import engines
from tests.support.corpus_languages import LanguageClip
from tests.support.languages import MODEL_CACHE, REAL_LANGUAGES, real_prompts
from tests.support.real_speech import english
from tests.support.servers import JFK

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ADAPTIVE = Settings().encoder_windows_s
FULL = (30.0,)
WORDS = TranscriptionOptions(beam_size=5, word_timestamps=True)


@pytest.fixture(scope="module")
def tiny() -> dict[str, Engine]:
    return {
        "transformers": engines.transformers("tiny.en", MODEL_CACHE),
        "ctranslate2": engines.ctranslate2("tiny.en", MODEL_CACHE),
        "float32": engines.ctranslate2("tiny.en", MODEL_CACHE, "float32"),
    }


@dataclass(frozen=True)
class Heard:
    refs: list[str]
    adaptive: dict[str, list[Transcript]]  # by engine
    full: dict[str, list[Transcript]]


@pytest.fixture(scope="module")
def heard(tiny: dict[str, Engine]) -> Heard:
    clips = english(30)
    paths = [clip.path for clip in clips]

    def run(engine: Engine, windows: tuple[float, ...]) -> list[Transcript]:
        files = engines.prepared(engine, paths, windows)
        return engines.transcripts(engine, files, [WORDS] * len(files))

    adaptive = {name: run(engine, ADAPTIVE) for name, engine in tiny.items()}
    full = {name: run(tiny[name], FULL) for name in ("transformers", "ctranslate2")}
    return Heard([clip.text for clip in clips], adaptive, full)


def _wer(refs: list[str], transcripts: list[Transcript]) -> float:
    return wer(refs, [t.text for t in transcripts])


def test_english_real_speech_within_001_of_ctranslate2_on_both_windows(heard: Heard) -> None:
    scores = {
        f"{name}/{windows}": _wer(heard.refs, transcripts)
        for windows, runs in (("adaptive", heard.adaptive), ("full", heard.full))
        for name, transcripts in runs.items()
    }
    print(f"tiny.en, real English: {scores}")
    for windows in ("adaptive", "full"):
        mine, theirs = scores[f"transformers/{windows}"], scores[f"ctranslate2/{windows}"]
        assert abs(mine - theirs) <= 0.01, scores
    assert abs(scores["transformers/adaptive"] - scores["transformers/full"]) <= 0.01, scores
    texts = [t.text for t in heard.adaptive["transformers"] + heard.full["transformers"]]
    assert [t for t in texts if compression_ratio(t) > 2.4 or repeats_phrase(t)] == []


def _word_gaps(mine: Sequence[Transcript], theirs: Sequence[Transcript]) -> np.ndarray:
    """Each shared word's larger gap (start or end, s), over files worded alike."""
    gaps = []
    for a, b in zip(mine, theirs, strict=True):
        if [w.word for w in a.words] == [w.word for w in b.words]:
            gaps += [
                max(abs(x.start - y.start), abs(x.end - y.end))
                for x, y in zip(a.words, b.words, strict=True)
            ]
    return np.array(gaps)


def test_word_timestamps_within_01_s_of_ctranslate2(heard: Heard) -> None:
    mine = heard.adaptive["transformers"]
    same_arithmetic = _word_gaps(mine, heard.adaptive["float32"])
    served = _word_gaps(mine, heard.adaptive["ctranslate2"])
    print(
        f"word gaps: float32 max {same_arithmetic.max():.3f} s over {len(same_arithmetic)},"
        f" int8 p99 {np.percentile(served, 99):.3f} s over {len(served)}"
    )
    assert len(same_arithmetic) >= 200 and len(served) >= 150
    assert same_arithmetic.max() <= 0.1
    assert np.percentile(served, 99) <= 0.1


def test_token_logprobs_are_the_decodes_own(tiny: dict[str, Engine]) -> None:
    """Greedy with logprobs on JFK: each text token's log probability and each window's
    average log probability as CTranslate2 at float32 computes them from its own step
    logits (``engine/logprobs.py``), and the tokens joined are the text."""
    options = TranscriptionOptions(beam_size=1, logprobs=True)
    got = {}
    for name in ("transformers", "float32"):
        [file] = engines.prepared(tiny[name], [JFK], FULL)
        [got[name]] = engines.transcripts(tiny[name], [file], [options])
    mine, theirs = got["transformers"], got["float32"]
    assert mine.text == theirs.text and "fellow Americans" in mine.text
    assert [t.token for t in mine.logprobs] == [t.token for t in theirs.logprobs]
    assert "".join(t.token for t in mine.logprobs).strip() == mine.text
    gaps = [abs(a.logprob - b.logprob) for a, b in zip(mine.logprobs, theirs.logprobs, strict=True)]
    assert max(gaps) <= 0.01, gaps
    for a, b in zip(mine.segments, theirs.segments, strict=True):
        assert a.avg_logprob == pytest.approx(b.avg_logprob, abs=0.01)


@dataclass(frozen=True)
class Multilingual:
    detected: list[str]
    transcripts: list[Transcript]
    translations: list[Transcript]


def _hear(engine: Engine, clips: Sequence[LanguageClip]) -> Multilingual:
    files = engines.prepared(engine, [clip.path for clip in clips], FULL)
    # greedy: beam search is held to CTranslate2's on the English recordings
    given = [TranscriptionOptions(beam_size=1, language=clip.language) for clip in clips]
    translate = [o.model_copy(update={"task": Task.TRANSLATE}) for o in given]
    return Multilingual(
        engines.detected(engine, files),
        engines.transcripts(engine, files, given),
        engines.transcripts(engine, files, translate),
    )


def test_base_hears_other_languages_as_ctranslate2_does() -> None:
    """Per language, over three recorded prompts each: the same detected languages,
    transcription WER within 0.02, translation WER within 0.02 over the prompts neither
    side translated by sampling (a sampled decode is a draw from the fallback)."""
    clips = real_prompts(per_language=3)
    mine = _hear(engines.transformers("base", MODEL_CACHE), clips)
    theirs = _hear(engines.ctranslate2("base", MODEL_CACHE, "float32"), clips)
    assert mine.detected == theirs.detected
    for language in REAL_LANGUAGES:
        at = [i for i, clip in enumerate(clips) if clip.language == language]
        fixed = [i for i in at if not _sampled(mine.translations[i], theirs.translations[i])]
        figures = {}
        for label, side in (("mine", mine), ("theirs", theirs)):
            figures[label] = (
                wer([clips[i].text for i in at], [side.transcripts[i].text for i in at]),
                wer([clips[i].english for i in fixed], [side.translations[i].text for i in fixed]),
            )
        print(f"base {language}: {figures}")
        assert abs(figures["mine"][0] - figures["theirs"][0]) <= 0.02, figures
        assert abs(figures["mine"][1] - figures["theirs"][1]) <= 0.02, figures


def _sampled(*transcripts: Transcript) -> bool:
    return any(s.temperature > 0 for t in transcripts for s in t.segments)


def test_the_scheduler_batches_windows_of_different_lengths_and_prompts(
    tiny: dict[str, Engine],
) -> None:
    """Six real-speech windows of 3 to 10 s in the 10 s bucket, each after different text
    (the context a live turn or a file's window carries), submitted at once through the
    scheduler: one forward pass holds them all, and each comes back as it does alone."""
    import asyncio
    import dataclasses

    from asrserve.batcher.device import Device
    from asrserve.batcher.scheduler import Scheduler, SchedulerConfig
    from asrserve.batcher.stats import BatchRecord

    engine = tiny["transformers"]
    clips = [c for c in english(30) if 3.0 <= c.duration <= 10.0][:6]
    assert len(clips) == 6
    files = engines.prepared(engine, [clip.path for clip in clips], (10.0, 30.0))
    contexts = ["", "Good morning.", "Please listen carefully to the following menu options."]
    chunks = [
        dataclasses.replace(f.chunks[0], context=contexts[i % len(contexts)])
        for i, f in enumerate(files)
    ]
    assert {chunk.features.shape[-1] for chunk in chunks} == {1000}
    assert len({round(chunk.duration, 1) for chunk in chunks}) >= 4
    options = TranscriptionOptions(beam_size=5)
    batches: list[BatchRecord] = []

    async def main() -> list[list[str]]:
        device = Device.of("cpu:0", engine)
        scheduler = Scheduler([device], SchedulerConfig(max_batch_size=16), on_batch=batches.append)
        loops = asyncio.create_task(scheduler.run())
        try:
            futures = scheduler.submit_chunks("job", 0, options, chunks)
            return [[s.text for s in await future] for future in futures]
        finally:
            loops.cancel()
            await asyncio.gather(loops, return_exceptions=True)
            scheduler.close()

    together = asyncio.run(main())
    assert [record.size for record in batches] == [6]
    alone = [[s.text for s in engine.transcribe_batch([chunk], options)[0]] for chunk in chunks]
    assert together == alone


def test_the_whole_file_baseline_decodes_in_order_to_the_end(
    tiny: dict[str, Engine], corpus: list[Clip]
) -> None:
    """Policy ``none`` on this engine (``engine/pytorch/sequential.py``): the 130 s corpus
    clip in 30 s windows, one after another, each after the text before it, with words."""
    from asrserve.audio.decode import decode

    clip = max(corpus, key=lambda c: c.duration)
    audio = decode(clip.path, 3600)
    options = TranscriptionOptions(beam_size=1, word_timestamps=True)
    transcript = tiny["transformers"].transcribe(audio, options)
    starts = [s.start for s in transcript.segments]
    assert starts == sorted(starts) and [s.id for s in transcript.segments] == list(
        range(len(starts))
    )
    assert transcript.segments[-1].end > clip.duration - 10  # it reached the end
    assert all(0 <= w.start <= w.end <= clip.duration + 0.05 for w in transcript.words)
    assert wer([clip.text], [transcript.text]) <= 0.25


def test_an_idle_replica_gives_its_weights_back_and_takes_them_again() -> None:
    """keep_alive on this engine: the last replica to let go releases the model; the next
    batch loads it again and decodes as before."""
    engine = engines.transformers("tiny.en", MODEL_CACHE)
    [file] = engines.prepared(engine, [JFK], FULL)
    options = TranscriptionOptions(beam_size=1)
    before = engines.transcripts(engine, [file], [options])[0].text
    engine.unload()
    assert not engine.loaded
    assert engines.transcripts(engine, [file], [options])[0].text == before
    assert engine.loaded
