"""Webhook signatures: `t=<unix>,v1=<hex HMAC-SHA256(secret, "<t>." + raw body)>`, Stripe's scheme, which the
public `spine` client verifies (`webhooks.construct_event`) with a 300 s tolerance."""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

SECRET_PREFIX = "whsec_"


def new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def signature_header(secret: str, body: bytes, timestamp: int | None = None) -> str:
    """The `Spine-Signature` (and `Canvas-Signature`) value for these body bytes, signed now."""
    t = int(time.time()) if timestamp is None else timestamp
    digest = hmac.new(secret.encode(), f"{t}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={t},v1={digest}"
