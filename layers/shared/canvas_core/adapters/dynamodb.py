"""What the DynamoDB adapters (the store, the account store, the webhook store) share: the client they call through
(`Retrying`: what DynamoDB cancels or throttles is tried again), items to and from DynamoDB's typed attributes,
expression values, and `dynamodb_errors`, which turns a ClientError into a domain error (`ConditionFailed` for a
failed condition, `StorageBusyError` for a write still cancelled or throttled after its retries, StorageError
otherwise)."""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache, partial
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError
from pydantic import BaseModel

from canvas_core.errors import StorageBusyError, StorageError
from canvas_core.observability import logger

if TYPE_CHECKING:
    from boto3.dynamodb.types import TypeDeserializer, TypeSerializer


class ConditionFailed(Exception):
    """A conditional write found the item in another state than expected."""


# What DynamoDB answers for a request it did not carry out and that may succeed when sent again: throttling, a
# write that met a transaction in flight on the same item, a transaction still in progress under the same token,
# a passing fault of the service.
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "ServiceUnavailable",
    }
)
# The reasons of a cancelled transaction's items that another attempt may get past (the others, a failed
# condition or an invalid item, would fail it again).
RETRYABLE_REASONS = frozenset({"TransactionConflict", "ThrottlingError", "ProvisionedThroughputExceeded"})
CANCELLED = "TransactionCanceledException"
# The batch calls, and where their answer lists what DynamoDB left for another attempt.
UNPROCESSED = {"batch_write_item": "UnprocessedItems", "batch_get_item": "UnprocessedKeys"}


def is_retryable(exc: ClientError) -> bool:
    """Whether DynamoDB refused the request without carrying it out, for a reason another attempt may not meet."""
    code = exc.response.get("Error", {}).get("Code", "")
    if code == CANCELLED:
        reasons = {r.get("Code") for r in exc.response.get("CancellationReasons", [])} - {None, "None"}
        return bool(reasons) and reasons <= RETRYABLE_REASONS
    return code in RETRYABLE_CODES


@dataclass(frozen=True)
class RetryBudget:
    """How often a cancelled or throttled call is tried, and how long it waits in between: capped exponential
    backoff with full jitter (a random wait up to the step's bound), so writers that collided spread apart."""

    attempts: int = 10
    base_seconds: float = 0.02
    cap_seconds: float = 1.0

    def delay(self, retry: int) -> float:
        return random.uniform(0, min(self.cap_seconds, self.base_seconds * 2**retry))


class Retrying:
    """A DynamoDB client whose calls are tried again, within a `RetryBudget`, when DynamoDB cancels or throttles
    them (`is_retryable`); past the budget the last error is raised. botocore's own retries (standard mode) cover
    throttling of single calls but not a cancelled transaction, which is what concurrent writers to one item get.

    Every transaction carries a `ClientRequestToken`, the same on each of its attempts: DynamoDB applies a
    transaction with a given token at most once (for 10 minutes), so an attempt whose answer was lost (a timeout
    after the write) is not applied twice by the next one."""

    def __init__(
        self, client: Any, budget: RetryBudget | None = None, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.client = client
        self.budget = budget or RetryBudget()
        self.sleep = sleep

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if name.startswith("_") or not callable(method) or name in ("get_paginator", "get_waiter", "can_paginate"):
            return method
        return partial(self._call, name, method)

    def _call(self, name: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        if name in UNPROCESSED:
            return self._batch(name, method, **kwargs)
        return self._once(name, method, **kwargs)

    def _batch(self, name: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        """A batch call sent again with what DynamoDB left unprocessed (as it does when it throttles), after the
        backoff of a throttled call; StorageBusyError when items are still left past the budget. The answer holds
        every item read, and nothing unprocessed."""
        left_key = UNPROCESSED[name]
        read: dict[str, list[Any]] = {}
        retry = 0
        while True:
            response = self._once(name, method, **kwargs)
            for table, items in response.get("Responses", {}).items():
                read.setdefault(table, []).extend(items)
            left = response.get(left_key) or {}
            if not left:
                break
            retry += 1
            if retry >= self.budget.attempts:
                raise StorageBusyError(f"DynamoDB left items of {name} unprocessed after {retry} attempts")
            logger.debug("DynamoDB batch sent again", extra={"operation": name, "tables": sorted(left)})
            self.sleep(self.budget.delay(retry))
            kwargs = {**kwargs, "RequestItems": left}
        return {**response, **({"Responses": read} if name == "batch_get_item" else {}), left_key: {}}

    def _once(self, name: str, method: Callable[..., Any], **kwargs: Any) -> Any:
        if name == "transact_write_items":
            kwargs.setdefault("ClientRequestToken", str(uuid.uuid4()))
        retry = 0
        while True:
            try:
                return method(**kwargs)
            except ClientError as exc:
                retry += 1
                if retry >= self.budget.attempts or not is_retryable(exc):
                    raise
                logger.debug(
                    "DynamoDB call retried", extra={"operation": name, "code": exc.response["Error"].get("Code")}
                )
                self.sleep(self.budget.delay(retry))


@contextmanager
def dynamodb_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
        if code == "ConditionalCheckFailedException" or "ConditionalCheckFailed" in reasons:
            raise ConditionFailed(str(exc)) from exc
        message = f"DynamoDB {code}: {exc.response.get('Error', {}).get('Message', '')}"
        if is_retryable(exc):
            raise StorageBusyError(message) from exc
        raise StorageError(message) from exc


@cache
def _serializer() -> TypeSerializer:
    # boto3's, imported with the first item rather than at cold start (adapters/aws.py says why).
    from boto3.dynamodb.types import TypeSerializer

    return TypeSerializer()


@cache
def _deserializer() -> TypeDeserializer:
    from boto3.dynamodb.types import TypeDeserializer

    return TypeDeserializer()


def serialize(value: Any) -> dict[str, Any]:
    """One value as a DynamoDB attribute value."""
    serialized: dict[str, Any] = _serializer().serialize(value)
    return serialized


def to_item(data: Mapping[str, Any]) -> dict[str, Any]:
    serializer = _serializer()
    return {k: serializer.serialize(v) for k, v in data.items()}


def model_item(model: BaseModel, **extra: Any) -> dict[str, Any]:
    """A model as an item: its JSON fields without the None ones, and `extra`."""
    return to_item(model.model_dump(mode="json", exclude_none=True) | extra)


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    deserializer = _deserializer()
    return {k: deserializer.deserialize(v) for k, v in item.items()}


def expression_values(**values: Any) -> dict[str, Any]:
    """`ExpressionAttributeValues`: each keyword `k` as `:k`."""
    serializer = _serializer()
    return {f":{k}": serializer.serialize(v) for k, v in values.items()}


def cancellation_reasons(exc: ConditionFailed) -> list[dict[str, Any]]:
    """The reasons of a cancelled transaction's items, in order (empty when it was not a transaction)."""
    cause = exc.__cause__
    return cause.response.get("CancellationReasons", []) if isinstance(cause, ClientError) else []


def cancellation_codes(exc: ConditionFailed) -> list[str | None]:
    """The codes of a cancelled transaction's items, in order (empty when it was not a transaction)."""
    return [r.get("Code") for r in cancellation_reasons(exc)]
