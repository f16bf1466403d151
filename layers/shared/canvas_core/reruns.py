"""Re-runs: iterate on a canvas by running one block again, with new instructions, and what depends on it.

A re-run is a new run with a new canvas (one canvas per run, as the contract has it), copied from the canvas of
an ended run: the chosen block and every block downstream of it are stored `idle` to run again, the chosen one with
the new instructions; every other block is carried over as it ended (content, sources, artifacts, credits), marked
`reused`, and counted as an ended input of its dependents from the start. A page or video block re-run with
instructions that name an address reads that address. Plan Canvas then finds the canvas stored
and plans nothing (`orchestration.plan_run`): the state machine runs only the blocks that run again, and the run's
`credits_consumed` counts only them. Admission is a create's: the balance, the account's running-run limit and the
reservation, in one write (`Store.admit_run`).
"""

from __future__ import annotations

from typing import Any

from canvas_core.adapters.events import Events
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.idempotency import call_once
from canvas_core.adapters.store import Store, start_wait_ms
from canvas_core.clock import new_id, now_ms, parse_uuid
from canvas_core.errors import (
    BlockNotFoundError,
    CanvasNotFoundError,
    ConflictError,
    InsufficientCreditsError,
    TooManyConcurrentRunsError,
    TooManyRunStartsError,
)
from canvas_core.estimates import estimate_rerun
from canvas_core.gather.pages import urls_in
from canvas_core.models.api import CreateRunResponse, RerunBlockRequest
from canvas_core.models.base import Model
from canvas_core.models.catalog import NodeStatus, RunStatus, TaskStatus, TaskType
from canvas_core.models.items import CanvasItem, EdgeItem, NodeItem, RerunOf, RunError, RunItem, TaskItem
from canvas_core.observability import count, logger
from canvas_core.planner import parent_task_id, persona_task_id
from canvas_core.settings import api_settings, provider_settings

RERUN_NAME_CHARS = 80
INSTRUCTIONS_EXCERPT_CHARS = 120


def rerun_block(
    canvas_id: str,
    block_id: str,
    request: RerunBlockRequest,
    account_id: str,
    store: Store | None = None,
    executions: Executions | None = None,
    events: Events | None = None,
) -> CreateRunResponse:
    """Start a run that re-runs `block_id` of the caller's canvas `canvas_id` (with `request.instructions`, when
    given) and every block downstream of it, reusing the others. 404 for a canvas or block not the caller's, 409
    while the canvas's run is still running, 402 and 429 as a create."""
    store, executions, events = store or Store(), executions or Executions(), events or Events()
    canvas_id, block_id = parse_uuid("canvas_id", canvas_id), parse_uuid("block_id", block_id)
    canvas, nodes, edges = store.get_canvas(canvas_id)
    # Another account's canvas answers exactly as a missing one.
    if canvas is None or canvas.account_id != account_id:
        raise CanvasNotFoundError(canvas_id)
    chosen = next((n for n in nodes if n.block_id == block_id), None)
    if chosen is None:
        raise BlockNotFoundError(block_id)
    source = store.get_run(canvas.run_id)
    if source is None or source.account_id != account_id:
        raise CanvasNotFoundError(canvas_id)
    if source.status == RunStatus.RUNNING:
        raise ConflictError(
            f"The run {source.run_id} of this canvas is still running: re-run a block once it has ended"
        )

    account = store.get_account(account_id)
    balance = int(account.get("credits_balance", 0)) if account else 0
    if balance <= 0:
        raise InsufficientCreditsError(
            f"Insufficient credits: the account balance is {balance}; add credits to re-run a block"
        )
    settings = api_settings()
    limit = settings.max_concurrent_runs
    if account is not None and int(account.get("active_runs", 0)) >= limit:
        raise TooManyConcurrentRunsError(limit)
    wait_ms = start_wait_ms(account, settings.max_runs_per_minute)
    if wait_ms is not None:
        raise TooManyRunStartsError(settings.max_runs_per_minute, wait_ms)

    run_id, new_canvas_id = new_id(), new_id()
    logger.append_keys(run_id=run_id, canvas_id=new_canvas_id)
    again = downstream_of(block_id, edges)
    copied = copy_nodes(nodes, again, new_canvas_id, block_id, request.instructions)
    to_run = [n for n in copied if not n.reused]
    duration_ms, expected_credits = estimate_rerun(
        [(n.block_id, n.type, n.inputs) for n in to_run], offline=provider_settings().model_provider == "offline"
    )
    run = RunItem(
        run_id=run_id,
        account_id=account_id,
        canvas_id=new_canvas_id,
        prompt=source.prompt,
        template=source.template,
        blocks=source.blocks,
        agent_instructions=source.agent_instructions,
        uploads=source.uploads,
        created_at_ms=now_ms(),
        estimated_duration_ms=duration_ms,
        rerun_of=RerunOf(run_id=source.run_id, canvas_id=canvas_id, block_id=block_id),
    )
    new_canvas = CanvasItem(
        canvas_id=new_canvas_id, account_id=account_id, run_id=run_id, canvas_name=rerun_name(canvas.canvas_name)
    )
    reserve = min(expected_credits, balance)
    admitted = store.admit_run(
        run, new_canvas, limit, reserve=reserve, max_starts_per_minute=settings.max_runs_per_minute, account=account
    )
    if not admitted:
        raise TooManyConcurrentRunsError(limit)
    try:
        new_edges = [EdgeItem(source_id=e.source_id, target_id=e.target_id) for e in edges]
        store.put_tasks(rerun_tasks(run, copied, chosen.block_id, source.run_id, request.instructions))
        # A block to run counts its reused inputs as ended already: only the inputs that run again release it.
        store.put_graph(
            copied,
            new_edges,
            new_canvas_id,
            ended_inputs={n.block_id: [i for i in n.inputs if i not in again] for n in to_run},
        )
        executions.start(
            run_id,
            {
                "run_id": run_id,
                "canvas_id": new_canvas_id,
                "account_id": account_id,
                "correlation_id": logger.get_correlation_id() or run_id,
            },
        )
    except Exception:
        # A re-run whose execution never started must not look like it is running.
        ended_at_ms = now_ms()
        if store.finish_run(
            run_id,
            account_id,
            status=RunStatus.FAILED.value,
            finished_at_ms=ended_at_ms,
            errors=[RunError(error="The re-run could not be started; please try again", recoverable=True)],
        ):
            events.publish_run_status(account_id, run_id, RunStatus.FAILED.value, ended_at_ms)
        raise
    events.publish_run_status(account_id, run_id, RunStatus.RUNNING.value, run.created_at_ms)
    logger.info(
        "Re-run created",
        extra={"source_run_id": source.run_id, "block_id": block_id, "blocks": len(to_run), "reused": len(copied)},
    )
    count("RunsCreated", template="rerun")
    return CreateRunResponse(
        run_id=run_id,
        status=RunStatus.RUNNING,
        poll_url=f"/v1/run/{run_id}",
        estimated_duration_ms=run.estimated_duration_ms,
        canvas_id=new_canvas_id,
    )


class RerunScope(Model):
    """What makes two re-run requests the same: one account's Idempotency-Key for one block of one canvas."""

    account_id: str
    key: str
    canvas_id: str
    block_id: str


def rerun_block_once(
    canvas_id: str,
    block_id: str,
    request: RerunBlockRequest,
    account_id: str,
    idempotency_key: str | None,
    lambda_context: Any = None,
) -> CreateRunResponse:
    """rerun_block, or with an Idempotency-Key, the answer the first request with that key got (for 24 hours), as
    POST /v1/run does: a client that retries after a lost response does not start (and pay for) a second re-run."""
    if not idempotency_key:
        return rerun_block(canvas_id, block_id, request, account_id)
    scope = RerunScope(account_id=account_id, key=idempotency_key, canvas_id=canvas_id, block_id=block_id)
    return call_once(_rerun_keyed, CreateRunResponse, scope, lambda_context, request=request)


def _rerun_keyed(scope: RerunScope, request: RerunBlockRequest) -> CreateRunResponse:
    return rerun_block(scope.canvas_id, scope.block_id, request, scope.account_id)


def downstream_of(block_id: str, edges: list[EdgeItem]) -> set[str]:
    """`block_id` and every block that reads it, directly or through others."""
    found, frontier = {block_id}, [block_id]
    while frontier:
        current = frontier.pop()
        for edge in edges:
            if edge.source_id == current and edge.target_id not in found:
                found.add(edge.target_id)
                frontier.append(edge.target_id)
    return found


def copy_nodes(
    nodes: list[NodeItem], again: set[str], canvas_id: str, chosen_id: str, instructions: str | None
) -> list[NodeItem]:
    """The nodes of the re-run's canvas: those in `again` as planned (idle, no output; the chosen one with
    `instructions` when given), waiting for their inputs that run again; the others as they ended, `reused`."""
    copied = []
    for node in nodes:
        if node.block_id not in again:
            copied.append(node.model_copy(update={"canvas_id": canvas_id, "reused": True, "pending_inputs": 0}))
            continue
        # As planned: what the block ran on, with nothing of what it made (its output, sources, files, credits).
        fresh = node.model_copy(
            update={
                "canvas_id": canvas_id,
                "status": NodeStatus.IDLE,
                "content": None,
                "content_key": None,
                "sources": [],
                "error": None,
                "notes": [],
                "models_used": [],
                "credits": 0,
                "artifacts": [],
                "reused": False,
                "pending_inputs": sum(1 for i in node.inputs if i in again),
                "instructions": instructions if node.block_id == chosen_id and instructions else node.instructions,
                "revision": instructions or node.revision,
            }
        )
        if node.block_id == chosen_id and node.url and urls_in(instructions):
            # A page or video read again from the address the new instructions give (its block reads `url` first).
            fresh.url = urls_in(instructions)[0]
        copied.append(fresh)
    return copied


def rerun_tasks(
    run: RunItem, nodes: list[NodeItem], chosen_id: str, source_run_id: str, instructions: str | None
) -> list[TaskItem]:
    """The re-run's task tree: its parent-task, a persona-task per block; a reused block's says so and has ended as
    the block did, the re-run block's names its new instructions."""
    chosen = next(n for n in nodes if n.block_id == chosen_id)
    parent = TaskItem(
        canvas_id=run.canvas_id,
        task_id=parent_task_id(run.canvas_id),
        name=f"Re-run {chosen.name} and what depends on it",
        task_type=TaskType.PARENT,
    )
    tasks = [parent]
    for i, node in enumerate(nodes):
        name = f"{node.persona}: {node.name}"
        status = TaskStatus.RUNNING
        if node.reused:
            name += f" (reused from run {source_run_id})"
            status = TaskStatus.COMPLETED if node.status == NodeStatus.COMPLETED else TaskStatus.ERROR
        elif node.block_id == chosen_id:
            name += f" (re-run with new instructions: {_excerpt(instructions)})" if instructions else " (re-run)"
        tasks.append(
            TaskItem(
                canvas_id=run.canvas_id,
                task_id=persona_task_id(run.canvas_id, node.block_id),
                parent_id=parent.task_id,
                name=name,
                task_type=TaskType.PERSONA,
                status=status,
                block_id=node.block_id,
                position=i + 1,
            )
        )
    return tasks


def rerun_name(name: str) -> str:
    name = name.removeprefix("Re-run: ")
    full = f"Re-run: {name}"
    return full if len(full) <= RERUN_NAME_CHARS else full[: RERUN_NAME_CHARS - 3].rstrip() + "..."


def _excerpt(text: str) -> str:
    line = " ".join(text.split())
    return line if len(line) <= INSTRUCTIONS_EXCERPT_CHARS else line[: INSTRUCTIONS_EXCERPT_CHARS - 3].rstrip() + "..."
