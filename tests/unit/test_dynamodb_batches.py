"""Batch calls through `Retrying`: what DynamoDB leaves unprocessed is sent again after a backoff, within the
budget of a throttled call, and a batch still unfinished past it is StorageBusyError."""

from __future__ import annotations

from typing import Any

import pytest

from canvas_core.adapters.dynamodb import RetryBudget, Retrying
from canvas_core.errors import StorageBusyError


class LeavesSome:
    """A client that processes one request item per batch call, as DynamoDB may when it throttles."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def batch_write_item(self, RequestItems: dict[str, list[Any]]) -> dict[str, Any]:
        self.calls.append(RequestItems)
        [(table, items)] = RequestItems.items()
        return {"UnprocessedItems": {table: items[1:]} if items[1:] else {}}

    def batch_get_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(RequestItems)
        [(table, request)] = RequestItems.items()
        first, rest = request["Keys"][0], request["Keys"][1:]
        return {
            "Responses": {table: [{"id": first["id"]}]},
            "UnprocessedKeys": {table: {**request, "Keys": rest}} if rest else {},
        }


def test_unprocessed_writes_are_sent_again_after_a_growing_backoff():
    client, waits = LeavesSome(), []
    retrying = Retrying(client, RetryBudget(attempts=10, base_seconds=1.0, cap_seconds=100.0), sleep=waits.append)
    items = [{"PutRequest": {"Item": {"id": {"S": str(i)}}}} for i in range(4)]
    answer = retrying.batch_write_item(RequestItems={"t": items})
    assert [len(call["t"]) for call in client.calls] == [4, 3, 2, 1]
    assert answer["UnprocessedItems"] == {}
    # Each wait is a random share of a bound that doubles: 2, 4 and 8 seconds
    assert len(waits) == 3 and all(0 <= wait <= 2 ** (n + 1) for n, wait in enumerate(waits))


def test_unprocessed_reads_are_read_again_and_every_item_is_answered():
    client = LeavesSome()
    retrying = Retrying(client, RetryBudget(attempts=10), sleep=lambda _: None)
    keys = [{"id": {"S": str(i)}} for i in range(3)]
    answer = retrying.batch_get_item(RequestItems={"t": {"Keys": keys}})
    assert answer["Responses"] == {"t": [{"id": k["id"]} for k in keys]}
    assert answer["UnprocessedKeys"] == {}


def test_a_batch_still_unfinished_past_the_budget_is_storage_busy():
    client = LeavesSome()
    retrying = Retrying(client, RetryBudget(attempts=3), sleep=lambda _: None)
    items = [{"PutRequest": {"Item": {"id": {"S": str(i)}}}} for i in range(10)]
    with pytest.raises(StorageBusyError, match="unprocessed after 3 attempts"):
        retrying.batch_write_item(RequestItems={"t": items})
    assert len(client.calls) == 3
