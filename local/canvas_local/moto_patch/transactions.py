"""DynamoDB's TransactWriteItems.

Correctness: moto ignores TransactWriteItems' `ClientRequestToken`; DynamoDB applies a transaction with a given token
once in ten minutes and answers a repeat with success (or `IdempotentParameterMismatchException` when its items
differ), which is what makes a retry after an unknown outcome safe. The handler keeps the tokens it applied for those
ten minutes, each with a hash of its request.

Speed: moto's `DynamoDBBackend.transact_write_items` deep-copies every table it touches before writing, to roll back
on failure: its cost grows with everything stored, so a long-lived stack slowed down run after run. It is replaced
with the same semantics (all conditions hold, or nothing is written) that checks every condition first and keeps only
the touched items for the rollback. Buys 86% of a chain's CPU per block on a stack that has run some 300 chains
(`bench/moto_patches.py item_level_transactions`: 30 ms a block with it, 218 without), and more as the stack grows."""

from __future__ import annotations

import copy
import hashlib
import json
import threading
import time
from typing import Any

from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.responses import DynamoHandler

from canvas_local.moto_patch.patches import Replacement, SpeedPatch

_ORIGINAL_TRANSACT = DynamoDBBackend.transact_write_items
_ORIGINAL_TRANSACT_HANDLER = DynamoHandler.transact_write_items
TOKEN_WINDOW_SECONDS = 600
_tokens_lock = threading.Lock()
# ClientRequestToken -> (the digest of the request it came with, when it was applied).
_applied_tokens: dict[str, tuple[str, float]] = {}


def install_item_level_transactions() -> None:
    """Transactions that keep only their items for the rollback, and their tokens applied once."""
    PATCHES["item_level_transactions"].install()
    install_transaction_tokens()


def uninstall_item_level_transactions() -> None:
    PATCHES["item_level_transactions"].uninstall()
    uninstall_transaction_tokens()


def install_transaction_tokens() -> None:
    DynamoHandler.transact_write_items = _idempotent_transact_write_items  # type: ignore[method-assign]


def uninstall_transaction_tokens() -> None:
    DynamoHandler.transact_write_items = _ORIGINAL_TRANSACT_HANDLER  # type: ignore[method-assign]
    with _tokens_lock:
        _applied_tokens.clear()


def _idempotent_transact_write_items(self: DynamoHandler) -> Any:
    token = self.body.get("ClientRequestToken")
    if not token:
        return _ORIGINAL_TRANSACT_HANDLER(self)
    # Kept as a hash: the request's text, held for ten minutes per transaction, was a run's largest share of memory.
    request = json.dumps({k: v for k, v in self.body.items() if k != "ClientRequestToken"}, sort_keys=True)
    digest = hashlib.sha256(request.encode("utf-8")).hexdigest()
    now = time.monotonic()
    with _tokens_lock:
        # Tokens are kept in the order they were applied: the expired ones are the oldest, at the front.
        while _applied_tokens:
            oldest = next(iter(_applied_tokens))
            if now - _applied_tokens[oldest][1] <= TOKEN_WINDOW_SECONDS:
                break
            del _applied_tokens[oldest]
        applied = _applied_tokens.get(token)
    if applied is not None:
        if applied[0] != digest:
            raise JsonRESTError(
                "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                "DynamoDB rejected the request because you retried a request with a different payload but with "
                "an idempotent token that was already used.",
            )
        return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
    answer = _ORIGINAL_TRANSACT_HANDLER(self)
    with _tokens_lock:
        _applied_tokens[token] = (digest, now)
    return answer


def _transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    operations, seen, errors = [], set(), []
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        table_name = op["TableName"]
        table = self.get_table(table_name)
        if op_type == "Put":
            key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = op["Item"][table.range_key_attr]
        else:
            key = op["Key"]
        identity = (table_name, json.dumps(key, sort_keys=True))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        current = self.get_item(table_name, key)
        failed = None
        if op.get("ConditionExpression") is not None:
            condition = get_filter_expression(
                op["ConditionExpression"], op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not condition.expr(current):
                old = current.to_json()["Attributes"] if current is not None else None
                wants_old = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                failed = ("ConditionalCheckFailed", "The conditional request failed", old if wants_old else None)
        errors.append(failed or (None, None, None))
        operations.append((op_type, op, table_name, key, copy.deepcopy(current)))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    done = []
    try:
        for op_type, op, table_name, key, before in operations:
            names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            if op_type == "Put":
                self.put_item(
                    table_name, op["Item"], expression_attribute_names=names, expression_attribute_values=values
                )
            elif op_type == "Delete":
                self.delete_item(table_name, key)
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            done.append((table_name, key, before))
    except Exception:
        for table_name, key, before in reversed(done):
            if before is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, before.to_json()["Attributes"])
        raise


PATCHES = {
    "item_level_transactions": SpeedPatch(
        (Replacement(DynamoDBBackend, "transact_write_items", _ORIGINAL_TRANSACT, _transact_write_items),)
    ),
}
