"""POST /v1/canvas/{canvas_id}/blocks/{block_id}/rerun: a new run of a copy of the canvas, where the block runs again
with new instructions, and what depends on it too (an extension of the contract, docs/api.md)."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Header, Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.api.forms import FormBody
from canvas_core.models.api import CreateRunResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.reruns import rerun_block_once
from canvas_core.settings import GatherSettings, ProviderSettings, StateMachineSettings
from canvas_core.validation import MAX_RERUN_BODY_BYTES, RerunBlockForm

# It estimates what a re-run will spend: the providers' and the research budgets' settings are read at its start too.
app = create_app(StateMachineSettings, ProviderSettings, GatherSettings)


@app.post(
    "/v1/canvas/<canvas_id>/blocks/<block_id>/rerun",
    summary="Re-run a block with new instructions, and what depends on it (extension)",
    description="Starts a new run on a copy of the canvas: the block and every block downstream of it run again, the "
    "others are reused as they ended (not run, not charged). Answers as POST /v1/run; poll the run until it ends.",
    tags=["Canvases"],
    responses=answers(CreateRunResponse, 400, 401, 402, 404, 409, 413, 415, 429),
)
def post_rerun(
    canvas_id: Annotated[UUID, Path(description="The canvas_id of an ended run")],
    block_id: Annotated[UUID, Path(description="The id of a block of that canvas (its DAG node's id)")],
    request: Annotated[RerunBlockForm, FormBody(max_bytes=MAX_RERUN_BODY_BYTES, accepts_json=True)],
    idempotency_key: Annotated[
        str | None,
        Header(
            description="Makes the re-run safe to retry: for 24 hours, the same key from the same account for the "
            "same block gets the first request's answer and starts no second run",
        ),
    ] = None,
) -> SuccessBody[CreateRunResponse]:
    return ok(
        rerun_block_once(
            str(canvas_id), str(block_id), request, caller_account(app), idempotency_key, app.lambda_context
        )
    )


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
