"""Runs: create one (store it, its canvas and uploads, start its execution), report its status, and list an
account's runs."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from canvas_core.adapters.artifacts import ArtifactStore
from canvas_core.adapters.events import Events
from canvas_core.adapters.executions import Executions
from canvas_core.adapters.idempotency import call_once
from canvas_core.adapters.store import Store, start_wait_ms
from canvas_core.clock import iso_utc, new_id, now_ms, parse_uuid
from canvas_core.content import with_full_run_text
from canvas_core.errors import (
    ArtifactNotFoundError,
    BadRequestError,
    InsufficientCreditsError,
    InvalidCursorError,
    RunNotFoundError,
    TooManyConcurrentRunsError,
    TooManyRunStartsError,
)
from canvas_core.estimates import estimate_credits, estimate_duration_ms
from canvas_core.models.api import (
    ArtifactView,
    CreateRunRequest,
    CreateRunResponse,
    ListRunsResponse,
    Progress,
    RerunOfView,
    RunErrorView,
    RunMetadata,
    RunResult,
    RunStatusResponse,
    RunSummary,
)
from canvas_core.models.base import Model
from canvas_core.models.catalog import TERMINAL_TASK_STATUSES, RunStatus, Template
from canvas_core.models.items import Artifact, CanvasItem, RunError, RunItem, RunSummaryItem, Upload
from canvas_core.observability import count, logger
from canvas_core.settings import api_settings, provider_settings, state_machine_settings


def create_run(
    request: CreateRunRequest,
    account_id: str,
    store: Store | None = None,
    files: ArtifactStore | None = None,
    executions: Executions | None = None,
    events: Events | None = None,
) -> CreateRunResponse:
    store, files, executions = store or Store(), files or ArtifactStore(), executions or Executions()
    events = events or Events()
    account = store.get_account(account_id)
    balance = int(account.get("credits_balance", 0)) if account else 0
    if balance <= 0:
        raise InsufficientCreditsError(
            f"Insufficient credits: the account balance is {balance}; add credits to start a run"
        )
    settings = api_settings()
    limit = settings.max_concurrent_runs
    # Read with the balance, so that a refused request uploads nothing; the write below is what holds the limit.
    if account is not None and int(account.get("active_runs", 0)) >= limit:
        raise TooManyConcurrentRunsError(limit)
    wait_ms = start_wait_ms(account, settings.max_runs_per_minute)
    if wait_ms is not None:
        raise TooManyRunStartsError(settings.max_runs_per_minute, wait_ms)

    run_id, canvas_id = new_id(), new_id()
    logger.append_keys(run_id=run_id, canvas_id=canvas_id)
    uploads = []
    for upload in request.files:
        file_id = new_id()
        key = f"uploads/{account_id}/{run_id}/{file_id}/{upload.name}"
        files.put(key, upload.data, upload.content_type)
        uploads.append(
            Upload(
                file_id=file_id,
                name=upload.name,
                extension=upload.extension,
                content_type=upload.content_type,
                size_bytes=len(upload.data),
                s3_key=key,
            )
        )
    run = RunItem(
        run_id=run_id,
        account_id=account_id,
        canvas_id=canvas_id,
        prompt=request.prompt,
        template=request.template,
        blocks=request.blocks,
        agent_instructions=request.agent_instructions,
        uploads=uploads,
        review=request.review,
        created_at_ms=now_ms(),
        estimated_duration_ms=estimate_duration_ms(
            request.template, request.blocks, len(uploads), offline=provider_settings().model_provider == "offline"
        ),
    )
    canvas = CanvasItem(canvas_id=canvas_id, account_id=account_id, run_id=run_id, canvas_name=canvas_name(run.prompt))
    # Credits set aside for the run as it is admitted: what it is expected to spend, at most the balance. Its blocks
    # spend from it, not from the account item every run of the account shares; what is left returns at its end.
    reserve = min(estimate_credits(request.template, request.blocks, len(uploads)), balance)
    if not store.admit_run(
        run, canvas, limit, reserve=reserve, max_starts_per_minute=settings.max_runs_per_minute, account=account
    ):
        raise TooManyConcurrentRunsError(limit)
    try:
        executions.start(
            run_id,
            {
                "run_id": run_id,
                "canvas_id": canvas_id,
                "account_id": account_id,
                "correlation_id": logger.get_correlation_id() or run_id,
                # A run to review waits after planning, at most this long (Await Approval's TimeoutSecondsPath).
                **(
                    {"review": True, "review_timeout_seconds": state_machine_settings().review_timeout_hours * 3600}
                    if request.review
                    else {}
                ),
            },
        )
    except Exception:
        # A run whose execution never started must not look like it is running.
        ended_at_ms = now_ms()
        if store.finish_run(
            run_id,
            account_id,
            status=RunStatus.FAILED.value,
            finished_at_ms=ended_at_ms,
            errors=[RunError(error="The run could not be started; please try again", recoverable=True)],
        ):
            events.publish_run_status(account_id, run_id, RunStatus.FAILED.value, ended_at_ms)
        raise
    events.publish_run_status(account_id, run_id, RunStatus.RUNNING.value, run.created_at_ms)
    logger.info("Run created", extra={"template": run.template, "files": len(uploads)})
    count("RunsCreated", template=str(run.template))
    return CreateRunResponse(
        run_id=run_id,
        status=RunStatus.RUNNING,
        poll_url=f"/v1/run/{run_id}",
        estimated_duration_ms=run.estimated_duration_ms,
        canvas_id=canvas_id,
    )


class IdempotencyScope(Model):
    """What makes two create requests the same: one account's Idempotency-Key."""

    account_id: str
    key: str


def create_run_once(
    request: CreateRunRequest, account_id: str, idempotency_key: str | None, lambda_context: Any = None
) -> CreateRunResponse:
    """create_run, or with an Idempotency-Key, the answer the first request with that key got (for 24 hours):
    a client that retries after a lost response does not start a second run."""
    if not idempotency_key:
        return create_run(request, account_id)
    scope = IdempotencyScope(account_id=account_id, key=idempotency_key)
    return call_once(_create_keyed, CreateRunResponse, scope, lambda_context, request=request)


def _create_keyed(scope: IdempotencyScope, request: CreateRunRequest) -> CreateRunResponse:
    return create_run(request, scope.account_id)


def canvas_name(prompt: str) -> str:
    first_line = prompt.strip().splitlines()[0]
    return first_line if len(first_line) <= 80 else first_line[:77].rstrip() + "..."


def template_used(run: RunItem | RunSummaryItem) -> Template:
    """The template the run was planned with. Explicit `blocks` override the template (the contract's
    precedence), so none was: the planner chose within the listed types as it does for `auto`."""
    return Template.AUTO if run.blocks else Template(run.template)


def get_run_status(
    run_id: str, account_id: str, store: Store | None = None, files: ArtifactStore | None = None
) -> RunStatusResponse:
    store = store or Store()
    run_id = parse_uuid("run_id", run_id)
    run = store.get_run(run_id)
    # Another account's run answers exactly as a missing one.
    if run is None or run.account_id != account_id:
        raise RunNotFoundError(run_id)
    files = files or ArtifactStore()
    run = with_full_run_text(run, files)

    response = RunStatusResponse(
        run_id=run.run_id,
        status=run.status,
        canvas_id=run.canvas_id,
        prompt=run.prompt,
        template=run.template,
        blocks=run.blocks,
        agent_instructions=run.agent_instructions,
        errors=[RunErrorView(**e.model_dump()) for e in run.errors],
        awaiting_approval=True if run.status == RunStatus.RUNNING and run.review_token else None,
        estimated_credits=run.estimated_credits,
    )
    if run.status == RunStatus.RUNNING:
        tasks = store.get_tasks(run.canvas_id)
        response.progress = Progress(
            tasks_completed=sum(1 for t in tasks if t.status in TERMINAL_TASK_STATUSES),
            tasks_total=len(tasks),
            elapsed_ms=max(0, now_ms() - run.created_at_ms),
        )
        return response

    response.duration_ms = max(0, (run.finished_at_ms or now_ms()) - run.created_at_ms)
    response.metadata = RunMetadata(
        template_used=template_used(run),
        models_used=run.models_used,
        credits_consumed=run.credits_consumed,
        rerun_of=RerunOfView(**run.rerun_of.model_dump()) if run.rerun_of else None,
    )
    if run.status in (RunStatus.COMPLETED, RunStatus.PARTIAL):
        response.result = RunResult(
            final_output=run.final_output or "",
            artifacts=[
                ArtifactView(
                    id=a.id,
                    type=a.type,
                    name=a.name,
                    download_url=files.download_url(a.s3_key, a.name),
                    size_bytes=a.size_bytes,
                )
                for a in run.artifacts
            ],
        )
    return response


def read_artifact(
    run_id: str, artifact_id: str, account_id: str, store: Store | None = None, files: ArtifactStore | None = None
) -> tuple[Artifact, bytes]:
    """One of a run's files and its bytes, for a caller that reads it rather than following its download URL (the MCP
    server's resources)."""
    store = store or Store()
    run_id = parse_uuid("run_id", run_id)
    run = store.get_run(run_id)
    if run is None or run.account_id != account_id:
        raise RunNotFoundError(run_id)
    artifact = next((a for a in run.artifacts if a.id == artifact_id), None)
    if artifact is None:
        raise ArtifactNotFoundError(artifact_id)
    return artifact, (files or ArtifactStore()).get(artifact.s3_key)


PROMPT_PREVIEW_CHARS = 200


def list_runs(account_id: str, limit: int, cursor: str | None = None, store: Store | None = None) -> ListRunsResponse:
    """A page of the account's runs, newest first. `cursor` is the previous page's `next_cursor`."""
    store = store or Store()
    runs, more = store.list_runs(account_id, limit, after=_decode_cursor(cursor) if cursor else None)
    return ListRunsResponse(
        runs=[
            RunSummary(
                run_id=run.run_id,
                status=run.status,
                created_at=iso_utc(run.created_at_ms),
                canvas_id=run.canvas_id,
                template_used=template_used(run),  # a summary holds the template and blocks it reads
                prompt=run.prompt[:PROMPT_PREVIEW_CHARS],
                rerun_of=RerunOfView(**run.rerun_of.model_dump()) if run.rerun_of else None,
            )
            for run in runs
        ],
        next_cursor=_encode_cursor(runs[-1].created_at_ms, runs[-1].run_id) if more else None,
    )


# A cursor is the position of the last run of a page, opaque to clients. It names no account: the query is
# always the caller's, so a cursor from elsewhere can only position a listing of the caller's own runs.
def _encode_cursor(created_at_ms: int, run_id: str) -> str:
    raw = json.dumps([created_at_ms, run_id], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _decode_cursor(cursor: str) -> tuple[int, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        created_at_ms, run_id = json.loads(raw)
        if type(created_at_ms) is not int or created_at_ms < 0 or not isinstance(run_id, str):
            raise ValueError
        return created_at_ms, parse_uuid("cursor", run_id)
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError, BadRequestError):
        raise InvalidCursorError() from None
