"""Synthetic non-English speech with known English translations, built with espeak-ng.

The multilingual counterpart of :mod:`asrserve.bench.corpus`: for German, Spanish, Italian and
Portuguese, each clip is two everyday sentences spoken by that language's espeak-ng voice, with
the original text and a literal English translation, so language detection, transcription and
translation can all be scored. espeak-ng's French is left out: Whisper base does not recognise it.
Containers rotate as in the English corpus, to exercise decoding on every language.
"""

from __future__ import annotations

import json
import tempfile
import wave
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path

from asrserve.bench.corpus import convert, exclusive, synthesize

__all__ = ["LANGUAGES", "SENTENCES", "LanguageClip", "build_language_corpus"]

LANGUAGE_CORPUS_VERSION = "1"
"""Bump when sentences, voices or the build recipe change, to invalidate caches."""
CONTAINERS = (".wav", ".flac", ".mp3", ".ogg")

# ISO-639-1 code -> (espeak-ng voice, words per minute)
# (the voices and speeds Whisper base recognised best, tried against its language detection:
# the male variant m3 for German and Spanish, European Portuguese, Italian and Portuguese slower)
LANGUAGES: dict[str, tuple[str, int]] = {
    "de": ("de+m3", 150),
    "es": ("es-419+m3", 150),
    "it": ("it", 125),
    "pt": ("pt", 125),
}

# language -> (original, English) sentence pairs; clip k speaks pairs 2k and 2k + 1.
# No digits or number words: Whisper may write either, which would count as an error.
SENTENCES: dict[str, tuple[tuple[str, str], ...]] = {
    "de": (
        ("Ich trinke jeden Morgen eine Tasse Kaffee.", "I drink a cup of coffee every morning."),
        ("Heute scheint die Sonne.", "Today the sun is shining."),
        ("Meine Schwester wohnt in einer großen Stadt.", "My sister lives in a big city."),
        ("Sie arbeitet in einem Krankenhaus.", "She works in a hospital."),
        ("Der Hund schläft unter dem Tisch.", "The dog is sleeping under the table."),
        ("Die Kinder spielen im Garten.", "The children are playing in the garden."),
        ("Kannst du bitte das Fenster schließen?", "Can you please close the window?"),
        ("Es ist sehr kalt draußen.", "It is very cold outside."),
    ),
    "es": (
        ("Mi hermano vive cerca del mar.", "My brother lives near the sea."),
        ("Todos los días camina por la playa.", "Every day he walks on the beach."),
        ("¿Dónde está la estación de tren?", "Where is the train station?"),
        ("Necesito comprar un billete.", "I need to buy a ticket."),
        ("La comida está en la mesa.", "The food is on the table."),
        ("Los niños tienen mucha hambre.", "The children are very hungry."),
        ("Hoy hace mucho calor.", "It is very hot today."),
        ("Vamos a nadar en la piscina.", "We are going to swim in the pool."),
    ),
    "it": (
        ("Oggi il cielo è molto azzurro.", "Today the sky is very blue."),
        ("Andiamo a fare una passeggiata nel parco.", "Let's go for a walk in the park."),
        ("Mia madre prepara la cena ogni sera.", "My mother makes dinner every evening."),
        ("Stasera mangiamo la pasta.", "Tonight we are eating pasta."),
        ("Il treno per Roma parte tra poco.", "The train to Rome leaves soon."),
        ("Dobbiamo andare alla stazione.", "We have to go to the station."),
        ("Il libro è sul tavolo della cucina.", "The book is on the kitchen table."),
        ("Puoi chiudere la porta, per favore?", "Can you close the door, please?"),
    ),
    "pt": (
        ("Eu gosto muito de ler livros.", "I really like to read books."),
        ("Eu leio todas as noites.", "I read every night."),
        ("O mercado abre cedo de manhã.", "The market opens early in the morning."),
        ("Nós compramos frutas e pão fresco.", "We buy fruit and fresh bread."),
        ("A minha casa fica perto da escola.", "My house is near the school."),
        ("Meus filhos vão a pé para a escola.", "My children walk to school."),
        ("Hoje está chovendo muito.", "Today it is raining a lot."),
        ("Não esqueça o seu guarda-chuva.", "Do not forget your umbrella."),
    ),
}


@dataclass(frozen=True)
class LanguageClip:
    """One clip: its file, spoken language (ISO-639-1), original text, English translation
    and duration (s)."""

    path: Path
    language: str
    text: str
    english: str
    duration: float


def _plan() -> Iterator[tuple[str, str, str, str]]:
    """(file name, language, text, English) for every clip, in a fixed order."""
    for language, pairs in SENTENCES.items():
        for k in range(len(pairs) // 2):
            first, second = pairs[2 * k], pairs[2 * k + 1]
            name = f"{language}_{k:02d}{CONTAINERS[k % len(CONTAINERS)]}"
            yield name, language, f"{first[0]} {second[0]}", f"{first[1]} {second[1]}"


def _cached(folder: Path) -> list[LanguageClip] | None:
    """The clips recorded in *folder* if that build is complete and current."""
    try:
        if (folder / "corpus.version").read_text().strip() != LANGUAGE_CORPUS_VERSION:
            return None
        meta = json.loads((folder / "clips.json").read_text(encoding="utf-8"))
        clips = [LanguageClip(**{**c, "path": folder / c["path"]}) for c in meta]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return clips if all(c.path.is_file() for c in clips) else None


def _wav_seconds(path: Path) -> float:
    with wave.open(str(path), "rb") as w:
        return w.getnframes() / w.getframerate()


def build_language_corpus(folder: Path) -> list[LanguageClip]:
    """Build (or reuse a cached) multilingual corpus in *folder*; returns its clips.

    Writes the clips (containers rotating through :data:`CONTAINERS`), ``clips.json``
    (texts, translations and durations) and ``corpus.version``, last, so an interrupted
    build is redone. Deterministic.
    """
    cached = _cached(folder)
    if cached is not None:
        return cached
    with exclusive(folder):
        return _cached(folder) or _build(folder)


def _build(folder: Path) -> list[LanguageClip]:
    (folder / "corpus.version").unlink(missing_ok=True)
    plan = list(_plan())
    with tempfile.TemporaryDirectory() as tmp_name:
        wavs = [Path(tmp_name) / f"{name}.src.wav" for name, *_ in plan]

        def speak(item: tuple[tuple[str, str, str, str], Path]) -> None:
            (_, language, text, _), wav = item
            voice, speed = LANGUAGES[language]
            synthesize(text, wav, voice=voice, speed=speed)

        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(speak, zip(plan, wavs, strict=True)))
        clips = []
        for (name, language, text, english), wav in zip(plan, wavs, strict=True):
            convert(wav, folder / name)
            clips.append(LanguageClip(folder / name, language, text, english, _wav_seconds(wav)))
    meta = [{**asdict(c), "path": c.path.name} for c in clips]
    (folder / "clips.json").write_text(json.dumps(meta, indent=1, ensure_ascii=False), "utf-8")
    (folder / "corpus.version").write_text(LANGUAGE_CORPUS_VERSION + "\n")
    return clips
