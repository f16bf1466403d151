"""Block isolation (docs/isolation.md): a block parses untrusted pages and files, so its function's role holds no
right to the service's data. Before each block, the state machine's Scope Block step (this module, trusted code)
vends it credentials of BlockSessionRole narrowed by a session policy to the block's own run: its canvas and tasks
(their partition), its run item (read, and its reservation spent), its account item (read, and its running blocks),
the objects of its run (and, read only, those of the earlier runs its inputs and uploads come from), and the task
tokens it sends. Whatever a taken-over block does with them, it reaches nothing of another run or account, and it
cannot write a balance.

Scope Block is also where a block's credits come from when its run's reservation runs short: a block never takes
credits from its account, so it keeps its output and raises ReservationShortError; the state machine comes back
here with that error, the reservation is topped up from the balance (or the block skipped, when the balance cannot
pay), and the block runs again and stores what it kept."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any

from canvas_core.adapters.credentials import PolicyTooLargeError, SessionVendor
from canvas_core.adapters.store import Store
from canvas_core.adapters.store.base import TOP_UP_CREDITS
from canvas_core.errors import BlockFatalError, CreditsExhaustedError
from canvas_core.models.base import Model
from canvas_core.models.blocks import BlockCredentials
from canvas_core.models.catalog import NodeStatus, TaskStatus
from canvas_core.models.items import NodeItem, RunItem
from canvas_core.observability import count, logger
from canvas_core.planner import persona_task_id, tool_call_task_id
from canvas_core.settings import ServiceSettings, scope_settings, service_settings

# IAM's limit on a session policy's plain text; past it a block reads every object of its account, not just its
# run's and those its inputs come from.
MAX_POLICY_CHARS = 2048
# The folders of the bucket a block's objects sit in: `<folder>/<account>/<run>/...`.
RUN_FOLDERS = ("uploads", "content", "artifacts")
_NEEDS = re.compile(r"needs (\d+) credits")


class ScopeRequest(Model):
    """What the state machine hands Scope Block: the block's ids, and after a block's ReservationShortError, that
    error as its Catch passes it (`{"Error": ..., "Cause": ...}`)."""

    run_id: str
    canvas_id: str
    account_id: str
    block_id: str
    short: dict[str, Any] | None = None


def scope_block(
    request: ScopeRequest, store: Store | None = None, vendor: SessionVendor | None = None
) -> BlockCredentials:
    """Credentials for one block that reach only its own run; after a ReservationShortError, the reservation topped
    up first (or the block skipped when the balance cannot pay: its next attempt finds it ended)."""
    store, vendor = store or Store(), vendor or SessionVendor()
    logger.append_keys(run_id=request.run_id, block_id=request.block_id)
    run = store.get_run(request.run_id, consistent=True)
    if run is None or run.account_id != request.account_id or run.canvas_id != request.canvas_id:
        raise BlockFatalError(f"Run {request.run_id} of canvas {request.canvas_id} not found")
    if request.short is not None:
        _pay_short_block(store, run, request)
    # Only a re-run's canvas holds outputs of earlier runs (its reused blocks'): a first run's are all its own.
    nodes = store.get_canvas(run.canvas_id)[1] if run.rerun_of is not None else []
    scope = BlockScope(
        account_id=run.account_id, run_id=run.run_id, canvas_id=run.canvas_id, read_runs=runs_read(run, nodes)
    )
    settings, seconds = scope_settings(), scope_settings().block_credentials_seconds
    session = f"block-{request.block_id}"[:64]
    policy = session_policy(scope, service_settings())
    try:
        return vendor.vend(settings.block_session_role_arn, session, policy, seconds)
    except PolicyTooLargeError:
        # IAM packs a policy before it checks its size: a run reading many earlier runs' objects reads its account's.
        count("BlockScopesWidened")
        wide = session_policy(scope, service_settings(), widen=True)
        return vendor.vend(settings.block_session_role_arn, session, wide, seconds)


class BlockScope(Model):
    account_id: str
    run_id: str
    canvas_id: str
    # The runs whose objects the block may read: its own first, then those its uploads and reused inputs come from.
    read_runs: list[str]


def runs_read(run: RunItem, nodes: Iterable[NodeItem]) -> list[str]:
    """The run itself, then the runs of the account whose objects its canvas refers to: a re-run's uploads and
    reused outputs stay where the run that made them put them."""
    keys = [u.s3_key for u in run.uploads]
    for node in nodes:
        keys += [node.content_key or "", *(a.s3_key for a in node.artifacts)]
    found = [run.run_id]
    for key in keys:
        parts = key.split("/")
        if len(parts) > 3 and parts[0] in RUN_FOLDERS and parts[1] == run.account_id and parts[2] not in found:
            found.append(parts[2])
    return found


def session_policy(scope: BlockScope, settings: ServiceSettings, widen: bool = False) -> dict[str, Any]:
    """The session policy of one block's credentials (IAM intersects it with BlockSessionRole's own policy)."""

    def table(name: str) -> str:
        return f"arn:aws:dynamodb:*:*:table/{name}"

    def keys(leading: str) -> dict[str, Any]:
        return {"ForAllValues:StringEquals": {"dynamodb:LeadingKeys": [leading]}}

    bucket = f"arn:aws:s3:::{settings.artifacts_bucket}"
    account = scope.account_id
    reads = [f"{bucket}/*/{account}/*"] if widen else [f"{bucket}/*/{account}/{run}/*" for run in scope.read_runs]
    # Which items and objects are the block's; what it may do to them (a run's reservation, never a balance) is
    # BlockSessionRole's own policy, which IAM intersects with this one. No Sid: the policy must fit IAM's limit.
    statements: list[dict[str, Any]] = [
        {
            "Effect": "Allow",
            "Action": [
                "dynamodb:GetItem",
                "dynamodb:BatchGetItem",
                "dynamodb:PutItem",
                "dynamodb:UpdateItem",
                "dynamodb:BatchWriteItem",
            ],
            "Resource": [table(settings.canvases_table), table(settings.tasks_table)],
            "Condition": keys(scope.canvas_id),
        },
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:UpdateItem"],
            "Resource": table(settings.runs_table),
            "Condition": keys(scope.run_id),
        },
        {
            "Effect": "Allow",
            "Action": ["dynamodb:GetItem", "dynamodb:BatchGetItem", "dynamodb:UpdateItem"],
            "Resource": table(settings.accounts_table),
            "Condition": keys(account),
        },
        {"Effect": "Allow", "Action": "s3:GetObject", "Resource": reads},
        {"Effect": "Allow", "Action": "s3:PutObject", "Resource": f"{bucket}/*/{account}/{scope.run_id}/*"},
        # Task tokens name no resource; the tokens a block can read are its own canvas's.
        {"Effect": "Allow", "Action": "states:SendTaskSuccess", "Resource": "*"},
    ]
    policy = {"Version": "2012-10-17", "Statement": statements}
    if not widen and len(compact(policy)) > MAX_POLICY_CHARS:
        return session_policy(scope, settings, widen=True)
    return policy


def compact(policy: dict[str, Any]) -> str:
    return json.dumps(policy, separators=(",", ":"))


def _pay_short_block(store: Store, run: RunItem, request: ScopeRequest) -> None:
    """Top the run's reservation up for a block whose output it could not pay for; when the balance cannot, the
    block is skipped, uncharged, and its kept output is never stored."""
    needed = _needed_credits(request.short or {})
    try:
        store.top_up(run.run_id, run.account_id, needed, step=max(needed, TOP_UP_CREDITS))
        return
    except CreditsExhaustedError as exc:
        reason = f"Credits exhausted: the block was not run ({exc})"
    running = [NodeStatus.RUNNING.value]
    if store.update_node(
        run.canvas_id, request.block_id, expect_status=running, status=NodeStatus.SKIPPED.value, error=reason
    ):
        tasks = [tool_call_task_id(run.canvas_id, request.block_id), persona_task_id(run.canvas_id, request.block_id)]
        for task_id in tasks:
            store.set_task_status(run.canvas_id, task_id, TaskStatus.ERROR)
        logger.info("Block skipped", extra={"reason": reason})
        count("BlocksSkipped", step="scope")


def _needed_credits(error: dict[str, Any]) -> int:
    """The credits a block's ReservationShortError said it needs (its message, in the Catch's `Cause`)."""
    cause = error.get("Cause") or ""
    try:
        message = str(json.loads(cause).get("errorMessage", ""))
    except (ValueError, AttributeError):
        message = str(cause)
    found = _NEEDS.search(message)
    if found is None:
        raise BlockFatalError(f"Scope Block was handed an error it cannot pay for: {error.get('Error')}")
    return int(found.group(1))
