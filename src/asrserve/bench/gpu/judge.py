"""What the check judges: each step's result against its bounds, as a list of judgements.

Pure functions of a step's result (the JSON the step wrote): nothing here runs a model.
Every judgement is recorded in the report (its name, the value found, the bound, whether
it passed); a step with one that failed is ``failed``, with the reasons, and ``run`` exits
non-zero naming them. Standard library only: the run's own process imports it.

- ``machine``: every module the service and the check import is importable; on CUDA,
  PyTorch sees the GPU and the driver and the card's compute capability are known.
- ``curve`` (the engine alone): the float32 reference (float32, batch size 1, every
  window) under :data:`WER_BOUND`; each precision's row at each batch size under
  :data:`WER_BOUND` and within :data:`WER_DELTA` of the reference's WER on the same
  windows; the known clip's text non-empty and its WER at most :data:`KNOWN_WER_BOUND`;
  ten seconds of silence (zeros) heard as silence (:func:`heard_silence`).
- ``service``: no request failed (under load, alone, per language, silence); the English
  WER under load and alone under :data:`WER_BOUND`; each English recording sent alone
  gets the engine's own answer for it (the same settings in-process, compared as the WER
  scores them: words, not case or punctuation); silence gives no text.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

# What the models get wrong of the English recordings the check carries (the GPU pack's 30
# windows, 328 words), float32 on the CPU with a beam of 5: tiny.en 0.021, base 0.034; the
# dry run's three prompts (26 words, beam 1): 0.038, one word. About three times base's: a
# few words more pass; garbage (WER near 1) or nothing (1.0) does not.
WER_BOUND = 0.1
# A row's WER against the float32 reference's on the same windows (the 0.02).
WER_DELTA = 0.02
# The known clip (jfk.flac where the pack carries it, else the first English recording):
# tiny.en and base get every one of jfk's 22 words right on the CPU, as tiny.en does the
# dry run's first prompt; at most two of jfk's words wrong is still "right".
KNOWN_WER_BOUND = 0.1

# Silence decoded by the engine alone: Whisper's no-speech probability of what it says there
# past the service's own threshold (``engine/fallback.py``'s NO_SPEECH_THRESHOLD), where
# it says anything. On a window of zeros tiny.en and base say "You" with a beam of 5, in
# float32 too (no-speech 0.94 and 0.76 on 10 s); the service never decodes that window (its
# VAD finds no speech), which the service steps judge: their answer to silence is empty.
NO_SPEECH_BOUND = 0.6

Value = float | int | str | list[str] | None


@dataclass(frozen=True)
class Judgement:
    name: str
    value: Value
    bound: str  # in words: "<= 0.2", "|delta| <= 0.02", "empty", ...
    passed: bool

    def reason(self) -> str:
        return reason(self.record())

    def record(self) -> dict[str, Any]:
        return asdict(self)


def reason(judgement: Mapping[str, Any]) -> str:
    """A judgement (as the report records it) in words: what it found, and the bound."""
    return f"{judgement['name']} = {judgement['value']!r}, not {judgement['bound']}"


def at_most(name: str, value: float | int | None, bound: float) -> Judgement:
    """``value`` no more than ``bound`` (None, not measured: fails)."""
    passed = value is not None and value <= bound
    return Judgement(name, value, f"<= {bound}", passed)


def near(name: str, value: float, reference: float, delta: float) -> Judgement:
    """``value`` within ``delta`` of ``reference`` (the value recorded is the difference)."""
    difference = round(value - reference, 4)
    return Judgement(name, difference, f"|delta| <= {delta}", abs(difference) <= delta)


def empty(name: str, text: str) -> Judgement:
    return Judgement(name, text, "empty", not text.strip())


def non_empty(name: str, text: str) -> Judgement:
    return Judgement(name, text, "not empty", bool(text.strip()))


def heard_silence(name: str, silence: Mapping[str, Any]) -> Judgement:
    """The engine said nothing for silence, or Whisper's no-speech probability of what it
    said is past :data:`NO_SPEECH_BOUND` (the value: the lowest, None where it said nothing)."""
    found: list[float] = silence["no_speech_prob"]
    lowest = min(found) if found else None
    passed = lowest is None or lowest > NO_SPEECH_BOUND
    return Judgement(name, lowest, f"> {NO_SPEECH_BOUND} (or nothing said)", passed)


def none_of(name: str, found: list[str]) -> Judgement:
    return Judgement(name, found, "none", not found)


def judge_machine(result: Mapping[str, Any], device: str) -> list[Judgement]:
    failed = sorted(name for name, why in result["imports"].items() if why)
    out = [none_of("imports/not-importable", failed)]
    if device == "cuda":
        versions = result["versions"]
        out.append(
            Judgement("torch/gpu", result["torch_gpu"], "cuda", result["torch_gpu"] == "cuda")
        )
        for key in ("driver", "compute_capability"):
            out.append(
                Judgement(f"versions/{key}", versions[key], "known", versions[key] is not None)
            )
    return out


def judge_curve(result: Mapping[str, Any]) -> list[Judgement]:
    if "skipped" in result:
        return []
    reference = result["reference"]
    out = [at_most("float32-reference/wer", reference["wer"], WER_BOUND)]
    for dtype, measured in result["dtypes"].items():
        for row in measured["rows"]:
            prefix = f"{dtype}/b{row['batch_size']}"
            out.append(at_most(f"{prefix}/wer", row["wer"], WER_BOUND))
            out.append(near(f"{prefix}/wer-vs-float32", row["wer"], row["float32_wer"], WER_DELTA))
        known = measured["known"]
        out.append(non_empty(f"{dtype}/known-clip/text", known["text"]))
        out.append(at_most(f"{dtype}/known-clip/wer", known["wer"], KNOWN_WER_BOUND))
        out.append(heard_silence(f"{dtype}/silence/no-speech", measured["silence"]))
    return out


def judge_service(result: Mapping[str, Any]) -> list[Judgement]:
    out = []
    for part in ("load", "lone"):
        out.append(at_most(f"{part}/errors", result[part]["errors"], 0))
        out.append(at_most(f"{part}/wer", result[part]["wer"], WER_BOUND))
    for code, row in result["wer_by_language"].items():
        out.append(at_most(f"language/{code}/errors", row["errors"], 0))
    differing = sorted(
        clip["clip"] for clip in result["engine_answers"]["clips"] if not clip["same"]
    )
    out.append(none_of("lone/differs-from-engine", differing))
    silence = result["silence"]
    out.append(at_most("silence/errors", silence["errors"], 0))
    out.append(empty("silence/text", silence["text"]))
    return out


def judge(kind: str, result: Mapping[str, Any], device: str) -> list[Judgement]:
    """Every judgement of one step's result."""
    if kind == "machine":
        return judge_machine(result, device)
    if kind == "curve":
        return judge_curve(result)
    if kind == "service":
        return judge_service(result)
    raise ValueError(f"no judgements for a step of kind {kind!r}")


def failures(judgements: list[Judgement]) -> list[str]:
    """The reason of each judgement that failed."""
    return [j.reason() for j in judgements if not j.passed]
