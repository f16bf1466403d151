"""The search key comes from Secrets Manager when only its ARN is set (the environment's key wins, as offline),
and every run, canvas item and task is written with the `expires_at` its table's TTL reads."""

from __future__ import annotations

import json
import time

import boto3
import pytest
from moto import mock_aws

from canvas_core.adapters.store import Store
from canvas_core.errors import BlockFatalError
from canvas_core.gather.search import search_api_key
from canvas_core.models.catalog import TaskType
from canvas_core.models.items import CanvasItem, RunItem, TaskItem
from canvas_core.settings import ServiceSettings, gather_settings
from tests.support import function_environment

pytestmark = pytest.mark.unit


def create_secret(name: str, value: str) -> str:
    return boto3.client("secretsmanager", region_name="us-east-1").create_secret(Name=name, SecretString=value)["ARN"]


def test_the_search_key_is_read_from_its_secret(monkeypatch):
    # Given no key in the environment, only the ARN of a secret holding it as JSON
    monkeypatch.delenv("SEARCH_API_KEY", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        monkeypatch.setenv("SEARCH_API_KEY_SECRET_ARN", create_secret("search-json", json.dumps({"api_key": "bk-1"})))
        # When the search provider's key is read
        key = search_api_key(gather_settings())
    # Then it is the secret's
    assert key == "bk-1"


def test_a_key_in_the_environment_wins_over_the_secret(monkeypatch):
    monkeypatch.setenv("SEARCH_API_KEY", "from-env")
    monkeypatch.setenv("SEARCH_API_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:unread")

    assert search_api_key(gather_settings()) == "from-env"


def test_a_search_secret_that_cannot_be_read_fails_the_block(monkeypatch):
    monkeypatch.delenv("SEARCH_API_KEY", raising=False)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        monkeypatch.setenv(
            "SEARCH_API_KEY_SECRET_ARN", "arn:aws:secretsmanager:us-east-1:123456789012:secret:missing-AbCdEf"
        )
        with pytest.raises(BlockFatalError, match="search API key secret could not be read"):
            search_api_key(gather_settings())


class RecordingDynamoDB:
    """Keeps the items a store writes, whatever the call."""

    def __init__(self) -> None:
        self.items: list[dict] = []

    def put_item(self, **kwargs):
        self.items.append(kwargs["Item"])

    def batch_write_item(self, RequestItems):
        for requests in RequestItems.values():
            self.items += [r["PutRequest"]["Item"] for r in requests]
        return {}

    def transact_write_items(self, TransactItems):
        self.items += [t["Put"]["Item"] for t in TransactItems if "Put" in t]


def test_runs_canvases_and_tasks_are_written_with_their_expiry():
    # Given a store that keeps data for 7 days
    ddb = RecordingDynamoDB()
    settings = ServiceSettings.from_environ(function_environment("FinalizeRunFunction") | {"DATA_RETENTION_DAYS": "7"})
    store = Store(settings, dynamodb=ddb)
    run = RunItem(
        run_id="r1", account_id="a1", canvas_id="c1", prompt="p", template="auto", created_at_ms=1,
        estimated_duration_ms=1,
    )  # fmt: skip
    task = TaskItem(canvas_id="c1", task_id="t1", name="n", task_type=next(iter(TaskType)))

    # When it writes a run, a canvas and tasks
    before = int(time.time())
    store.put_run(run)
    store.put_canvas(CanvasItem(canvas_id="c1", account_id="a1", run_id="r1", canvas_name="c"))
    store.put_tasks([task])

    # Then each item expires 7 days from now, in epoch seconds
    assert len(ddb.items) == 3
    for item in ddb.items:
        assert before + 7 * 86_400 <= int(item["expires_at"]["N"]) <= int(time.time()) + 7 * 86_400
