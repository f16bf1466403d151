"""Local retention (canvas_local.retention): the sweep removes what DynamoDB's TTL and the bucket's lifecycle rules
remove on AWS, and nothing that has not expired; `canvas serve --retention-days N` sets the retention."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from canvas_local import cli
from canvas_local.defaults import DEFAULT_TEMPLATE
from canvas_local.retention import ExpirationRule, RetentionSweeper, expiration_rules
from canvas_local.template import Template, bucket_name

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

DAY = 86_400
BUCKET = "artifacts"


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        dynamodb = client("dynamodb")
        dynamodb.create_table(
            TableName="runs",
            KeySchema=[{"AttributeName": "run_id", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "run_id", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        dynamodb.create_table(
            TableName="tasks",
            KeySchema=[
                {"AttributeName": "canvas_id", "KeyType": "HASH"},
                {"AttributeName": "task_id", "KeyType": "RANGE"},
            ],
            AttributeDefinitions=[
                {"AttributeName": "canvas_id", "AttributeType": "S"},
                {"AttributeName": "task_id", "AttributeType": "S"},
            ],
            BillingMode="PAY_PER_REQUEST",
        )
        client("s3").create_bucket(Bucket=BUCKET)
        yield


def sweeper(clock: Clock, page: int = 500) -> RetentionSweeper:
    rules = [ExpirationRule(BUCKET, "artifacts/", 1), ExpirationRule(BUCKET, "webhooks/", 14)]
    return RetentionSweeper(client, {"runs": "expires_at", "tasks": "expires_at"}, rules, clock=clock, page=page)


def run_ids() -> set[str]:
    return {item["run_id"]["S"] for item in client("dynamodb").scan(TableName="runs")["Items"]}


def keys() -> set[str]:
    return {entry["Key"] for entry in client("s3").list_objects_v2(Bucket=BUCKET).get("Contents", [])}


def put_run(run_id: str, expires_at: float | None) -> None:
    item = {"run_id": {"S": run_id}}
    if expires_at is not None:
        item["expires_at"] = {"N": str(int(expires_at))}
    client("dynamodb").put_item(TableName="runs", Item=item)


def test_expired_items_and_files_are_removed_and_nothing_unexpired(aws):
    # Given runs and tasks written with a one-day retention, one without a TTL, and files under the rules' prefixes
    clock = Clock()
    put_run("old", clock.now + DAY)
    put_run("new", clock.now + 3 * DAY)
    put_run("kept", None)
    client("dynamodb").put_item(
        TableName="tasks",
        Item={"canvas_id": {"S": "c"}, "task_id": {"S": "t"}, "expires_at": {"N": str(int(clock.now + DAY))}},
    )
    s3 = client("s3")
    for key in ("artifacts/a/r/report.docx", "webhooks/body.json", "other/file"):
        s3.put_object(Bucket=BUCKET, Key=key, Body=b"x" * 100)
    retention = sweeper(clock)

    # When a sweep runs before anything expired
    swept = retention.sweep()
    # Then nothing is removed
    assert (swept.items, swept.objects) == (0, 0)
    assert run_ids() == {"old", "new", "kept"}
    assert len(keys()) == 3

    # When the clock passes the first expiry (and the artifacts' one day)
    clock.now += DAY + 60
    swept = retention.sweep()
    # Then the expired run and task are gone, and the artifact; the later run, the one without a TTL, the webhook
    # body (14 days) and the file no rule names are kept
    assert swept.items == 2 and swept.objects == 1
    assert run_ids() == {"new", "kept"}
    assert client("dynamodb").scan(TableName="tasks")["Items"] == []
    assert keys() == {"webhooks/body.json", "other/file"}

    # When the clock passes fourteen days
    clock.now += 14 * DAY
    retention.sweep()
    # Then the later run and the webhook body go too, and what has no expiry stays
    assert run_ids() == {"kept"}
    assert keys() == {"other/file"}


def test_an_item_given_a_later_expiry_after_the_scan_is_not_removed(aws):
    # Given an expired run
    clock = Clock()
    put_run("old", clock.now - 10)
    retention = sweeper(clock)
    original_scan = retention._dynamodb.scan

    def scan_then_write(**kwargs: Any) -> Any:
        page = original_scan(**kwargs)
        put_run("old", clock.now + DAY)  # written again while the sweep runs
        return page

    retention._dynamodb.scan = scan_then_write
    # When the sweep runs
    retention.sweep()
    # Then the run, no longer expired, is kept
    assert run_ids() == {"old"}


def test_a_sweep_examines_at_most_a_page_and_the_next_resumes(aws):
    # Given five expired runs and a page of two
    clock = Clock()
    for n in range(5):
        put_run(f"r{n}", clock.now - 10)
    retention = sweeper(clock, page=2)
    # When sweeps run
    removed = [retention.sweep().by_table["runs"] for _ in range(4)]
    # Then each removes at most two, and together they remove all
    assert max(removed) <= 2
    assert run_ids() == set()


def test_the_rules_are_the_templates_lifecycle_with_its_retention():
    # Given the template with a retention of 3 days
    template = Template(DEFAULT_TEMPLATE, {"DataRetentionDays": "3"})
    # When its expiration rules are read
    rules = {rule.prefix: rule.days for rule in expiration_rules(template)}
    # Then uploads, artifacts and spilled content are kept 3 days, webhook bodies 14
    assert rules == {"uploads/": 3, "artifacts/": 3, "content/": 3, "webhooks/": 14}
    assert {rule.bucket for rule in expiration_rules(template)} == {bucket_name("ArtifactsBucket")}


def test_serve_takes_a_positive_retention_in_days():
    parser = cli.build_parser()
    assert parser.parse_args(["serve", "--retention-days", "7"]).retention_days == 7
    assert parser.parse_args(["serve"]).retention_days is None
    with pytest.raises(SystemExit):
        parser.parse_args(["serve", "--retention-days", "0"])
