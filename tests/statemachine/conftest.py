"""State machine tier: executions of ASL by moto's interpreter, Lambda tasks run by the handlers in-process."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from canvas_local.stack import LocalStack

EXECUTION_TIMEOUT_SECONDS = 60


@pytest.fixture
def local_stack(local_stack_factory: Callable[..., LocalStack]) -> LocalStack:
    """template.yaml's stack with one seeded account (`local_stack.api_keys[0]`)."""
    return local_stack_factory(api_keys=["sk_canvas_statemachine_test_key"])


@pytest.fixture
def execute() -> Callable[..., dict[str, Any]]:
    """`execute(stack, state_machine_logical_id, input, name=...)`: DescribeExecution once it has finished."""

    def run(stack: LocalStack, state_machine: str, execution_input: Any, name: str = "execution-1") -> dict[str, Any]:
        # Always named: moto gives unnamed executions colliding names.
        execution = stack.client("stepfunctions").start_execution(
            stateMachineArn=stack.state_machine_arns[state_machine],
            name=name,
            input=json.dumps(execution_input),
        )
        return stack.wait_for_execution(execution["executionArn"], timeout=EXECUTION_TIMEOUT_SECONDS)

    return run
