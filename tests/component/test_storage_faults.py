"""What DynamoDB does under contention and load, met by the handlers: transactions cancelled by a conflict or as
throttled, conditional writes refused while a transaction holds the item, an answer lost after the write, an index
that has not caught up. Nothing a block finished is lost, nothing is charged or counted twice."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError

from canvas_core import pricing
from canvas_core.adapters import dynamodb
from canvas_core.adapters.aws import client
from canvas_core.adapters.store import Store
from canvas_core.adapters.webhook_store import WebhookStore
from canvas_core.errors import BlockRetryableError
from canvas_core.models.webhooks import EndpointItem
from canvas_local import moto_patch
from tests.fakes.dynamodb_faults import mentions, refused
from tests.support import body_of, load_event

pytestmark = pytest.mark.component

COMPLETION = ("#cur = :running", "reserved_credits - :credits")


@pytest.fixture(autouse=True)
def costly_and_quick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs cost credits (the offline model is priced like a small one), and retries do not wait."""
    monkeypatch.setitem(pricing.MODEL_PRICES, "offline/", (Decimal(2), Decimal(4)))
    monkeypatch.setattr(dynamodb.RetryBudget, "delay", lambda self, retry: 0.0)


@pytest.fixture(autouse=True)
def transaction_tokens(aws):
    moto_patch.install_transaction_tokens()
    yield
    moto_patch.uninstall_transaction_tokens()


def start_run(function, context, api_key: str) -> dict:
    response = function("api/create_run")(load_event("create_run", api_key=api_key), context)
    assert response["statusCode"] == 200, response["body"]
    return body_of(response)["data"]


def plan(function, context, account_id: str, created: dict) -> tuple[dict, list[dict]]:
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    return ids, function("orchestration/plan_canvas")(ids, context)["blocks"]


def run_blocks(function, context, ids: dict, blocks: list[dict]) -> None:
    for block in blocks:
        function(f"blocks/{block['block_type'].replace('-', '_')}")({**ids, **block}, context)


def account_item(account_id: str) -> dict[str, Any]:
    return Store().get_account(account_id)


def reserved(run_id: str) -> int:
    """What the run holds of the credits set aside for it."""
    return Store().get_run(run_id).reserved_credits


def test_a_conflicted_completion_is_retried_and_the_block_charged_once(aws, account, function, context):
    # Given a planned run whose first block's completion meets three conflicting transactions
    created = start_run(function, context, account.api_key)
    before = reserved(created["run_id"])
    ids, blocks = plan(function, context, account.account_id, created)
    first = blocks[0]
    # When the block runs
    with refused("TransactWriteItems", "TransactionConflict", 3, mentions(*COMPLETION)) as conflicts:
        result = function("blocks/prompt_block")({**ids, **first}, context)
    # Then it completed, and its credits were taken once
    assert conflicts.refused == 3
    assert result["status"] == "completed"
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed" and node.credits > 0
    run = Store().get_run(created["run_id"])
    assert before - reserved(created["run_id"]) == run.planning_credits + node.credits


def test_a_completion_refused_past_its_retries_keeps_the_output_for_the_retried_block(
    aws, account, function, context, monkeypatch
):
    # Given a block whose completion DynamoDB keeps cancelling past the retry budget
    created = start_run(function, context, account.api_key)
    before = reserved(created["run_id"])
    ids, blocks = plan(function, context, account.account_id, created)
    first = blocks[0]
    event = {**ids, **first}
    from canvas_core.blocks import runner

    calls: list[str] = []
    real = runner.implementation

    def counted(block_type: str):
        behaviour = real(block_type)

        def run(ctx):
            calls.append(ctx.node.block_id)
            return behaviour(ctx)

        return run

    monkeypatch.setattr(runner, "implementation", counted)
    # When it runs: the state machine is told to retry it
    with (
        refused("TransactWriteItems", "TransactionConflict", 1000, mentions(*COMPLETION)) as conflicts,
        pytest.raises(BlockRetryableError, match="kept for a retry"),
    ):
        function("blocks/prompt_block")(event, context)
    assert conflicts.refused == dynamodb.RetryBudget().attempts, conflicts
    [running] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert running.status.value == "running"
    # And when the retried attempt runs once DynamoDB accepts the write
    result = function("blocks/prompt_block")(event, context)
    # Then the work was done once, its output stored as it was made, and charged once
    assert result["status"] == "completed"
    assert calls == [first["block_id"]]
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed" and node.content and node.credits > 0
    run = Store().get_run(created["run_id"])
    assert before - reserved(created["run_id"]) == run.planning_credits + node.credits
    tool_calls = [t for t in Store().get_tasks(created["canvas_id"]) if t.block_id == first["block_id"]]
    assert tool_calls and {t.status.value for t in tool_calls} == {"completed"}


def test_a_completion_whose_answer_was_lost_is_not_applied_twice(aws, account, function, context, monkeypatch):
    # Given a DynamoDB that applies the block's completion, then loses the answer (a 500 after the write)
    created = start_run(function, context, account.api_key)
    before = reserved(created["run_id"])
    ids, blocks = plan(function, context, account.account_id, created)
    ddb = client("dynamodb")
    real = ddb.transact_write_items
    lost: list[str] = []

    def applied_then_lost(**kwargs: Any) -> Any:
        answer = real(**kwargs)
        if not lost and "#cur = :running" in json.dumps(kwargs):
            lost.append(kwargs["ClientRequestToken"])
            raise ClientError(
                {"Error": {"Code": "InternalServerError", "Message": "Internal server error"}}, "TransactWriteItems"
            )
        return answer

    monkeypatch.setattr(ddb, "transact_write_items", applied_then_lost)
    # When the block runs
    result = function("blocks/prompt_block")({**ids, **blocks[0]}, context)
    # Then the retry (same token) found it applied: completed, not dropped, charged once
    assert lost and result["status"] == "completed"
    [node] = Store().get_nodes(created["canvas_id"], [blocks[0]["block_id"]])
    assert node.status.value == "completed"
    run = Store().get_run(created["run_id"])
    assert before - reserved(created["run_id"]) == run.planning_credits + node.credits


def test_a_release_meeting_a_transaction_on_the_dependent_is_retried(aws, account, function, context):
    # Given a failed first block whose dependent is held by another transaction twice
    created = start_run(function, context, account.api_key)
    ids, blocks = plan(function, context, account.account_id, created)
    first, second = blocks
    error = {"Error": "BlockFatalError", "Cause": json.dumps({"errorMessage": "failed on purpose"})}
    # When Release Dependents counts it on its dependent
    with refused("UpdateItem", "TransactionConflict", 2, mentions("ended_inputs")) as conflicts:
        function("orchestration/release_dependents")({**ids, **first, "error": error}, context)
    # Then it was counted, once
    assert conflicts.refused == 2
    item = Store().get_node_item(created["canvas_id"], second["block_id"])
    assert item["ended_inputs"] == {first["block_id"]}
    assert int(item["pending_inputs"]) == 0


def test_an_admission_conflicted_or_throttled_admits_the_run_once(aws, account, function, context):
    # Given the account item held by other transactions, then throttled
    with (
        refused("TransactWriteItems", "TransactionConflict", 2, mentions("active_runs")) as conflicts,
        refused("TransactWriteItems", "ThrottlingError", 2, mentions("active_runs")) as throttled,
    ):
        # When a run is created
        created = start_run(function, context, account.api_key)
    # Then it was admitted, and counted once
    assert (conflicts.refused, throttled.refused) == (2, 2)
    assert Store().get_run(created["run_id"]).status.value == "running"
    assert int(account_item(account.account_id)["active_runs"]) == 1
    runs_this_month = [v for k, v in account_item(account.account_id).items() if k.startswith("runs_")]
    assert runs_this_month == [1]


def test_a_run_end_conflicted_ends_the_run_once_and_gives_its_slot_back(aws, account, function, context):
    # Given a run whose blocks have all completed
    created = start_run(function, context, account.api_key)
    ids, blocks = plan(function, context, account.account_id, created)
    run_blocks(function, context, ids, blocks)
    # When it is finalized while its end meets conflicting transactions
    with refused("TransactWriteItems", "TransactionConflict", 3, mentions("active_runs - :one")) as conflicts:
        function("orchestration/finalize_run")(ids, context)
    # Then it ended completed, and its slot was given back once
    assert conflicts.refused == 3
    run = Store().get_run(created["run_id"])
    assert run.status.value == "completed" and run.credits_consumed > 0
    assert int(account_item(account.account_id)["active_runs"]) == 0


def test_a_throttled_write_is_retried(aws, account, function, context):
    # Given a planned run whose node writes are throttled more often than botocore retries them
    created = start_run(function, context, account.api_key)
    ids, blocks = plan(function, context, account.account_id, created)
    with refused("TransactWriteItems", "ThrottlingError", 6, mentions(*COMPLETION)) as throttled:
        result = function("blocks/prompt_block")({**ids, **blocks[0]}, context)
    assert throttled.refused == 6 and result["status"] == "completed"


def test_an_endpoint_created_a_moment_ago_is_listed_while_the_index_lags(aws, account):
    # Given an endpoint just created, which the account index does not show yet
    store = WebhookStore()
    endpoint = EndpointItem(
        endpoint_id="0c4d3b2a-0000-4000-8000-000000000001",
        account_id=account.account_id,
        url="https://example.com/hook",
        events=["run.completed"],
        secret="whsec_test",
        created_at=1_764_115_200,
    )
    assert store.add_endpoint(endpoint, limit=10)
    events = client("dynamodb").meta.events

    def lagging_index(request: Any, **_: Any) -> Any:
        from botocore.awsrequest import AWSResponse
        from moto.core.botocore_stubber import MockRawResponse

        if json.loads(request.body).get("IndexName"):
            empty = json.dumps({"Items": [], "Count": 0, "ScannedCount": 0}).encode()
            return AWSResponse(request.url, 200, {}, MockRawResponse(empty))
        return None

    events.register_first("before-send.dynamodb.Query", lagging_index)
    try:
        # When the account's endpoints are listed (as a run event fans out)
        listed = store.list_endpoints(account.account_id)
    finally:
        events.unregister("before-send.dynamodb.Query", lagging_index)
    # Then it is there
    assert [e.endpoint_id for e in listed] == [endpoint.endpoint_id]


def test_a_release_claim_whose_answer_was_lost_is_still_its_callers(aws, account, function, context, monkeypatch):
    # Given a parked block ready to go, and a DynamoDB that applies a claim, then loses the answer
    created = start_run(function, context, account.api_key)
    _, blocks = plan(function, context, account.account_id, created)
    waiting = blocks[1]["block_id"]
    store = Store()
    store.update_node(created["canvas_id"], waiting, task_token="token-1", pending_inputs=0)
    ddb = client("dynamodb")
    real = ddb.update_item
    lost: list[dict] = []

    def applied_then_lost(**kwargs: Any) -> Any:
        answer = real(**kwargs)
        if not lost and "released_by" in kwargs.get("UpdateExpression", ""):
            lost.append(kwargs)
            raise ClientError({"Error": {"Code": "InternalServerError", "Message": "Internal error"}}, "UpdateItem")
        return answer

    monkeypatch.setattr(ddb, "update_item", applied_then_lost)
    # When it is claimed (the retry resends the same write), and then claimed again by another caller
    claimed = store.claim_ready_release(created["canvas_id"], waiting, 1)
    again = store.claim_ready_release(created["canvas_id"], waiting, 2)
    # Then the first caller holds the claim, once, and nobody else gets it
    assert lost and claimed is not None and claimed["task_token"] == "token-1"
    assert again is None


def test_a_create_refused_past_its_retries_answers_503_with_retry_after_and_stores_nothing(
    aws, account, function, context
):
    # Given the account item held by other transactions for longer than the retries last
    with refused("TransactWriteItems", "TransactionConflict", 1000, mentions("active_runs")):
        # When a run is created
        response = function("api/create_run")(load_event("create_run", api_key=account.api_key), context)
    # Then the client is told to come back, and nothing was admitted
    assert response["statusCode"] == 503
    assert body_of(response) == {"success": False, "error": "The service is busy: please try again in a moment"}
    headers = response.get("multiValueHeaders") or {}
    assert headers.get("Retry-After") == ["1"] or response.get("headers", {}).get("Retry-After") == "1"
    assert int(account_item(account.account_id).get("active_runs", 0)) == 0
