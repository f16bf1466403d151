"""The steps of the state machine around the blocks: plan the canvas, finalize the run, and record failures
(a block's, or the whole run's). Finalizing keeps whatever finished: a failure never discards done work."""

from __future__ import annotations

import json
from typing import Any

from canvas_core.adapters.events import Events
from canvas_core.adapters.store import Store
from canvas_core.clock import now_ms
from canvas_core.content import belongs_to, run_text_fields, with_full_content
from canvas_core.dataflow import describe_error, record_block_failure, wire
from canvas_core.errors import CreditsExhaustedError, StorageBusyError, StorageError
from canvas_core.estimates import estimate_block_credits
from canvas_core.models.catalog import TERMINAL_NODE_STATUSES, BlockType, NodeStatus, RunStatus, TaskStatus
from canvas_core.models.items import Artifact, EdgeItem, NodeItem, RunError, RunItem
from canvas_core.observability import count, logger
from canvas_core.planner import parent_task_id, plan_canvas
from canvas_core.settings import orchestration_settings

# The reason a run a client cancelled ends with (reviews.cancel_run).
CANCELLED = "Cancelled by the client"
EXECUTION_ENDINGS = {
    "TIMED_OUT": "The run exceeded its maximum duration and was stopped",
    "ABORTED": "The run was stopped before it finished",
    "FAILED": "The run's execution failed",
}


class RunStateError(Exception):
    """The run or canvas a step was given does not exist."""


def plan_run(
    run_id: str, canvas_id: str, store: Store | None = None, function_prefix: str | None = None
) -> dict[str, Any]:
    """Plan the canvas once (a retried step finds the plan stored) and list its blocks in run order: all of
    them, those `ready` at once (no inputs) and those `waiting` for their inputs, each with the function that
    runs its type (named after `function_prefix`, from the state machine: block_function_name)."""
    store = store or Store()
    logger.append_keys(run_id=run_id, canvas_id=canvas_id)
    run = store.get_run(run_id)
    if run is None:
        raise RunStateError(f"Run not found: {run_id}")
    _, nodes, _ = store.get_canvas(canvas_id)
    if run.rerun_of is not None:
        # A re-run's canvas was copied, planned already, when it was created: nothing is planned or charged here.
        if not nodes:
            raise RunStateError(f"The re-run {run_id} has no canvas to run")
    # A run that has ended (its planning could not be paid) is not planned again by a retried step.
    elif not nodes and run.status == RunStatus.RUNNING:
        nodes = _plan(store, run, canvas_id)
    timeout = orchestration_settings().block_timeout_seconds
    # A re-run's reused blocks ended in the run it re-runs: they are not run, and count as ended inputs already.
    nodes = [n for n in nodes if not n.reused]
    running = {n.block_id for n in nodes}
    # Ids only: each iteration carries what it reads and releases, never outputs.
    blocks = [
        {
            "block_id": n.block_id,
            "block_type": n.type,
            "inputs": n.inputs,
            "dependents": n.dependents,
            "timeout_seconds": timeout,
            **({"function": block_function_name(n.type, function_prefix)} if function_prefix is not None else {}),
        }
        for n in nodes
    ]
    # Ready: no input that runs in this execution (a re-run's block may read reused inputs only).
    ready = {n.block_id for n in nodes if not running.intersection(n.inputs)}
    return {
        "blocks": blocks,
        "ready": [b for b in blocks if b["block_id"] in ready],
        "waiting": [b for b in blocks if b["block_id"] not in ready],
    }


def block_function_name(block_type: str, prefix: str) -> str:
    """The function that runs a block type: the prefix, then the logical id the template's Fn::ForEach gives it
    (`web-research-block` -> `<prefix>WebResearchBlockFunction`), as its FunctionName there says."""
    if block_type not in set(BlockType):
        raise RunStateError(f"This deployment has no function for the {block_type} block type")
    name = "".join(part.capitalize() for part in block_type.removesuffix("-block").split("-"))
    return f"{prefix}{name}BlockFunction"


def _plan(store: Store, run: RunItem, canvas_id: str) -> list[NodeItem]:
    """Plan the canvas and store it. When the account cannot pay for planning, the run fails with the reason
    and has no blocks: nothing is charged, and the balance never goes below zero."""
    account = store.get_account(run.account_id) if not run.reserved_credits else None
    balance = int(account.get("credits_balance", 0)) if account else 0
    if account is not None and balance <= 0:
        # Spent by other runs since this one was accepted: do not call the Planner for nothing.
        _fail_unpaid(store, run, f"the account has {balance} credits")
        return []
    plan = plan_canvas(run)
    try:
        # Charged once, before the blocks: a retried step that plans again is not charged again.
        notes = [*([plan.fallback] if plan.fallback else []), *plan.notes] or None
        if store.record_planning(run.run_id, run.account_id, plan.models_used, plan.credits, notes):
            count("CreditsDebited", plan.credits, step="plan")
    except CreditsExhaustedError as exc:
        _fail_unpaid(store, run, f"planning {exc}")
        return []
    for node in plan.nodes:
        node.estimated_credits = estimate_block_credits(node.type, node.persona, uploaded=bool(node.upload_id))
    wire(plan.nodes, plan.edges)
    store.put_tasks(plan.tasks)
    store.put_graph(plan.nodes, plan.edges, canvas_id)
    logger.info("Canvas planned", extra={"blocks": len(plan.nodes), "edges": len(plan.edges)})
    ended = store.get_run(run.run_id, consistent=True)
    if ended is not None and ended.status != RunStatus.RUNNING:
        # Cancelled while it was planned (its end found no blocks to mark): its blocks never start.
        reason = ended.errors[0].error if ended.errors else "The run ended before its blocks started"
        for node in plan.nodes:
            record_block_failure(store, canvas_id, node.block_id, reason)
        return []
    return plan.nodes


def _fail_unpaid(store: Store, run: RunItem, why: str) -> None:
    failure = f"Credits exhausted: the run was not planned ({why}); add credits and run again"
    logger.info("Planning refused", extra={"reason": failure})
    finalize_run(run.run_id, failure=failure, store=store)


def finalize_run(
    run_id: str,
    failure: str | None = None,
    store: Store | None = None,
    events: Events | None = None,
    hold_slot: bool = False,
) -> dict[str, Any]:
    """End a run: its final output from the blocks that completed, its status from how many did, its errors
    from those that did not, and why those that completed on a fallback fell back. With `failure` (the run itself
    broke, or was abandoned, e.g. found `running` after an unclean restart), unfinished blocks fail and the status
    is at best `partial`. Whichever path ends the run, the write that ends it gives back the run's slot, once (a
    run already ended is left as it is), and publishes the run's status change (only the write that won). A run a
    client cancelled ends cancelled, whichever path ends it, unless every block had completed: it ends completed. A
    cancel passes `hold_slot`: the run keeps its slot until its execution has ended; every other caller ends an
    execution (or finds it ended), so it gives back a slot a cancel held."""
    store = store or Store()
    logger.append_keys(run_id=run_id)
    # Read strongly: a cancel marked on the run before it ended the blocks that brought this end about is seen.
    run = store.get_run(run_id, consistent=True)
    if run is None:
        raise RunStateError(f"Run not found: {run_id}")
    if run.status != RunStatus.RUNNING:
        if run.slot_held and not hold_slot:
            store.release_held_slot(run_id, run.account_id)
        return {"run_id": run_id, "status": run.status.value}
    if run.cancelled_at_ms is not None:
        # A client's cancel won: the run ends cancelled, whichever path ends it.
        failure = CANCELLED

    _, nodes, edges = store.get_canvas(run.canvas_id)
    nodes = with_full_content(nodes, run.account_id)
    if failure == CANCELLED and nodes and all(n.status == NodeStatus.COMPLETED for n in nodes):
        # Every block had completed (and was charged) when the cancel came: it stopped nothing, the run completed.
        failure = None
    ended_meanwhile = []
    for node in nodes:
        if node.status not in TERMINAL_NODE_STATUSES:
            reason = failure or "The block did not finish"
            if not record_block_failure(store, run.canvas_id, node.block_id, reason):
                ended_meanwhile.append(node.block_id)
            node.status, node.error = NodeStatus.ERROR, reason
    if ended_meanwhile:
        # Blocks that ended while the run was being ended (a cancel racing their completion) count as they ended, so
        # that what a completed one was charged is in the run's credits.
        as_ended = {
            n.block_id: n for n in with_full_content(store.get_nodes(run.canvas_id, ended_meanwhile), run.account_id)
        }
        nodes = [as_ended.get(n.block_id, n) for n in nodes]

    completed = [n for n in nodes if n.status == NodeStatus.COMPLETED and n.content]
    if completed and failure is None and len(completed) == len(nodes):
        status = RunStatus.COMPLETED
    elif completed:
        status = RunStatus.PARTIAL
    else:
        status = RunStatus.FAILED

    errors = [RunError(error=failure, recoverable=True)] if failure else []
    errors += [RunError(error=note, recoverable=True) for note in run.planning_notes]
    # A block that fell back (a model answer it could not use) completed all the same: its reason is listed, its
    # status and the run's are not changed. A re-run's reused blocks did not run in this run.
    errors += [
        RunError(error=f"{n.name}: {note}", block_id=n.block_id, block_type=n.type, recoverable=True)
        for n in completed
        if not n.reused
        for note in n.notes
    ]
    errors += [
        RunError(error=f"{n.name}: {n.error}", block_id=n.block_id, block_type=n.type, recoverable=False)
        for n in nodes
        if n.status in (NodeStatus.ERROR, NodeStatus.SKIPPED)
    ]
    if not nodes and failure is None:
        errors.append(RunError(error="The plan for this run had no blocks", recoverable=False))

    # A block writes its own node: only its account's objects become the run's files (content.belongs_to).
    artifacts = unique_names(
        [
            a
            for n in completed
            for a in map(Artifact.model_validate, n.artifacts)
            if belongs_to(a.s3_key, run.account_id)
        ]
    )
    # What the run used and spent is what its blocks did: a re-run's reused blocks were paid by the run they ran in.
    ran = [n for n in nodes if not n.reused]
    # Ending the run also gives back its slot among the account's running runs (in the same write).
    finished_at_ms = now_ms()
    # The task tree ends before the run shows ended, so a client that sees the run end reads its tree ended too.
    store.set_task_status(run.canvas_id, parent_task_id(run.canvas_id), _tree_status(status))
    ending = {
        "status": status.value,
        "finished_at_ms": finished_at_ms,
        "models_used": sorted({*run.planning_models_used, *(m for n in ran for m in n.models_used)}),
        "credits_consumed": run.planning_credits + sum(n.credits for n in ran),
    }
    try:
        ended = store.finish_run(
            run_id,
            run.account_id,
            hold_slot=hold_slot,
            **ending,
            artifacts=artifacts,
            # By reference when large, so that the write that ends the run holds whatever its blocks produced.
            **run_text_fields(
                _final_output(completed, edges, [a.name for a in artifacts]), errors, run.account_id, run_id
            ),
        )
    except StorageError as exc:
        if isinstance(exc, StorageBusyError):
            raise  # passing: the step's retry ends the run whole
        # What the run produced could not be written: it ends all the same (its slot and reservation settled), with
        # the reason, rather than fail again on every path that would end it.
        logger.exception("The run's results could not be written; ending it without them")
        unwritten = RunError(error=f"The run's results could not be recorded: {exc}", recoverable=False)
        ended = store.finish_run(run_id, run.account_id, hold_slot=hold_slot, **ending, errors=[*errors[:1], unwritten])
    if ended:
        (events or Events()).publish_run_status(run.account_id, run_id, status.value, finished_at_ms)
        count("RunsEnded", status=status.value)
    else:
        # Another end came first (a cancel, Fail Run): the tree takes the status the run ended with.
        ended_run = store.get_run(run_id, consistent=True)
        ended_as = ended_run.status if ended_run else status
        if ended_run is not None and ended_run.slot_held and not hold_slot:
            # A cancel ended it first and held its slot: this end is the execution's, which gives it back.
            store.release_held_slot(run_id, run.account_id)
        if ended_as != status:
            store.set_task_status(run.canvas_id, parent_task_id(run.canvas_id), _tree_status(ended_as))
    logger.info("Run finished", extra={"status": status.value, "blocks": len(nodes), "completed": len(completed)})
    return {"run_id": run_id, "status": status.value}


def _tree_status(status: RunStatus) -> TaskStatus:
    """What a run's parent task says of how the run ended."""
    return TaskStatus.COMPLETED if status == RunStatus.COMPLETED else TaskStatus.ERROR


def fail_run(event: dict[str, Any], store: Store | None = None) -> dict[str, Any]:
    """Record a run whose execution broke: from the state machine's Catch (`run_id` and `error`), or from
    the EventBridge rule on executions that failed, timed out or were aborted outside that Catch."""
    if "detail" in event:
        detail = event["detail"]
        run_id = _run_id_from_execution(detail)
        failure = EXECUTION_ENDINGS.get(detail.get("status", ""), "The run's execution ended unexpectedly")
    elif "review_error" in event:
        # Await Approval ended without an approval: its timeout, or a cancel (which has ended the run already).
        run_id = event["run_id"]
        failure = review_failure(event["review_error"], event.get("review_timeout_seconds"))
    else:
        run_id = event["run_id"]
        failure = "The run stopped: " + describe_error(event.get("error"), default="an internal step failed")
    try:
        return finalize_run(run_id, failure=failure, store=store)
    except RunStateError:
        # Nothing to mark: the execution was started for a run that is not stored.
        logger.warning("Fail Run for an unknown run", extra={"run_id": run_id, "failure": failure})
        return {"run_id": run_id, "status": "unknown"}


def review_failure(error: dict[str, Any] | None, timeout_seconds: Any) -> str:
    """Why a run that waited for review ended: not approved in time, or the reason its wait failed."""
    if (error or {}).get("Error") in ("States.Timeout", "States.HeartbeatTimeout"):
        return f"The run was not approved within {_duration(int(timeout_seconds or 0))}; its blocks did not run"
    return "The run stopped while it waited for approval: " + describe_error(error, default="the wait failed")


def _duration(seconds: int) -> str:
    for unit, size in (("hour", 3600), ("minute", 60), ("second", 1)):
        if seconds >= size and seconds % size == 0:
            amount = seconds // size
            return f"{amount} {unit}{'' if amount == 1 else 's'}"
    return "the time allowed for review"


def _run_id_from_execution(detail: dict[str, Any]) -> str:
    try:
        return str(json.loads(detail.get("input") or "{}")["run_id"])
    except (json.JSONDecodeError, KeyError, TypeError):
        return str(detail["name"])


def _final_output(completed: list[NodeItem], edges: list[EdgeItem], file_names: list[str]) -> str:
    """The answer: the Writer's synthesis with its numbered sources, or what the finished blocks produced."""
    from canvas_core.agents.writer import final_output

    return final_output(completed, edges, file_names)


def unique_names(artifacts: list[Artifact]) -> list[Artifact]:
    """The run's artifacts with a distinct name each: blocks name their files from their titles without seeing
    each other, so a second `report.docx` becomes `report-2.docx` (the stored key keeps its name; the name is
    what the download is saved as)."""
    taken: set[str] = set()
    named = []
    for artifact in artifacts:
        stem, dot, extension = artifact.name.rpartition(".")
        stem, extension = (stem, dot + extension) if dot else (artifact.name, "")
        name, n = artifact.name, 2
        while name.lower() in taken:
            name, n = f"{stem}-{n}{extension}", n + 1
        taken.add(name.lower())
        named.append(artifact if name == artifact.name else artifact.model_copy(update={"name": name}))
    return named
