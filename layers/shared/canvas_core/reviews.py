"""Control over what a run spends: review its plan before any block runs, approve it (with new instructions for some
blocks), or cancel a running run (docs/execution.md, "Review and cancel").

A run created with `review=true` is planned as any run (planning is charged), then Plan Canvas raises
`ReviewRequested`, which the state machine's Catch sends to Await Approval: that task stores its token, the plan and
the blocks' estimated credits on the run and waits. Approving claims the token (a conditional write, so one approval
wins) and sends it with the plan; the run goes on as any run. An approval and a cancel whose requests overlap end one
way: each claim is a condition on the run item that the other's mark fails (`Store.claim_approval`,
`Store.claim_cancel`), and the loser answers 409. Cancelling ends the run through the same write that
ends every run (`finalize_run`: unfinished blocks `error`, the reservation settled, the status change published); a
waiting run's task is then failed, and the blocks of an executing run find their nodes ended and never start.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import Field, field_validator, model_validator

from canvas_core.adapters.events import Events
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store
from canvas_core.clock import now_ms, parse_uuid
from canvas_core.errors import BadRequestError, ConflictError, ReviewRequested, RunNotFoundError, StorageError
from canvas_core.models.api import ApproveRunRequest, RunStatusResponse
from canvas_core.models.base import RequestRefused
from canvas_core.models.catalog import RunStatus
from canvas_core.models.items import RunItem
from canvas_core.observability import count, logger
from canvas_core.orchestration import CANCELLED, RunStateError, finalize_run, plan_run
from canvas_core.runs import get_run_status
from canvas_core.textsafety import MAX_JSON_DEPTH, json_depth, strip_control
from canvas_core.validation import CLOSED_BODY, MAX_AGENT_INSTRUCTIONS_CHARS, only_instructions

# The error a cancelled run's parked Await Approval task fails with (the run has ended already).
CANCELLED_ERROR = "RunCancelled"
# What a cancel that lost to an approval answers (409): the two requests overlapped, and the approval was first.
APPROVED_FIRST = "The run was approved as it was cancelled: it runs on; cancel it again to stop it"
# How far before the cancel's handling its request's arrival time (API Gateway's stamp) may be: any older stamp (a
# replayed event, a skewed clock) counts as now. A request is answered within its function's 29 s.
MAX_REQUEST_AGE_MS = 60_000
# An approval's body holds instructions for at most a plan's blocks; past this it is refused unread (413).
MAX_APPROVE_BODY_BYTES = 1024 * 1024


class ApproveRunForm(ApproveRunRequest):
    """The body of POST /v1/run/{run_id}/approve: a JSON object, or a form whose `instructions` field holds the object
    as JSON text; none at all approves the plan as it is. `instructions` maps planned blocks' ids to their new
    instructions, each held to agent_instructions' length."""

    model_config = CLOSED_BODY

    instructions: dict[str, str] = Field(
        default_factory=dict,
        description="New instructions by block id (the DAG's node ids); each at most "
        f"{MAX_AGENT_INSTRUCTIONS_CHARS:,} characters, trimmed, control characters dropped; a blank one keeps the "
        "block's own",
    )

    @model_validator(mode="before")
    @classmethod
    def _only_instructions(cls, body: Any) -> Any:
        # A misspelt field would otherwise approve the plan, and let it spend, without the instructions meant.
        return only_instructions(body)

    @field_validator("instructions", mode="before", json_schema_input_type=dict[str, str])
    @classmethod
    def _instructions(cls, value: Any) -> dict[str, str]:
        if value is None or (isinstance(value, str) and not value.strip()):
            return {}
        if isinstance(value, str):
            try:
                value = json.loads(value) if json_depth(value) <= MAX_JSON_DEPTH else None
            except (json.JSONDecodeError, RecursionError):
                value = None
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise RequestRefused(
                BadRequestError('Invalid instructions: expected an object of block ids to text, {"<block_id>": "..."}')
            )
        cleaned = {}
        for block_id, text in value.items():
            text = strip_control(text).strip()
            if len(text) > MAX_AGENT_INSTRUCTIONS_CHARS:
                raise RequestRefused(
                    BadRequestError(
                        f"Invalid instructions: those for {block_id} are {len(text)} characters "
                        f"(maximum {MAX_AGENT_INSTRUCTIONS_CHARS})"
                    )
                )
            if text:
                cleaned[str(block_id)] = text
        return cleaned


def plan_step(
    execution: dict[str, Any],
    function_prefix: str | None,
    correlation_id: str,
    task_token: str | None = None,
    store: Store | None = None,
) -> dict[str, Any]:
    """Plan Canvas, and Await Approval for a run created with `review=true` (its execution input says so, so a run
    without review reads nothing more). Planning answers the blocks to run; a run to review raises ReviewRequested
    instead, and its Await Approval step (`task_token`) parks it with its plan."""
    store = store or Store()
    run_id = execution["run_id"]
    plan = {**plan_run(run_id, execution["canvas_id"], store, function_prefix), "correlation_id": correlation_id}
    if not execution.get("review"):
        return plan
    if task_token is None:
        # Lambda counts the hand-off among the function's errors; its alarm subtracts this count (template.yaml).
        count("ReviewsRequested")
        raise ReviewRequested(f"Run {run_id} waits for approval")
    _, nodes, _ = store.get_canvas(execution["canvas_id"])
    estimate = sum(n.estimated_credits or 0 for n in nodes)
    listing = {key: plan[key] for key in ("ready", "waiting", "correlation_id")}
    if not store.park_for_review(run_id, task_token, listing, estimate):
        # Cancelled (or refused planning) before it was parked: the task fails, and Fail Run finds the run ended.
        raise RunStateError(f"Run {run_id} ended before it could wait for approval")
    logger.info("Run waits for approval", extra={"blocks": len(plan["blocks"]), "estimated_credits": estimate})
    return {"run_id": run_id, "awaiting_approval": True}


def approve_run(
    run_id: str,
    account_id: str,
    request: ApproveRunRequest,
    store: Store | None = None,
    executions: Executions | None = None,
) -> RunStatusResponse:
    """Let a run waiting for approval go on, first giving the planned blocks named in `request.instructions` their new
    instructions. 409 when the run is not waiting (never asked for review, approved, cancelled, timed out, ended)."""
    store, executions = store or Store(), executions or Executions()
    run = _owned_run(store, run_id, account_id)
    token, plan = run.review_token, run.review_plan
    if run.status != RunStatus.RUNNING or not token or plan is None or run.cancelled_at_ms is not None:
        raise ConflictError(_not_waiting(run))
    if request.instructions:
        _, nodes, _ = store.get_canvas(run.canvas_id)
        planned = {n.block_id for n in nodes}
        unknown = [block_id for block_id in request.instructions if block_id not in planned]
        if unknown:
            raise BadRequestError(
                f"Invalid instructions: {unknown[0]} is not a block of this run's plan (see GET "
                f"/v1/canvas/{run.canvas_id}/dag)"
            )
    approver = str(uuid.uuid4())
    if not store.claim_approval(run.run_id, token, now_ms(), approver):
        current = store.get_run(run.run_id, consistent=True)
        raise ConflictError(_not_waiting(current or run))
    try:
        for block_id, instructions in request.instructions.items():
            store.update_node(
                run.canvas_id, block_id, expect_status=["idle"], instructions=instructions, revision=instructions
            )
        sent = executions.send_task_success(token, json.loads(plan))
    except Exception:
        store.unclaim_approval(run.run_id, token)
        raise
    if not sent:
        raise ConflictError("The run is no longer waiting for approval: its review time ran out, or it was cancelled")
    try:
        # From here a cancel that comes ends the executing run; one that came before this has lost (APPROVED_FIRST).
        store.settle_approval(run.run_id, approver, now_ms())
    except StorageError:
        # The run is approved all the same; cancels are refused until the claim counts as abandoned (Store).
        logger.warning("The approval could not be marked settled", exc_info=True)
    logger.append_keys(run_id=run.run_id)
    logger.info("Run approved", extra={"new_instructions": len(request.instructions)})
    count("RunsApproved")
    return get_run_status(run.run_id, account_id, store=store)


def cancel_run(
    run_id: str,
    account_id: str,
    store: Store | None = None,
    executions: Executions | None = None,
    events: Events | None = None,
    requested_at_ms: int | None = None,
) -> RunStatusResponse:
    """End a running run, waiting for approval or executing: `partial` when some blocks completed, else `failed`, with
    the error "Cancelled by the client". Blocks not started never start and are not charged; the run's reservation
    returns to the account but for what it spent. 409 for a run that has ended, or that an approval whose request
    overlapped this one's (`requested_at_ms`, when it reached the service) let go on first."""
    store, executions = store or Store(), executions or Executions()
    started = now_ms()
    if requested_at_ms is None or not started - MAX_REQUEST_AGE_MS <= requested_at_ms:
        requested_at_ms = started
    run = _owned_run(store, run_id, account_id)
    if run.status != RunStatus.RUNNING:
        raise ConflictError(f"The run has ended ({run.status.value}); only a running run can be cancelled")
    logger.append_keys(run_id=run.run_id)
    won = store.claim_cancel(run.run_id, now_ms(), min(requested_at_ms, started))
    if not won:
        # It ended meanwhile, an approval came first, or a cancel sent at the same time is ending it: that one answers
        # for it. This one ends it too (once, whoever gets there first), so that a cancel whose caller stopped halfway
        # is finished.
        current = store.get_run(run.run_id, consistent=True) or run
        if current.status == RunStatus.RUNNING and current.cancelled_at_ms is None and current.approved_at_ms:
            raise ConflictError(APPROVED_FIRST)
        if current.status != RunStatus.RUNNING or current.cancelled_at_ms is None:
            raise ConflictError(f"The run has ended ({current.status.value}); only a running run can be cancelled")
    # Ended here, or by the run's own end that ending its blocks brought about: cancelled either way. A run executing
    # keeps its slot until its execution has stopped (the end of the execution gives it back): a client that creates
    # and cancels runs in a loop never has more executions running than the account's limit.
    finalize_run(run.run_id, failure=CANCELLED, store=store, events=events, hold_slot=not run.review_token)
    ended = store.get_run(run.run_id, consistent=True)
    if ended is None:
        raise RunNotFoundError(run.run_id)
    if ended.review_token:
        # Parked for approval: its task fails, and the execution ends through Run Cancelled.
        try:
            executions.send_task_failure(ended.review_token, CANCELLED_ERROR, CANCELLED)
        except StorageError:
            # The run has ended all the same; its execution ends when the review time runs out (Fail Run finds it).
            logger.warning("The cancelled run's wait could not be ended", exc_info=True)
    _stop_execution(ended, store, executions)
    if not won or ended.status == RunStatus.COMPLETED:
        # Completed: every block had completed when the cancel came, so it stopped nothing (finalize_run).
        raise ConflictError(f"The run has ended ({ended.status.value}); only a running run can be cancelled")
    logger.info("Run cancelled", extra={"status": ended.status.value})
    count("RunsCancelled")
    return get_run_status(run.run_id, account_id, store=store)


def _stop_execution(run: RunItem, store: Store, executions: Executions) -> None:
    """Stop the cancelled run's execution, so that its running blocks' work ends with it. Its end gives back the slot
    the run held (Fail Run on the execution's end, or Finalize Run); with no execution running, it is given back
    here."""
    if run.review_token:
        return  # the failed task ends it, through Run Cancelled
    try:
        running = executions.stop(run.run_id, CANCELLED_ERROR, CANCELLED)
    except StorageError:
        # The execution ends on its own (its blocks find their nodes ended), and its end gives the slot back.
        logger.warning("The cancelled run's execution could not be stopped", exc_info=True)
        return
    if running:
        # Its execution ends ABORTED: the aborted-executions alarm leaves out these, which a client asked for.
        count("ExecutionsStoppedByCancel")
    if not running and run.slot_held:
        store.release_held_slot(run.run_id, run.account_id)


def _owned_run(store: Store, run_id: str, account_id: str) -> RunItem:
    run_id = parse_uuid("run_id", run_id)
    run = store.get_run(run_id, consistent=True)
    # Another account's run answers exactly as a missing one.
    if run is None or run.account_id != account_id:
        raise RunNotFoundError(run_id)
    return run


def _not_waiting(run: RunItem) -> str:
    if run.status != RunStatus.RUNNING:
        return f"The run is not waiting for approval: it has ended ({run.status.value})"
    if not run.review:
        return "The run is not waiting for approval: it was not created with review=true"
    if run.cancelled_at_ms is not None:
        return "The run is not waiting for approval: it is being cancelled"
    if run.approved_at_ms is not None:
        return "The run is not waiting for approval: it was approved already"
    return "The run is not waiting for approval yet: it is still being planned; try again shortly"
