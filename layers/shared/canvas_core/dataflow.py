"""Dataflow execution of a canvas: every block starts the moment all of its inputs have ended.

The state machine runs all blocks of a canvas at once (two inline Maps side by side, at most 40 blocks in all,
so every block is admitted together and none can wait on a block that was never started). A block without
inputs runs at once; any other first parks in `Wait For Inputs` (a `.waitForTaskToken` task): `register_wait`
stores the token on the node. A block that completes counts itself as an ended input of each dependent in the
write that completes it (`Store.complete_block`). The same write claims the release of the dependents that were
parked and waiting for it alone when it started, or when it looked at them again while it worked
(`claimable_by_completion`), whose tokens it then sends;
`release_ready` claims each other dependent that is ready and parked, in one conditional write each. Otherwise
(skipped, or failed: Release Dependents, where the state machine's Catch goes, first records the failure)
`release_dependents` reads the dependents in one request and counts the block on those it was not counted on
yet, once per input, with a conditional write. Whoever sees a dependent with no pending input and a stored
token, the parking side or the releasing side, claims the release with another conditional write, so a block
is released exactly once even when its last input ends while its token is being stored.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.clock import now_ms
from canvas_core.models.blocks import Release
from canvas_core.models.catalog import NodeStatus, TaskStatus
from canvas_core.models.items import EdgeItem, NodeItem
from canvas_core.observability import logger
from canvas_core.planner import persona_task_id, tool_call_task_id


def wire(nodes: list[NodeItem], edges: list[EdgeItem]) -> None:
    """Set each node's inputs, dependents and pending count from the edges (the plan's single source)."""
    for node in nodes:
        node.inputs = [e.source_id for e in edges if e.target_id == node.block_id]
        node.dependents = [e.target_id for e in edges if e.source_id == node.block_id]
        node.pending_inputs = len(node.inputs)


def register_wait(
    canvas_id: str,
    block_id: str,
    task_token: str,
    store: Store | None = None,
    executions: Executions | None = None,
) -> dict[str, Any]:
    store, executions = store or Store(), executions or Executions()
    node = store.register_task_token(canvas_id, block_id, task_token)
    released = False
    if int(node.get("pending_inputs", 0)) <= 0:
        released = _release(store, executions, canvas_id, node)
    return {"block_id": block_id, "released": released}


def release_dependents(
    canvas_id: str,
    block_id: str,
    dependents: list[str] | None = None,
    store: Store | None = None,
    executions: Executions | None = None,
    error: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Count `block_id` as ended for each of its dependents (given by the caller, else read) that its completion
    did not count, and release those ready. The block's own function calls it when the block ended without an
    error; Release Dependents with the `error` the state machine caught (retries exhausted, a timeout, a crash),
    and then the block is first recorded as failed, so that its dependents see it ended without completing."""
    store, executions = store or Store(), executions or Executions()
    if error is not None:
        record_block_failure(store, canvas_id, block_id, describe_error(error, default="The block failed"))
    if dependents is None:
        node = store.get_node_item(canvas_id, block_id)
        if node is None:
            raise ValueError(f"Block {block_id} not found on canvas {canvas_id}")
        dependents = node.get("dependents", [])
    released = []
    stored = store.get_node_items(canvas_id, dependents) if dependents else {}
    for dependent_id in dependents:
        dependent = stored.get(dependent_id)
        if dependent is None:
            continue
        if block_id not in dependent.get("ended_inputs", ()):
            # Not counted by the block's completion (it failed or was skipped) nor by an earlier attempt.
            dependent = store.count_input_ended(canvas_id, dependent_id, block_id) or (
                store.get_node_item(canvas_id, dependent_id) or {}  # counted meanwhile by a concurrent attempt
            )
        if int(dependent.get("pending_inputs", 1)) <= 0 and _release(store, executions, canvas_id, dependent):
            released.append(dependent_id)
    return {"block_id": block_id, "released": released}


def claimable_by_completion(block_id: str, dependents: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The dependents (as stored when the block started) whose release the block's completion may claim: parked,
    not claimed, and waiting for this block alone. Dependent id -> its task token. An input that ends counts
    itself once, so "this block alone" still holds when the block completes, unless the dependent parks again."""
    return {
        dependent_id: item["task_token"]
        for dependent_id, item in dependents.items()
        if item.get("task_token")
        and item.get("released_at_ms") is None
        and int(item.get("pending_inputs", 0)) == 1
        and block_id not in item.get("ended_inputs", ())
    }


# What a release may carry (`carried_release`): Step Functions keeps at most 256 KB of state data per iteration.
CARRIED_MAX_BYTES = 32_000

# What a completed block's release sends a dependent: (dependent id, its item as claimed after the completion, or
# None for one the completion claimed) -> the token's output.
Carry = Callable[[str, Mapping[str, Any] | None], dict[str, Any]]


def release_ready(
    canvas_id: str,
    block_id: str,
    dependents: list[str],
    store: Store | None = None,
    executions: Executions | None = None,
    claimed: Mapping[str, str] | None = None,
    carry: Carry | None = None,
) -> dict[str, Any]:
    """Release the dependents of a completed block, which its completion counted on each: those whose release the
    completion claimed (`claimed`: dependent id -> task token) are sent their token; every other dependent that is
    ready and parked is claimed and released in one conditional write (no read first). `carry(dependent_id, item)`
    gives what each token carries (`carried_release`), with the dependent's item as claimed after the completion
    (None for one the completion claimed); its block id alone by default."""
    store, executions = store or Store(), executions or Executions()
    claimed = claimed or {}
    released = []
    for dependent_id in dict.fromkeys(dependents):  # each once: a claimed token is sent once
        if dependent_id in claimed:
            output = carry(dependent_id, None) if carry else None
            _send(store, executions, canvas_id, {"block_id": dependent_id, "task_token": claimed[dependent_id]}, output)
            released.append(dependent_id)
            continue
        node = store.claim_ready_release(canvas_id, dependent_id, now_ms())
        if node is not None:
            _send(store, executions, canvas_id, node, carry(dependent_id, node) if carry else None)
            released.append(dependent_id)
    return {"block_id": block_id, "released": released}


def carried_release(
    dependent: Mapping[str, Any], source: NodeItem, account: Mapping[str, Any] | None
) -> dict[str, Any]:
    """What the token of a released `dependent` (its item as stored) carries when `source`, completed, released
    it: for a dependent whose one input is `source`, its node, that input and the account, which it then does not
    read when it starts (`Release`); for any other, or past CARRIED_MAX_BYTES, its block id alone."""
    block_id = dependent["block_id"]
    if list(dependent.get("inputs") or ()) != [source.block_id]:
        return {"block_id": block_id}
    node = NodeItem.model_validate({k: v for k, v in dependent.items() if k in NodeItem.model_fields})
    release = Release(block_id=block_id, node=node, inputs=[source], account=dict(account) if account else None)
    carried = release.model_dump(mode="json", exclude_defaults=True)
    if len(json.dumps(carried)) > CARRIED_MAX_BYTES:
        return {"block_id": block_id}
    return carried


def _release(store: Store, executions: Executions, canvas_id: str, node: dict[str, Any]) -> bool:
    token = node.get("task_token")
    if not token:
        return False  # not parked yet: its own Wait For Inputs will see the count and go on
    if node.get("released_at_ms") is not None:
        return False  # claimed already (a claim given back after a failed send is taken again by that retry)
    if not store.claim_release(canvas_id, node["block_id"], now_ms()):
        return False
    _send(store, executions, canvas_id, node)
    return True


def _send(
    store: Store, executions: Executions, canvas_id: str, node: Mapping[str, Any], output: dict[str, Any] | None = None
) -> None:
    """Send a claimed block's token, with `output` (its block id by default)."""
    block_id = node["block_id"]
    try:
        executions.send_task_success(node["task_token"], output or {"block_id": block_id})
    except Exception:
        # Give the claim back so that the retried step (or the Catch's release) can release the block.
        store.unclaim_release(canvas_id, block_id)
        raise
    logger.debug("Block released", extra={"block_id": block_id})


def record_block_failure(store: Store, canvas_id: str, block_id: str, reason: str) -> bool:
    """Mark a block `error` with its reason, and its tasks with it; a finished block is left as it is (False)."""
    unfinished = [NodeStatus.IDLE.value, NodeStatus.RUNNING.value]
    if not store.update_node(
        canvas_id, block_id, expect_status=unfinished, status=NodeStatus.ERROR.value, error=reason
    ):
        return False
    store.set_task_status(canvas_id, tool_call_task_id(canvas_id, block_id), TaskStatus.ERROR)
    store.set_task_status(canvas_id, persona_task_id(canvas_id, block_id), TaskStatus.ERROR)
    logger.warning("Block failed", extra={"block_id": block_id, "reason": reason})
    return True


def describe_error(error: dict[str, Any] | None, default: str) -> str:
    """A reason a user can read, from a Step Functions error (`Error` name and `Cause`)."""
    if not error:
        return default
    name, cause = error.get("Error", ""), error.get("Cause", "")
    if name == "States.Timeout":
        return "The block timed out"
    try:
        parsed = json.loads(cause) if cause else {}
    except json.JSONDecodeError:
        parsed = {}
    message = parsed.get("errorMessage") if isinstance(parsed, dict) else None
    return message or cause or name or default
