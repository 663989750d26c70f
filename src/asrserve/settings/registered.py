"""The names registered above the settings: the engines (``engine/registry.py``) and the
batching policies (``batcher/policies/``). The settings check a configured name against
these without importing what they name, so that nothing below the settings' importers
imports upward; each registry's test asserts it registers exactly these names, so a new
engine or policy is one line here as well as its registry entry."""

from __future__ import annotations

AUTO = "auto"  # the engine chosen per device (engine/choice.py)
ENGINES = ("ctranslate2", "transformers")
BATCH_POLICIES = ("greedy", "window", "unbatched", "none")


def check_engine(name: str) -> str:
    """``name`` if an engine is registered under it (or ``auto``); ValueError naming them."""
    if name != AUTO and name not in ENGINES:
        registered = ", ".join([AUTO, *sorted(ENGINES)])
        raise ValueError(f"unknown engine {name!r}; registered: {registered}")
    return name


def check_policy(name: str) -> str:
    """``name`` if a batching policy is registered under it; ValueError naming them."""
    if name not in BATCH_POLICIES:
        known = ", ".join(BATCH_POLICIES)
        raise ValueError(f"unknown batch policy {name!r}: use one of {known}")
    return name
