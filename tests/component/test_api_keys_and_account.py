"""/v1/api_keys and /v1/account through their Lambda handlers: keys listed without secrets, a new key shown once
and usable, a revoked key refused at once, another account's key not found; credits and this month's usage."""

from __future__ import annotations

import uuid

import pytest

from canvas_core.adapters.accounts import AccountStore
from canvas_core.adapters.store import Store
from canvas_core.adapters.usage import credits_used_counter, runs_counter
from canvas_core.auth import create_account_with_key, hash_api_key
from canvas_core.keys import key_id_of
from canvas_core.models.items import CanvasItem, RunItem
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def call(function, context, name, api_key, **changes):
    response = function(f"api/{name}")(load_event(changes.pop("event"), api_key=api_key, **changes), context)
    return response["statusCode"], body_of(response)


def list_keys(function, context, api_key):
    return call(function, context, "api_keys", api_key, event="list_api_keys")


def create_key(function, context, api_key):
    return call(function, context, "api_keys", api_key, event="create_api_key")


def revoke_key(function, context, api_key, key_id):
    return call(function, context, "api_keys", api_key, event="revoke_api_key", path_parameters={"key_id": key_id})


def test_keys_are_listed_by_prefix_and_last_four_never_the_key(aws, account, function, context):
    # When the account lists its keys
    status, body = list_keys(function, context, account.api_key)

    # Then its one key is there by id, prefix and last four, and neither the key nor its hash is
    assert status == 200, body
    [key] = body["data"]["keys"]
    assert key["id"] == key_id_of(hash_api_key(account.api_key))
    assert key["prefix"] == account.api_key[:14] and key["last_four"] == account.api_key[-4:]
    assert key["status"] == "active" and key["created"].endswith("Z")
    text = str(body)
    assert account.api_key not in text and hash_api_key(account.api_key) not in text


def test_a_new_key_is_shown_once_works_and_dies_when_revoked(aws, account, function, context):
    # Given a key created through the API
    status, body = create_key(function, context, account.api_key)
    assert status == 200, body
    new = body["data"]
    assert new["key"].startswith("sk_canvas_") and new["key"].endswith(new["last_four"])

    # Then it authenticates, is listed without its secret, and its use is recorded
    status, listed = list_keys(function, context, new["key"])
    assert status == 200
    keys = {k["id"]: k for k in listed["data"]["keys"]}
    assert set(keys) == {new["id"], key_id_of(hash_api_key(account.api_key))}
    assert "key" not in keys[new["id"]]
    assert keys[new["id"]]["last_used"] is not None

    # When it is revoked with the account's first key
    status, body = revoke_key(function, context, account.api_key, new["id"])
    assert status == 200 and body["data"]["status"] == "revoked"

    # Then its next use is refused, and the list shows it revoked
    status, body = list_keys(function, context, new["key"])
    assert (status, body) == (401, {"success": False, "error": "Invalid or revoked API key"})
    _, listed = list_keys(function, context, account.api_key)
    assert {k["id"]: k["status"] for k in listed["data"]["keys"]}[new["id"]] == "revoked"


def test_another_accounts_key_is_not_found_and_stays_active(aws, account, function, context):
    # Given a key of another account
    _, other_key = create_account_with_key()
    other_id = key_id_of(hash_api_key(other_key))

    # When the caller tries to revoke it
    status, body = revoke_key(function, context, account.api_key, other_id)

    # Then it is 404, and the key still works
    assert status == 404 and body == {"success": False, "error": f"API key not found: {other_id}"}
    assert list_keys(function, context, other_key)[0] == 200


def test_unknown_and_malformed_key_ids(aws, account, function, context):
    unknown = str(uuid.uuid4())
    assert revoke_key(function, context, account.api_key, unknown)[0] == 404
    status, body = revoke_key(function, context, account.api_key, "not-a-uuid")
    assert status == 400 and "key_id" in body["error"]


def test_keys_need_a_key(aws, function, context):
    assert list_keys(function, context, None)[0] == 401
    assert create_key(function, context, "sk_canvas_nope")[0] == 401


def test_last_use_is_written_at_most_once_a_minute(aws, account):
    store = AccountStore()
    key_hash = hash_api_key(account.api_key)
    # Given a use recorded now
    assert store.touch_api_key(key_hash, 1_000_000, 1_000_000 - 60_000)
    # Then another within the minute writes nothing, one after it does
    assert not store.touch_api_key(key_hash, 1_030_000, 1_030_000 - 60_000)
    assert store.touch_api_key(key_hash, 1_070_000, 1_070_000 - 60_000)
    assert store.get_api_key(key_hash)["last_used_at_ms"] == 1_070_000


def get_account(function, context, api_key):
    return call(function, context, "account", api_key, event="get_account")


def test_account_shows_credits_usage_and_limits(aws, account, function, context):
    # Given a run admitted and a block charged 120 credits this month
    store = Store()
    run = RunItem(
        run_id=str(uuid.uuid4()),
        account_id=account.account_id,
        canvas_id=str(uuid.uuid4()),
        prompt="p",
        template="report",
        created_at_ms=1,
        estimated_duration_ms=1,
    )
    canvas = CanvasItem(canvas_id=run.canvas_id, account_id=account.account_id, run_id=run.run_id, canvas_name="p")
    assert store.admit_run(run, canvas, 10)
    store._transact(store._debit(account.account_id, 120))

    # When the account is read
    status, body = get_account(function, context, account.api_key)

    # Then it shows the balance, the month's use and the limits
    assert status == 200, body
    data = body["data"]
    assert data["account_id"] == account.account_id
    assert data["credits_balance"] == 5000 - 120
    assert data["credits_used_this_month"] == 120
    assert data["runs_this_month"] == 1 and data["active_runs"] == 1
    assert data["limits"]["max_webhook_endpoints"] == 10 and data["limits"]["max_blocks_per_run"] == 40
    assert data["limits"]["max_concurrent_runs"] >= 1
    stored = store.get_account(account.account_id)
    assert stored[credits_used_counter()] == 120 and stored[runs_counter()] == 1


def test_account_needs_a_key(aws, function, context):
    assert get_account(function, context, "sk_canvas_nope") == (
        401,
        {"success": False, "error": "Invalid or revoked API key"},
    )
