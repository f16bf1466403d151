"""Everything the embedded stack does to moto beyond its public API, in one place.

moto's Step Functions interpreter invokes Lambda tasks through boto3 against moto's own Lambda, which runs
code in Docker. We replace the one function every Lambda Task form goes through (`arn:aws:lambda:...`,
`arn:aws:states:::lambda:invoke` and its `.waitForTaskToken`) so that tasks run our handlers in this
process.

moto's TransactWriteItems copies every table it touches before writing, to roll back on failure: its cost
grows with everything stored, so a long-lived local stack slows down run after run. We replace it with the
same semantics (all conditions hold, or nothing is written) that checks every condition first and keeps
only the touched items for the rollback.

tests/unit/test_moto_patch.py fails when a moto upgrade moves or reshapes either seam.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from botocore.exceptions import ClientError
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

from canvas_local.lambda_runtime import LocalFunction, function_name_of

SEAM_NAME = "_invoke_lambda_function"

FunctionResolver = Callable[[str], LocalFunction | None]

_ORIGINAL_SEAM = getattr(lambda_eval_utils, SEAM_NAME)
_lock = threading.Lock()
_resolvers: list[FunctionResolver] = []


def install(resolve: FunctionResolver) -> None:
    """Dispatch Lambda tasks to `resolve(function_name)`; the latest install wins until uninstalled."""
    with _lock:
        _resolvers.append(resolve)
        setattr(lambda_eval_utils, SEAM_NAME, _invoke_in_process)


def uninstall(resolve: FunctionResolver) -> None:
    with _lock:
        if resolve in _resolvers:
            _resolvers.remove(resolve)
        if not _resolvers:
            setattr(lambda_eval_utils, SEAM_NAME, _ORIGINAL_SEAM)


@contextmanager
def lambdas_in_process(resolve: FunctionResolver) -> Iterator[None]:
    install(resolve)
    try:
        yield
    finally:
        uninstall(resolve)


def _invoke_in_process(parameters: dict, region: str, state_credentials: Any) -> dict:
    """Same contract as the seam it replaces: an Invoke response with `Payload` already parsed."""
    name = function_name_of(parameters["FunctionName"])
    function = _resolve(name)
    if function is None:
        raise _function_not_found(parameters["FunctionName"])
    invocation = function.invoke(_parse_payload(parameters.get("Payload")))
    response: dict[str, Any] = {
        "StatusCode": 200,
        "ExecutedVersion": "$LATEST",
        "Payload": invocation.payload,
    }
    if invocation.function_error:
        response["FunctionError"] = invocation.function_error
    return response


def _resolve(name: str) -> LocalFunction | None:
    with _lock:
        resolve = _resolvers[-1] if _resolvers else None
    return resolve(name) if resolve else None


def _parse_payload(payload: bytes | str | None) -> Any:
    if payload is None or payload in (b"", ""):
        return {}
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode("utf-8") if isinstance(payload, bytes) else payload


def _function_not_found(function_name: str) -> ClientError:
    # Shaped like boto3's error so moto reports `Lambda.ResourceNotFoundException`, as AWS would.
    message = f"Function not found: {function_name}"
    return ClientError(
        {
            "Error": {"Code": "ResourceNotFoundException", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 404, "RequestId": str(uuid.uuid4())},
        },
        "Invoke",
    )


def enable_state_machine_execution(endpoint_url: str) -> None:
    """Make moto's server run executions through its ASL interpreter (moto's documented server config).

    The setting is process-wide (moto.core.config.default_user_config), so it also reaches `mock_aws`.
    """
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": True}})


def disable_state_machine_execution(endpoint_url: str) -> None:
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": False}})


def reset_backends(endpoint_url: str) -> None:
    """Forget every resource: moto's backends are process-wide, shared by each server started here."""
    _moto_api(endpoint_url, "reset", None)


def _moto_api(endpoint_url: str, action: str, body: dict | None) -> None:
    response = httpx.post(f"{endpoint_url}/moto-api/{action}", json=body, timeout=10)
    response.raise_for_status()


# ---------------------------------------------------------------- DynamoDB transactions

_ORIGINAL_TRANSACT = DynamoDBBackend.transact_write_items


def install_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _transact_write_items


def uninstall_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _ORIGINAL_TRANSACT


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
