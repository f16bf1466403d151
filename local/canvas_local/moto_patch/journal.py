"""State dir: with `--state-dir`, every DynamoDB and S3 write is handed to a journal (state_dir.py) before its
answer leaves moto: the items a request changed, read back from the backend once it has written them (a
transaction's items together), and the objects it put or deleted with their content type and metadata. moto has no
hook for a write, so S3's `put_object` and `delete_object` are wrapped to note what a request wrote, and the
service locks (locks.py) hand each answered request's writes here."""

from __future__ import annotations

import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from moto.core.responses import BaseResponse
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DynamoType
from moto.s3.models import FakeKey, S3Backend


@dataclass(frozen=True)
class ItemChange:
    """An item as a write left it: `item` in DynamoDB JSON (binary as base64), None when it was deleted. `key` is
    the item's key attributes as sorted JSON, the same for every write of the item."""

    table: str
    key: str
    item: dict[str, Any] | None


@dataclass(frozen=True)
class ObjectChange:
    """An object as a write left it: its bytes, content type and user metadata, or `body` None when deleted."""

    bucket: str
    key: str
    body: bytes | None
    content_type: str = "binary/octet-stream"
    metadata: dict[str, str] = field(default_factory=dict)


class WriteJournal(Protocol):
    def items_written(self, changes: list[ItemChange]) -> None: ...

    def objects_written(self, changes: list[ObjectChange]) -> None: ...


_journal: WriteJournal | None = None
_ORIGINAL_S3_PUT = S3Backend.put_object
_ORIGINAL_S3_DELETE = S3Backend.delete_object
# The (bucket, key) pairs the S3 request being served in this thread wrote: journaled once it has set their metadata.
_s3_written = threading.local()
_USER_METADATA = "x-amz-meta-"


def install_write_journal(journal: WriteJournal) -> None:
    """From here on every acknowledged DynamoDB and S3 write reaches `journal` first (needs the backend locks)."""
    global _journal
    _journal = journal
    S3Backend.put_object = _journaled_put_object  # type: ignore[method-assign]
    S3Backend.delete_object = _journaled_delete_object  # type: ignore[method-assign]


def uninstall_write_journal() -> None:
    global _journal
    S3Backend.put_object = _ORIGINAL_S3_PUT  # type: ignore[method-assign]
    S3Backend.delete_object = _ORIGINAL_S3_DELETE  # type: ignore[method-assign]
    _journal = None


def journal_items(handler: BaseResponse) -> None:
    """The items a successful DynamoDB request wrote, to the journal (when there is one)."""
    journal = _journal
    if journal is not None:
        changes = _items_changed(handler)
        if changes:
            journal.items_written(changes)


def _items_changed(handler: BaseResponse) -> list[ItemChange]:
    """Every item a successful DynamoDB write request named, as the backend now holds it."""
    body: dict[str, Any] = getattr(handler, "body", None) or {}
    named: list[tuple[str, dict[str, Any]]] = []  # (table, the item or its key)
    match handler._get_action():
        case "PutItem":
            named.append((body["TableName"], body["Item"]))
        case "UpdateItem" | "DeleteItem":
            named.append((body["TableName"], body["Key"]))
        case "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        named.append((table, request["PutRequest"]["Item"]))
                    elif "DeleteRequest" in request:
                        named.append((table, request["DeleteRequest"]["Key"]))
        case "TransactWriteItems":
            for entry in body["TransactItems"]:
                for kind, op in entry.items():
                    if kind in ("Put", "Update", "Delete"):
                        named.append((op["TableName"], op["Item"] if kind == "Put" else op["Key"]))
        case _:
            return []
    backend: DynamoDBBackend = handler.dynamodb_backend  # type: ignore[attr-defined]
    changes = []
    for table_name, attributes in named:
        table = backend.get_table(table_name)
        key = {name: attributes[name] for name in (table.hash_key_attr, table.range_key_attr) if name}
        item = backend.get_item(table_name, key)
        changes.append(
            ItemChange(
                table_name,
                _json_text({name: DynamoType(value).to_json() for name, value in key.items()}),
                json.loads(_json_text(item.to_json()["Attributes"])) if item is not None else None,
            )
        )
    return changes


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_base64_bytes)


def _base64_bytes(value: Any) -> str:
    if isinstance(value, bytes):  # a binary value nested in a map or list: DynamoDB JSON holds it as base64
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not DynamoDB JSON")


def _journaled_put_object(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> FakeKey:
    key = _ORIGINAL_S3_PUT(self, bucket_name, key_name, *args, **kwargs)
    _note_s3_write(bucket_name, key_name)
    return key


def _journaled_delete_object(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
    answer = _ORIGINAL_S3_DELETE(self, bucket_name, key_name, *args, **kwargs)
    _note_s3_write(bucket_name, key_name)
    return answer


def _note_s3_write(bucket: str, key: str) -> None:
    written: dict[tuple[str, str], None] | None = getattr(_s3_written, "keys", None)
    if written is None:
        written = _s3_written.keys = {}
    written[(bucket, key)] = None


def journal_objects(backend: S3Backend) -> None:
    """The objects the S3 request just served wrote, to the journal (when there is one)."""
    written: dict[tuple[str, str], None] | None = getattr(_s3_written, "keys", None)
    journal = _journal
    if not written:
        return
    _s3_written.keys = None
    if journal is None:
        return
    changes = []
    for bucket, key in written:
        obj = backend.get_object(bucket, key)
        if obj is None:
            changes.append(ObjectChange(bucket, key, None))
            continue
        metadata = obj.metadata  # case-insensitive: moto keeps its names lowercased
        changes.append(
            ObjectChange(
                bucket,
                key,
                obj.value,
                str(metadata.get("Content-Type") or "binary/octet-stream"),
                {
                    name[len(_USER_METADATA) :]: str(value)
                    for name, value in metadata.items()
                    if name.lower().startswith(_USER_METADATA)
                },
            )
        )
    journal.objects_written(changes)
