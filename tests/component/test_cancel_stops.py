"""Cancel stops the run's execution and the run keeps its slot among the account's running runs until the execution
has ended (the Execution Status Change rule's Fail Run gives it back), so that creating and cancelling runs in a loop
never has more executions running than the account's limit. Here moto's Step Functions does not execute the state
machine: its executions stay RUNNING until stopped, and the test delivers each end as EventBridge would."""

from __future__ import annotations

import json
from collections import deque

import pytest

from canvas_core.adapters.store import Store
from tests.component.test_concurrent_runs import active_runs, create
from tests.support import body_of, load_event

pytestmark = pytest.mark.component


def cancel(function, context, api_key: str, run_id: str) -> dict:
    event = load_event("cancel_run", api_key=api_key, path_parameters={"run_id": run_id})
    return function("api/cancel_run")(event, context)


def execution_status(aws, run_id: str) -> str:
    arn = aws.state_machine_arn.replace(":stateMachine:", ":execution:") + f":{run_id}"
    return aws.sfn.describe_execution(executionArn=arn)["status"]


def deliver_end(function, context, aws, run_id: str) -> None:
    """What EventBridge delivers to Fail Run once the execution has ended."""
    event = load_event("fail_run_eventbridge")
    event["detail"].update(name=run_id, status=execution_status(aws, run_id), input=json.dumps({"run_id": run_id}))
    function("orchestration/fail_run")(event, context)


def test_a_cancel_stops_the_execution_and_the_slot_comes_back_only_once_it_has_ended(aws, account, function, context):
    # Given a run executing
    created = body_of(create(function, context, account.api_key))["data"]
    assert active_runs(account.account_id) == 1
    # When it is cancelled
    response = cancel(function, context, account.api_key, created["run_id"])
    # Then it has ended for the client, its execution is stopped, and the slot is still held
    assert response["statusCode"] == 200, response["body"]
    assert body_of(response)["data"]["status"] == "failed"
    assert execution_status(aws, created["run_id"]) == "ABORTED"
    assert active_runs(account.account_id) == 1 and Store().get_run(created["run_id"]).slot_held
    # When the execution's end is delivered (once, or twice: EventBridge delivers at least once)
    deliver_end(function, context, aws, created["run_id"])
    deliver_end(function, context, aws, created["run_id"])
    # Then the slot is back, once, and the run keeps how it ended
    assert active_runs(account.account_id) == 0
    run = Store().get_run(created["run_id"])
    assert run.status.value == "failed" and not run.slot_held
    assert run.errors[0].error == "Cancelled by the client"


def test_a_run_cancelled_before_its_execution_started_gives_its_slot_back_at_once(aws, account, function, context):
    # Given a run whose execution never started (its create stopped after storing it)
    from canvas_core.adapters.executions import Executions

    real_start = Executions.start
    Executions.start = lambda self, run_id, payload: "never-started"  # type: ignore[method-assign]
    try:
        created = body_of(create(function, context, account.api_key))["data"]
    finally:
        Executions.start = real_start  # type: ignore[method-assign]
    # When it is cancelled
    response = cancel(function, context, account.api_key, created["run_id"])
    # Then no execution holds it: the slot is back at once
    assert response["statusCode"] == 200, response["body"]
    assert active_runs(account.account_id) == 0


def test_two_hundred_creates_and_cancels_never_run_more_executions_than_the_limit(aws, account, function, context):
    # Given an account with the limit of 10 runs at once, and executions that end a while after they are stopped
    limit, lag = aws.settings.max_concurrent_runs, 15
    stopping: deque[str] = deque()
    most, refused = 0, 0
    # When a client creates and cancels runs 200 times over
    for _ in range(200):
        response = create(function, context, account.api_key)
        if response["statusCode"] == 429:
            refused += 1
        else:
            assert response["statusCode"] == 200, response["body"]
            run_id = body_of(response)["data"]["run_id"]
            assert cancel(function, context, account.api_key, run_id)["statusCode"] == 200
            stopping.append(run_id)
        # Then the executions not yet ended never pass the limit
        most = max(most, len(stopping))
        assert len(stopping) <= limit
        if len(stopping) > lag or (stopping and response["statusCode"] == 429):
            deliver_end(function, context, aws, stopping.popleft())
    while stopping:
        deliver_end(function, context, aws, stopping.popleft())
    assert most == limit and refused > 0
    assert active_runs(account.account_id) == 0


def test_a_cancel_that_stops_an_execution_counts_it_for_the_aborted_executions_alarm(
    aws, account, function, context, monkeypatch, capsys
):
    # Given a run executing, and metrics on as in a deployed function
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "false")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "CanvasRunService")
    created = body_of(create(function, context, account.api_key))["data"]
    capsys.readouterr()
    # When it is cancelled
    assert cancel(function, context, account.api_key, created["run_id"])["statusCode"] == 200
    # Then the cancel counts the execution it stopped, which the alarm on aborted executions leaves out
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith('{"_aws"')]
    assert [emf.get("ExecutionsStoppedByCancel") for emf in lines if "ExecutionsStoppedByCancel" in emf] == [[1.0]]
    assert execution_status(aws, created["run_id"]) == "ABORTED"
