"""OpenAI's ``keywords[]`` on the real tiny.en (CTranslate2): names it misspells, said by
espeak-ng, come out spelled right when they are keywords, and keywords that name nothing said
leave the words of real speech as they are without them (WER within 0.005), where the same
text as a prompt changes them (engine/keywords.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from asrserve.bench.corpus import synthesize
from asrserve.bench.keywords import DEFAULT_KEYWORDS
from asrserve.bench.wer import wer
from asrserve.engine.base import Engine
from asrserve.inference.direct import transcribe_file
from asrserve.vocabulary import TranscriptionOptions
from tests.support.real_speech import english

pytestmark = pytest.mark.slow

# each sentence, and the names in it that tiny.en misspells unprompted
SENTENCES = {
    "Please send the report to Siobhan Nakamura before Friday.": ("Siobhan Nakamura",),
    "Our new database is called Zyqlo and it runs on Kubernetes.": ("Zyqlo",),
    "We deployed Grafana and Prometheus on the cluster.": ("Grafana",),
    "The library is named Pydantic and it validates data.": ("Pydantic",),
    "Mister Nguyen called from Szczecin this morning.": ("Szczecin",),
    "Please call Siddharth Raghunathan about the contract.": ("Siddharth Raghunathan",),
}
UNRELATED = DEFAULT_KEYWORDS  # the names above: the real recordings say none of them
WER_CHANGE = 0.005  # two of the real speech's 397 words


def test_keywords_spell_names_right_and_leave_other_words(engine: Engine, tmp_path: Path) -> None:
    def text(path: Path, keywords: tuple[str, ...] = (), prompt: str | None = None) -> str:
        options = TranscriptionOptions(keywords=keywords, prompt=prompt)
        return transcribe_file(engine, path, options, max_seconds=60).text

    spelled = {"without": 0, "with": 0}
    for index, (sentence, names) in enumerate(SENTENCES.items()):
        path = tmp_path / f"{index}.wav"
        synthesize(sentence, path)
        spelled["without"] += all(name in text(path) for name in names)
        spelled["with"] += all(name in text(path, names) for name in names)
    print(f"names spelled right of {len(SENTENCES)}: {spelled}")
    assert spelled["without"] <= 1 and spelled["with"] >= len(SENTENCES) - 1, spelled

    clips = english(40)  # 45 recordings, 397 words: 0.0025 a word
    references = [clip.text for clip in clips]
    plain = wer(references, [text(clip.path) for clip in clips])
    biased = wer(references, [text(clip.path, UNRELATED) for clip in clips])
    prompted = wer(references, [text(clip.path, prompt=", ".join(UNRELATED)) for clip in clips])
    print(f"WER without {plain:.4f}, with keywords {biased:.4f}, as a prompt {prompted:.4f}")
    assert prompted - plain > WER_CHANGE  # the recordings show what a prompt changes
    assert abs(biased - plain) <= WER_CHANGE


# recordings whose words tiny.en on the transformers engine writes otherwise when the
# UNRELATED names are its prompt ("ill-disposed", "Collars", "male buck", "town")
PROMPT_SENSITIVE = (
    "sense_and_sensibility_01_austen_64kb-0880.wav",
    "queue-quantity2.wav",
    "vm-login.wav",
    "vm-record-prepend.wav",
)


def test_the_transformers_engine_keeps_keywords_only_where_they_spell_one(
    torch_engine: Engine, tmp_path: Path
) -> None:
    """The same rule on the PyTorch engine: a name it misspells is spelled right with it as
    a keyword, and recordings whose words the same names as a prompt change come out
    with those names as keywords exactly as without them."""

    def text(path: Path, keywords: tuple[str, ...] = (), prompt: str | None = None) -> str:
        options = TranscriptionOptions(keywords=keywords, prompt=prompt)
        return transcribe_file(torch_engine, path, options, max_seconds=60).text

    zyqlo = tmp_path / "zyqlo.wav"
    synthesize("Our new database is called Zyqlo and it runs on Kubernetes.", zyqlo)
    assert ["Zyqlo" in text(zyqlo, keywords) for keywords in ((), ("Zyqlo",))] == [False, True]
    clips = [clip for clip in english(40) if clip.path.name in PROMPT_SENSITIVE]
    assert len(clips) == len(PROMPT_SENSITIVE)
    plain = [text(clip.path) for clip in clips]
    prompted = [text(clip.path, prompt=", ".join(UNRELATED)) for clip in clips]
    assert [p != q for p, q in zip(plain, prompted, strict=True)] == [True] * len(clips)
    assert [text(clip.path, UNRELATED) for clip in clips] == plain
