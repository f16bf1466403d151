"""Dataflow execution of a canvas: every block starts the moment all of its inputs have ended.

The state machine runs all blocks of a canvas at once (an inline Map of at most 40 iterations, so every block
is admitted together and none can wait on a block that was never started). Each iteration first parks in
`Wait For Inputs` (a `.waitForTaskToken` task): `register_wait` stores the token on the node. When a block
ends (completed, failed or skipped), `release_dependents` counts it as an ended input of each dependent, once
per input, with a conditional write. Whoever sees a dependent with no pending input and a stored token, the
parking side or the releasing side, claims the release with another conditional write, so a block is released
exactly once even when its last input ends while its token is being stored.
"""

from __future__ import annotations

from typing import Any

from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.clock import now_ms
from canvas_core.models.items import EdgeItem, NodeItem
from canvas_core.observability import logger


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
) -> dict[str, Any]:
    """Count `block_id` as ended for each of its dependents (given by the state machine, else read)."""
    store, executions = store or Store(), executions or Executions()
    if dependents is None:
        node = store.get_node_item(canvas_id, block_id)
        if node is None:
            raise ValueError(f"Block {block_id} not found on canvas {canvas_id}")
        dependents = node.get("dependents", [])
    released = []
    for dependent_id in dependents:
        dependent = store.count_input_ended(canvas_id, dependent_id, block_id)
        if dependent is None:
            # Counted by an earlier attempt of this step; the release may still be owed.
            dependent = store.get_node_item(canvas_id, dependent_id) or {}
        if int(dependent.get("pending_inputs", 1)) <= 0 and _release(store, executions, canvas_id, dependent):
            released.append(dependent_id)
    return {"block_id": block_id, "released": released}


def _release(store: Store, executions: Executions, canvas_id: str, node: dict[str, Any]) -> bool:
    token = node.get("task_token")
    if not token:
        return False  # not parked yet: its own Wait For Inputs will see the count and go on
    block_id = node["block_id"]
    if not store.claim_release(canvas_id, block_id, now_ms()):
        return False
    try:
        executions.send_task_success(token, {"block_id": block_id})
    except Exception:
        # Give the claim back so that the retried step can release the block.
        store.unclaim_release(canvas_id, block_id)
        raise
    logger.debug("Block released", extra={"block_id": block_id})
    return True
