"""Real human speech from Debian packages, with reference texts: the accuracy gates' corpus.

- ``pocketsphinx-testdata``: LibriVox read sentences (16 kHz) with their transcription.
- ``asterisk-core-sounds-<lang>`` and ``-wav``: professionally recorded telephone prompts
  (8 kHz) in English, Spanish, French, Italian and Russian, with their recording scripts.
  Prompts share names across languages, so the English script of a prompt is the
  reference for translating it. Only prompts of several words without digits or bracketed
  notes are used (the scripts write digits where the speaker says words, and Italian's
  carry notes in brackets); a prompt is used only where all five languages record it.

``scripts/system-deps.sh`` installs the packages; nothing is copied into the repository.
Licences: CC-BY-SA-3.0 (Asterisk en, es, fr), CC-BY-3.0 (it, ru); LibriVox is public domain.
"""

from __future__ import annotations

import gzip
import re
import wave
from dataclasses import dataclass
from pathlib import Path

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")
SOUNDS = Path("/usr/share/asterisk/sounds")
SCRIPTS = Path("/usr/share/doc")
VOICES = {
    "en": "en_US_f_Allison",
    "es": "es_MX_f_Allison",
    "fr": "fr_CA_f_June",
    "it": "it_IT_m_Carlo",
    "ru": "ru_RU_f_IvrvoiceRU",
}
MIN_WORDS = 3
MAX_SECONDS = 20.0
_UNSAYABLE = re.compile(r"[\d\[\](){}<>@/#*=+_]|www|\.\w")


@dataclass(frozen=True)
class Recording:
    path: Path
    language: str
    text: str  # what is said
    english: str  # what it says in English (the text itself for English)
    duration: float


def _duration(path: Path) -> float:
    with wave.open(str(path)) as audio:
        return float(audio.getnframes() / audio.getframerate())


def scripts(language: str) -> dict[str, str]:
    """The recording script of one language's prompts: name -> text, sayable ones only."""
    path = SCRIPTS / f"asterisk-core-sounds-{language}" / f"core-sounds-{language}.txt.gz"
    out = {}
    for line in gzip.decompress(path.read_bytes()).decode("utf-8-sig").splitlines():
        name, sep, text = line.partition(":")
        text = text.strip().strip('"').strip(".").strip()
        if not sep or line.startswith(";") or _UNSAYABLE.search(text) or '"' in text:
            continue
        if len(text.split()) >= MIN_WORDS:
            out[name.strip()] = text
    return out


def prompts(per_language: int, languages: tuple[str, ...] = tuple(VOICES)) -> list[Recording]:
    """``per_language`` prompts of each of ``languages``, the same prompts in each (where
    that many exist) and each with an English script, spread evenly over the names."""
    texts = {language: scripts(language) for language in {*languages, "en"}}
    voices = [VOICES[language] for language in languages]
    names = sorted(
        name
        for name in set.intersection(*(set(t) for t in texts.values()))
        if all((SOUNDS / voice / f"{name}.wav").is_file() for voice in voices)
        and all(_duration(SOUNDS / voice / f"{name}.wav") <= MAX_SECONDS for voice in voices)
    )
    step = max(len(names) / per_language, 1.0)
    chosen = [names[int(i * step)] for i in range(min(per_language, len(names)))]
    return [
        Recording(path, language, texts[language][name], texts["en"][name], _duration(path))
        for language in languages
        for name in chosen
        for path in [SOUNDS / VOICES[language] / f"{name}.wav"]
    ]


def librivox() -> list[Recording]:
    """The LibriVox sentences (Sense and Sensibility, read in English)."""
    out = []
    for line in (LIBRIVOX / "transcription").read_text().splitlines():
        match = re.fullmatch(r"<s> (.*) </s> \((.*)\)", line.strip())
        if match:
            path = LIBRIVOX / f"{match[2]}.wav"
            out.append(Recording(path, "en", match[1], match[1], _duration(path)))
    return out


def english(count: int) -> list[Recording]:
    """The LibriVox sentences and ``count`` English prompts."""
    return librivox() + prompts(count, ("en",))
