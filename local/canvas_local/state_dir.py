"""Persistence for `canvas serve --state-dir DIR`: the embedded stack keeps its tables and buckets in moto's
memory, so this module snapshots them to DIR and loads them back after a restart.

Layout of DIR (one snapshot, replaced whole by each save):

    snapshot/manifest.json                    format version, tables, buckets, counts
    snapshot/tables/<table>.jsonl             one item a line, in DynamoDB JSON (binary as base64)
    snapshot/buckets/<bucket>/objects.jsonl   one object a line: key, body file, content type, metadata
    snapshot/buckets/<bucket>/<sha256>        an object's bytes, named by the hash of its key
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from canvas_core.models.catalog import RunStatus

LOG = logging.getLogger(__name__)

FORMAT_VERSION = 1
SNAPSHOT = "snapshot"
BATCH_SIZE = 25  # BatchWriteItem's limit
MAX_BATCH_ATTEMPTS = 8


class StateDirError(Exception):
    """The state directory cannot be read or written; the message says which and why."""


@dataclass
class SaveReport:
    tables: int = 0
    items: int = 0
    buckets: int = 0
    objects: int = 0
    bytes: int = 0

    def __str__(self) -> str:
        return (
            f"{self.items} items in {self.tables} tables, "
            f"{self.objects} objects ({self.bytes} bytes) in {self.buckets} buckets"
        )


@dataclass
class RestoreReport(SaveReport):
    skipped: list[str] = field(default_factory=list)  # tables and buckets in the snapshot the stack no longer has

    def __str__(self) -> str:
        return super().__str__() + (f"; skipped {', '.join(self.skipped)}" if self.skipped else "")


class StateDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        # The periodic save and the shutdown save may overlap; each must swap in a whole snapshot.
        self._lock = threading.Lock()

    def restore(self, dynamodb: Any, s3: Any, table_names: Iterable[str], bucket_names: Iterable[str]) -> RestoreReport:
        """Load the saved items and objects into the (freshly provisioned, empty) tables and buckets."""
        report = RestoreReport()
        snapshot = self._current_snapshot()
        if snapshot is None:
            return report
        manifest = _read_manifest(snapshot)
        tables, buckets = set(table_names), set(bucket_names)
        try:
            for table, entry in manifest["tables"].items():
                if table not in tables:
                    LOG.warning("state dir: table %s is gone from the stack; its items are not restored", table)
                    report.skipped.append(table)
                    continue
                report.items += _write_items(dynamodb, table, _read_lines(snapshot / entry["file"]))
                report.tables += 1
            for bucket, entry in manifest["buckets"].items():
                if bucket not in buckets:
                    LOG.warning("state dir: bucket %s is gone from the stack; its objects are not restored", bucket)
                    report.skipped.append(bucket)
                    continue
                folder = snapshot / entry["folder"]
                for obj in _read_lines(folder / "objects.jsonl"):
                    body = folder / obj["body"]
                    with body.open("rb") as data:
                        s3.put_object(
                            Bucket=bucket,
                            Key=obj["key"],
                            Body=data,
                            ContentType=obj["content_type"],
                            Metadata=obj["metadata"],
                        )
                    report.objects += 1
                    report.bytes += body.stat().st_size
                report.buckets += 1
        except (ClientError, BotoCoreError, OSError, KeyError, ValueError) as exc:
            raise StateDirError(f"could not restore the state saved in {snapshot}: {exc}") from exc
        return report

    def save(self, dynamodb: Any, s3: Any, table_names: Iterable[str], bucket_names: Iterable[str]) -> SaveReport:
        """Snapshot every item of the tables and every object of the buckets, replacing the previous snapshot."""
        with self._lock:
            self.path.mkdir(parents=True, exist_ok=True)
            self._current_snapshot()  # puts back a snapshot a crashed save left aside, before it is replaced
            for stale in [*self.path.glob(".tmp-*"), *self.path.glob(".old-*")]:  # left by saves that crashed
                shutil.rmtree(stale, ignore_errors=True)
            tmp = self.path / f".tmp-{uuid.uuid4().hex}"
            try:
                report = _write_snapshot(tmp, dynamodb, s3, table_names, bucket_names)
                # Two renames: a crash between them leaves the previous snapshot under .old-*, which
                # _current_snapshot puts back; at no point is there a half-written `snapshot`.
                current, old = self.path / SNAPSHOT, self.path / f".old-{uuid.uuid4().hex}"
                if current.exists():
                    current.rename(old)
                tmp.rename(current)
                shutil.rmtree(old, ignore_errors=True)
            except (ClientError, BotoCoreError, OSError) as exc:
                raise StateDirError(
                    f"could not save state to {self.path}, the previous snapshot is kept: {exc}"
                ) from exc
            finally:
                shutil.rmtree(tmp, ignore_errors=True)  # gone after the swap; half-written if the save failed
            return report

    def _current_snapshot(self) -> Path | None:
        current = self.path / SNAPSHOT
        if not current.is_dir():
            left_aside = max(self.path.glob(".old-*"), key=lambda old: old.stat().st_mtime, default=None)
            if left_aside is None:
                return None
            left_aside.rename(current)
        return current


def runs_left_running(dynamodb: Any, runs_table: str) -> list[str]:
    """Ids of the runs whose status is still `running`: after a restart, no execution is driving them."""
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=runs_table,
        FilterExpression="#status = :running",
        ProjectionExpression="run_id",
        ExpressionAttributeNames={"#status": "status"},
        ExpressionAttributeValues={":running": {"S": RunStatus.RUNNING.value}},
        ConsistentRead=True,
    )
    return [item["run_id"]["S"] for page in pages for item in page["Items"]]


# ---------------------------------------------------------------- snapshot files


def _write_snapshot(
    folder: Path, dynamodb: Any, s3: Any, table_names: Iterable[str], bucket_names: Iterable[str]
) -> SaveReport:
    report = SaveReport()
    manifest: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "saved_at": datetime.now(UTC).isoformat(),
        "tables": {},
        "buckets": {},
    }
    (folder / "tables").mkdir(parents=True)
    for table in table_names:
        # Table and bucket names are limited to [A-Za-z0-9_.-], so they are safe file names.
        file = f"tables/{table}.jsonl"
        count = _write_lines(folder / file, (_map_binary(item, _to_base64) for item in _scan(dynamodb, table)))
        manifest["tables"][table] = {"file": file, "items": count}
        report.tables += 1
        report.items += count
    for bucket in bucket_names:
        objects, size = _save_bucket(s3, bucket, folder / "buckets" / bucket)
        manifest["buckets"][bucket] = {"folder": f"buckets/{bucket}", "objects": objects, "bytes": size}
        report.buckets += 1
        report.objects += objects
        report.bytes += size
    (folder / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return report


def _save_bucket(s3: Any, bucket: str, folder: Path) -> tuple[int, int]:
    folder.mkdir(parents=True)
    count = size = 0
    with (folder / "objects.jsonl").open("w", encoding="utf-8") as manifest:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for listed in page.get("Contents", []):
                key = listed["Key"]
                # Keys may hold slashes, "..", or characters no file system takes: the key lives in the
                # manifest, the body in a file named by the key's hash.
                body = hashlib.sha256(key.encode("utf-8")).hexdigest()
                obj = s3.get_object(Bucket=bucket, Key=key)
                with (folder / body).open("wb") as out:
                    shutil.copyfileobj(obj["Body"], out)
                entry = {"key": key, "body": body, "content_type": obj["ContentType"], "metadata": obj["Metadata"]}
                manifest.write(json.dumps(entry) + "\n")
                count += 1
                size += obj["ContentLength"]
    return count, size


def _read_manifest(snapshot: Path) -> dict[str, Any]:
    try:
        manifest = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
        version = manifest["format_version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateDirError(f"{snapshot} is not a canvas state snapshot: {exc}") from exc
    if version > FORMAT_VERSION:
        raise StateDirError(
            f"{snapshot} was saved in state format {version} by a newer canvas; this one reads up to format "
            f"{FORMAT_VERSION}. Upgrade canvas, or start with another --state-dir."
        )
    return manifest


def _write_lines(file: Path, records: Iterable[dict[str, Any]]) -> int:
    count = 0
    with file.open("w", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps(record) + "\n")
            count += 1
    return count


def _read_lines(file: Path) -> Iterator[dict[str, Any]]:
    with file.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


# ---------------------------------------------------------------- DynamoDB


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        yield from page["Items"]


def _write_items(dynamodb: Any, table: str, items: Iterable[dict[str, Any]]) -> int:
    count, batch = 0, []
    for item in items:
        batch.append({"PutRequest": {"Item": _map_binary(item, base64.b64decode)}})
        if len(batch) == BATCH_SIZE:
            count += _write_batch(dynamodb, table, batch)
            batch = []
    if batch:
        count += _write_batch(dynamodb, table, batch)
    return count


def _write_batch(dynamodb: Any, table: str, batch: list[dict[str, Any]]) -> int:
    requests = {table: batch}
    for attempt in range(MAX_BATCH_ATTEMPTS):
        requests = dynamodb.batch_write_item(RequestItems=requests).get("UnprocessedItems") or {}
        if not requests:
            return len(batch)
        time.sleep(min(0.05 * 2**attempt, 2))  # DynamoDB hands back what it throttled; retry with backoff
    left = len(requests.get(table, []))
    raise StateDirError(f"table {table} left {left} items unwritten after {MAX_BATCH_ATTEMPTS} attempts")


def _map_binary(item: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    """A low-level (typed) item with `convert` applied to its binary values, at any depth: JSON has no bytes,
    so they are stored as base64, as in DynamoDB's own JSON."""
    return {name: _map_binary_value(value, convert) for name, value in item.items()}


def _map_binary_value(attribute: dict[str, Any], convert: Callable[[Any], Any]) -> dict[str, Any]:
    ((kind, value),) = attribute.items()
    match kind:
        case "B":
            value = convert(value)
        case "BS":
            value = [convert(v) for v in value]
        case "M":
            value = _map_binary(value, convert)
        case "L":
            value = [_map_binary_value(v, convert) for v in value]
    return {kind: value}


def _to_base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
