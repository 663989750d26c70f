"""How long a generate call may run: a short window's decode stops near what its audio can
hold, so one that loops costs a few times a normal decode, not the model's whole limit."""

from __future__ import annotations

from asrserve.engine.pipeline import TOKENS_PER_SECOND, token_limit


def test_a_5_s_window_may_hold_its_prompt_and_15_tokens_a_second() -> None:
    assert TOKENS_PER_SECOND == 15
    assert token_limit(prompt_tokens=36, frames=500, model_limit=448) == 36 + 75


def test_a_full_window_keeps_the_model_limit() -> None:
    assert token_limit(prompt_tokens=3, frames=3000, model_limit=448) == 448
