"""Webhook signatures, as the Standard Webhooks specification defines them (what Svix,
and receivers written for Stripe-style webhooks, verify).

Every delivery carries ``webhook-id`` (the job or batch id, the same on every retry: a
receiver drops a message it has seen), ``webhook-timestamp`` (Unix seconds when sent: a
receiver refuses one too old, which defeats a replay) and ``webhook-signature``
(``v1,`` and the base64 HMAC-SHA256 of ``"{id}.{timestamp}.{body}"``, the body as sent).

Each API key signs with a secret of its own, derived from the deployment's signing key
(``ASRSERVE_WEBHOOK_SIGNING_KEY``, else one made at first start and kept in
``webhook-signing.key`` beside the stored files, which every node of a deployment shares),
so one tenant cannot forge another's webhooks. A key reads its secret at
``GET /v1/webhooks/secret`` as ``whsec_`` and its base64.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

KEY_FILE = "webhook-signing.key"
PREFIX = "whsec_"


class Signer:
    def __init__(self, signing_key: bytes) -> None:
        self._key = signing_key

    @classmethod
    def from_settings(cls, configured: str | None, folder: Path) -> Signer:
        """The configured signing key, else the one kept in ``folder`` (made if none is)."""
        if configured:
            return cls(configured.encode())
        return cls(_kept_key(folder / KEY_FILE))

    def secret(self, tenant: str | None) -> bytes:
        """The secret of an API key's webhooks (``None``: the one open caller's)."""
        label = b"asrserve webhook secret\0" + (tenant or "").encode()
        return hmac.new(self._key, label, hashlib.sha256).digest()

    def shown(self, tenant: str | None) -> str:
        return PREFIX + base64.b64encode(self.secret(tenant)).decode()

    def headers(self, message_id: str, body: bytes, tenant: str | None, now: int) -> dict[str, str]:
        signed = f"{message_id}.{now}.".encode() + body
        digest = hmac.new(self.secret(tenant), signed, hashlib.sha256).digest()
        return {
            "webhook-id": message_id,
            "webhook-timestamp": str(now),
            "webhook-signature": "v1," + base64.b64encode(digest).decode(),
        }


def _kept_key(path: Path) -> bytes:
    """The key in ``path``; made (owner-only) if there is none: written whole beside it,
    then linked into place, so that of two nodes starting at once both keep the first."""
    if not path.exists():
        draft = path.with_name(f".{path.name}.{secrets.token_hex(4)}")
        descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(secrets.token_hex(32).encode())
        try:
            os.link(draft, path)
        except FileExistsError:
            pass
        finally:
            draft.unlink()
    return path.read_bytes().strip()
