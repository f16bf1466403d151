"""Block isolation on the embedded stack (docs/isolation.md): a block whose function a hostile page or file took over
holds only the credentials Scope Block vended for its own run. Handed another account's run, canvas and block ids,
every block function is refused at its first read and changes nothing; with its credentials, nothing of another run
or account can be read or written, and not its own account's balance."""

from __future__ import annotations

import re

import boto3
import httpx
import pytest
from boto3.dynamodb.types import TypeDeserializer
from botocore.exceptions import ClientError

from canvas_local.lambda_runtime import REGION
from tests.e2e.conftest import KEY_A, KEY_B, poll_until_finished

pytestmark = pytest.mark.e2e

_plain = TypeDeserializer()


def item(service, table: str, **key: str) -> dict:
    found = service.client("dynamodb").get_item(
        TableName=service.table_names[table], Key={k: {"S": v} for k, v in key.items()}, ConsistentRead=True
    )
    return {k: _plain.deserialize(v) for k, v in found.get("Item", {}).items()}


def finished_run(service, key: str, **post) -> dict:
    with httpx.Client(base_url=service.base_url, headers={"X-API-KEY": key}, timeout=30) as http:
        response = http.post("/v1/run", **post)
        assert response.status_code == 200, response.text
        run_id = response.json()["data"]["run_id"]
        assert poll_until_finished(http, run_id)["status"] == "completed"
    run = item(service, "RunsTable", run_id=run_id)
    nodes = service.client("dynamodb").query(
        TableName=service.table_names["CanvasesTable"],
        KeyConditionExpression="canvas_id = :c AND begins_with(item_id, :n)",
        ExpressionAttributeValues={":c": {"S": run["canvas_id"]}, ":n": {"S": "NODE#"}},
    )["Items"]
    return run | {"block_ids": [n["block_id"]["S"] for n in nodes]}


def block_type(function: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"-\1", function.removesuffix("BlockFunction")).lower() + "-block"


@pytest.fixture(scope="module")
def runs(service) -> tuple[dict, dict]:
    mine = finished_run(service, KEY_A, data={"prompt": "Summarize why tides happen"})
    theirs = finished_run(
        service,
        KEY_B,
        data={"prompt": "Summarize the uploaded figures"},
        files=[("files", ("figures.csv", b"region,sales\nNorth,10\nSouth,7\n", "text/csv"))],
    )
    return mine, theirs


@pytest.fixture(scope="module")
def vended(service, runs) -> dict:
    mine, _ = runs
    return service.functions["BlockScopeFunction"].call(
        {
            "run_id": mine["run_id"],
            "canvas_id": mine["canvas_id"],
            "account_id": mine["account_id"],
            "block_id": mine["block_ids"][0],
            "short": None,
        }
    )


def client(service, name: str, credentials: dict):
    return boto3.client(
        name,
        region_name=REGION,
        endpoint_url=service.endpoint_url,
        aws_access_key_id=credentials["access_key_id"],
        aws_secret_access_key=credentials["secret_access_key"],
        aws_session_token=credentials["session_token"],
    )


def test_every_block_function_handed_another_accounts_ids_is_refused_and_changes_nothing(service, runs, vended):
    # Given a block's credentials for run A, and account B's finished run
    _, theirs = runs
    node_key = {"canvas_id": theirs["canvas_id"], "item_id": "NODE#" + theirs["block_ids"][0]}
    before = item(service, "CanvasesTable", **node_key)
    balance = item(service, "AccountsTable", account_id=theirs["account_id"])["credits_balance"]
    functions = sorted(f for f in service.functions if f.endswith("BlockFunction") and f != "BlockScopeFunction")
    assert len(functions) == 17
    refused = {}
    for function in functions:
        # When a taken-over block function is handed B's run, canvas and block with A's credentials
        event = {
            "run_id": theirs["run_id"],
            "canvas_id": theirs["canvas_id"],
            "account_id": theirs["account_id"],
            "block_id": theirs["block_ids"][0],
            "block_type": block_type(function),
            "credentials": vended,
        }
        with pytest.raises(Exception) as denied:
            service.functions[function].call(event)
        refused[function] = str(denied.value)
    # Then each was denied by IAM at its first read of B's data
    assert {f: "AccessDenied" in text for f, text in refused.items()} == dict.fromkeys(functions, True), refused
    # And B's block and balance are as they were
    assert item(service, "CanvasesTable", **node_key) == before
    assert item(service, "AccountsTable", account_id=theirs["account_id"])["credits_balance"] == balance


def test_a_blocks_credentials_reach_its_own_run_and_nothing_else(service, runs, vended):
    mine, theirs = runs
    ddb, s3 = client(service, "dynamodb", vended), client(service, "s3", vended)
    bucket = next(iter(service.template.buckets()))
    runs_table, accounts = service.table_names["RunsTable"], service.table_names["AccountsTable"]

    def denied(call, *args, **kwargs) -> str:
        with pytest.raises(ClientError) as refused:
            call(*args, **kwargs)
        return refused.value.response["Error"]["Code"]

    # Its own run, account and objects: read and written
    assert ddb.get_item(TableName=runs_table, Key={"run_id": {"S": mine["run_id"]}})["Item"]
    assert ddb.get_item(TableName=accounts, Key={"account_id": {"S": mine["account_id"]}})["Item"]
    own = f"content/{mine['account_id']}/{mine['run_id']}/probe.txt"
    s3.put_object(Bucket=bucket, Key=own, Body=b"mine")
    assert s3.get_object(Bucket=bucket, Key=own)["Body"].read() == b"mine"
    # Nothing of B: its run, its account, its upload, its folders
    upload = theirs["uploads"][0]["s3_key"]
    assert (
        denied(ddb.get_item, TableName=runs_table, Key={"run_id": {"S": theirs["run_id"]}}) == "AccessDeniedException"
    )
    assert (
        denied(ddb.get_item, TableName=accounts, Key={"account_id": {"S": theirs["account_id"]}})
        == "AccessDeniedException"
    )
    assert denied(s3.get_object, Bucket=bucket, Key=upload) == "AccessDenied"
    assert (
        denied(s3.put_object, Bucket=bucket, Key=f"artifacts/{theirs['account_id']}/{theirs['run_id']}/x", Body=b"x")
        == "AccessDenied"
    )
    assert denied(s3.list_objects_v2, Bucket=bucket, Prefix="uploads/") == "AccessDenied"
    # And not its own balance, nor anything of its run but the reservation it spends
    lots = {":lots": {"N": "1000000"}}
    assert (
        denied(
            ddb.update_item,
            TableName=accounts,
            Key={"account_id": {"S": mine["account_id"]}},
            UpdateExpression="SET credits_balance = :lots",
            ExpressionAttributeValues=lots,
        )
        == "AccessDeniedException"
    )
    assert (
        denied(
            ddb.update_item,
            TableName=runs_table,
            Key={"run_id": {"S": mine["run_id"]}},
            UpdateExpression="SET credits_set_aside = :lots",
            ExpressionAttributeValues=lots,
        )
        == "AccessDeniedException"
    )
    assert denied(ddb.scan, TableName=runs_table) == "AccessDeniedException"
