"""What every block Lambda does around its type's behaviour: load the node and its inputs, skip it when an
input failed, run it once (a retried task finds it done), store its output (counting the block as an ended input
of each dependent in the same write), keep the task tree in step, and release the dependents it made ready."""

from __future__ import annotations

import contextvars
import json
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.adapters.block_slots import BlockSlots, slot_key
from canvas_core.adapters.dynamodb import ConditionFailed
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.store import Store, jsonable_fields
from canvas_core.blocks.context import BlockContext
from canvas_core.blocks.registry import implementation
from canvas_core.content import content_fields, with_full_content
from canvas_core.dataflow import (
    Carry,
    carried_release,
    claimable_by_completion,
    record_block_failure,
    release_dependents,
    release_ready,
)
from canvas_core.errors import (
    BlockFatalError,
    BlockRetryableError,
    BlocksBusyError,
    CreditsExhaustedError,
    ReservationShortError,
    StorageBusyError,
    StorageError,
)
from canvas_core.models.blocks import BlockInput, BlockResult
from canvas_core.models.catalog import TERMINAL_NODE_STATUSES, BlockType, NodeStatus, TaskStatus, TaskType
from canvas_core.models.items import NodeItem, RunItem, TaskItem
from canvas_core.observability import MetricUnit, count, logger, tracer
from canvas_core.planner import persona_task_id, tool_call_task_id, tool_call_tasks
from canvas_core.pricing import balance_refusal, block_credits
from canvas_core.providers import ModelProvider, get_provider
from canvas_core.settings import block_settings

# How long a block's running mark waits for its work (and that of blocks released with it) to get going.
MARK_AFTER_SECONDS = 0.05
# Sources a block goes without when they fail: a page, a video, and research that found nothing or could not search.
OPTIONAL_INPUTS = frozenset(
    {BlockType.WEB.value, BlockType.YT.value, BlockType.WEB_RESEARCH.value, BlockType.DEEP_RESEARCH.value}
)


@tracer.capture_method
def run_block(
    block: BlockInput,
    expected_type: str,
    store: Store | None = None,
    files: ArtifactStore | None = None,
    provider: ModelProvider | None = None,
    executions: Executions | None = None,
) -> BlockResult:
    """Run the block once; when it has ended without an error (completed or skipped, now or by an earlier attempt),
    release its dependents that are ready. An error goes to the state machine, whose Catch hands it to Release
    Dependents, which records it and releases them."""
    store = store or Store()
    attempt = _run_once(block, expected_type, store, files, provider)
    node, result = attempt.node, attempt.result
    try:
        if not node.dependents:
            return result
        if result.status == NodeStatus.COMPLETED.value:
            # Its completion counted it on each dependent and claimed those waiting for it alone: their tokens are
            # sent, and the others now ready are claimed.
            release_ready(
                block.canvas_id,
                node.block_id,
                node.dependents,
                store,
                executions,
                claimed=attempt.claimed,
                carry=attempt.carry,
            )
        else:
            release_dependents(block.canvas_id, node.block_id, node.dependents, store=store, executions=executions)
        return result
    finally:
        # The tool calls the block made, written once its dependents are on their way (whether or not their
        # release succeeded): the write is not between the block's end and theirs' start.
        if attempt.tool_calls:
            store.put_tasks(attempt.tool_calls)


@contextmanager
def _slot(account_id: str, block: BlockInput) -> Iterator[None]:
    """One of the account's slots for blocks running at once, held while the block works; BlocksBusyError, with
    nothing done, when the account's blocks hold them all."""
    slots, key = BlockSlots(), slot_key(block.run_id, block.block_id)
    limit = block_settings().max_running_blocks
    if not slots.take(account_id, key, limit):
        count("BlocksWaitingForSlot", step=block.block_type)
        raise BlocksBusyError(f"The account has {limit} blocks running, as many as it may at once")
    try:
        yield
    finally:
        try:
            slots.give_back(account_id, key)
        except StorageError:
            # DynamoDB kept refusing the write: the block's work stands, and its hold lapses (HOLD_MS).
            logger.warning("The block's slot could not be given back; its hold lapses", exc_info=True)


@dataclass(frozen=True)
class _Attempt:
    """What one attempt at a block did: its node, its result, the dependents whose release its completion
    claimed (with their tokens), the tool-call tasks of a completed block, to write, and what a completed block's
    releases carry to its dependents."""

    node: NodeItem
    result: BlockResult
    claimed: dict[str, str] = field(default_factory=dict)
    tool_calls: list[TaskItem] = field(default_factory=list)
    carry: Carry | None = None


def _run_once(
    block: BlockInput,
    expected_type: str,
    store: Store,
    files: ArtifactStore | None,
    provider: ModelProvider | None,
) -> _Attempt:
    logger.append_keys(run_id=block.run_id, block_id=block.block_id, block_type=block.block_type)
    for key in ("run_id", "block_id", "block_type"):
        tracer.put_annotation(key, getattr(block, key))
    if block.block_type != expected_type:
        raise BlockFatalError(f"Block {block.block_id} is a {block.block_type}, not a {expected_type}")
    node, inputs, account, dependents = _load_node(store, block)
    if node.status in TERMINAL_NODE_STATUSES:
        if node.status == NodeStatus.COMPLETED:
            # A retry after a crash between the node's write and its tasks' finishes the tasks.
            for task_id in _task_ids(block.canvas_id, node.block_id):
                store.set_task_status(block.canvas_id, task_id, TaskStatus.COMPLETED)
        return _Attempt(node, BlockResult(block_id=node.block_id, status=node.status.value))

    unfinished = [n for n in inputs if n.status != NodeStatus.COMPLETED]
    # A page or video that could not be read (refused, gone, malformed) is a source the run goes without: the
    # block runs on its other inputs and the failure stays in the run's errors. Any other input is needed.
    needed = [n for n in unfinished if n.type not in OPTIONAL_INPUTS]
    inputs = [n for n in inputs if n.status == NodeStatus.COMPLETED]
    if needed:
        reason = f"Skipped: its input '{needed[0].name}' did not complete"
        store.update_node(block.canvas_id, node.block_id, status=NodeStatus.SKIPPED.value, error=reason)
        store.set_task_status(block.canvas_id, persona_task_id(block.canvas_id, node.block_id), TaskStatus.ERROR)
        logger.info("Block skipped", extra={"reason": reason})
        count("BlocksSkipped", step=node.type)
        return _Attempt(node, BlockResult(block_id=node.block_id, status=NodeStatus.SKIPPED.value))

    run = _run(store, block.run_id)
    if run is None:
        raise BlockFatalError(f"Run {block.run_id} not found")
    behaviour = implementation(node.type)
    if behaviour is None:
        reason = f"The {node.type} block type is not available in this deployment yet"
        record_block_failure(store, block.canvas_id, node.block_id, reason)
        count("BlocksFailed", step=node.type)
        raise BlockFatalError(reason)

    if run.account_id != block.account_id:
        account = store.get_account(run.account_id)
    refusal = balance_refusal(account)
    if refusal and run.reserved_credits is not None:
        # The account's balance is spent, but the run may still hold credits set aside for it.
        current = store.get_run(run.run_id)
        if current is not None and (current.reserved_credits or 0) > 0:
            refusal = None
    if refusal:
        store.update_node(block.canvas_id, node.block_id, status=NodeStatus.SKIPPED.value, error=refusal)
        store.set_task_status(block.canvas_id, persona_task_id(block.canvas_id, node.block_id), TaskStatus.ERROR)
        logger.info("Block skipped", extra={"reason": refusal})
        count("BlocksSkipped", step=node.type)
        return _Attempt(node, BlockResult(block_id=node.block_id, status=NodeStatus.SKIPPED.value))

    files = files or ArtifactStore()
    claims = _Claims(store, node, dependents)
    kept = _kept_completion(files, run, node) if node.status == NodeStatus.RUNNING else None
    if kept is not None:
        # An earlier attempt did the work but could not store it (DynamoDB kept cancelling or throttling the write):
        # its output is stored now, not made again.
        logger.info("Block output kept by an earlier attempt is stored")
        return _complete(store, files, block, run, node, account, claims, *kept)

    ctx = BlockContext(run=run, node=node, inputs=inputs, files=files, provider=provider or get_provider())
    started = time.monotonic()
    try:
        with _slot(run.account_id, block), _marked_running(store, node, then=claims.refresh):
            output = behaviour(ctx)
    except ConditionFailed:
        # Its node ended before the running mark (its run was cancelled): the work is dropped, never charged.
        logger.info("Block ended before it started; its work is dropped")
        return _Attempt(node, BlockResult(block_id=node.block_id, status=NodeStatus.ERROR.value))
    except BlockRetryableError:
        count("BlockRetryableErrors", step=node.type)
        raise
    except BlocksBusyError:
        raise
    except BlockFatalError as exc:
        record_block_failure(store, block.canvas_id, node.block_id, str(exc))
        count("BlocksFailed", step=node.type)
        raise
    except Exception as exc:
        logger.exception("Block failed unexpectedly")
        reason = f"The {node.type} block failed unexpectedly ({type(exc).__name__})"
        record_block_failure(store, block.canvas_id, node.block_id, reason)
        count("BlocksFailed", step=node.type)
        raise BlockFatalError(reason) from exc
    finally:
        # What an attempt took and spent, whether it succeeded or not.
        count("BlockDuration", (time.monotonic() - started) * 1000, MetricUnit.Milliseconds, step=node.type)
        count("ModelInputTokens", ctx.usage.input_tokens, step=node.type)
        count("ModelOutputTokens", ctx.usage.output_tokens, step=node.type)

    files = ctx.files
    credits = block_credits(ctx.usage, output)
    fields: dict[str, Any] = {
        **content_fields(output.content, run.account_id, run.run_id, node.block_id, files),
        "sources": output.sources,
        "models_used": list(dict.fromkeys([*ctx.usage.models_used, *output.models_used])),
        "credits": credits,
        "artifacts": output.artifacts,
        **({"url": output.url} if output.url else {}),
        # Why it fell back, in the same write (no write of its own): the run's errors list them at its end.
        **({"notes": ctx.notes} if ctx.notes else {}),
    }
    return _complete(store, files, block, run, node, account, claims, fields, tool_call_tasks(node, ctx.usage))


def _complete(
    store: Store,
    files: ArtifactStore,
    block: BlockInput,
    run: RunItem,
    node: NodeItem,
    account: Mapping[str, Any] | None,
    claims: _Claims,
    fields: dict[str, Any],
    tool_calls: list[TaskItem],
) -> _Attempt:
    """Store a block's output on its node, its credits spent from its run's reservation in the same write. A write
    DynamoDB still cancels or throttles after its retries loses nothing: the output is kept in S3 and the state
    machine retries the block, whose next attempt stores it (`_kept_completion`) instead of doing the work again.
    Likewise when the reservation cannot pay: a block never takes credits from its account (docs/isolation.md), so it
    keeps its output and raises ReservationShortError, and the state machine's Scope Block tops the reservation up
    from the balance, or skips the block when the balance cannot pay, before the block is run again."""
    credits = int(fields.get("credits") or 0)
    # Only from `running`: a block the state machine timed out (now `error`) stays failed if it ends late.
    try:
        finished = store.complete_block(
            block.canvas_id,
            node.block_id,
            _task_ids(block.canvas_id, node.block_id),
            debit_run=run.run_id,
            dependents=node.dependents,
            release=claims.tokens,
            **fields,
        )
    except StorageBusyError as exc:
        _keep_completion(files, run, node, fields, tool_calls)
        count("BlockRetryableErrors", step=node.type)
        raise BlockRetryableError(
            f"The block's output could not be stored yet, and is kept for a retry: {exc}"
        ) from exc
    except CreditsExhaustedError as exc:
        _keep_completion(files, run, node, fields, tool_calls)
        count("BlockReservationsShort", step=node.type)
        raise ReservationShortError(exc.credits, exc.balance) from exc
    if finished is None:
        logger.warning("Block ended after it was recorded as failed; its output is dropped")
        count("BlocksFailed", step=node.type)
        return _Attempt(node, BlockResult(block_id=node.block_id, status=NodeStatus.ERROR.value))
    logger.info("Block completed", extra={"content_chars": len(str(fields.get("content") or ""))})
    count("BlocksCompleted", step=node.type)
    count("CreditsDebited", credits, step=node.type)
    completed = BlockResult(block_id=node.block_id, status=NodeStatus.COMPLETED.value)
    done = NodeItem.model_validate(
        node.model_dump(mode="json") | jsonable_fields(fields) | {"status": NodeStatus.COMPLETED.value}
    )
    carry = claims.carry(done, account)
    return _Attempt(node, completed, finished.released, tool_calls, carry)


def _kept_key(run: RunItem, node: NodeItem) -> str:
    return f"content/{run.account_id}/{run.run_id}/{node.block_id}.completion.json"


def _keep_completion(
    files: ArtifactStore, run: RunItem, node: NodeItem, fields: Mapping[str, Any], tool_calls: list[TaskItem]
) -> None:
    kept = {"fields": jsonable_fields(fields), "tool_calls": [t.model_dump(mode="json") for t in tool_calls]}
    files.put(_kept_key(run, node), json.dumps(kept).encode("utf-8"), "application/json")


def _kept_completion(
    files: ArtifactStore, run: RunItem, node: NodeItem
) -> tuple[dict[str, Any], list[TaskItem]] | None:
    """The output an earlier attempt at this block made but could not store, if it kept one."""
    data = files.find(_kept_key(run, node))
    if data is None:
        return None
    kept = json.loads(data)
    return kept["fields"], [TaskItem.model_validate(t) for t in kept["tool_calls"]]


class _Claims:
    """The dependents whose release the block's completion may claim, with their tokens: those waiting for this
    block alone when it started, and, looked at again once its work is under way, those that have come to since
    (parked meanwhile, or their other inputs ended). Each release that rides in the completion is a conditional
    write less between this block's end and that dependent's start."""

    def __init__(self, store: Store, node: NodeItem, stored: Mapping[str, Mapping[str, Any]]):
        self.store = store
        self.node = node
        self.tokens: dict[str, str] = {}
        # The dependents' items as last read, by block id: what a release carries is built from them.
        self.items: dict[str, Mapping[str, Any]] = {}
        self._add(stored)

    def refresh(self) -> bool:
        """Read the dependents not claimable yet (one read, beside the work) and add those that now are; whether
        some are still not. The read is optional: whatever makes it fail (a DynamoDB error, a dropped connection)
        changes nothing, and the release after the completion claims them as it would have."""
        others = self._others()
        if not others:
            return False
        try:
            stored = self.store.get_node_items(self.node.canvas_id, others)
        except Exception:
            logger.warning(
                "Could not look at the dependents again; they are released after the completion", exc_info=True
            )
            return False
        self._add(stored)
        return bool(self._others())

    def carry(self, done: NodeItem, account: Mapping[str, Any] | None) -> Carry:
        """What the releases of this block, completed as `done`, carry to each dependent: built from its item as
        claimed after the completion, or as last read for one the completion claimed."""

        def carried(dependent_id: str, claimed: Mapping[str, Any] | None) -> dict[str, Any]:
            item = claimed or self.items.get(dependent_id)
            return carried_release(item, done, account) if item else {"block_id": dependent_id}

        return carried

    def _add(self, stored: Mapping[str, Mapping[str, Any]]) -> None:
        self.items.update(stored)
        self.tokens = {**self.tokens, **claimable_by_completion(self.node.block_id, stored)}

    def _others(self) -> list[str]:
        return [d for d in dict.fromkeys(self.node.dependents) if d not in self.tokens]


@contextmanager
def _marked_running(store: Store, node: NodeItem, then: Callable[[], bool] | None = None) -> Iterator[None]:
    """The node `running` with its tool-call task, written while the block's work goes on: the write is not
    between an input's end and this block's start. Nothing else is written before it lands (the block's
    failure or completion waits for it), and an error of the write is the block's. `then` runs after the mark
    on the same thread while the work still goes on, again at growing intervals for as long as it returns True;
    it too is joined before the block's next write."""
    errors: list[BaseException] = []
    work_ended = threading.Event()

    def mark() -> None:
        # The work starts first, and so does that of blocks released with it: where they share one interpreter (the
        # embedded stack), the write would otherwise go before them. It waits a moment, or until the work ends.
        work_ended.wait(MARK_AFTER_SECONDS)
        try:
            store.start_block(node.canvas_id, node.block_id, _tool_call_task(node))
        except BaseException as exc:  # handed to the block's thread below
            errors.append(exc)
            return
        if then is None:
            return
        # Then again at growing intervals (after 4, 16, 64... times the first wait) while the work goes on.
        pause = MARK_AFTER_SECONDS * 3
        try:
            while not work_ended.is_set() and then():
                if work_ended.wait(pause):
                    break
                pause *= 4
        except BaseException as exc:
            errors.append(exc)

    # In the invocation's context (its environment's logger, whoever else tells callers apart by it).
    writer = threading.Thread(
        target=contextvars.copy_context().run, args=(mark,), name=f"start-{node.block_id}", daemon=True
    )
    writer.start()
    try:
        yield
    finally:
        work_ended.set()
        writer.join()
    if errors:
        raise errors[0]


def _run(store: Store, run_id: str) -> RunItem | None:
    """The run a block belongs to; what blocks read of it (prompt, instructions, uploads) never changes,
    so a container keeps the runs it has read."""
    run = _runs.get(run_id)
    if run is None:
        run = store.get_run(run_id)
        if run is not None:
            if len(_runs) >= 64:
                _runs.pop(next(iter(_runs)))
            _runs[run_id] = run
    return run


_runs: dict[str, RunItem] = {}


def _load_node(
    store: Store, block: BlockInput
) -> tuple[NodeItem, list[NodeItem], Mapping[str, Any] | None, dict[str, dict[str, Any]]]:
    """The block's node, its input nodes, its account (for the balance) and its dependents as stored (for the
    releases its completion may claim), in one read when the state machine named inputs and dependents; none at
    all on the first attempt of a block whose release carried them (its dependents are then read beside its work)."""
    release = block.release
    if (
        release
        and release.node
        and release.inputs is not None
        and release.account
        and block.attempt == 0
        and not block.short
    ):
        return release.node, with_full_content(release.inputs, block.account_id), release.account, {}
    wanted = [block.block_id, *(block.inputs or [])]
    nodes, account, dependents = store.get_nodes_and_account(
        block.canvas_id, wanted, block.account_id, dependents=block.dependents
    )
    found = {n.block_id: n for n in nodes}
    node = found.get(block.block_id)
    if node is None:
        raise BlockFatalError(f"Block {block.block_id} not found on canvas {block.canvas_id}")
    if block.inputs is None or set(block.inputs) != set(node.inputs):
        found |= {n.block_id: n for n in store.get_nodes(block.canvas_id, node.inputs)}
    stored = {d: dependents[d] for d in node.dependents if d in dependents}
    return node, with_full_content([found[i] for i in node.inputs if i in found], block.account_id), account, stored


def _task_ids(canvas_id: str, block_id: str) -> list[str]:
    return [tool_call_task_id(canvas_id, block_id), persona_task_id(canvas_id, block_id)]


def _tool_call_task(node: NodeItem) -> TaskItem:
    return TaskItem(
        canvas_id=node.canvas_id,
        task_id=tool_call_task_id(node.canvas_id, node.block_id),
        parent_id=persona_task_id(node.canvas_id, node.block_id),
        name=f"{node.type}: {node.name}",
        task_type=TaskType.TOOL_CALL,
        status=TaskStatus.RUNNING,
        block_id=node.block_id,
        position=1000 + node.position,
    )
