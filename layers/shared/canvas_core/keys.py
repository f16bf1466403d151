"""An account's API keys: list them, create one (shown once), revoke one. Keys are stored by their SHA-256 hash;
a key's id is derived from that hash, so every key, old ones included, has one without being rewritten."""

from __future__ import annotations

import uuid
from typing import Any

from canvas_core.adapters.accounts import AccountStore
from canvas_core.adapters.dynamodb import ConditionFailed
from canvas_core.auth import generate_api_key, hash_api_key
from canvas_core.clock import iso_utc, now_ms, parse_uuid
from canvas_core.errors import NotFoundError
from canvas_core.models.accounts import ApiKeyList, ApiKeyStatus, ApiKeyView, CreatedApiKey
from canvas_core.observability import logger, tracer

PREFIX_CHARS = 14  # "sk_canvas_" and four characters of the secret


class ApiKeyNotFoundError(NotFoundError):
    def __init__(self, key_id: str):
        super().__init__(f"API key not found: {key_id}")


def key_id_of(key_hash: str) -> str:
    """The id of the key with this hash: a UUID of the hash's first 128 bits."""
    return str(uuid.UUID(key_hash[:32]))


@tracer.capture_method
def list_keys(account_id: str, store: AccountStore | None = None) -> ApiKeyList:
    records = (store or AccountStore()).list_api_keys(account_id)
    records.sort(key=lambda r: (int(r.get("created_at_ms", 0)), r["key_hash"]), reverse=True)
    return ApiKeyList(keys=[_view(r) for r in records])


@tracer.capture_method
def create_key(account_id: str, store: AccountStore | None = None) -> CreatedApiKey:
    store = store or AccountStore()
    api_key = generate_api_key()
    key_hash, created = hash_api_key(api_key), now_ms()
    store.put_api_key(key_hash, account_id, api_key[:PREFIX_CHARS], created, last_four=api_key[-4:])
    logger.info("API key created", extra={"key_id": key_id_of(key_hash)})
    record = {"key_hash": key_hash, "key_hint": api_key[:PREFIX_CHARS], "last_four": api_key[-4:]}
    return CreatedApiKey(**_view(record | {"created_at_ms": created, "status": "active"}).model_dump(), key=api_key)


@tracer.capture_method
def revoke_key(account_id: str, key_id: str, store: AccountStore | None = None) -> ApiKeyView:
    """Revoke one of the account's keys: its next use answers 401. Another account's key is not found."""
    store = store or AccountStore()
    key_id = parse_uuid("key_id", key_id)
    record = next((r for r in store.list_api_keys(account_id) if key_id_of(r["key_hash"]) == key_id), None)
    if record is None:
        raise ApiKeyNotFoundError(key_id)
    try:
        store.revoke_api_key(record["key_hash"])
    except ConditionFailed:
        raise ApiKeyNotFoundError(key_id) from None
    logger.info("API key revoked", extra={"key_id": key_id})
    return _view(record | {"status": ApiKeyStatus.REVOKED.value})


def _view(record: dict[str, Any]) -> ApiKeyView:
    last_used = record.get("last_used_at_ms")
    return ApiKeyView(
        id=key_id_of(record["key_hash"]),
        prefix=str(record.get("key_hint", ""))[:PREFIX_CHARS],
        last_four=record.get("last_four"),
        created=iso_utc(int(record.get("created_at_ms", 0))),
        last_used=iso_utc(int(last_used)) if last_used is not None else None,
        status=ApiKeyStatus(record.get("status", ApiKeyStatus.ACTIVE.value)),
    )
