"""One task state runs every block type and releases the block's dependents, after the trusted step that vends its
credentials: a block without inputs costs two state transitions (Scope Block, Run Block), one with inputs three
(Wait For Inputs first), and a failure the state machine catches one more (Release Dependents records it and
releases the dependents). Counted from the execution history as AWS bills them."""

from __future__ import annotations

import collections

import pytest

from bench.dags import Block, Dag, Script, scripted
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest, RerunBlockRequest
from canvas_core.reruns import rerun_block
from canvas_core.runs import create_run

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(120)]


def run_and_count(stack, prompt: str, dag: Dag) -> tuple[str, dict[str, int]]:
    """Run `dag` to its end; (canvas id, states entered by name)."""
    account_id = authenticate({"X-API-KEY": stack.api_keys[0]})
    with scripted({prompt: dag}):
        created = create_run(CreateRunRequest(prompt=prompt, template="auto"), account_id)
        arn = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
        execution_arn = f"{arn}:{created.run_id}"
        assert stack.wait_for_execution(execution_arn, timeout=60)["status"] == "SUCCEEDED"
    events = stack.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)
    entered = collections.Counter(
        e["stateEnteredEventDetails"]["name"] for e in events["events"] if e["type"].endswith("StateEntered")
    )
    return created.canvas_id, dict(entered)


def test_blocks_cost_two_transitions_without_inputs_and_three_with(local_stack):
    # Given a -> b, a -> c, b -> d, c -> d: one block without inputs, three with
    dag = Dag([Block(0.0) for _ in range(4)], [(0, 1), (0, 2), (1, 3), (2, 3)])

    # When it runs
    _, entered = run_and_count(local_stack, "four blocks", dag)

    # Then the block without inputs was scoped and ran (2), the others waited, were scoped and ran (3 each); each
    # released its dependents
    assert entered == {
        "Plan Canvas": 1,
        "Run Blocks": 1,
        "Run Ready Blocks": 1,
        "Scope Block": 1,
        "Run Block": 1,
        "Run Waiting Blocks": 1,
        "Wait For Inputs": 3,
        "Scope Waiting Block": 3,
        "Run Waiting Block": 3,
        "Finalize Run": 1,
    }


def test_a_block_timed_out_by_the_state_machine_is_recorded_by_its_release(local_stack_factory, monkeypatch):
    # Given a -> b -> c where b never answers within a 2-second limit, given to the stack's functions as it starts
    monkeypatch.setenv("BLOCK_TIMEOUT_SECONDS", "2")
    local_stack = local_stack_factory(api_keys=["sk_canvas_statemachine_test_key"])
    dag = Dag([Block(0.0), Block(hang=True), Block(0.0)], [(0, 1), (1, 2)])

    # When it runs
    canvas_id, entered = run_and_count(local_stack, "times out", dag)

    # Then the Catch went straight to the release, which recorded the failure: one state for it, b's alone (c's
    # runner skips c and has nothing to release)
    assert entered["Wait For Inputs"] == entered["Run Waiting Block"] == 2
    assert entered["Release Waiting Block Dependents"] == 1
    assert "Release Dependents" not in entered
    assert "Record Block Failure" not in entered
    _, nodes, _ = Store().get_canvas(canvas_id)
    assert [(n.status.value, n.error) for n in nodes] == [
        ("completed", None),
        ("error", "The block timed out"),
        ("skipped", "Skipped: its input 'Block 1' did not complete"),
    ]


def test_a_block_released_by_its_one_input_starts_without_reading_what_the_release_carried(local_stack, monkeypatch):
    # Given a -> b -> c and a, b -> d: b and c have one input each, d two; every read a block makes when it starts
    # is recorded
    dag = Dag([Block(0.1) for _ in range(4)], [(0, 1), (1, 2), (0, 3), (1, 3)])
    reads: list[list[str]] = []
    real_read = Store.get_nodes_and_account

    def get_nodes_and_account(self, canvas_id, block_ids, account_id=None, dependents=None):
        reads.append(list(block_ids))
        return real_read(self, canvas_id, block_ids, account_id, dependents=dependents)

    monkeypatch.setattr(Store, "get_nodes_and_account", get_nodes_and_account)
    inputs_seen: dict[str, list[str]] = {}
    real_run = Script.run

    def run(self, ctx):
        inputs_seen[ctx.node.name] = sorted(i.content or "" for i in ctx.inputs)
        return real_run(self, ctx)

    monkeypatch.setattr(Script, "run", run)

    # When it runs
    canvas_id, _ = run_and_count(local_stack, "carried releases", dag)

    # Then a (no input) and d (two inputs) read their node and inputs when they started; b and c had them from the
    # release that started them; every block completed, having worked on its inputs' outputs
    _, nodes, _ = Store().get_canvas(canvas_id)
    ids = {n.name: n.block_id for n in nodes}
    assert sorted(block_ids[0] for block_ids in reads) == sorted([ids["Block 0"], ids["Block 3"]])
    assert all(n.status.value == "completed" for n in nodes)
    assert inputs_seen == {
        "Block 0": [],
        "Block 1": ["Block 0 done after 0.1s"],
        "Block 2": ["Block 1 done after 0.1s"],
        "Block 3": ["Block 0 done after 0.1s", "Block 1 done after 0.1s"],
    }


def test_a_rerun_enters_a_state_only_for_the_blocks_that_run_again(local_stack):
    # Given a finished run of a -> b -> d and a -> c -> d
    account_id = authenticate({"X-API-KEY": local_stack.api_keys[0]})
    dag = Dag([Block(0.0) for _ in range(4)], [(0, 1), (0, 2), (1, 3), (2, 3)])
    canvas_id, _ = run_and_count(local_stack, "four blocks, then one re-run", dag)
    a, b, c, d = Store().get_canvas(canvas_id)[1]

    # When b is re-run (so b and d run again; a and c are reused)
    with scripted({}):
        created = rerun_block(canvas_id, b.block_id, RerunBlockRequest(instructions='{"seconds": 0.0}'), account_id)
        entered = entered_states(local_stack, created.run_id)

    # Then b runs at once (its one input, a, is reused) and d waits for b alone: no state for a or c, no planning
    assert entered == {
        "Plan Canvas": 1,
        "Run Blocks": 1,
        "Run Ready Blocks": 1,
        "Scope Block": 1,
        "Run Block": 1,
        "Run Waiting Blocks": 1,
        "Wait For Inputs": 1,
        "Scope Waiting Block": 1,
        "Run Waiting Block": 1,
        "Finalize Run": 1,
    }
    _, nodes, _ = Store().get_canvas(created.canvas_id)
    assert [(n.block_id, n.reused, n.status.value) for n in nodes] == [
        (a.block_id, True, "completed"),
        (b.block_id, False, "completed"),
        (c.block_id, True, "completed"),
        (d.block_id, False, "completed"),
    ]


def entered_states(stack, run_id: str) -> dict[str, int]:
    """The states a run's execution entered, by name, once it has succeeded."""
    arn = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    execution_arn = f"{arn}:{run_id}"
    assert stack.wait_for_execution(execution_arn, timeout=60)["status"] == "SUCCEEDED"
    events = stack.client("stepfunctions").get_execution_history(executionArn=execution_arn, maxResults=1000)
    return dict(
        collections.Counter(
            e["stateEnteredEventDetails"]["name"] for e in events["events"] if e["type"].endswith("StateEntered")
        )
    )
