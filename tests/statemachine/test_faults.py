"""Faults injected into runs executed by the real state machine: each run ends in its documented state and
nothing is left `running`. Block behaviour is scripted in-process (bench/dags.py); the ASL, the dataflow
release, the block runner and the EventBridge rule are the real ones."""

from __future__ import annotations

import logging
import threading
import time

import pytest

from bench.dags import Block, Dag, scripted
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local import moto_patch

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(120)]

INTERPRETER_ERRORS = "moto.stepfunctions.parser.asl.component.eval_component"


@pytest.fixture
def interpreter_errors_unlogged():
    """What canvas serve sets: moto's interpreter logs every failure a state catches as an error."""
    logger = logging.getLogger(INTERPRETER_ERRORS)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    yield
    logger.setLevel(level)


def run_to_end(stack, prompt: str, timeout: float = 60):
    account_id = authenticate({"X-API-KEY": stack.api_keys[0]})
    created = create_run(CreateRunRequest(prompt=prompt, template="auto"), account_id)
    arn = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    execution = stack.wait_for_execution(f"{arn}:{created.run_id}", timeout=timeout)
    return created, execution


def settled(run_id: str, timeout: float = 10):
    """The run once it has left `running` (the EventBridge stand-in delivers within a poll or two)."""
    deadline = time.monotonic() + timeout
    while (run := Store().get_run(run_id)).status.value == "running" and time.monotonic() < deadline:
        time.sleep(0.1)
    return run


def nothing_running(canvas_id: str) -> None:
    _, nodes, _ = Store().get_canvas(canvas_id)
    assert {n.status.value for n in nodes} <= {"completed", "error", "skipped"}
    assert {t.status.value for t in Store().get_tasks(canvas_id)} <= {"completed", "error"}


def test_a_block_that_fails_once_is_retried_and_the_run_completes(local_stack):
    # Given a -> b, where b fails once with a passing error
    dag = Dag([Block(0.05), Block(0.05, fail="once")], [(0, 1)])
    with scripted({"fails once": dag}) as script:
        # When
        created, execution = run_to_end(local_stack, "fails once")
    # Then
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(created.run_id)
    assert run.status.value == "completed"
    assert sorted(script.attempts.values()) == [1, 2]
    nothing_running(created.canvas_id)


def test_a_block_that_always_fails_ends_the_run_partial_without_running_its_dependents(local_stack):
    # Given a -> b -> c and a -> d, where b always fails
    dag = Dag([Block(0.05), Block(0.05, fail="always"), Block(0.05), Block(0.05)], [(0, 1), (1, 2), (0, 3)])
    with scripted({"always fails": dag}) as script:
        created, execution = run_to_end(local_stack, "always fails")
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(created.run_id)
    assert run.status.value == "partial"
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert [n.status.value for n in nodes] == ["completed", "error", "skipped", "completed"]
    # The dependent never ran: the runner skipped it before its behaviour was called
    assert nodes[2].block_id not in script.attempts
    assert {e.block_id for e in run.errors} == {nodes[1].block_id, nodes[2].block_id}
    assert "failed on purpose" in next(e.error for e in run.errors if e.block_id == nodes[1].block_id)
    nothing_running(created.canvas_id)


def test_a_block_that_hangs_is_timed_out(local_stack_factory, monkeypatch):
    # Given a block that never answers, with a 2-second block limit given to the stack's functions as it starts
    monkeypatch.setenv("BLOCK_TIMEOUT_SECONDS", "2")
    local_stack = local_stack_factory(api_keys=["sk_canvas_statemachine_test_key"])
    dag = Dag([Block(0.05), Block(hang=True), Block(0.05)], [(0, 1), (1, 2)])
    with scripted({"hangs": dag}):
        created, execution = run_to_end(local_stack, "hangs")
    # Then the state machine gave up on it, and its dependent was skipped
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(created.run_id)
    assert run.status.value == "partial"
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert [n.status.value for n in nodes] == ["completed", "error", "skipped"]
    assert nodes[1].error == "The block timed out"
    nothing_running(created.canvas_id)


def test_an_execution_aborted_from_outside_fails_the_run(local_stack):
    # Given a run whose second block takes long
    dag = Dag([Block(0.05), Block(hang=True), Block(0.05)], [(0, 1), (1, 2)])
    with scripted({"aborted": dag}) as script:
        account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
        created = create_run(CreateRunRequest(prompt="aborted", template="auto"), account_id)
        sfn = local_stack.client("stepfunctions")
        arn = local_stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        execution_arn = f"{arn}:{created.run_id}"
        deadline = time.monotonic() + 30
        while len(script.started) < 2:
            assert time.monotonic() < deadline, "the slow block never started"
            time.sleep(0.05)
        # When an operator stops the execution (moto ends it once the task it is blocked on returns)
        sfn.stop_execution(executionArn=execution_arn, error="Operator", cause="stopped by hand")
        script.release()
        ended = local_stack.wait_for_execution(execution_arn, timeout=30)
        run = settled(created.run_id)
    # Then the EventBridge rule's target ended the run with the reason, and nothing is left running
    assert ended["status"] in ("ABORTED", "FAILED")
    assert run.status.value in ("failed", "partial")
    reasons = {"ABORTED": "The run was stopped before it finished", "FAILED": "The run's execution failed"}
    assert run.errors[0].error == reasons[ended["status"]]
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert nodes[0].status.value == "completed"
    assert nodes[2].status.value != "completed"
    nothing_running(created.canvas_id)
    # And the run's slot among the account's running runs is back
    assert int(Store().get_account(account_id).get("active_runs", 0)) == 0


def test_a_cancel_stops_the_execution_and_its_slot_comes_back_once_the_execution_has_ended(local_stack):
    from canvas_core.reviews import cancel_run

    # Given a run whose first block completed and whose second is working
    dag = Dag([Block(0.05), Block(hang=True), Block(0.05)], [(0, 1), (1, 2)])
    with scripted({"cancelled": dag}) as script:
        account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
        balance = int(Store().get_account(account_id)["credits_balance"])
        created = create_run(CreateRunRequest(prompt="cancelled", template="auto"), account_id)
        arn = local_stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        execution_arn = f"{arn}:{created.run_id}"
        deadline = time.monotonic() + 30
        while len(script.started) < 2:
            assert time.monotonic() < deadline, "the slow block never started"
            time.sleep(0.05)
        # When the client cancels it
        cancelled = cancel_run(created.run_id, account_id)
        # Then the run has ended for the client, its execution is stopping, and the slot is held while it does
        assert cancelled.status.value == "partial"
        sfn = local_stack.client("stepfunctions")
        assert sfn.describe_execution(executionArn=execution_arn)["status"] in ("ABORTED", "RUNNING")
        time.sleep(0.5)
        assert int(Store().get_account(account_id)["active_runs"]) == 1
        # When the running block returns (moto ends a stopped execution only then; AWS at once)
        script.release()
        ended = local_stack.wait_for_execution(execution_arn, timeout=30)
    # Then the execution was stopped (moto may report a stop inside a Map as FAILED), and its end gave the slot back
    assert ended["status"] in ("ABORTED", "FAILED")
    deadline = time.monotonic() + 10
    while int(Store().get_account(account_id)["active_runs"]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert int(Store().get_account(account_id)["active_runs"]) == 0
    # And the credits add up: the completed block and planning are charged, the stopped block is not
    run = Store().get_run(created.run_id)
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert [n.status.value for n in nodes] == ["completed", "error", "error"]
    assert nodes[1].credits == 0 and nodes[2].credits == 0
    assert run.credits_consumed == run.planning_credits + nodes[0].credits
    assert int(Store().get_account(account_id)["credits_balance"]) == balance - run.credits_consumed
    assert run.errors[0].error == "Cancelled by the client"
    nothing_running(created.canvas_id)


def test_stopping_the_stack_with_a_run_in_flight_logs_no_error(
    local_stack_factory, caplog, interpreter_errors_unlogged
):
    # Given a run whose second block is still working, among the state machine's Map and Parallel states
    local_stack = local_stack_factory(api_keys=["sk_canvas_statemachine_test_key"])
    dag = Dag([Block(0.05), Block(hang=True), Block(0.05)], [(0, 1), (1, 2)])
    with scripted({"in flight": dag}) as script:
        account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
        created = create_run(CreateRunRequest(prompt="in flight", template="auto"), account_id)
        deadline = time.monotonic() + 30
        while len(script.started) < 2:
            assert time.monotonic() < deadline, "the slow block never started"
            time.sleep(0.05)

        # When the stack stops (as on SIGTERM), the block answering while it waits for the execution to end
        ended: list[str] = []
        moto_patch.on_execution_end(ended.append)
        threading.Timer(0.5, script.release).start()
        with caplog.at_level(logging.INFO):
            local_stack.stop()
        moto_patch.remove_execution_listener(ended.append)

    # Then the execution ended, and nothing logged an error on the way
    assert any(arn.endswith(created.run_id) for arn in ended)
    errors = [f"{r.name}: {r.getMessage()[:300]}" for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == []
