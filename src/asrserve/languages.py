"""Whisper's languages by name: what whisper-asr-webservice's ``/detect-language`` answers
(``"detected_language": "english"``) beside the code; the languages an API key allows, and
detection restricted to them.

The table of openai-whisper's ``tokenizer.LANGUAGES``, in its order (the order of the
language tokens); faster-whisper, which this project runs, ships the codes only.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

LANGUAGE_NAMES: dict[str, str] = {
    "en": "english",
    "zh": "chinese",
    "de": "german",
    "es": "spanish",
    "ru": "russian",
    "ko": "korean",
    "fr": "french",
    "ja": "japanese",
    "pt": "portuguese",
    "tr": "turkish",
    "pl": "polish",
    "ca": "catalan",
    "nl": "dutch",
    "ar": "arabic",
    "sv": "swedish",
    "it": "italian",
    "id": "indonesian",
    "hi": "hindi",
    "fi": "finnish",
    "vi": "vietnamese",
    "he": "hebrew",
    "uk": "ukrainian",
    "el": "greek",
    "ms": "malay",
    "cs": "czech",
    "ro": "romanian",
    "da": "danish",
    "hu": "hungarian",
    "ta": "tamil",
    "no": "norwegian",
    "th": "thai",
    "ur": "urdu",
    "hr": "croatian",
    "bg": "bulgarian",
    "lt": "lithuanian",
    "la": "latin",
    "mi": "maori",
    "ml": "malayalam",
    "cy": "welsh",
    "sk": "slovak",
    "te": "telugu",
    "fa": "persian",
    "lv": "latvian",
    "bn": "bengali",
    "sr": "serbian",
    "az": "azerbaijani",
    "sl": "slovenian",
    "kn": "kannada",
    "et": "estonian",
    "mk": "macedonian",
    "br": "breton",
    "eu": "basque",
    "is": "icelandic",
    "hy": "armenian",
    "ne": "nepali",
    "mn": "mongolian",
    "bs": "bosnian",
    "kk": "kazakh",
    "sq": "albanian",
    "sw": "swahili",
    "gl": "galician",
    "mr": "marathi",
    "pa": "punjabi",
    "si": "sinhala",
    "km": "khmer",
    "sn": "shona",
    "yo": "yoruba",
    "so": "somali",
    "af": "afrikaans",
    "oc": "occitan",
    "ka": "georgian",
    "be": "belarusian",
    "tg": "tajik",
    "sd": "sindhi",
    "gu": "gujarati",
    "am": "amharic",
    "yi": "yiddish",
    "lo": "lao",
    "uz": "uzbek",
    "fo": "faroese",
    "ht": "haitian creole",
    "ps": "pashto",
    "tk": "turkmen",
    "nn": "nynorsk",
    "mt": "maltese",
    "sa": "sanskrit",
    "lb": "luxembourgish",
    "my": "myanmar",
    "bo": "tibetan",
    "tl": "tagalog",
    "mg": "malagasy",
    "as": "assamese",
    "tt": "tatar",
    "haw": "hawaiian",
    "ln": "lingala",
    "ha": "hausa",
    "ba": "bashkir",
    "jw": "javanese",
    "su": "sundanese",
    "yue": "cantonese",
}


def language_name(code: str) -> str:
    """The language's English name in lower case (Whisper's spelling), or the code itself
    for one Whisper does not know."""
    return LANGUAGE_NAMES.get(code, code)


@dataclass(frozen=True)
class LanguageRule:
    """The languages an API key may be transcribed in: ``allowed`` (Whisper's codes; empty:
    any), and ``default``, the language of a request that names none (None: detected, among
    ``allowed`` when there is a list)."""

    allowed: tuple[str, ...] = ()
    default: str | None = None

    @classmethod
    def parse(cls, languages: str | None, default: str | None) -> LanguageRule:
        """The rule ``keys create --languages en,de --default-language de`` asks for;
        ValueError, saying what is wrong, for an unknown code or a default off the list."""
        parts = [part for part in (languages or "").split(",") if part.strip()]
        allowed = tuple(dict.fromkeys(_code(part, "--languages") for part in parts))
        if languages is not None and not allowed:
            raise ValueError("--languages names no language: give codes such as en,de")
        chosen = None if default is None else _code(default, "--default-language")
        if chosen is not None and allowed and chosen not in allowed:
            raise ValueError(
                f"--default-language {chosen} is not one of --languages ({', '.join(allowed)})"
            )
        return cls(allowed, chosen)

    def permits(self, code: str) -> bool:
        return not self.allowed or code in self.allowed

    @property
    def assumed(self) -> str | None:
        """The language of a request that names none: the default, or the only allowed
        one; None: detected."""
        return self.default or (self.allowed[0] if len(self.allowed) == 1 else None)

    @property
    def english_only_serves(self) -> bool:
        """Whether an English-only model can serve this key's requests that name no
        language: English is allowed, and no other language is assumed."""
        return self.permits("en") and self.assumed in (None, "en")

    def view(self) -> str:
        """As ``keys list`` shows it: the codes, or ``any``."""
        return ",".join(self.allowed) or "any"


ANY_LANGUAGE = LanguageRule()


def _code(text: str, flag: str) -> str:
    code = text.strip().lower()
    if code not in LANGUAGE_NAMES:
        raise ValueError(
            f"{flag}: unknown language {text.strip()[:20]!r} (Whisper's codes: en, de, fr, ...)"
        )
    return code


def restricted(ranked: Sequence[tuple[str, float]], among: Collection[str]) -> tuple[str, float]:
    """The most probable language of ``among`` (empty: of all), and its probability among
    them: Whisper's language-token probabilities (``ranked``, each code's) renormalised over
    the allowed codes, so that a German-only tenant is never told its audio is Dutch."""
    if not among:
        return max(ranked, key=lambda pair: pair[1])
    kept = [(code, p) for code, p in ranked if code in among]
    if not kept:
        raise ValueError(f"none of {sorted(among)} is among the model's languages")
    code, probability = max(kept, key=lambda pair: pair[1])
    total = sum(p for _, p in kept)
    return code, probability / total if total > 0 else 1.0 / len(kept)
