"""Batching policies, registered by name (``ASRSERVE_BATCH_POLICY``).

A policy says when a batch is ready and which pending items form it (``base.Policy``);
``selection`` holds the shared rules for the latter. A new policy is one module beside
these and one line in ``POLICIES``.
"""

from __future__ import annotations

from asrserve.batcher.policies.base import Policy, PolicyConfig
from asrserve.batcher.policies.greedy import Greedy
from asrserve.batcher.policies.selection import LENGTH_BUCKET_S, Pending, Selection, select_batch
from asrserve.batcher.policies.sequential import Sequential
from asrserve.batcher.policies.unbatched import Unbatched
from asrserve.batcher.policies.window import Window

POLICIES: dict[str, type[Policy]] = {
    Greedy.name: Greedy,
    Window.name: Window,
    Unbatched.name: Unbatched,
    Sequential.name: Sequential,
}

__all__ = [
    "LENGTH_BUCKET_S",
    "POLICIES",
    "Pending",
    "Policy",
    "PolicyConfig",
    "Selection",
    "get_policy",
    "policy_class",
    "select_batch",
]


def policy_class(name: str) -> type[Policy]:
    """The policy registered as ``name``; ValueError naming the known ones otherwise."""
    try:
        return POLICIES[name]
    except KeyError:
        known = ", ".join(POLICIES)
        raise ValueError(f"unknown batch policy {name!r}: use one of {known}") from None


def get_policy(name: str, config: PolicyConfig) -> Policy:
    return policy_class(name)(config)
