"""What the DynamoDB adapters (the store, the account store, the webhook store) share: items to and from
DynamoDB's typed attributes, expression values, and `dynamodb_errors`, which turns a ClientError into a domain
error (`ConditionFailed` for a failed condition, StorageError otherwise)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError
from pydantic import BaseModel

from canvas_core.errors import StorageError

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()


class ConditionFailed(Exception):
    """A conditional write found the item in another state than expected."""


@contextmanager
def dynamodb_errors() -> Iterator[None]:
    try:
        yield
    except ClientError as exc:
        code = exc.response.get("Error", {}).get("Code", "")
        reasons = [r.get("Code") for r in exc.response.get("CancellationReasons", [])]
        if code == "ConditionalCheckFailedException" or "ConditionalCheckFailed" in reasons:
            raise ConditionFailed(str(exc)) from exc
        raise StorageError(f"DynamoDB {code}: {exc.response.get('Error', {}).get('Message', '')}") from exc


def serialize(value: Any) -> dict[str, Any]:
    """One value as a DynamoDB attribute value."""
    serialized: dict[str, Any] = _serializer.serialize(value)
    return serialized


def to_item(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in data.items()}


def model_item(model: BaseModel, **extra: Any) -> dict[str, Any]:
    """A model as an item: its JSON fields without the None ones, and `extra`."""
    return to_item(model.model_dump(mode="json", exclude_none=True) | extra)


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _deserializer.deserialize(v) for k, v in item.items()}


def expression_values(**values: Any) -> dict[str, Any]:
    """`ExpressionAttributeValues`: each keyword `k` as `:k`."""
    return {f":{k}": _serializer.serialize(v) for k, v in values.items()}


def cancellation_reasons(exc: ConditionFailed) -> list[dict[str, Any]]:
    """The reasons of a cancelled transaction's items, in order (empty when it was not a transaction)."""
    cause = exc.__cause__
    return cause.response.get("CancellationReasons", []) if isinstance(cause, ClientError) else []


def cancellation_codes(exc: ConditionFailed) -> list[str | None]:
    """The codes of a cancelled transaction's items, in order (empty when it was not a transaction)."""
    return [r.get("Code") for r in cancellation_reasons(exc)]
