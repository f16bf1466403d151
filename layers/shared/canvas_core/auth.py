"""API keys: `sk_canvas_<secret>` with 256 bits of randomness, stored only as a SHA-256 hash, each owned by
an account that starts with 5,000 credits (5 currency units)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping

from canvas_core.adapters.store import Store
from canvas_core.clock import new_id, now_ms
from canvas_core.errors import InvalidApiKeyError, MissingApiKeyError

KEY_PREFIX = "sk_canvas_"
STARTING_CREDITS = 5000
API_KEY_HEADER = "x-api-key"


def generate_api_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_api_key(api_key: str) -> str:
    # Keys carry 256 random bits, so a fast hash is enough: there is nothing to brute-force.
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def create_account_with_key(
    api_key: str | None = None, credits: int = STARTING_CREDITS, store: Store | None = None
) -> tuple[str, str]:
    """Create an account holding one key (generated when not given). Returns (account_id, api_key)."""
    store = store or Store()
    api_key = api_key or generate_api_key()
    account_id = new_id()
    created = now_ms()
    store.put_account(account_id, credits, created)
    store.put_api_key(hash_api_key(api_key), account_id, key_hint=api_key[:14], created_at_ms=created)
    return account_id, api_key


def authenticate(headers: Mapping[str, str] | None, store: Store | None = None) -> str:
    """The account id behind the request's X-API-KEY header."""
    api_key = next((v for k, v in (headers or {}).items() if k.lower() == API_KEY_HEADER), None)
    if api_key is None or not api_key.strip():
        raise MissingApiKeyError()
    record = (store or Store()).get_api_key(hash_api_key(api_key.strip()))
    if record is None or record.get("status") != "active":
        raise InvalidApiKeyError()
    return record["account_id"]
