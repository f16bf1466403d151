"""Accounts (their balance and counters) and API keys."""

from __future__ import annotations

from typing import Any

from canvas_core.adapters.dynamodb import dynamodb_errors, expression_values, from_item, to_item
from canvas_core.adapters.store.base import StoreBase


class AccountsTable(StoreBase):
    def put_account(self, account_id: str, credits: int, created_at_ms: int) -> None:
        item = {"account_id": account_id, "credits_balance": credits, "created_at_ms": created_at_ms}
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.accounts_table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(account_id)",
            )

    def get_account(self, account_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(TableName=self.settings.accounts_table, Key={"account_id": {"S": account_id}})
        return from_item(found["Item"]) if "Item" in found else None

    def put_api_key(
        self, key_hash: str, account_id: str, key_hint: str, created_at_ms: int, last_four: str | None = None
    ) -> None:
        item = {
            "key_hash": key_hash,
            "account_id": account_id,
            "key_hint": key_hint,
            "status": "active",
            "created_at_ms": created_at_ms,
        }
        if last_four is not None:
            item["last_four"] = last_four
        with dynamodb_errors():
            self.ddb.put_item(
                TableName=self.settings.api_keys_table,
                Item=to_item(item),
                ConditionExpression="attribute_not_exists(key_hash)",
            )

    def get_api_key(self, key_hash: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(TableName=self.settings.api_keys_table, Key={"key_hash": {"S": key_hash}})
        return from_item(found["Item"]) if "Item" in found else None

    def revoke_api_key(self, key_hash: str) -> None:
        with dynamodb_errors():
            self.ddb.update_item(
                TableName=self.settings.api_keys_table,
                Key={"key_hash": {"S": key_hash}},
                UpdateExpression="SET #s = :revoked",
                ConditionExpression="attribute_exists(key_hash)",
                ExpressionAttributeNames={"#s": "status"},
                ExpressionAttributeValues=expression_values(revoked="revoked"),
            )
