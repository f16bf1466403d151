"""POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun through the handlers, with the state machine's steps driven as
it drives them and the Bedrock provider talking to a fake: the re-run is admitted through the ledger as a create is
(402, 429, the reservation), plans nothing, runs only the chosen block and what depends on it, is charged only for
them, and a re-run whose execution cannot start ends failed with its slot given back."""

from __future__ import annotations

import json

import pytest

from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.estimates import CREDITS_PER_BLOCK
from tests.component.test_credits import NOTES, balance, drive, get_run, priced, start_run
from tests.component.test_credits import bedrock as bedrock  # the fake Bedrock the runs here call
from tests.fakes.model_servers import PLANNER_MARK
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

NEW_INSTRUCTIONS = "List the launch risks, one line each"


def rerun(function, context, api_key: str, canvas_id: str, block_id: str, body: dict | None = None) -> dict:
    event = load_event(
        "rerun",
        api_key=api_key,
        path_parameters={"canvas_id": canvas_id, "block_id": block_id},
        body=json.dumps(body if body is not None else {}),
    )
    return function("api/rerun")(event, context)


@pytest.fixture
def finished(bedrock, account, function, context) -> dict:
    """A finished run of notes -> analysis -> answer, and its blocks by type."""
    created = start_run(
        function, context, account.api_key, {"prompt": "What do the notes say?"}, [("notes.txt", NOTES, "text/plain")]
    )
    drive(function, context, account.account_id, created)
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert [n.type for n in nodes] == ["file-block", "prompt-block", "text-block"]
    return {**created, "nodes": {n.type: n for n in nodes}}


def test_a_rerun_plans_nothing_runs_the_block_and_its_dependents_and_is_charged_only_for_them(
    bedrock, account, function, context, finished
):
    # Given the finished run, and what the account holds
    before = Store().get_account(account.account_id)
    calls_before = len(bedrock.calls)
    analysis = finished["nodes"]["prompt-block"]

    # When its analysis is re-run with new instructions
    response = rerun(
        function, context, account.api_key, finished["canvas_id"], analysis.block_id, {"instructions": NEW_INSTRUCTIONS}
    )

    # Then it is admitted as a create is: counted among the running runs, its credits set aside
    assert response["statusCode"] == 200, response["body"]
    created = body_of(response)["data"]
    assert set(created) == {"run_id", "status", "poll_url", "estimated_duration_ms", "canvas_id"}
    admitted = Store().get_account(account.account_id)
    reserve = Store().get_run(created["run_id"]).reserved_credits
    assert reserve == 2 * CREDITS_PER_BLOCK  # the analysis and the answer run again
    assert int(admitted["active_runs"]) == int(before.get("active_runs", 0)) + 1
    assert int(admitted["credits_balance"]) == int(before["credits_balance"]) - reserve

    # And Plan Canvas hands the state machine the two blocks that run again, the analysis ready at once
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    plan = function("orchestration/plan_canvas")(ids, context)
    assert [b["block_type"] for b in plan["ready"]] == ["prompt-block"]
    assert [b["block_type"] for b in plan["waiting"]] == ["text-block"]

    # When the state machine runs them
    drive(function, context, account.account_id, created)

    # Then the Planner was not called: the Analyst, on the new instructions, then the Writer
    calls = bedrock.calls[calls_before:]
    assert not [c for c in calls if PLANNER_MARK in c.system]
    assert [c.system.split(" agent")[0].removeprefix("You are the ") for c in calls] == ["Analyst", "Writer"]
    assert NEW_INSTRUCTIONS in calls[0].prompt
    # And the run is charged for those two blocks' calls only (each block's credits a whole number), the balance
    # moved by that once the run ended
    data = get_run(function, context, account.api_key, created["run_id"])
    assert data["status"] == "completed", data["errors"]
    spent = sum(priced([call]) for call in calls)
    assert data["metadata"]["credits_consumed"] == spent > 0
    assert data["metadata"]["rerun_of"] == {
        "run_id": finished["run_id"],
        "canvas_id": finished["canvas_id"],
        "block_id": analysis.block_id,
    }
    ended = Store().get_account(account.account_id)
    assert int(ended["credits_balance"]) == int(before["credits_balance"]) - spent
    assert int(ended["active_runs"]) == int(before.get("active_runs", 0))
    # And the file block is the source run's, unchanged
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    reused = {n.type: n for n in nodes}["file-block"]
    source_file = finished["nodes"]["file-block"]
    assert reused.reused and (reused.content, reused.credits) == (source_file.content, source_file.credits)


def test_a_rerun_the_account_cannot_pay_for_is_402_and_stores_nothing(
    bedrock, aws, account, function, context, finished
):
    aws.ddb.update_item(
        TableName=aws.settings.accounts_table,
        Key={"account_id": {"S": account.account_id}},
        UpdateExpression="SET credits_balance = :zero",
        ExpressionAttributeValues={":zero": {"N": "0"}},
    )
    runs = aws.ddb.scan(TableName=aws.settings.runs_table)["Count"]

    response = rerun(
        function, context, account.api_key, finished["canvas_id"], finished["nodes"]["text-block"].block_id
    )

    assert response["statusCode"] == 402
    assert body_of(response)["error"] == (
        "Insufficient credits: the account balance is 0; add credits to re-run a block"
    )
    assert aws.ddb.scan(TableName=aws.settings.runs_table)["Count"] == runs


def test_a_rerun_past_the_accounts_running_runs_is_429(bedrock, aws, account, function, context, finished):
    limit = aws.settings.max_concurrent_runs
    aws.ddb.update_item(
        TableName=aws.settings.accounts_table,
        Key={"account_id": {"S": account.account_id}},
        UpdateExpression="SET active_runs = :limit",
        ExpressionAttributeValues={":limit": {"N": str(limit)}},
    )

    response = rerun(
        function, context, account.api_key, finished["canvas_id"], finished["nodes"]["text-block"].block_id
    )

    assert response["statusCode"] == 429
    assert body_of(response)["error"] == f"Too many concurrent runs: the limit is {limit} per account"


def test_a_rerun_whose_execution_cannot_start_ends_failed_with_its_slot_and_credits_back(
    bedrock, account, function, context, finished, monkeypatch
):
    # Given Step Functions refusing to start the execution
    def refuse(self, name, payload):
        raise RuntimeError("StartExecution refused")

    monkeypatch.setattr(Executions, "start", refuse)
    before = Store().get_account(account.account_id)

    # When
    response = rerun(
        function, context, account.api_key, finished["canvas_id"], finished["nodes"]["text-block"].block_id
    )

    # Then the caller gets a 500, and the run it created is failed, not running, with everything given back
    assert response["statusCode"] == 500
    [failed] = [r for r in Store().list_runs(account.account_id, 10)[0] if r.run_id != finished["run_id"]]
    run = Store().get_run(failed.run_id)
    assert run.status.value == "failed"
    assert run.errors[0].error == "The re-run could not be started; please try again"
    after = Store().get_account(account.account_id)
    assert int(after["credits_balance"]) == int(before["credits_balance"])
    assert int(after.get("active_runs", 0)) == int(before.get("active_runs", 0))


def test_a_rerun_of_a_running_runs_canvas_is_409(bedrock, account, function, context):
    created = start_run(function, context, account.api_key, {"prompt": "Still going"})
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    function("orchestration/plan_canvas")(ids, context)
    _, nodes, _ = Store().get_canvas(created["canvas_id"])

    response = rerun(function, context, account.api_key, created["canvas_id"], nodes[0].block_id)

    assert response["statusCode"] == 409
    assert body_of(response)["error"] == (
        f"The run {created['run_id']} of this canvas is still running: re-run a block once it has ended"
    )
    assert balance(account.account_id) > 0


def test_a_rerun_whose_credits_other_runs_took_as_it_was_admitted_is_402_as_a_rerun(
    bedrock, aws, account, function, context, finished, monkeypatch
):
    # Given the account's balance, read by the re-run, is taken by other runs before its admission is written
    real_get_account = Store.get_account

    def taken_after_reading(self, account_id):
        found = real_get_account(self, account_id)
        aws.ddb.update_item(
            TableName=aws.settings.accounts_table,
            Key={"account_id": {"S": account_id}},
            UpdateExpression="SET credits_balance = :zero",
            ExpressionAttributeValues={":zero": {"N": "0"}},
        )
        return found

    monkeypatch.setattr(Store, "get_account", taken_after_reading)
    runs = aws.ddb.scan(TableName=aws.settings.runs_table)["Count"]

    # When a block is re-run
    response = rerun(
        function, context, account.api_key, finished["canvas_id"], finished["nodes"]["text-block"].block_id
    )

    # Then it is refused as a re-run the account cannot pay for, and nothing is stored
    assert response["statusCode"] == 402
    assert body_of(response)["error"] == (
        "Insufficient credits: the account balance is 0; add credits to re-run a block"
    )
    assert aws.ddb.scan(TableName=aws.settings.runs_table)["Count"] == runs
