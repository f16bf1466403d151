"""canvas_local.state_dir: every write the stack acknowledges is in the state directory when its answer comes back
(a transaction whole, or nothing of it), the next start finds it all, a crash leaves nothing unreadable behind, the
snapshot of the format before is imported, and the runs a restart left `running` are found."""

from __future__ import annotations

import dataclasses
import json
import logging
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from canvas_core.adapters.store import Store
from canvas_core.models.items import RunItem
from canvas_core.settings import ServiceSettings
from canvas_local import moto_patch, state_dir
from canvas_local.state_dir import FORMAT_VERSION, RestoreReport, StateDir, StateDirError
from tests.support import function_environment

pytestmark = [pytest.mark.unit, pytest.mark.usefixtures("model_env")]

TABLE = "CanvasesTable"
BUCKET = "artifacts"
RUNS_TABLE = "RunsTable"

# Keys a user's uploads and a run's artifacts may have: slashes, "..", unicode, URL-special characters.
OBJECTS = {
    "runs/r-1/report.docx": (
        bytes(range(256)) * 40,
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
        {"run-id": "r-1", "block-id": "write_report"},
    ),
    "uploads/ünïcödé/文档 final (1).md": ("# Résumé\n\n✓ done\n".encode(), "text/markdown; charset=utf-8", {}),
    "odd//keys/../with ?&%+=#chars.txt": (b"", "text/plain", {"origin": "test"}),
}


@dataclasses.dataclass
class Stack:
    """The clients of one embedded stack's moto, with what a user would read back from it."""

    dynamodb: Any
    s3: Any

    def items(self, table: str = TABLE) -> list[dict[str, Any]]:
        pages = self.dynamodb.get_paginator("scan").paginate(TableName=table)
        items = [item for page in pages for item in page["Items"]]
        return sorted(items, key=lambda item: (item["canvas_id"]["S"], item["item_id"]["S"]))

    def objects(self, bucket: str = BUCKET) -> dict[str, tuple[bytes, str, dict[str, str]]]:
        found = {}
        for page in self.s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            for listed in page.get("Contents", []):
                obj = self.s3.get_object(Bucket=bucket, Key=listed["Key"])
                found[listed["Key"]] = (obj["Body"].read(), obj["ContentType"], obj["Metadata"])
        return found

    def put_objects(self, objects: dict[str, tuple[bytes, str, dict[str, str]]]) -> None:
        for key, (body, content_type, metadata) in objects.items():
            self.s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType=content_type, Metadata=metadata)

    def restore(self, state: StateDir) -> RestoreReport:
        return state.restore(self.dynamodb, self.s3, [TABLE], [BUCKET])


@contextmanager
def embedded_stack(journal: StateDir | None = None) -> Iterator[Stack]:
    """A fresh stack as `canvas serve` provisions it: empty tables and bucket, in memory until it stops; with a
    journal, each write from the first one on is written to it as the stack writes it."""
    with mock_aws(), moto_patch.backend_locks():
        stack = Stack(boto3.client("dynamodb", region_name="us-east-1"), boto3.client("s3", region_name="us-east-1"))
        stack.dynamodb.create_table(
            TableName=TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[
                {"AttributeName": "canvas_id", "AttributeType": "S"},
                {"AttributeName": "item_id", "AttributeType": "S"},
            ],
            KeySchema=[
                {"AttributeName": "canvas_id", "KeyType": "HASH"},
                {"AttributeName": "item_id", "KeyType": "RANGE"},
            ],
        )
        stack.s3.create_bucket(Bucket=BUCKET)
        if journal is None:
            yield stack
            return
        journal.open()
        moto_patch.install_write_journal(journal)
        try:
            yield stack
        finally:
            moto_patch.uninstall_write_journal()
            journal.close()


def canvas_item(i: int, title: str = "Block") -> dict[str, Any]:
    """An item with every kind of DynamoDB attribute, binary ones nested too."""
    return {
        "canvas_id": {"S": "canvas-a" if i % 2 else "canvas-b"},
        "item_id": {"S": f"NODE#{i:03}"},
        "title": {"S": f"{title} {i} — ünïcode ✓"},
        "credits": {"N": str(i)},
        "cost": {"N": "-12345678901234567890.125"},
        "thumbnail": {"B": bytes([i, 0, 255, 128, 10])},
        "config": {"M": {"seed": {"B": b"\x00\xff"}, "draft": {"BOOL": True}, "parent": {"NULL": True}}},
        "steps": {"L": [{"S": "plan"}, {"N": "2.5"}, {"B": b"\x01\x02"}, {"M": {"ok": {"BOOL": False}}}]},
        "tags": {"SS": ["research", "ünïcode"]},
        "scores": {"NS": ["1", "2.5", "-3"]},
        "chunks": {"BS": [b"\x00", b"\xfe\xff", bytes([i])]},
    }


def put_items(stack: Stack, count: int, title: str = "Block") -> None:
    for i in range(count):
        stack.dynamodb.put_item(TableName=TABLE, Item=canvas_item(i, title))


# ---------------------------------------------------------------- every write, as it is acknowledged


def test_a_restart_finds_every_item_and_object_as_written(tmp_path: Path) -> None:
    # Given a stack journaling to a state dir: 40 items with every kind of attribute, objects with awkward keys
    state = StateDir(tmp_path / "state")
    with embedded_stack(state) as first:
        put_items(first, 40)
        first.put_objects(OBJECTS)
        written_items, written_objects = first.items(), first.objects()
        # (the process ends here without any save: nothing is written at stop)

    # When a new stack starts, empty, and restores
    with embedded_stack() as second:
        restored = second.restore(StateDir(tmp_path / "state"))

        # Then it holds exactly what was written
        assert second.items() == written_items
        assert second.objects() == written_objects == OBJECTS
    size = sum(len(body) for body, _, _ in OBJECTS.values())
    assert restored == RestoreReport(tables=1, items=40, buckets=1, objects=3, bytes=size)
    assert str(restored) == f"40 items in 1 tables, 3 objects ({size} bytes) in 1 buckets"


def test_updates_deletes_batches_and_transactions_are_journaled_as_the_table_holds_them(tmp_path: Path) -> None:
    # Given a journaled stack
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        put_items(first, 6)
        # When items are updated, deleted, written in a batch and in a transaction, and objects replaced and deleted
        first.dynamodb.update_item(
            TableName=TABLE,
            Key={"canvas_id": {"S": "canvas-b"}, "item_id": {"S": "NODE#000"}},
            UpdateExpression="SET credits = credits + :one REMOVE thumbnail",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        first.dynamodb.delete_item(TableName=TABLE, Key={"canvas_id": {"S": "canvas-a"}, "item_id": {"S": "NODE#001"}})
        first.dynamodb.batch_write_item(
            RequestItems={
                TABLE: [
                    {"PutRequest": {"Item": canvas_item(10, "Batched")}},
                    {"DeleteRequest": {"Key": {"canvas_id": {"S": "canvas-a"}, "item_id": {"S": "NODE#003"}}}},
                ]
            }
        )
        first.dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": canvas_item(11, "Transacted")}},
                {
                    "Update": {
                        "TableName": TABLE,
                        "Key": {"canvas_id": {"S": "canvas-b"}, "item_id": {"S": "NODE#002"}},
                        "UpdateExpression": "SET title = :t",
                        "ExpressionAttributeValues": {":t": {"S": "Renamed"}},
                    }
                },
                {"Delete": {"TableName": TABLE, "Key": {"canvas_id": {"S": "canvas-a"}, "item_id": {"S": "NODE#005"}}}},
            ]
        )
        first.put_objects(OBJECTS)
        first.s3.put_object(Bucket=BUCKET, Key="runs/r-1/report.docx", Body=b"second version", ContentType="text/plain")
        first.s3.delete_object(Bucket=BUCKET, Key="odd//keys/../with ?&%+=#chars.txt")
        written_items, written_objects = first.items(), first.objects()

    # Then a restart finds the tables and the bucket as they were, and no body file outlives its object
    with embedded_stack() as second:
        second.restore(StateDir(tmp_path))
        assert second.items() == written_items
        assert second.objects() == written_objects
    assert {item["item_id"]["S"] for item in written_items} == {f"NODE#{i:03}" for i in (0, 2, 4, 10, 11)}
    assert len(list((tmp_path / state_dir.BODIES).iterdir())) == 2


def test_a_cancelled_transaction_leaves_the_journal_as_it_was(tmp_path: Path) -> None:
    # Given a journaled stack with one item
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        put_items(first, 1)
        before = sqlite3.connect(tmp_path / state_dir.DATABASE).execute("SELECT tbl, key, item FROM items").fetchall()

        # When a transaction's condition fails
        with pytest.raises(ClientError, match="TransactionCanceled"):
            first.dynamodb.transact_write_items(
                TransactItems=[
                    {"Put": {"TableName": TABLE, "Item": canvas_item(7)}},
                    {
                        "Update": {
                            "TableName": TABLE,
                            "Key": {"canvas_id": {"S": "canvas-b"}, "item_id": {"S": "NODE#000"}},
                            "UpdateExpression": "SET credits = :zero",
                            "ConditionExpression": "credits > :big",
                            "ExpressionAttributeValues": {":zero": {"N": "0"}, ":big": {"N": "100"}},
                        }
                    },
                ]
            )

        # Then the journal holds what it held
        after = sqlite3.connect(tmp_path / state_dir.DATABASE).execute("SELECT tbl, key, item FROM items").fetchall()
        assert after == before
        assert len(after) == 1


def test_a_write_is_in_the_database_when_its_call_returns(tmp_path: Path) -> None:
    # Given a journaled stack
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        # When an item is put and an object written
        first.dynamodb.put_item(TableName=TABLE, Item=canvas_item(3))
        first.s3.put_object(Bucket=BUCKET, Key="a/b.txt", Body=b"hello", Metadata={"run-id": "r-9"})

        # Then another connection (another process, after a crash) reads both already
        db = sqlite3.connect(tmp_path / state_dir.DATABASE)
        ((key, item),) = db.execute("SELECT key, item FROM items WHERE tbl = ?", (TABLE,)).fetchall()
        ((body, content_type, metadata),) = db.execute(
            "SELECT body, content_type, metadata FROM objects WHERE bucket = ? AND key = 'a/b.txt'", (BUCKET,)
        ).fetchall()
    assert json.loads(key) == {"canvas_id": {"S": "canvas-a"}, "item_id": {"S": "NODE#003"}}
    assert json.loads(item)["title"] == {"S": "Block 3 — ünïcode ✓"}
    assert (tmp_path / state_dir.BODIES / body).read_bytes() == b"hello"
    assert (content_type, json.loads(metadata)) == ("binary/octet-stream", {"run-id": "r-9"})


def test_a_body_whose_row_a_crash_never_wrote_is_removed_at_the_next_start(tmp_path: Path) -> None:
    # Given a state dir with an object, and body files a crash left without a row (a whole one, a partial one)
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        first.s3.put_object(Bucket=BUCKET, Key="kept.txt", Body=b"kept")
    (tmp_path / state_dir.BODIES / ("0" * 64)).write_bytes(b"orphan")
    (tmp_path / state_dir.BODIES / ".partial-1234").write_bytes(b"half")

    # When the state dir is opened again
    again = StateDir(tmp_path)
    again.open()
    again.close()

    # Then only the named body is left
    assert [body.read_bytes() for body in (tmp_path / state_dir.BODIES).iterdir()] == [b"kept"]


# ---------------------------------------------------------------- the snapshot of format 1


def write_format_1_snapshot(folder: Path, items: list[dict[str, Any]], objects: dict[str, bytes]) -> None:
    """A snapshot as canvas wrote it before the journal: items as JSON lines (binary as base64), bodies by key hash."""
    import base64
    import hashlib

    def b64(attribute: dict[str, Any]) -> dict[str, Any]:
        ((kind, value),) = attribute.items()
        if kind == "B":
            return {kind: base64.b64encode(value).decode()}
        if kind == "BS":
            return {kind: [base64.b64encode(v).decode() for v in value]}
        if kind == "M":
            return {kind: {n: b64(v) for n, v in value.items()}}
        if kind == "L":
            return {kind: [b64(v) for v in value]}
        return attribute

    (folder / "tables").mkdir(parents=True)
    (folder / "buckets" / BUCKET).mkdir(parents=True)
    lines = [json.dumps({name: b64(value) for name, value in item.items()}) for item in items]
    (folder / "tables" / f"{TABLE}.jsonl").write_text("\n".join(lines) + "\n")
    entries = []
    for key, body in objects.items():
        name = hashlib.sha256(key.encode()).hexdigest()
        (folder / "buckets" / BUCKET / name).write_bytes(body)
        entries.append(json.dumps({"key": key, "body": name, "content_type": "text/plain", "metadata": {"a": "b"}}))
    (folder / "buckets" / BUCKET / "objects.jsonl").write_text("\n".join(entries) + "\n")
    manifest = {
        "format_version": 1,
        "tables": {TABLE: {"file": f"tables/{TABLE}.jsonl", "items": len(items)}},
        "buckets": {BUCKET: {"folder": f"buckets/{BUCKET}", "objects": len(objects)}},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest))


def test_a_format_1_snapshot_is_imported_once_and_then_read_from_the_database(tmp_path: Path) -> None:
    # Given a state dir holding a snapshot of the format before
    items = [canvas_item(i) for i in range(30)]
    write_format_1_snapshot(tmp_path / "snapshot", items, {"x/y.txt": b"why", "z.txt": b""})

    # When a stack starts on it, and a second one after it
    with embedded_stack() as first:
        imported = first.restore(StateDir(tmp_path))
        first_items, first_objects = first.items(), first.objects()
    with embedded_stack() as second:
        restored = second.restore(StateDir(tmp_path))
        second_items, second_objects = second.items(), second.objects()

    # Then both find every item and object, the second from the database, the snapshot set aside
    assert (imported.items, imported.objects) == (restored.items, restored.objects) == (30, 2)
    assert len(first_items) == 30
    assert second_items == first_items
    assert (
        second_objects
        == first_objects
        == {"x/y.txt": (b"why", "text/plain", {"a": "b"}), "z.txt": (b"", "text/plain", {"a": "b"})}
    )
    assert not (tmp_path / "snapshot").exists()
    assert (tmp_path / "snapshot.imported" / "manifest.json").is_file()


# ---------------------------------------------------------------- what restore refuses or skips


def test_a_state_dir_from_a_newer_format_is_refused(tmp_path: Path) -> None:
    # Given a state database written by a newer canvas
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        put_items(first, 2)
    db = sqlite3.connect(tmp_path / state_dir.DATABASE)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE name = 'format_version'", (str(FORMAT_VERSION + 1),))
    db.close()

    # When a stack restores it, Then it is refused and nothing is restored
    with embedded_stack() as second:
        with pytest.raises(StateDirError, match=f"state format {FORMAT_VERSION + 1} by a newer canvas"):
            second.restore(StateDir(tmp_path))
        assert second.items() == []


def test_a_state_database_that_is_not_one_says_so(tmp_path: Path) -> None:
    # Given a state dir whose database file holds something else
    (tmp_path / state_dir.DATABASE).write_bytes(b"not a database, " * 200)

    # When it is opened, Then the error names the file
    with pytest.raises(StateDirError, match=r"state\.db is not a canvas state database"):
        StateDir(tmp_path).open()


def test_a_state_dir_in_use_by_another_stack_is_refused_until_it_is_let_go(tmp_path: Path) -> None:
    # Given a state dir one stack has open
    first = StateDir(tmp_path)
    first.open()
    try:
        # When another opens it, Then it is refused, naming the process that holds it
        with pytest.raises(StateDirError, match=r"is in use by canvas serve \(pid \d+\)"):
            StateDir(tmp_path).open()
    finally:
        first.close()

    # And once the first has let it go, it opens
    second = StateDir(tmp_path)
    second.open()
    second.close()


@pytest.mark.parametrize("folder", ["never-created", "."])
def test_a_missing_or_empty_state_dir_restores_nothing(tmp_path: Path, folder: str) -> None:
    # Given a state dir that does not exist, or is empty
    state = StateDir(tmp_path / folder)

    # When a stack restores it
    with embedded_stack() as stack:
        report = stack.restore(state)

        # Then the stack stays empty
        assert report == RestoreReport()
        assert stack.items() == []
        assert stack.objects() == {}
    state.close()


def test_tables_and_buckets_the_stack_no_longer_has_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a state dir holding a table and a bucket that a later template dropped
    state = StateDir(tmp_path)
    with embedded_stack(state) as first:
        put_items(first, 3)
        first.s3.create_bucket(Bucket="retired-bucket")
        first.s3.put_object(Bucket="retired-bucket", Key="old.txt", Body=b"old")
        first.dynamodb.create_table(
            TableName="RetiredTable",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        first.dynamodb.put_item(TableName="RetiredTable", Item={"id": {"S": "gone"}})

    # When a stack without them restores
    with embedded_stack() as second, caplog.at_level(logging.WARNING, logger=state_dir.__name__):
        report = second.restore(StateDir(tmp_path))

        # Then the rest is restored, and the log says what was left out
        assert len(second.items()) == 3
    assert report.skipped == ["RetiredTable", "retired-bucket"]
    assert str(report).endswith("; skipped RetiredTable, retired-bucket")
    assert "table RetiredTable is gone from the stack" in caplog.text
    assert "bucket retired-bucket is gone from the stack" in caplog.text


# ---------------------------------------------------------------- throttled writes


class ThrottlingDynamoDB:
    """A DynamoDB client that hands back part of a batch as UnprocessedItems, every other call or always."""

    def __init__(self, dynamodb: Any, always: bool = False) -> None:
        self._dynamodb = dynamodb
        self._always = always
        self._calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._dynamodb, name)

    def batch_write_item(self, RequestItems: dict[str, Any]) -> dict[str, Any]:
        self._calls += 1
        ((table, requests),) = RequestItems.items()
        if self._always or self._calls % 2:
            half = len(requests) // 2
            if half:
                self._dynamodb.batch_write_item(RequestItems={table: requests[:half]})
            return {"UnprocessedItems": {table: requests[half:]}}
        return self._dynamodb.batch_write_item(RequestItems=RequestItems)


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_dir.time, "sleep", lambda seconds: None)


@pytest.mark.usefixtures("no_backoff")
def test_items_dynamodb_hands_back_unprocessed_are_written_again(tmp_path: Path) -> None:
    # Given a state dir of 30 items
    with embedded_stack(StateDir(tmp_path)) as first:
        put_items(first, 30)
        saved_items = first.items()
    state = StateDir(tmp_path)

    # When a stack whose DynamoDB throttles part of each batch restores it
    with embedded_stack() as second:
        report = state.restore(ThrottlingDynamoDB(second.dynamodb), second.s3, [TABLE], [BUCKET])

        # Then every item is there
        assert report.items == 30
        assert second.items() == saved_items


@pytest.mark.usefixtures("no_backoff")
def test_items_dynamodb_keeps_handing_back_fail_the_restore(tmp_path: Path) -> None:
    # Given a state dir, and a DynamoDB that never takes a whole batch
    with embedded_stack(StateDir(tmp_path)) as first:
        put_items(first, 3)
    state = StateDir(tmp_path)

    # When a stack restores it, Then the error says how many items were left out
    with embedded_stack() as second, pytest.raises(StateDirError, match=f"table {TABLE} left 1 items unwritten"):
        state.restore(ThrottlingDynamoDB(second.dynamodb, always=True), second.s3, [TABLE], [BUCKET])


# ---------------------------------------------------------------- runs left running


def test_runs_left_running_finds_exactly_the_running_runs() -> None:
    # Given runs written as the service writes them, over several scan pages (1 MB each), some of them finished
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dynamodb.create_table(
            TableName=RUNS_TABLE,
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "run_id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "run_id", "KeyType": "HASH"}],
        )
        environment = function_environment("FinalizeRunFunction") | {"RUNS_TABLE_NAME": RUNS_TABLE}
        settings = ServiceSettings.from_environ(environment)
        store = Store(settings, dynamodb=dynamodb)
        for i in range(12):
            store.put_run(
                RunItem(
                    run_id=f"run-{i:02}",
                    account_id="acct-1",
                    canvas_id=f"canvas-{i:02}",
                    prompt="x" * 200_000,
                    template="report",
                    created_at_ms=1_700_000_000_000 + i,
                    estimated_duration_ms=60_000,
                )
            )
        for i, status in [(1, "completed"), (4, "failed"), (7, "partial"), (10, "completed")]:
            assert store.finish_run(f"run-{i:02}", status=status, finished_at_ms=1_800_000_000_000)

        # When the runs left running are looked up
        running = state_dir.runs_left_running(dynamodb, RUNS_TABLE)

    # Then they are exactly the runs not finished
    assert sorted(running) == [f"run-{i:02}" for i in (0, 2, 3, 5, 6, 8, 9, 11)]
