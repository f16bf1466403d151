"""canvas_local.state_dir: what `canvas serve --state-dir` saves is what the next start finds, a failed or
interrupted save keeps the previous snapshot, and the runs a restart left `running` are found."""

from __future__ import annotations

import dataclasses
import json
import logging
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
from canvas_local import state_dir
from canvas_local.state_dir import FORMAT_VERSION, RestoreReport, SaveReport, StateDir, StateDirError
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

    def save(self, state: StateDir, **clients: Any) -> SaveReport:
        return state.save(clients.get("dynamodb", self.dynamodb), clients.get("s3", self.s3), [TABLE], [BUCKET])

    def restore(self, state: StateDir) -> RestoreReport:
        return state.restore(self.dynamodb, self.s3, [TABLE], [BUCKET])


@contextmanager
def embedded_stack() -> Iterator[Stack]:
    """A fresh stack as `canvas serve` provisions it: empty tables and bucket, in memory until it stops."""
    with mock_aws():
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
        yield stack


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


# ---------------------------------------------------------------- round trip


def test_a_restart_finds_every_item_and_object_as_saved(tmp_path: Path) -> None:
    # Given a stack with 40 items (two batches of BatchWriteItem) and objects with awkward keys, saved
    state = StateDir(tmp_path / "state")
    with embedded_stack() as first:
        put_items(first, 40)
        first.put_objects(OBJECTS)
        saved_items, saved_objects = first.items(), first.objects()
        saved = first.save(state)

    # When the stack starts again, empty, and restores
    with embedded_stack() as second:
        assert second.items() == []
        restored = second.restore(state)

        # Then items and objects are exactly as they were: binary, numbers, sets, maps, lists, types, metadata
        assert second.items() == saved_items
        assert second.objects() == saved_objects == OBJECTS
    size = sum(len(body) for body, _, _ in OBJECTS.values())
    assert saved == SaveReport(tables=1, items=40, buckets=1, objects=3, bytes=size)
    assert restored == RestoreReport(tables=1, items=40, buckets=1, objects=3, bytes=size)
    assert str(restored) == f"40 items in 1 tables, 3 objects ({size} bytes) in 1 buckets"


def test_a_second_save_replaces_the_first(tmp_path: Path) -> None:
    # Given a state dir saved twice, with an object deleted and items changed in between
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 3, title="Draft")
        first.put_objects(OBJECTS)
        first.save(state)
        put_items(first, 3, title="Final")
        first.s3.delete_object(Bucket=BUCKET, Key="runs/r-1/report.docx")
        first.save(state)

    # When a new stack restores
    with embedded_stack() as second:
        second.restore(state)

        # Then it holds what the second save saw, and the state dir holds one snapshot
        assert sorted(item["title"]["S"] for item in second.items()) == [f"Final {i} — ünïcode ✓" for i in range(3)]
        assert set(second.objects()) == set(OBJECTS) - {"runs/r-1/report.docx"}
    assert [path.name for path in tmp_path.iterdir()] == ["snapshot"]


# ---------------------------------------------------------------- a save that fails or is interrupted


class FailingS3:
    """An S3 client whose downloads fail after the first: a save that breaks midway."""

    def __init__(self, s3: Any) -> None:
        self._s3 = s3
        self._downloads = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._s3, name)

    def get_object(self, **kwargs: Any) -> Any:
        self._downloads += 1
        if self._downloads > 1:
            raise ClientError({"Error": {"Code": "InternalError", "Message": "We hit a snag"}}, "GetObject")
        return self._s3.get_object(**kwargs)


def test_a_save_that_fails_midway_keeps_the_previous_snapshot(tmp_path: Path) -> None:
    # Given a saved stack whose items and objects then change
    state = StateDir(tmp_path)
    first_objects = {key: OBJECTS[key] for key in list(OBJECTS)[:1]}
    with embedded_stack() as first:
        put_items(first, 30, title="Saved")
        first.put_objects(first_objects)
        first.save(state)
        put_items(first, 30, title="Unsaved")
        first.put_objects(OBJECTS)

        # When the next save fails while downloading objects
        with pytest.raises(StateDirError, match=r"previous snapshot is kept.*We hit a snag"):
            first.save(state, s3=FailingS3(first.s3))

    # Then nothing half-written is left, and a restart finds the state of the first save
    assert [path.name for path in tmp_path.iterdir()] == ["snapshot"]
    with embedded_stack() as second:
        assert second.restore(state).items == 30
        assert {item["title"]["S"].split()[0] for item in second.items()} == {"Saved"}
        assert second.objects() == first_objects


def test_a_save_interrupted_between_its_renames_restores_the_previous_snapshot(tmp_path: Path) -> None:
    # Given a saved stack, then a save that crashed after setting the snapshot aside, before swapping its own in
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 5)
        first.put_objects(OBJECTS)
        first.save(state)
        saved_items = first.items()
    (tmp_path / "snapshot").rename(tmp_path / ".old-0123")
    (tmp_path / ".tmp-4567" / "tables").mkdir(parents=True)

    # When a new stack restores
    with embedded_stack() as second:
        report = second.restore(state)

        # Then it finds the previous snapshot
        assert (report.items, report.objects) == (5, 3)
        assert second.items() == saved_items
        assert second.objects() == OBJECTS


# ---------------------------------------------------------------- what restore refuses or skips


def test_a_snapshot_from_a_newer_format_is_refused(tmp_path: Path) -> None:
    # Given a snapshot written by a newer canvas
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 2)
        first.save(state)
    manifest_file = tmp_path / "snapshot" / "manifest.json"
    manifest = json.loads(manifest_file.read_text())
    manifest_file.write_text(json.dumps(manifest | {"format_version": FORMAT_VERSION + 1}))

    # When a stack restores it
    with embedded_stack() as second:
        with pytest.raises(StateDirError, match=f"state format {FORMAT_VERSION + 1} by a newer canvas"):
            second.restore(state)

        # Then it restores nothing
        assert second.items() == []


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


def test_tables_and_buckets_the_stack_no_longer_has_are_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # Given a snapshot of a table and a bucket that a later template dropped
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 3)
        first.s3.create_bucket(Bucket="retired-bucket")
        first.s3.put_object(Bucket="retired-bucket", Key="old.txt", Body=b"old")
        first.dynamodb.create_table(
            TableName="RetiredTable",
            BillingMode="PAY_PER_REQUEST",
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        )
        state.save(first.dynamodb, first.s3, [TABLE, "RetiredTable"], [BUCKET, "retired-bucket"])

    # When a stack without them restores
    with embedded_stack() as second, caplog.at_level(logging.WARNING, logger=state_dir.__name__):
        report = second.restore(state)

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
    # Given a snapshot of 30 items
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 30)
        saved_items = first.items()
        first.save(state)

    # When a stack whose DynamoDB throttles part of each batch restores it
    with embedded_stack() as second:
        report = state.restore(ThrottlingDynamoDB(second.dynamodb), second.s3, [TABLE], [BUCKET])

        # Then every item is there
        assert report.items == 30
        assert second.items() == saved_items


@pytest.mark.usefixtures("no_backoff")
def test_items_dynamodb_keeps_handing_back_fail_the_restore(tmp_path: Path) -> None:
    # Given a snapshot, and a DynamoDB that never takes a whole batch
    state = StateDir(tmp_path)
    with embedded_stack() as first:
        put_items(first, 3)
        first.save(state)

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
