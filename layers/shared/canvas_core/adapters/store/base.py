"""What every table of the store shares: the client, the settings, how items are written and read."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from canvas_core.adapters.aws import LazyClient
from canvas_core.adapters.dynamodb import (
    ConditionFailed,
    Retrying,
    cancellation_reasons,
    dynamodb_errors,
    from_item,
    model_item,
)
from canvas_core.clock import now_ms
from canvas_core.errors import CreditsExhaustedError
from canvas_core.settings import ServiceSettings, service_settings

CANVAS_ITEM = "CANVAS"
# The runs table's index of an account's runs by creation time (template.yaml, RunsTable).
RUNS_BY_ACCOUNT_INDEX = "account_id-created_at_ms-index"
NODE_PREFIX = "NODE#"
# How often a write that found the balance or a reservation changed by others looks again before giving up.
ADMISSION_ATTEMPTS = 8
# The window an account's run starts are counted in (`max_starts_per_minute`).
START_WINDOW_MS = 60_000
SETTLEMENT_ATTEMPTS = 16
TOP_UP_ATTEMPTS = 8
# The least a run's reservation is topped up by, in credits: a run writes its account once per step at most.
TOP_UP_CREDITS = 100
EDGE_PREFIX = "EDGE#"
# An approval claimed this long ago and not settled was abandoned (the functions' timeout is 29 s, as API Gateway's).
APPROVAL_ABANDONED_MS = 60_000


@dataclass(frozen=True)
class Completion:
    """A block's completion as written: the dependents whose release it claimed, with their task tokens."""

    released: dict[str, str] = field(default_factory=dict)


def expires_at(settings: ServiceSettings | None = None) -> int:
    """When an item written now expires (its table's TTL): DATA_RETENTION_DAYS from now, in epoch seconds."""
    return now_ms() // 1000 + (settings or service_settings()).data_retention_days * 86_400


class StoreBase:
    ddb = LazyClient("dynamodb", wrap=Retrying)

    def __init__(self, settings: ServiceSettings | None = None, dynamodb: Any = None):
        self.settings = settings or service_settings()
        self.ddb = dynamodb

    def _item(self, model: BaseModel, **extra: Any) -> dict[str, Any]:
        """A run, canvas, node, edge or task as stored, with the `expires_at` its table's TTL reads."""
        return model_item(model, expires_at=expires_at(self.settings), **extra)

    def _transact(self, items: list[dict[str, Any]]) -> None:
        with dynamodb_errors():
            self.ddb.transact_write_items(TransactItems=items)

    def _query_partition(self, table: str, canvas_id: str) -> Iterator[dict[str, Any]]:
        kwargs: dict[str, Any] = {
            "TableName": table,
            "KeyConditionExpression": "canvas_id = :c",
            "ExpressionAttributeValues": {":c": {"S": canvas_id}},
            "ConsistentRead": True,
        }
        while True:
            with dynamodb_errors():
                page = self.ddb.query(**kwargs)
            for item in page["Items"]:
                yield from_item(item)
            if "LastEvaluatedKey" not in page:
                return
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _batch_put(self, table: str, items: list[dict[str, Any]]) -> None:
        for start in range(0, len(items), 25):
            request: dict[str, Any] | None = {
                table: [{"PutRequest": {"Item": item}} for item in items[start : start + 25]]
            }
            while request:
                with dynamodb_errors():
                    response = self.ddb.batch_write_item(RequestItems=request)
                request = response.get("UnprocessedItems") or None

    @staticmethod
    def _node_key(canvas_id: str, block_id: str) -> dict[str, Any]:
        return {"canvas_id": {"S": canvas_id}, "item_id": {"S": NODE_PREFIX + block_id}}

    def _consistent_run(self, run_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.runs_table,
                Key={"run_id": {"S": run_id}},
                ProjectionExpression="run_id, #s, reserved_credits, credits_set_aside, account_id",
                ExpressionAttributeNames={"#s": "status"},
                ConsistentRead=True,
            )
        return from_item(found["Item"]) if "Item" in found else None

    def _consistent_balance(self, account_id: str) -> dict[str, Any] | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.accounts_table,
                Key={"account_id": {"S": account_id}},
                ProjectionExpression="account_id, credits_balance",
                ConsistentRead=True,
            )
        return from_item(found["Item"]) if "Item" in found else None


def refused_item(exc: ConditionFailed, index: int = -1) -> dict[str, Any] | None:
    """The item as it was, of the transaction's item at `index` whose condition failed (asked with
    `ReturnValuesOnConditionCheckFailure`), or None when it does not exist."""
    reasons = cancellation_reasons(exc)
    if not reasons or not reasons[index].get("Item"):
        return None
    return from_item(reasons[index]["Item"])


def refuse_overdraft(exc: ConditionFailed, credits: int) -> None:
    """Raise CreditsExhaustedError when the refused debit (the transaction's last item) found the account:
    its balance did not hold `credits`. Return when the account does not exist."""
    reasons = cancellation_reasons(exc)
    account = from_item(reasons[-1]["Item"]) if reasons and reasons[-1].get("Item") else None
    if account is not None:
        raise CreditsExhaustedError(credits, int(account.get("credits_balance", 0))) from exc


def jsonable_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Models inside update values become plain JSON data, and None is dropped by the serializer's NULL."""
    out = {}
    for key, value in fields.items():
        if isinstance(value, BaseModel):
            value = value.model_dump(mode="json", exclude_none=True)
        elif isinstance(value, list):
            value = [v.model_dump(mode="json", exclude_none=True) if isinstance(v, BaseModel) else v for v in value]
        out[key] = value
    return out
