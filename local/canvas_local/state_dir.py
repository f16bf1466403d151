"""Persistence for `canvas serve --state-dir DIR`: the embedded stack keeps its tables and buckets in moto's
memory, and every write moto acknowledges is also written here, before its answer leaves (moto_patch hands each
DynamoDB and S3 write to `items_written` / `objects_written`); the next start loads it all back.

A write is one SQLite transaction: a TransactWriteItems (a run's admission, a block's debit, a settlement) is in the
database whole or not at all, so the ledger adds up after any crash. The database is in WAL mode with
`synchronous=NORMAL`: a committed write survives the process being killed (`kill -9`), as it lives in the operating
system's cache; a power cut can lose the last writes (SQLite's WAL documentation), which a local stack accepts.

Layout of DIR:

    .lock             held (flock) by the one process using DIR, released by the system however that process ends
    state.db          SQLite: `items` (table, key, item in DynamoDB JSON with binary as base64), `objects` (bucket,
                      key, body, size, content type, user metadata), `meta` (the format version)
    bodies/<sha256>   an object's bytes, named by their hash: written before the row that names them, removed once no
                      row does (a crash between the two leaves a file no row names, removed at the next start)
    snapshot/         what canvas wrote before (format 1, a snapshot a minute): imported once into state.db, then
                      renamed snapshot.imported
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from canvas_core.models.catalog import RunStatus
from canvas_local.moto_patch import ItemChange, ObjectChange

LOG = logging.getLogger(__name__)

FORMAT_VERSION = 2
DATABASE = "state.db"
BODIES = "bodies"
SNAPSHOT = "snapshot"  # format 1
BATCH_SIZE = 25  # BatchWriteItem's limit
MAX_BATCH_ATTEMPTS = 8

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    tbl TEXT NOT NULL, key TEXT NOT NULL, item TEXT NOT NULL, PRIMARY KEY (tbl, key)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS objects (
    bucket TEXT NOT NULL, key TEXT NOT NULL, body TEXT NOT NULL, size INTEGER NOT NULL,
    content_type TEXT NOT NULL, metadata TEXT NOT NULL, PRIMARY KEY (bucket, key)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS objects_by_body ON objects (body);
"""


class StateDirError(Exception):
    """The state directory cannot be read or written; the message says which and why."""


@dataclass
class RestoreReport:
    tables: int = 0
    items: int = 0
    buckets: int = 0
    objects: int = 0
    bytes: int = 0
    skipped: list[str] = field(default_factory=list)  # tables and buckets in DIR the stack no longer has

    def __str__(self) -> str:
        return (
            f"{self.items} items in {self.tables} tables, "
            f"{self.objects} objects ({self.bytes} bytes) in {self.buckets} buckets"
        ) + (f"; skipped {', '.join(self.skipped)}" if self.skipped else "")


class StateDir:
    """The state directory: `open`, `restore` into the freshly provisioned stack, then the journal of its writes
    (moto_patch.install_write_journal), `close` at stop."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._db: sqlite3.Connection | None = None
        self._held: Any = None  # DIR/.lock, open while this process uses DIR
        # DynamoDB's and S3's writes are journaled from their own threads, each under its service's lock.
        self._lock = threading.Lock()

    # -------------------------------------------------- lifecycle

    def open(self) -> None:
        """Create or open DIR's database; files no row names (a crash between a body and its row) are removed."""
        if self._db is not None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._hold()
            (self.path / BODIES).mkdir(exist_ok=True)
            db = sqlite3.connect(self.path / DATABASE, isolation_level=None, check_same_thread=False)
        except (OSError, sqlite3.Error) as exc:
            self._release()
            raise StateDirError(f"could not open the state in {self.path}: {exc}") from exc
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            row = db.execute("SELECT value FROM meta WHERE name = 'format_version'").fetchone()
            if row is None:
                db.execute("INSERT INTO meta VALUES ('format_version', ?)", (str(FORMAT_VERSION),))
            elif int(row[0]) > FORMAT_VERSION:
                raise StateDirError(_newer_format(self.path / DATABASE, int(row[0])))
            named = {body for (body,) in db.execute("SELECT DISTINCT body FROM objects")}
        except sqlite3.DatabaseError as exc:
            db.close()
            self._release()
            raise StateDirError(f"{self.path / DATABASE} is not a canvas state database: {exc}") from exc
        except StateDirError:
            db.close()
            self._release()
            raise
        for body in (self.path / BODIES).iterdir():
            if body.name not in named:
                body.unlink(missing_ok=True)
        self._db = db

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
            self._release()

    def _hold(self) -> None:
        """DIR for this process alone: two processes journaling to one DIR would each restore what the other
        wrote over. The lock goes with the process, however it ends (a `kill -9` too)."""
        held = (self.path / ".lock").open("a+")
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            held.seek(0)
            owner = held.read().strip() or "another process"
            held.close()
            raise StateDirError(
                f"{self.path} is in use by {owner}: one canvas serve at a time uses a --state-dir"
            ) from None
        held.seek(0)
        held.truncate()
        held.write(f"canvas serve (pid {os.getpid()})")
        held.flush()
        self._held = held

    def _release(self) -> None:
        if self._held is not None:
            self._held.close()  # closing the file releases the lock
            self._held = None

    # -------------------------------------------------- the journal (moto_patch.WriteJournal)

    def items_written(self, changes: list[ItemChange]) -> None:
        if not changes:
            return
        with self._lock, self._transaction("items") as db:
            for change in changes:
                if change.item is None:
                    db.execute("DELETE FROM items WHERE tbl = ? AND key = ?", (change.table, change.key))
                else:
                    db.execute(
                        "INSERT OR REPLACE INTO items VALUES (?, ?, ?)",
                        (change.table, change.key, json.dumps(change.item, separators=(",", ":"))),
                    )

    def objects_written(self, changes: list[ObjectChange]) -> None:
        if not changes:
            return
        with self._lock:
            rows = [(change, self._write_body(change.body) if change.body is not None else None) for change in changes]
            replaced: set[str] = set()
            with self._transaction("objects") as db:
                for change, body in rows:
                    old = db.execute(
                        "SELECT body FROM objects WHERE bucket = ? AND key = ?", (change.bucket, change.key)
                    ).fetchone()
                    if old is not None:
                        replaced.add(old[0])
                    if body is None:
                        db.execute("DELETE FROM objects WHERE bucket = ? AND key = ?", (change.bucket, change.key))
                        continue
                    db.execute(
                        "INSERT OR REPLACE INTO objects VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            change.bucket,
                            change.key,
                            body,
                            len(change.body or b""),
                            change.content_type,
                            json.dumps(change.metadata, sort_keys=True),
                        ),
                    )
            self._remove_unnamed(replaced)

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        db = self._db
        if db is None:
            raise StateDirError(f"the state in {self.path} is closed")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise StateDirError(f"could not write {what} to {self.path / DATABASE}: {exc}") from exc

    def _write_body(self, data: bytes) -> str:
        """The body's file name, its bytes written first (atomically: a crash leaves the file whole or absent)."""
        name = hashlib.sha256(data).hexdigest()
        target = self.path / BODIES / name
        if not target.exists():
            partial = self.path / BODIES / f".partial-{uuid.uuid4().hex}"
            try:
                partial.write_bytes(data)
                os.replace(partial, target)
            except OSError as exc:
                partial.unlink(missing_ok=True)
                raise StateDirError(f"could not write an object's body to {self.path / BODIES}: {exc}") from exc
        return name

    def _remove_unnamed(self, bodies: set[str]) -> None:
        assert self._db is not None
        for body in bodies:
            if self._db.execute("SELECT 1 FROM objects WHERE body = ? LIMIT 1", (body,)).fetchone() is None:
                (self.path / BODIES / body).unlink(missing_ok=True)

    # -------------------------------------------------- restore

    def restore(self, dynamodb: Any, s3: Any, table_names: Iterable[str], bucket_names: Iterable[str]) -> RestoreReport:
        """Load the stored items and objects into the (freshly provisioned, empty) tables and buckets. A format-1
        snapshot is imported first when the database holds nothing yet."""
        if self._db is None:
            self.open()
        assert self._db is not None
        tables, buckets = set(table_names), set(bucket_names)
        if (self.path / SNAPSHOT).is_dir() and not self._holds_anything():
            return self._import_snapshot(dynamodb, s3, tables, buckets)
        report = RestoreReport()
        try:
            for (table,) in self._db.execute("SELECT DISTINCT tbl FROM items").fetchall():
                if table not in tables:
                    LOG.warning("state dir: table %s is gone from the stack; its items are not restored", table)
                    report.skipped.append(table)
                    continue
                items = self._db.execute("SELECT item FROM items WHERE tbl = ?", (table,))
                report.items += _write_items(dynamodb, table, (json.loads(item) for (item,) in items))
                report.tables += 1
            for (bucket,) in self._db.execute("SELECT DISTINCT bucket FROM objects").fetchall():
                if bucket not in buckets:
                    LOG.warning("state dir: bucket %s is gone from the stack; its objects are not restored", bucket)
                    report.skipped.append(bucket)
                    continue
                rows = self._db.execute(
                    "SELECT key, body, size, content_type, metadata FROM objects WHERE bucket = ?", (bucket,)
                ).fetchall()
                for key, body, size, content_type, metadata in rows:
                    with (self.path / BODIES / body).open("rb") as data:
                        s3.put_object(
                            Bucket=bucket, Key=key, Body=data, ContentType=content_type, Metadata=json.loads(metadata)
                        )
                    report.objects += 1
                    report.bytes += size
                report.buckets += 1
        except (ClientError, BotoCoreError, OSError, sqlite3.Error, KeyError, ValueError) as exc:
            raise StateDirError(f"could not restore the state saved in {self.path}: {exc}") from exc
        return report

    def _holds_anything(self) -> bool:
        assert self._db is not None
        return any(
            self._db.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() is not None for table in ("items", "objects")
        )

    def _import_snapshot(self, dynamodb: Any, s3: Any, tables: set[str], buckets: set[str]) -> RestoreReport:
        """A format-1 snapshot: loaded into the stack as before, then every item and object written to the database,
        and the snapshot renamed so that the next start reads the database alone."""
        snapshot = self.path / SNAPSHOT
        report = _restore_snapshot(snapshot, dynamodb, s3, tables, buckets)
        try:
            for table in sorted(tables):
                key = [k["AttributeName"] for k in dynamodb.describe_table(TableName=table)["Table"]["KeySchema"]]
                self.items_written(
                    [
                        ItemChange(table, json.dumps({name: item[name] for name in key}, sort_keys=True), item)
                        for item in _scan(dynamodb, table)
                    ]
                )
            for bucket in sorted(buckets):
                self.objects_written(list(_objects(s3, bucket)))
            snapshot.rename(self.path / f"{SNAPSHOT}.imported")
        except (ClientError, BotoCoreError, OSError) as exc:
            raise StateDirError(f"could not import the snapshot in {snapshot}: {exc}") from exc
        LOG.info("state dir: imported the snapshot of format 1 in %s into %s", snapshot, DATABASE)
        return report


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


def _newer_format(where: Path, version: int) -> str:
    return (
        f"{where} was saved in state format {version} by a newer canvas; this one reads up to format "
        f"{FORMAT_VERSION}. Upgrade canvas, or start with another --state-dir."
    )


# ---------------------------------------------------------------- format 1: a snapshot a minute


def _restore_snapshot(snapshot: Path, dynamodb: Any, s3: Any, tables: set[str], buckets: set[str]) -> RestoreReport:
    report = RestoreReport()
    manifest = _read_manifest(snapshot)
    try:
        for table, entry in manifest["tables"].items():
            if table not in tables:
                LOG.warning("state dir: table %s is gone from the stack; its items are not restored", table)
                report.skipped.append(table)
                continue
            items = (_map_binary(item, base64.b64decode) for item in _read_lines(snapshot / entry["file"]))
            report.items += _write_items(dynamodb, table, items, binary=True)
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


def _read_manifest(snapshot: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((snapshot / "manifest.json").read_text(encoding="utf-8"))
        version = manifest["format_version"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise StateDirError(f"{snapshot} is not a canvas state snapshot: {exc}") from exc
    if version > 1:
        raise StateDirError(_newer_format(snapshot, version))
    return manifest


def _read_lines(file: Path) -> Iterator[dict[str, Any]]:
    with file.open(encoding="utf-8") as lines:
        for line in lines:
            if line.strip():
                yield json.loads(line)


def _objects(s3: Any, bucket: str) -> Iterator[ObjectChange]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for listed in page.get("Contents", []):
            obj = s3.get_object(Bucket=bucket, Key=listed["Key"])
            yield ObjectChange(bucket, listed["Key"], obj["Body"].read(), obj["ContentType"], obj["Metadata"])


# ---------------------------------------------------------------- DynamoDB


def _scan(dynamodb: Any, table: str) -> Iterator[dict[str, Any]]:
    """Every item, in DynamoDB JSON with binary as base64 (as the journal holds them)."""
    for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True):
        for item in page["Items"]:
            yield _map_binary(item, _to_base64)


def _write_items(dynamodb: Any, table: str, items: Iterable[dict[str, Any]], binary: bool = False) -> int:
    """Items in DynamoDB JSON, written in batches; binary values are base64 unless `binary` (already bytes)."""
    count, batch = 0, []
    for item in items:
        batch.append({"PutRequest": {"Item": item if binary else _map_binary(item, base64.b64decode)}})
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
