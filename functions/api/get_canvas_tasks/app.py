"""GET /v1/canvas/{canvas_id}/tasks: the task tree, split into completed and not completed."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.canvas import get_task_tree
from canvas_core.models.api import TaskTreeResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer

app = create_app()


@app.get(
    "/v1/canvas/<canvas_id>/tasks",
    summary="Get the task tree",
    tags=["Canvases"],
    responses=answers(TaskTreeResponse, 400, 401, 404),
)
def get_tasks(canvas_id: Annotated[UUID, Path(description="The run's canvas_id")]) -> SuccessBody[TaskTreeResponse]:
    return ok(get_task_tree(str(canvas_id), caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
