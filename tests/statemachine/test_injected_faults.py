"""Runs on the embedded stack with AWS's failures injected (canvas_local.faults): DynamoDB's conflicts and throttling,
Lambda's service errors. Every run ends, no block is lost to a fault, and the ledger adds up."""

from __future__ import annotations

import threading

import pytest

from bench.dags import Block, Dag, scripted
from canvas_core.adapters.store import Store
from canvas_core.auth import authenticate
from canvas_core.models.api import CreateRunRequest
from canvas_core.runs import create_run
from canvas_local import moto_patch
from canvas_local.faults import Faults

pytestmark = [pytest.mark.statemachine, pytest.mark.timeout(300)]

KEY = "sk_canvas_faults_test_key"
CREDITS_PER_BLOCK = 3


def fan_in(width: int) -> Dag:
    """A source, `width` blocks fed by it, and one block fed by all of them: completions close together."""
    blocks = [Block(0.02, credits=CREDITS_PER_BLOCK) for _ in range(width + 2)]
    edges = [(0, i) for i in range(1, width + 1)] + [(i, width + 1) for i in range(1, width + 1)]
    return Dag(blocks, edges)


def run_all(stack, dags: dict[str, Dag]) -> list:
    account_id = authenticate({"X-API-KEY": KEY})
    arn = stack.state_machine_arns["RunCanvasStateMachine"].replace(":stateMachine:", ":execution:")
    with scripted(dags):
        created = [create_run(CreateRunRequest(prompt=prompt, template="auto"), account_id) for prompt in dags]
        for run in created:
            stack.wait_for_execution(f"{arn}:{run.run_id}", timeout=240)
    return created


def test_runs_under_injected_faults_lose_no_block_and_the_ledger_adds_up(local_stack_factory):
    # Given a stack whose DynamoDB conflicts and throttles and whose Lambda fails now and then
    faults = Faults(transaction_conflict=0.3, throttle=0.05, lambda_error=0.02)
    stack = local_stack_factory(api_keys=[KEY], faults=faults)
    account_id = authenticate({"X-API-KEY": KEY})
    before = int(Store().get_account(account_id)["credits_balance"])
    dags = {f"fan-in {i}": fan_in(8) for i in range(4)}
    # When four fan-ins run at once
    created = run_all(stack, dags)
    # Then every run completed with every block
    store = Store()
    runs = [store.get_run(c.run_id) for c in created]
    assert [r.status.value for r in runs] == ["completed"] * len(runs)
    for run in runs:
        _, nodes, _ = store.get_canvas(run.canvas_id)
        assert {n.status.value for n in nodes} == {"completed"}
        # And each run's credits are what its blocks spent
        assert run.credits_consumed == run.planning_credits + sum(n.credits for n in nodes)
        assert sum(n.credits for n in nodes) == CREDITS_PER_BLOCK * len(nodes)
    # And the account's use is the runs' credits, its balance never below zero, its slots all given back
    account = store.get_account(account_id)
    assert before - int(account["credits_balance"]) == sum(r.credits_consumed for r in runs)
    assert int(account["credits_balance"]) >= 0 and int(account["active_runs"]) == 0
    # And the faults were met
    injected = stack.fault_injector.injected
    assert injected["transaction_conflict"] > 0 and injected["throttle"] > 0


def test_a_lambda_service_error_on_run_block_is_retried(local_stack_factory):
    # Given a stack whose Lambda service fails the first invocation of a block function
    stack = local_stack_factory(api_keys=[KEY])
    failed: list[str] = []
    lock = threading.Lock()

    def first_block_invocation_fails(function_name: str) -> bool:
        with lock:
            if not failed and "Block" in function_name:
                failed.append(function_name)
                return True
        return False

    moto_patch.inject_lambda_faults(first_block_invocation_fails)
    try:
        # When a run of a -> b runs
        [created] = run_all(stack, {"lambda error": Dag([Block(0.02, credits=2), Block(0.02, credits=2)], [(0, 1)])})
    finally:
        moto_patch.inject_lambda_faults(None)
    # Then Run Block was retried and the run completed whole
    assert failed
    run = Store().get_run(created.run_id)
    assert run.status.value == "completed"
    _, nodes, _ = Store().get_canvas(run.canvas_id)
    assert [n.status.value for n in nodes] == ["completed", "completed"]
