"""POST /v1/run/{run_id}/cancel: end a running run, waiting for approval or executing; blocks not started never
start and are not charged (an extension of the contract, docs/api.md)."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.models.api import RunStatusResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.reviews import cancel_run
from canvas_core.settings import StateMachineSettings

# A cancel stops the run's execution, named after the run on the state machine.
app = create_app(StateMachineSettings)


@app.post(
    "/v1/run/<run_id>/cancel",
    summary="Cancel a running run (extension)",
    description='The run ends `partial` when some blocks completed, else `failed`, with the error "Cancelled by the '
    'client"; credits spent stay spent, the rest of its reservation returns. Answers the ended run as GET '
    "/v1/run/{run_id} does; 409 for a run that has ended.",
    tags=["Runs"],
    responses=answers(RunStatusResponse, 400, 401, 404, 409),
)
def post_cancel(
    run_id: Annotated[UUID, Path(description="The run_id POST /v1/run answered")],
) -> SuccessBody[RunStatusResponse]:
    requested_at_ms = app.current_event.request_context.request_time_epoch
    return ok(cancel_run(str(run_id), caller_account(app), requested_at_ms=requested_at_ms))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
