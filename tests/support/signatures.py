"""Checking a webhook's signature as a receiver does (Standard Webhooks), written from the
specification rather than from the service's code."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping


def verifies(secret: str, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether one of ``webhook-signature``'s ``v1`` signatures is the HMAC-SHA256, keyed
    with the base64 after ``whsec_``, of ``"{webhook-id}.{webhook-timestamp}.{body}"``."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    offered = headers["webhook-signature"].split()
    return any(hmac.compare_digest(one, f"v1,{expected}") for one in offered)
