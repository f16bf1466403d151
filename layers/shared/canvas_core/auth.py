"""API keys: `sk_canvas_<secret>` with 256 bits of randomness, stored only as a SHA-256 hash, each owned by
an account that starts with 5,000 credits (5 currency units)."""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping
from typing import Any

from canvas_core.adapters.accounts import AccountStore
from canvas_core.adapters.store import Store
from canvas_core.clock import new_id, now_ms
from canvas_core.errors import InvalidApiKeyError, MissingApiKeyError
from canvas_core.observability import logger

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
    store.put_api_key(
        hash_api_key(api_key), account_id, key_hint=api_key[:14], created_at_ms=created, last_four=api_key[-4:]
    )
    return account_id, api_key


def authenticate(headers: Mapping[str, str] | None, store: Store | None = None) -> str:
    """The account id behind the request's X-API-KEY header."""
    api_key = next((v for k, v in (headers or {}).items() if k.lower() == API_KEY_HEADER), None)
    if api_key is None or not api_key.strip():
        raise MissingApiKeyError()
    account_id: str = active_key(api_key.strip(), store)["account_id"]
    return account_id


# A key's last use is written at most this often, so a busy key costs one write a minute, not one a request.
LAST_USED_RESOLUTION_MS = 60_000


def active_key(api_key: str, store: Store | None = None) -> dict[str, Any]:
    """The stored record of an active key (InvalidApiKeyError otherwise), its last use recorded."""
    store = store or Store()
    record = store.get_api_key(hash_api_key(api_key))
    if record is None or record.get("status") != "active":
        raise InvalidApiKeyError()
    record_use(record, store)
    return record


def record_use(record: dict[str, Any], store: Store) -> None:
    """Set the key's `last_used_at_ms` unless it was set within the last minute; never fails the request."""
    now = now_ms()
    if now - int(record.get("last_used_at_ms", 0)) < LAST_USED_RESOLUTION_MS:
        return
    try:
        AccountStore(store.settings, store.ddb).touch_api_key(record["key_hash"], now, now - LAST_USED_RESOLUTION_MS)
    except Exception:
        logger.warning("Recording a key's last use failed", exc_info=True)
