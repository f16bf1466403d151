"""DynamoDB storage for what an account holder manages: the account's keys (listed through the key table's
account index), its credit grants, and the portal's sessions (kept by the hash of their token, with a TTL).

Every method raises domain errors or `ConditionFailed`, never ClientError."""

from __future__ import annotations

from typing import Any

from canvas_core.adapters.dynamodb import ConditionFailed, dynamodb_errors, expression_values, from_item, to_item
from canvas_core.adapters.store import Store

# The API keys table's index of an account's keys (template.yaml, ApiKeysTable).
KEYS_BY_ACCOUNT_INDEX = "account_id-index"


class AccountStore(Store):
    # Keys

    def list_api_keys(self, account_id: str) -> list[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": self.settings.api_keys_table,
            "IndexName": KEYS_BY_ACCOUNT_INDEX,
            "KeyConditionExpression": "account_id = :a",
            "ExpressionAttributeValues": {":a": {"S": account_id}},
        }
        found: list[dict[str, Any]] = []
        while True:
            with dynamodb_errors():
                page = self.ddb.query(**kwargs)
            found += [from_item(item) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def touch_api_key(self, key_hash: str, used_at_ms: int, not_since_ms: int) -> bool:
        """Record a key's use, unless one was recorded after `not_since_ms` (False then: nothing written)."""
        try:
            with dynamodb_errors():
                self.ddb.update_item(
                    TableName=self.settings.api_keys_table,
                    Key={"key_hash": {"S": key_hash}},
                    UpdateExpression="SET last_used_at_ms = :now",
                    ConditionExpression=(
                        "attribute_exists(key_hash) AND "
                        "(attribute_not_exists(last_used_at_ms) OR last_used_at_ms < :since)"
                    ),
                    ExpressionAttributeValues=expression_values(now=used_at_ms, since=not_since_ms),
                )
        except ConditionFailed:
            return False
        return True

    # Credits

    def grant_credits(self, account_id: str, credits: int) -> int:
        """Add credits to an existing account's balance; the new balance. ConditionFailed when there is none. A
        transaction, for its token: a grant resent after its answer was lost is not added twice."""
        self._transact(
            [
                {
                    "Update": {
                        "TableName": self.settings.accounts_table,
                        "Key": {"account_id": {"S": account_id}},
                        "UpdateExpression": "ADD credits_balance :credits",
                        "ConditionExpression": "attribute_exists(account_id)",
                        "ExpressionAttributeValues": expression_values(credits=credits),
                    }
                }
            ]
        )
        account = self._consistent_balance(account_id) or {}
        return int(account.get("credits_balance", 0))

    # Portal sessions

    def put_session(self, session: dict[str, Any]) -> None:
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.portal_sessions_table,
                Item=to_item(session),
                ConditionExpression="attribute_not_exists(session_hash)",
            )

    def get_session(self, session_hash: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.portal_sessions_table,
                Key={"session_hash": {"S": session_hash}},
                ConsistentRead=True,
            )
        return from_item(found["Item"]) if "Item" in found else None

    def delete_session(self, session_hash: str) -> None:
        with dynamodb_errors():
            self.ddb.delete_item(
                TableName=self.settings.portal_sessions_table, Key={"session_hash": {"S": session_hash}}
            )

    # Failed portal sign-ins, counted per client address and window in an item beside the sessions (its key is
    # never a session's hash: those are hex digests), which the table's TTL removes after its window.

    def sign_in_failures(self, window_key: str) -> int:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.portal_sessions_table,
                Key={"session_hash": {"S": window_key}},
                ProjectionExpression="failures",
                ConsistentRead=True,
            )
        return int(from_item(found.get("Item", {})).get("failures", 0))

    def add_sign_in_failure(self, window_key: str, expires_at: int) -> int:
        """One more failed sign-in in the window: the window's count, this one included."""
        with dynamodb_errors():
            answer = self.ddb.update_item(
                TableName=self.settings.portal_sessions_table,
                Key={"session_hash": {"S": window_key}},
                UpdateExpression="ADD failures :one SET expires_at = if_not_exists(expires_at, :expires)",
                ExpressionAttributeValues=expression_values(one=1, expires=expires_at),
                ReturnValues="UPDATED_NEW",
            )
        return int(from_item(answer["Attributes"])["failures"])
