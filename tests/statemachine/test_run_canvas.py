"""statemachine/run_canvas.asl.json, the file that deploys, executed by moto's interpreter with every Lambda
task run in-process by the handler template.yaml names: the happy path and each failure path."""

from __future__ import annotations

import json
import threading
import time

import pytest

from canvas_core.adapters.block_slots import BlockSlots
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest, UploadedFile
from canvas_core.runs import create_run

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(90)]


def start(stack, **request) -> tuple[str, dict]:
    """Create a run as POST /v1/run does (which starts its execution) and wait for the execution to end."""
    account_id = authenticate({"X-API-KEY": stack.api_keys[0]})
    created = create_run(CreateRunRequest(template=request.pop("template", "auto"), **request), account_id)
    arn = (
        f"{stack.state_machine_arns['RunCanvasStateMachine'].replace(':stateMachine:', ':execution:')}:{created.run_id}"
    )
    return created.run_id, stack.wait_for_execution(arn, timeout=60)


def statuses(canvas_id: str) -> tuple[list[tuple[str, str]], set[str]]:
    _, nodes, _ = Store().get_canvas(canvas_id)
    return [(n.type, n.status.value) for n in nodes], {t.status.value for t in Store().get_tasks(canvas_id)}


def test_a_run_goes_from_plan_to_completed(local_stack):
    # When
    run_id, execution = start(local_stack, prompt="Explain tides", blocks=["prompt-block", "text-block"])
    # Then the execution succeeded through Plan Canvas, Run Blocks and Finalize Run
    assert execution["status"] == "SUCCEEDED"
    assert json.loads(execution["output"]) == {"run_id": run_id, "status": "completed"}
    run = Store().get_run(run_id)
    assert run.status.value == "completed" and "Explain tides" in run.final_output
    nodes, tasks = statuses(run.canvas_id)
    assert nodes == [("prompt-block", "completed"), ("text-block", "completed")]
    assert tasks == {"completed"}


def test_a_failing_block_is_caught_recorded_and_its_dependents_skipped(local_stack, monkeypatch):
    # Given two uploaded files, the second of which its file-block cannot read
    from canvas_core.blocks import registry
    from canvas_core.blocks.context import BlockOutput
    from canvas_core.errors import BlockFatalError

    def file_block(ctx):
        if ctx.node.name == "b.txt":
            raise BlockFatalError("b.txt could not be read")
        return BlockOutput(content="Tides follow the moon closely.")

    real = registry.implementation
    monkeypatch.setattr(
        "canvas_core.blocks.runner.implementation", lambda t: file_block if t == "file-block" else real(t)
    )
    files = [
        UploadedFile(name="a.txt", extension="txt", content_type="text/plain", data=b"Tides."),
        UploadedFile(name="b.txt", extension="txt", content_type="text/plain", data=b"Unreadable."),
    ]
    # When
    run_id, execution = start(local_stack, prompt="Compare", blocks=["prompt-block", "text-block"], files=files)
    # Then the Catch sent the failure to Record Block Failure and the run still finalized
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(run_id)
    assert run.status.value == "partial"
    nodes, tasks = statuses(run.canvas_id)
    assert nodes == [
        ("file-block", "completed"),
        ("file-block", "error"),
        ("prompt-block", "skipped"),
        ("text-block", "skipped"),
    ]
    assert "running" not in tasks
    assert "Tides follow the moon" in run.final_output
    assert any(e.block_type == "file-block" and e.error.endswith("b.txt could not be read") for e in run.errors)


def test_a_run_with_only_unavailable_blocks_fails_with_a_reason(local_stack, monkeypatch):
    monkeypatch.setattr("canvas_core.blocks.runner.implementation", lambda block_type: None)
    run_id, execution = start(local_stack, prompt="Write a report", blocks=["document-block"])
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(run_id)
    assert run.status.value == "failed"
    assert any(e.block_type == "document-block" for e in run.errors)


def test_a_broken_step_ends_in_fail_run_and_the_run_is_failed(local_stack):
    # Given an execution for a run whose record is gone: Plan Canvas cannot plan it
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    created = create_run(CreateRunRequest(prompt="Vanishing run", template="auto"), account_id)
    arn = local_stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    first = local_stack.wait_for_execution(f"{arn}:{created.run_id}", timeout=60)
    assert first["status"] == "SUCCEEDED"
    sfn = local_stack.client("stepfunctions")
    execution = sfn.start_execution(
        stateMachineArn=local_stack.state_machine_arns["RunCanvasStateMachine"],
        name="broken-step",
        input=json.dumps(
            {"run_id": "00000000-0000-4000-8000-000000000000", "canvas_id": created.canvas_id, "account_id": account_id}
        ),
    )
    # When
    ended = local_stack.wait_for_execution(execution["executionArn"], timeout=60)
    # Then Plan Canvas failed, Fail Run ran, and the execution ended in the Run Failed state
    assert ended["status"] == "FAILED"
    assert ended.get("error") == "RunFailed"


def test_a_planner_fault_fails_the_run_with_its_reason(local_stack, monkeypatch):
    # Given the planner breaks (the handlers run in this process, so the fault reaches the real execution)
    def broken_planner(run):
        raise RuntimeError("planner exploded")

    monkeypatch.setattr("canvas_core.orchestration.plan_canvas", broken_planner)
    # When
    run_id, execution = start(local_stack, prompt="Explain tides")
    # Then
    assert execution["status"] == "FAILED"
    assert execution.get("error") == "RunFailed"
    run = Store().get_run(run_id)
    assert run.status.value == "failed"
    assert run.errors[0].error == "The run stopped: planner exploded"
    assert run.finished_at_ms is not None


def test_blocks_past_the_accounts_limit_wait_for_a_slot_and_the_run_completes(local_stack_factory, monkeypatch):
    # Given an account that may run one block at once, and a run of three files read in parallel, each taking a while
    stack = local_stack_factory(
        api_keys=["sk_canvas_statemachine_test_key"], parameter_overrides={"MaxRunningBlocksPerAccount": "1"}
    )
    from canvas_core.blocks import registry
    from canvas_core.blocks.context import BlockOutput

    running, most, lock = [0], [0], threading.Lock()

    def file_block(ctx):
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.3)
        with lock:
            running[0] -= 1
        return BlockOutput(content=f"{ctx.node.name} says tides follow the moon.")

    real = registry.implementation
    monkeypatch.setattr(
        "canvas_core.blocks.runner.implementation", lambda t: file_block if t == "file-block" else real(t)
    )
    files = [
        UploadedFile(name=f"{name}.txt", extension="txt", content_type="text/plain", data=b"Tides.")
        for name in ("a", "b", "c")
    ]
    # When
    run_id, execution = start(stack, prompt="Compare", blocks=["prompt-block", "text-block"], files=files)
    # Then every block ran, one at a time, and the account holds no slot after
    assert execution["status"] == "SUCCEEDED"
    run = Store().get_run(run_id)
    assert run.status.value == "completed"
    nodes, _ = statuses(run.canvas_id)
    assert {status for _, status in nodes} == {"completed"} and len(nodes) == 5
    assert most[0] == 1
    assert BlockSlots().held(run.account_id) == {}
