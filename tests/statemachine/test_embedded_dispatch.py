"""The embedded stack executes a template's ASL with moto and runs its Lambda tasks in-process: Map, Choice,
Catch on a typed error, waitForTaskToken, both Task forms, and the environment template.yaml gives them."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(90)]


def test_a_map_runs_each_item_with_the_function_its_kind_chooses(mini_stack, execute):
    # Given a plan of one item of each kind: plain work, callback approval, typed failure, unknown kind
    kinds = ["work", "approve", "broken", "unknown"]

    # When the fixture state machine runs it
    described = execute(mini_stack, "MiniStateMachine", {"run_id": "run-1", "kinds": kinds})

    # Then every item has the result its branch gives, in plan order
    assert described["status"] == "SUCCEEDED", described
    assert json.loads(described["output"])["results"] == [
        {"item_id": "item-0", "status": "done", "by": "WorkFunction"},
        {"item_id": "item-1", "status": "approved"},
        {"item_id": "item-2", "status": "failed", "error": "BlockFatalError"},
        {"item_id": "item-3", "status": "failed", "error": "unknown kind unknown"},
    ]


def test_handlers_reach_the_resources_the_template_names(mini_stack, execute):
    # Given the work function writes to the table its environment names (!Ref ItemsTable)
    execution_input = {"run_id": "run-2", "kinds": ["work", "work"]}

    # When an execution runs two work items
    described = execute(mini_stack, "MiniStateMachine", execution_input, name="run-2")

    # Then both items are in moto's table, found through the template's GSI
    assert described["status"] == "SUCCEEDED", described
    items = mini_stack.client("dynamodb").query(
        TableName="ItemsTable",
        IndexName="kind-index",
        KeyConditionExpression="kind = :kind",
        ExpressionAttributeValues={":kind": {"S": "work"}},
    )["Items"]
    assert sorted(item["item_id"]["S"] for item in items) == ["item-0", "item-1"]


def test_a_failure_outside_any_catch_fails_the_execution(mini_stack, execute):
    # Given an input the plan function cannot read (no "kinds")
    execution_input = {"run_id": "run-3"}

    # When an execution runs
    described = execute(mini_stack, "MiniStateMachine", execution_input, name="run-3")

    # Then the execution fails with the handler's exception class
    assert described["status"] == "FAILED"
    assert described["error"] == "KeyError"


def test_a_stopped_stack_gives_back_the_environment_it_found_not_one_changed_since(local_stack_factory, monkeypatch):
    import os

    from tests.conftest import MINI_STACK_TEMPLATE

    # Given an operator setting in the environment as a stack starts (a test's monkeypatch.setenv)
    monkeypatch.setenv("BLOCK_TIMEOUT_SECONDS", "2")
    stack = local_stack_factory(MINI_STACK_TEMPLATE)
    assert stack.environment["BLOCK_TIMEOUT_SECONDS"] == "2"

    # When the setting is removed before the stack stops (the monkeypatch undone first), then the stack stops
    monkeypatch.delenv("BLOCK_TIMEOUT_SECONDS")
    stack.stop()

    # Then the stack does not put back the value it found: the next stack would start with it
    assert "BLOCK_TIMEOUT_SECONDS" not in os.environ
