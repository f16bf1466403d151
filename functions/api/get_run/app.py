"""GET /v1/run/{run_id}: the run's status, progress while running, result and metadata once finished."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.models.api import RunStatusResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.runs import get_run_status

app = create_app()


@app.get(
    "/v1/run/<run_id>",
    summary="Get run status and results",
    tags=["Runs"],
    responses=answers(RunStatusResponse, 400, 401, 404),
)
def get_run(
    run_id: Annotated[UUID, Path(description="The run_id POST /v1/run answered")],
) -> SuccessBody[RunStatusResponse]:
    return ok(get_run_status(str(run_id), caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
