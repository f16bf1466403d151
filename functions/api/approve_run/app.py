"""POST /v1/run/{run_id}/approve: a run created with `review=true` goes on from its plan, optionally with new
instructions for some of its blocks (an extension of the contract, docs/api.md)."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.api.forms import FormBody
from canvas_core.models.api import RunStatusResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.reviews import MAX_APPROVE_BODY_BYTES, ApproveRunForm, approve_run

app = create_app()


@app.post(
    "/v1/run/<run_id>/approve",
    summary="Approve a run waiting for review (extension)",
    description="The run's planned blocks run, those named in `instructions` with their new instructions. Answers "
    "the run as GET /v1/run/{run_id} does; 409 when it is not waiting for approval.",
    tags=["Runs"],
    responses=answers(RunStatusResponse, 400, 401, 404, 409, 413, 415),
)
def post_approve(
    run_id: Annotated[UUID, Path(description="The run_id POST /v1/run answered, for a run created with review=true")],
    request: Annotated[ApproveRunForm, FormBody(max_bytes=MAX_APPROVE_BODY_BYTES, accepts_json=True)],
) -> SuccessBody[RunStatusResponse]:
    return ok(approve_run(str(run_id), caller_account(app), request))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
