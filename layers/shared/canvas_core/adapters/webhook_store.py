"""DynamoDB storage for webhook endpoints (WebhookEndpointsTable, by endpoint id, with an index by account) and
their delivery attempts (WebhookDeliveriesTable: an endpoint's partition, sorted by time, expiring after 30
days). An account item counts its endpoints in `webhook_endpoints`, moved in the write that adds or removes
one, so concurrent creates cannot pass the limit together."""

from __future__ import annotations

from typing import Any

from canvas_core.adapters.aws import LazyClient
from canvas_core.adapters.dynamodb import (
    ConditionFailed,
    Retrying,
    cancellation_codes,
    dynamodb_errors,
    expression_values,
    from_item,
    model_item,
    to_item,
)
from canvas_core.models.webhooks import EndpointItem, EndpointStatus, WebhookDelivery
from canvas_core.settings import WebhookSettings, webhook_settings

ENDPOINTS_BY_ACCOUNT_INDEX = "account_id-index"
DELIVERY_RETENTION_SECONDS = 30 * 24 * 3600
COUNTER = "webhook_endpoints"
# The account's endpoint ids, beside the count and in the same writes: a consistent read of them finds an endpoint
# the moment it is created, where the account index is eventually consistent.
IDS = "webhook_endpoint_ids"


class WebhookStore:
    ddb = LazyClient("dynamodb", wrap=Retrying)

    def __init__(self, settings: WebhookSettings | None = None, dynamodb: Any = None):
        self.settings = settings or webhook_settings()
        self.ddb = dynamodb

    # Endpoints

    def add_endpoint(self, endpoint: EndpointItem, limit: int) -> bool:
        """Store the endpoint and count it on its account, in one write; False, with nothing stored, when the
        account has `limit` endpoints already."""
        put = {
            "Put": {
                "TableName": self.settings.endpoints_table,
                "Item": model_item(endpoint),
                "ConditionExpression": "attribute_not_exists(endpoint_id)",
            }
        }
        count = {
            "Update": {
                "TableName": self.settings.accounts_table,
                "Key": {"account_id": {"S": endpoint.account_id}},
                "UpdateExpression": f"SET {COUNTER} = if_not_exists({COUNTER}, :zero) + :one ADD {IDS} :id",
                "ConditionExpression": (
                    f"attribute_exists(account_id) AND (attribute_not_exists({COUNTER}) OR {COUNTER} < :limit)"
                ),
                "ExpressionAttributeValues": expression_values(zero=0, one=1, limit=limit)
                | {":id": {"SS": [endpoint.endpoint_id]}},
            }
        }
        try:
            with dynamodb_errors():
                self.ddb.transact_write_items(TransactItems=[put, count])
        except ConditionFailed as exc:
            if "ConditionalCheckFailed" in cancellation_codes(exc)[:-1]:
                raise
            return False
        return True

    def get_endpoint(self, endpoint_id: str) -> EndpointItem | None:
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.endpoints_table,
                Key={"endpoint_id": {"S": endpoint_id}},
                ConsistentRead=True,
            )
        return _endpoint(found["Item"]) if "Item" in found else None

    def list_endpoints(self, account_id: str) -> list[EndpointItem]:
        """The account's endpoints, oldest first, including one created a moment ago: the ids kept on the account
        item are read consistently, and the account index (eventually consistent) adds only endpoints created
        before the account kept ids."""
        with dynamodb_errors():
            found = self.ddb.get_item(
                TableName=self.settings.accounts_table,
                Key={"account_id": {"S": account_id}},
                ProjectionExpression=f"{COUNTER}, {IDS}",
                ConsistentRead=True,
            )
        account = from_item(found.get("Item", {}))
        ids = set(account.get(IDS, set()))
        endpoints = {e.endpoint_id: e for e in self._get_endpoints(sorted(ids))}
        if int(account.get(COUNTER, 0)) > len(ids):
            endpoints |= {e.endpoint_id: e for e in self._query_endpoints(account_id) if e.endpoint_id not in endpoints}
        return sorted(endpoints.values(), key=lambda e: (e.created_at, e.endpoint_id))

    def _get_endpoints(self, endpoint_ids: list[str]) -> list[EndpointItem]:
        found: list[EndpointItem] = []
        for start in range(0, len(endpoint_ids), 100):
            request: dict[str, Any] | None = {
                self.settings.endpoints_table: {
                    "Keys": [{"endpoint_id": {"S": i}} for i in endpoint_ids[start : start + 100]],
                    "ConsistentRead": True,
                }
            }
            while request:
                with dynamodb_errors():
                    response = self.ddb.batch_get_item(RequestItems=request)
                found += [_endpoint(item) for item in response["Responses"].get(self.settings.endpoints_table, [])]
                request = response.get("UnprocessedKeys") or None
        return found

    def _query_endpoints(self, account_id: str) -> list[EndpointItem]:
        kwargs: dict[str, Any] = {
            "TableName": self.settings.endpoints_table,
            "IndexName": ENDPOINTS_BY_ACCOUNT_INDEX,
            "KeyConditionExpression": "account_id = :a",
            "ExpressionAttributeValues": {":a": {"S": account_id}},
        }
        found: list[EndpointItem] = []
        while True:
            with dynamodb_errors():
                page = self.ddb.query(**kwargs)
            found += [_endpoint(item) for item in page["Items"]]
            if "LastEvaluatedKey" not in page:
                return found
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def remove_endpoint(self, endpoint_id: str, account_id: str) -> bool:
        """Delete the account's endpoint and uncount it, in one write; False when it is not the account's."""
        delete = {
            "Delete": {
                "TableName": self.settings.endpoints_table,
                "Key": {"endpoint_id": {"S": endpoint_id}},
                "ConditionExpression": "account_id = :a",
                "ExpressionAttributeValues": expression_values(a=account_id),
            }
        }
        uncount = {
            "Update": {
                "TableName": self.settings.accounts_table,
                "Key": {"account_id": {"S": account_id}},
                "UpdateExpression": f"SET {COUNTER} = {COUNTER} - :one DELETE {IDS} :id",
                "ConditionExpression": f"{COUNTER} > :zero",
                "ExpressionAttributeValues": expression_values(one=1, zero=0) | {":id": {"SS": [endpoint_id]}},
            }
        }
        try:
            with dynamodb_errors():
                self.ddb.transact_write_items(TransactItems=[delete, uncount])
        except ConditionFailed as exc:
            if "ConditionalCheckFailed" in cancellation_codes(exc)[:-1]:
                return False
            # Nothing counted on the account: delete all the same; the count never goes below zero.
            try:
                with dynamodb_errors():
                    self.ddb.delete_item(**delete["Delete"])
            except ConditionFailed:
                return False
        return True

    def set_secret(self, endpoint_id: str, account_id: str, secret: str) -> EndpointItem | None:
        """Replace the account's endpoint's secret; the endpoint after, or None when it is not the account's."""
        return self._update(endpoint_id, account_id, "SET secret = :s", s=secret)

    def disable_endpoint(self, endpoint_id: str, reason: str) -> bool:
        found = self._update(
            endpoint_id,
            None,
            "SET #st = :disabled, disabled_reason = :r",
            disabled=EndpointStatus.DISABLED.value,
            r=reason,
        )
        return found is not None

    def _update(self, endpoint_id: str, account_id: str | None, expression: str, **values: Any) -> EndpointItem | None:
        condition = "attribute_exists(endpoint_id)"
        if account_id is not None:
            condition += " AND account_id = :a"
            values["a"] = account_id
        kwargs: dict[str, Any] = {}
        if "#st" in expression:
            kwargs["ExpressionAttributeNames"] = {"#st": "status"}
        try:
            with dynamodb_errors():
                found = self.ddb.update_item(
                    TableName=self.settings.endpoints_table,
                    Key={"endpoint_id": {"S": endpoint_id}},
                    UpdateExpression=expression,
                    ConditionExpression=condition,
                    ExpressionAttributeValues=expression_values(**values),
                    ReturnValues="ALL_NEW",
                    **kwargs,
                )
        except ConditionFailed:
            return None
        return _endpoint(found["Attributes"])

    # Deliveries

    def record_delivery(self, endpoint_id: str, delivery: WebhookDelivery, attempted_ms: int) -> None:
        item = delivery.model_dump(mode="json", exclude_none=True) | {
            "endpoint_id": endpoint_id,
            "attempt_key": f"{attempted_ms:013d}#{delivery.event_id}#{delivery.attempt:02d}",
            "expires_at": attempted_ms // 1000 + DELIVERY_RETENTION_SECONDS,
        }
        with dynamodb_errors():
            self.ddb.put_item(TableName=self.settings.deliveries_table, Item=to_item(item))

    def list_deliveries(self, endpoint_id: str, limit: int) -> list[WebhookDelivery]:
        """The endpoint's most recent attempts, newest first."""
        with dynamodb_errors():
            page = self.ddb.query(
                TableName=self.settings.deliveries_table,
                KeyConditionExpression="endpoint_id = :e",
                ExpressionAttributeValues={":e": {"S": endpoint_id}},
                ScanIndexForward=False,
                Limit=limit,
            )
        return [WebhookDelivery.model_validate(from_item(item)) for item in page["Items"]]


def _endpoint(item: dict[str, Any]) -> EndpointItem:
    return EndpointItem.model_validate(from_item(item))
