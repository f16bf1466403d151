"""The per-account limit of blocks running at once (MAX_RUNNING_BLOCKS_PER_ACCOUNT, template parameter
MaxRunningBlocksPerAccount): a block takes a slot on its account item before its work and gives it back after; a
block past the limit does nothing and raises BlocksBusyError, which the state machine retries; a hold whose Lambda
was stopped lapses."""

from __future__ import annotations

import threading

import pytest

from canvas_core import settings
from canvas_core.adapters import block_slots
from canvas_core.adapters.block_slots import HOLD_MS, BlockSlots
from canvas_core.adapters.store import Store
from canvas_core.errors import BlocksBusyError
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def test_slots_taken_at_once_never_pass_the_limit(aws, account):
    # Given twelve blocks of one account taking a slot at once, with three slots
    taken: list[str] = []
    barrier = threading.Barrier(12)

    def take(index: int) -> None:
        barrier.wait()
        if BlockSlots().take(account.account_id, f"run/{index}", limit=3):
            taken.append(f"run/{index}")

    threads = [threading.Thread(target=take, args=(i,)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    # Then three hold one
    assert len(taken) == 3
    assert sorted(BlockSlots().held(account.account_id)) == sorted(taken)
    # And a block that gave its slot back makes room for one more, once
    BlockSlots().give_back(account.account_id, taken[0])
    assert BlockSlots().take(account.account_id, "run/next", limit=3)
    assert not BlockSlots().take(account.account_id, "run/after", limit=3)
    # And a block holding a slot may take it again (a retried attempt)
    assert BlockSlots().take(account.account_id, taken[1], limit=3)


def test_a_hold_whose_block_was_stopped_lapses(aws, account, monkeypatch):
    # Given a slot held by a block whose Lambda was stopped before giving it back
    assert BlockSlots().take(account.account_id, "run/stopped", limit=1)
    assert not BlockSlots().take(account.account_id, "run/waiting", limit=1)
    # When the hold's time has passed
    later = block_slots.now_ms() + HOLD_MS + 1
    monkeypatch.setattr(block_slots, "now_ms", lambda: later)
    # Then the next block clears it and takes the slot
    assert BlockSlots().take(account.account_id, "run/waiting", limit=1)
    assert list(BlockSlots().held(account.account_id)) == ["run/waiting"]


def test_a_hold_set_to_last_longer_than_a_block_can_run_is_cleared(aws, account):
    # Given a hold written to last for years (no runner writes one: a block taken over by what it parsed could)
    from canvas_core.adapters.dynamodb import expression_values

    BlockSlots().take(account.account_id, "run/real", limit=2)
    aws.ddb.update_item(
        TableName=aws.settings.accounts_table,
        Key={"account_id": {"S": account.account_id}},
        UpdateExpression="SET running_blocks.#k = :until",
        ExpressionAttributeNames={"#k": "run/forever"},
        ExpressionAttributeValues=expression_values(until=block_slots.now_ms() + 10 * 365 * 86_400_000),
    )
    # When another block wants a slot
    # Then that hold does not keep it from running, and the real one stays
    assert BlockSlots().take(account.account_id, "run/next", limit=2)
    assert sorted(BlockSlots().held(account.account_id)) == ["run/next", "run/real"]


def test_a_block_past_the_limit_does_nothing_and_runs_once_a_slot_is_free(aws, account, function, context, monkeypatch):
    # Given an account that may run one block at once, and a block of another of its runs holding it
    monkeypatch.setenv("MAX_RUNNING_BLOCKS_PER_ACCOUNT", "1")
    settings.reset()
    created = body_of(function("api/create_run")(load_event("create_run", api_key=account.api_key), context))["data"]
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    [first, *_] = function("orchestration/plan_canvas")(ids, context)["blocks"]
    assert BlockSlots().take(account.account_id, "other-run/block", limit=1)
    # When the state machine starts the run's first block
    with pytest.raises(BlocksBusyError):
        function("blocks/prompt_block")({**ids, **first}, context)
    # Then nothing of it was done: its node has not started and nothing was charged
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "idle" and not node.credits
    # And once the other block gave its slot back, the retry runs it, and it gives its own back
    BlockSlots().give_back(account.account_id, "other-run/block")
    assert function("blocks/prompt_block")({**ids, **first}, context)["status"] == "completed"
    assert BlockSlots().held(account.account_id) == {}


def test_a_slot_that_cannot_be_given_back_leaves_the_blocks_work_standing(aws, account, function, context, monkeypatch):
    from canvas_core.errors import StorageBusyError

    # Given a block whose slot DynamoDB refuses to give back (throttled past its retries)
    created = body_of(function("api/create_run")(load_event("create_run", api_key=account.api_key), context))["data"]
    ids = {"run_id": created["run_id"], "canvas_id": created["canvas_id"], "account_id": account.account_id}
    [first, *_] = function("orchestration/plan_canvas")(ids, context)["blocks"]

    def refused(self, account_id, key):
        raise StorageBusyError("throttled")

    monkeypatch.setattr(BlockSlots, "give_back", refused)
    # When it runs
    result = function("blocks/prompt_block")({**ids, **first}, context)
    # Then it completed, its output stored, and its hold is left to lapse
    assert result["status"] == "completed"
    [node] = Store().get_nodes(created["canvas_id"], [first["block_id"]])
    assert node.status.value == "completed" and node.content
    assert list(BlockSlots().held(account.account_id)) == [f"{created['run_id']}/{first['block_id']}"]
