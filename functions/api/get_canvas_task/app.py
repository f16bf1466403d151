"""GET /v1/canvas/{canvas_id}/tasks/{task_id}: one task with its children."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.canvas import get_task
from canvas_core.models.api import TaskView
from canvas_core.observability import correlation_paths, logger, metrics, tracer

app = create_app()


@app.get(
    "/v1/canvas/<canvas_id>/tasks/<task_id>",
    summary="Get a single task",
    tags=["Canvases"],
    responses=answers(TaskView, 400, 401, 404),
)
def get_one_task(
    canvas_id: Annotated[UUID, Path(description="The run's canvas_id")],
    task_id: Annotated[UUID, Path(description="A task_id of the canvas's task tree")],
) -> SuccessBody[TaskView]:
    return ok(get_task(str(canvas_id), str(task_id), caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
