"""Cancel against moto, with the races the e2e tier cannot arrange: a block completing just as its run is cancelled is
counted once, in the run's credits and on the account; a block whose node the cancel ended first is not charged;
and a run cancelled while it is planned never starts its blocks."""

from __future__ import annotations

import pytest

from canvas_core.adapters.dynamodb import ConditionFailed
from canvas_core.adapters.store import Store
from canvas_core.auth import create_account_with_key
from canvas_core.errors import ConflictError, RunNotFoundError
from canvas_core.models.catalog import NodeStatus
from canvas_core.models.items import TaskItem
from canvas_core.orchestration import plan_run
from canvas_core.reviews import CANCELLED, cancel_run
from tests.component.test_credits import balance, get_run, start_run


def first_block(function, context, account_id: str, created: dict) -> str:
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account_id}
    blocks = function("orchestration/plan_canvas")(ids, context)["blocks"]
    assert blocks
    return blocks[0]["block_id"]


def start_block(store: Store, canvas_id: str, block_id: str) -> None:
    task = TaskItem(canvas_id=canvas_id, task_id=f"tool-{block_id}", name="tool", task_type="tool-call-task")
    store.start_block(canvas_id, block_id, task)


def test_a_block_completing_as_its_run_is_cancelled_is_counted_and_charged_once(aws, function, context, monkeypatch):
    # Given a planned run whose first block is running
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    block_id = first_block(function, context, account_id, created)
    store = Store()
    start_block(store, created["canvas_id"], block_id)
    # And that block completes (charged 9 from the run's reservation) after the cancel has read the canvas and before
    # it marks the block
    real_update = Store.update_node

    def completing_first(self, canvas_id, node_id, expect_status=None, **fields):
        if node_id == block_id and fields.get("error") == CANCELLED:
            store.complete_block(
                canvas_id, block_id, [], debit_account=account_id, debit_run=created["run_id"], credits=9, content="x"
            )
        return real_update(self, canvas_id, node_id, expect_status, **fields)

    monkeypatch.setattr(Store, "update_node", completing_first)

    # When the run is cancelled
    ended = cancel_run(created["run_id"], account_id)

    # Then it ended partial with the block as it completed, and the account paid exactly the run's credits
    assert ended.status.value == "partial"
    assert ended.errors[0].error == CANCELLED
    run = store.get_run(created["run_id"])
    assert run is not None
    assert ended.metadata is not None
    assert ended.metadata.credits_consumed == run.planning_credits + 9
    assert 5000 - balance(account_id) == ended.metadata.credits_consumed
    assert [n.status for n in store.get_nodes(created["canvas_id"], [block_id])] == [NodeStatus.COMPLETED]


def test_a_block_the_cancel_ended_first_is_not_charged_when_it_completes(aws, function, context):
    # Given a planned run whose first block is running, and the run cancelled
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    block_id = first_block(function, context, account_id, created)
    store = Store()
    start_block(store, created["canvas_id"], block_id)
    ended = cancel_run(created["run_id"], account_id)

    # When the block's work comes back and would complete it
    late = store.complete_block(
        created["canvas_id"], block_id, [], debit_account=account_id, debit_run=created["run_id"], credits=9
    )

    # Then the completion is refused, nothing of it is charged, and a block not started cannot start
    assert late is None
    assert ended.status.value == "failed"
    assert ended.metadata is not None
    assert (
        5000 - balance(account_id)
        == ended.metadata.credits_consumed
        == store.get_run(created["run_id"]).planning_credits
    )
    with pytest.raises(ConditionFailed):
        start_block(store, created["canvas_id"], block_id)
    # And a second cancel, or one of another account, is refused as the API answers them
    with pytest.raises(ConflictError):
        cancel_run(created["run_id"], account_id)
    other_account, _ = create_account_with_key()
    with pytest.raises(RunNotFoundError):
        cancel_run(created["run_id"], other_account)


def test_a_run_cancelled_while_it_is_planned_never_starts_its_blocks(aws, function, context, monkeypatch):
    # Given a run being planned, cancelled as its plan is stored
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    real_put_graph = Store.put_graph

    def cancelled_meanwhile(self, nodes, edges, canvas_id, *args, **kwargs):
        cancel_run(created["run_id"], account_id)
        return real_put_graph(self, nodes, edges, canvas_id, *args, **kwargs)

    monkeypatch.setattr(Store, "put_graph", cancelled_meanwhile)

    # When planning ends
    listed = plan_run(created["run_id"], created["canvas_id"])

    # Then no block is handed to the state machine, and every planned block is ended with the cancel's reason
    assert listed["ready"] == listed["waiting"] == []
    _, nodes, _ = Store().get_canvas(created["canvas_id"])
    assert nodes
    assert {(n.status, n.error) for n in nodes} == {(NodeStatus.ERROR, CANCELLED)}
    assert get_run(function, context, api_key, created["run_id"])["status"] == "failed"


def test_of_two_cancels_at_once_one_ends_the_run_and_the_other_finds_it_ended(aws, function, context, monkeypatch):
    # Given a planned run, and a second cancel of it that ends it after the first has found it running
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    first_block(function, context, account_id, created)
    real_get_run = Store.get_run
    answers: list = []
    raced: list = []

    def cancelled_meanwhile(self, run_id, consistent=False):
        found = real_get_run(self, run_id, consistent)
        if not raced and consistent:
            raced.append(run_id)
            answers.append(cancel_run(created["run_id"], account_id))
        return found

    monkeypatch.setattr(Store, "get_run", cancelled_meanwhile)

    # When the first cancel goes on
    with pytest.raises(ConflictError) as caught:
        cancel_run(created["run_id"], account_id)

    # Then the second one ended the run, once, and the first is answered as any cancel of an ended run
    assert [a.status.value for a in answers] == ["failed"]
    assert caught.value.message == "The run has ended (failed); only a running run can be cancelled"
    assert [e.error for e in answers[0].errors].count(CANCELLED) == 1


def test_a_run_its_own_finalize_ends_while_the_cancel_ends_its_blocks_ends_cancelled(
    aws, function, context, monkeypatch
):
    # Given a planned run, whose Finalize Run runs (every block ended) as soon as the cancel has ended its first
    # block: the block's runner finds it ended and the state machine goes on to end the run
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    first_block(function, context, account_id, created)
    real_update = Store.update_node
    finalized: list = []

    def state_machine_ends_it(self, canvas_id, node_id, expect_status=None, **fields):
        updated = real_update(self, canvas_id, node_id, expect_status, **fields)
        if fields.get("error") == CANCELLED and not finalized:
            finalized.append(function("orchestration/finalize_run")({"run_id": created["run_id"]}, context))
        return updated

    monkeypatch.setattr(Store, "update_node", state_machine_ends_it)

    # When the run is cancelled
    ended = cancel_run(created["run_id"], account_id)

    # Then the cancel answers the run it ended: cancelled by the client, whichever write ended it
    assert finalized
    assert ended.status.value == "failed"
    assert ended.errors[0].error == CANCELLED
    assert get_run(function, context, api_key, created["run_id"])["errors"][0]["error"] == CANCELLED
    # And a cancel after it finds it ended
    with pytest.raises(ConflictError):
        cancel_run(created["run_id"], account_id)


def test_a_cancel_whose_caller_stopped_halfway_is_ended_by_the_next_one(aws, function, context):
    # Given a planned run a cancel has claimed, and whose caller stopped before it ended the run
    account_id, api_key = create_account_with_key(credits=5000)
    created = start_run(function, context, api_key, {"prompt": "Explain how tides form"})
    first_block(function, context, account_id, created)
    assert Store().claim_cancel(created["run_id"], 1)

    # When another cancel comes
    with pytest.raises(ConflictError) as caught:
        cancel_run(created["run_id"], account_id)

    # Then it finds the run ended by the first, cancelled, and nothing left running
    assert caught.value.message == "The run has ended (failed); only a running run can be cancelled"
    run = get_run(function, context, api_key, created["run_id"])
    assert run["status"] == "failed" and run["errors"][0]["error"] == CANCELLED
