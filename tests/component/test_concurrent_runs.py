"""The per-account limit of runs `running` at once (MAX_CONCURRENT_RUNS, template parameter
MaxConcurrentRunsPerAccount, 10 by default): POST /v1/run beyond it answers 429 with Retry-After, and every way
a run ends gives its slot back, exactly once."""

from __future__ import annotations

import json

import pytest

from canvas_core import settings
from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key
from canvas_core.models.items import CanvasItem, RunItem
from canvas_core.orchestration import finalize_run
from tests.support import body_of, header, load_event

pytestmark = pytest.mark.component

LIMIT_REACHED = {"success": False, "error": "Too many concurrent runs: the limit is 10 per account"}


def create(function, context, api_key: str, idempotency_key: str | None = None) -> dict:
    event = load_event("create_run", api_key=api_key)
    if idempotency_key:
        event["headers"]["Idempotency-Key"] = idempotency_key
        event["multiValueHeaders"]["Idempotency-Key"] = [idempotency_key]
    return function("api/create_run")(event, context)


def fill(function, context, api_key: str, count: int = 10) -> list[dict]:
    created = []
    for _ in range(count):
        response = create(function, context, api_key)
        assert response["statusCode"] == 200, response["body"]
        created.append(body_of(response)["data"])
    return created


def active_runs(account_id: str) -> int:
    return int(Store().get_account(account_id).get("active_runs", 0))


def stored_runs(aws) -> int:
    return aws.ddb.scan(TableName=aws.settings.runs_table, Select="COUNT")["Count"]


def ids_of(created: dict, account_id: str) -> dict:
    return {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}


def test_the_eleventh_concurrent_run_is_refused_with_429_and_retry_after(aws, account, function, context):
    # Given ten runs of the account still running
    fill(function, context, account.api_key)
    # When it asks for an eleventh
    response = create(function, context, account.api_key)
    # Then
    assert response["statusCode"] == 429
    assert header(response, "Retry-After") == "10"
    assert body_of(response) == LIMIT_REACHED
    # And nothing was stored or started for it
    assert stored_runs(aws) == 10 and active_runs(account.account_id) == 10
    assert len(aws.sfn.list_executions(stateMachineArn=aws.state_machine_arn)["executions"]) == 10


def test_the_limit_is_per_account(aws, account, function, context):
    # Given an account at its limit
    fill(function, context, account.api_key)
    _, other_key = create_account_with_key()
    # When another account creates a run
    response = create(function, context, other_key)
    # Then it is not refused
    assert response["statusCode"] == 200


def test_a_run_that_ends_gives_its_slot_back_once(aws, account, function, context):
    # Given ten running runs
    created = fill(function, context, account.api_key)
    # When one of them is driven to its end, and Finalize Run is delivered again
    ids = ids_of(created[0], account.account_id)
    for block in function("orchestration/plan_canvas")(ids, context)["blocks"]:
        folder = "blocks/" + block["block_type"].removesuffix("-block").replace("-", "_") + "_block"
        function(folder)({**ids, **block}, context)
    assert function("orchestration/finalize_run")(ids, context)["status"] == "completed"
    assert function("orchestration/finalize_run")(ids, context)["status"] == "completed"
    # Then one slot is free, and one only
    assert active_runs(account.account_id) == 9
    assert create(function, context, account.api_key)["statusCode"] == 200
    assert create(function, context, account.api_key)["statusCode"] == 429


def test_a_replayed_idempotency_key_does_not_count_twice(aws, account, function, context):
    # Given a run created with an Idempotency-Key, and its answer replayed
    first = create(function, context, account.api_key, idempotency_key="order-42")
    again = create(function, context, account.api_key, idempotency_key="order-42")
    assert body_of(first)["data"] == body_of(again)["data"]
    assert active_runs(account.account_id) == 1
    # When the account then fills its remaining nine slots
    others = fill(function, context, account.api_key, count=9)
    # Then the replay still answers with the first run, and a new run is refused
    replay = create(function, context, account.api_key, idempotency_key="order-42")
    assert replay["statusCode"] == 200 and body_of(replay)["data"] == body_of(first)["data"]
    assert body_of(create(function, context, account.api_key, idempotency_key="order-43")) == LIMIT_REACHED
    assert active_runs(account.account_id) == 10 and stored_runs(aws) == 10
    # And the refused key is not remembered: once a run ends, retrying it starts the run
    finalize_run(others[0]["run_id"], failure="Stopped for the test")
    retried = create(function, context, account.api_key, idempotency_key="order-43")
    assert retried["statusCode"] == 200 and active_runs(account.account_id) == 10


def test_an_abandoned_run_finalized_with_a_failure_gives_its_slot_back(aws, account, function, context):
    # Given ten runs, one of them planned and then left running (its stack stopped uncleanly)
    created = fill(function, context, account.api_key)
    abandoned = ids_of(created[0], account.account_id)
    function("orchestration/plan_canvas")(abandoned, context)
    reason = "The embedded stack stopped while this run was in flight"
    # When the restart ends it, twice (a second restart finds it ended)
    assert finalize_run(abandoned["run_id"], failure=reason)["status"] == "failed"
    assert finalize_run(abandoned["run_id"], failure=reason)["status"] == "failed"
    # Then it is failed with the reason, its slot is back once, and the account may start a run again
    run = Store().get_run(abandoned["run_id"])
    assert run.status.value == "failed" and run.errors[0].error == reason
    assert active_runs(account.account_id) == 9
    assert create(function, context, account.api_key)["statusCode"] == 200


@pytest.mark.parametrize("event_name", ["fail_run_catch", "fail_run_eventbridge"])
def test_fail_run_gives_the_slot_back(aws, account, function, context, event_name):
    # Given a full account, and the Fail Run event for one of its runs (the Catch's, or the EventBridge rule's)
    created = fill(function, context, account.api_key)
    ids = ids_of(created[0], account.account_id)
    event = load_event(event_name)
    if "detail" in event:
        event["detail"]["name"] = ids["run_id"]
        event["detail"]["input"] = json.dumps(ids)
    else:
        event.update(ids)
    # When
    assert function("orchestration/fail_run")(event, context)["status"] == "failed"
    # Then
    assert active_runs(account.account_id) == 9
    assert create(function, context, account.api_key)["statusCode"] == 200


def test_a_run_whose_execution_cannot_start_gives_its_slot_back(aws, account, function, context, monkeypatch):
    # Given a state machine that does not exist
    monkeypatch.setenv("STATE_MACHINE_ARN", aws.state_machine_arn + "Missing")
    settings.reset()
    # When
    response = create(function, context, account.api_key)
    # Then the run stored for it has ended and holds no slot
    assert response["statusCode"] == 500
    assert active_runs(account.account_id) == 0


def test_the_limit_is_a_setting(aws, account, function, context, monkeypatch):
    # Given a deployment that allows two runs at once
    monkeypatch.setenv("MAX_CONCURRENT_RUNS", "2")
    settings.reset()
    fill(function, context, account.api_key, count=2)
    # When
    response = create(function, context, account.api_key)
    # Then
    assert response["statusCode"] == 429
    assert body_of(response) == {"success": False, "error": "Too many concurrent runs: the limit is 2 per account"}


def test_the_limit_holds_in_the_write_even_when_the_read_was_stale(aws, account, function, context):
    # Given an account at its limit, and a create that read the count before the last run was stored
    fill(function, context, account.api_key)
    run = RunItem(
        run_id="7a1c2d4e-0000-4000-8000-00000000000b",
        account_id=account.account_id,
        canvas_id="6f1c2d4e-0000-4000-8000-00000000000b",
        prompt="p",
        template="auto",
        created_at_ms=0,
        estimated_duration_ms=0,
    )
    canvas = CanvasItem(canvas_id=run.canvas_id, account_id=account.account_id, run_id=run.run_id, canvas_name="p")
    # When it stores its run
    admitted = Store().admit_run(run, canvas, max_active_runs=10)
    # Then DynamoDB's condition refuses it, and neither the run nor its canvas is stored
    assert admitted is False
    assert Store().get_run(run.run_id) is None and Store().get_canvas_item(run.canvas_id) is None
    assert active_runs(account.account_id) == 10
