"""A run created with review=true: planned, then parked in Await Approval (one more state, none for a run without
review) until approved, cancelled, or its review time runs out, which ends it failed through Fail Run."""

from __future__ import annotations

import collections
import time
from typing import Any

import pytest

from bench.dags import Block, Dag, scripted
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.errors import ConflictError
from canvas_core.models.api import ApproveRunRequest, CreateRunRequest
from canvas_core.reviews import approve_run, cancel_run
from canvas_core.runs import create_run, get_run_status

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(120)]


class ShortReview(Executions):
    """Starts executions as create_run asks, with the review time cut to `seconds` (the template's is in hours)."""

    def __init__(self, stack: Any, seconds: int):
        super().__init__(state_machine_arn=stack.state_machine_arns["RunCanvasStateMachine"])
        self.seconds = seconds

    def start(self, run_id: str, payload: dict[str, Any]) -> str:
        return super().start(run_id, {**payload, "review_timeout_seconds": self.seconds})


def execution_arn(stack: Any, run_id: str) -> str:
    arn = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    return f"{arn}:{run_id}"


def entered(stack: Any, run_id: str) -> dict[str, int]:
    events = stack.client("stepfunctions").get_execution_history(
        executionArn=execution_arn(stack, run_id), maxResults=1000
    )
    return dict(
        collections.Counter(
            e["stateEnteredEventDetails"]["name"] for e in events["events"] if e["type"].endswith("StateEntered")
        )
    )


def wait_until_awaiting(run_id: str, account_id: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not get_run_status(run_id, account_id).awaiting_approval:
        assert time.monotonic() < deadline, f"run {run_id} never waited for approval"
        time.sleep(0.1)


def test_a_review_run_waits_after_planning_and_runs_once_approved_with_one_state_more(local_stack):
    # Given a canvas a -> b, created with review
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    dag = Dag([Block(0.0), Block(0.0)], [(0, 1)])
    with scripted({"reviewed": dag, "not reviewed": dag}):
        created = create_run(CreateRunRequest(prompt="reviewed", template="auto", review=True), account_id)

        # When it has been planned
        wait_until_awaiting(created.run_id, account_id)

        # Then it waits in Await Approval with its blocks planned, estimated and not run
        status = get_run_status(created.run_id, account_id)
        assert status.status.value == "running"
        _, nodes, _ = Store().get_canvas(created.canvas_id)
        assert [n.status.value for n in nodes] == ["idle", "idle"]
        assert all(n.estimated_credits is not None for n in nodes)
        assert status.estimated_credits == sum(n.estimated_credits or 0 for n in nodes)
        assert set(entered(local_stack, created.run_id)) == {"Plan Canvas", "Await Approval"}

        # When it is approved, and a run without review runs the same canvas
        approve_run(created.run_id, account_id, ApproveRunRequest())
        reviewed = local_stack.wait_for_execution(execution_arn(local_stack, created.run_id), timeout=60)
        plain = create_run(CreateRunRequest(prompt="not reviewed", template="auto"), account_id)
        unreviewed = local_stack.wait_for_execution(execution_arn(local_stack, plain.run_id), timeout=60)

    # Then both completed, and the review cost one state, Await Approval
    assert reviewed["status"] == unreviewed["status"] == "SUCCEEDED"
    assert get_run_status(created.run_id, account_id).status.value == "completed"
    with_review, without = entered(local_stack, created.run_id), entered(local_stack, plain.run_id)
    assert with_review == {**without, "Await Approval": 1}
    assert "Await Approval" not in without


def test_a_review_run_not_approved_in_time_ends_failed_with_the_reason(local_stack):
    # Given a run created with review, whose review time is 2 seconds
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    with scripted({"left waiting": Dag([Block(0.0)])}):
        created = create_run(
            CreateRunRequest(prompt="left waiting", template="auto", review=True),
            account_id,
            executions=ShortReview(local_stack, seconds=2),
        )

        # When nobody approves it
        ended = local_stack.wait_for_execution(execution_arn(local_stack, created.run_id), timeout=60)

    # Then the wait timed out into Fail Run: the run failed with the reason, its block never ran, planning alone
    # was charged
    assert ended["status"] == "FAILED"
    assert "Fail Run" in entered(local_stack, created.run_id)
    status = get_run_status(created.run_id, account_id)
    assert status.status.value == "failed"
    assert status.awaiting_approval is None
    assert status.errors[0].error == "The run was not approved within 2 seconds; its blocks did not run"
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert [n.status.value for n in nodes] == ["error"]
    assert status.metadata is not None
    run = Store().get_run(created.run_id)
    assert run is not None
    assert status.metadata.credits_consumed == run.planning_credits


def test_a_review_run_cancelled_while_it_waits_ends_its_execution_at_once(local_stack):
    # Given a run waiting for approval
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    with scripted({"cancelled while waiting": Dag([Block(0.0, credits=50)])}):
        created = create_run(
            CreateRunRequest(prompt="cancelled while waiting", template="auto", review=True), account_id
        )
        wait_until_awaiting(created.run_id, account_id)

        # When it is cancelled
        cancelled = cancel_run(created.run_id, account_id)
        ended = local_stack.wait_for_execution(execution_arn(local_stack, created.run_id), timeout=30)

    # Then the run failed with the reason, and its execution ended through Run Cancelled, not as a failure (a
    # client's cancel is no outage for the failed-executions alarm), without Fail Run or any block
    assert cancelled.status.value == "failed"
    assert cancelled.errors[0].error == "Cancelled by the client"
    assert ended["status"] == "SUCCEEDED"
    states = entered(local_stack, created.run_id)
    assert states == {"Plan Canvas": 1, "Await Approval": 1, "Run Cancelled": 1}


def test_a_run_being_cancelled_is_not_approved_and_its_wait_ends_with_the_next_cancel(local_stack):
    # Given a run waiting for approval, whose cancel has marked it and whose caller stopped before ending it
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    with scripted({"cancel under way": Dag([Block(0.0, credits=50)])}):
        created = create_run(CreateRunRequest(prompt="cancel under way", template="auto", review=True), account_id)
        wait_until_awaiting(created.run_id, account_id)
        assert Store().claim_cancel(created.run_id, 1)

        # When it is approved
        with pytest.raises(ConflictError) as approving:
            approve_run(created.run_id, account_id, ApproveRunRequest())
        # And cancelled again
        with pytest.raises(ConflictError) as cancelling:
            cancel_run(created.run_id, account_id)
        ended = local_stack.wait_for_execution(execution_arn(local_stack, created.run_id), timeout=30)

    # Then the approval is refused, no block ran, and the second cancel ended the run and its wait at once
    assert approving.value.message == "The run is not waiting for approval: it is being cancelled"
    assert cancelling.value.message == "The run has ended (failed); only a running run can be cancelled"
    status = get_run_status(created.run_id, account_id)
    assert status.status.value == "failed" and status.errors[0].error == "Cancelled by the client"
    assert ended["status"] == "SUCCEEDED"
    assert entered(local_stack, created.run_id) == {"Plan Canvas": 1, "Await Approval": 1, "Run Cancelled": 1}
