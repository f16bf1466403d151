"""GET /v1/canvas/{canvas_id}/tasks/{task_id}: one task with its children."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import caller_account, create_app, handle, ok
from canvas_core.canvas import get_task
from canvas_core.observability import correlation_paths, logger, tracer

app = create_app()


@app.get("/v1/canvas/<canvas_id>/tasks/<task_id>")
def get_one_task(canvas_id: str, task_id: str) -> dict:
    return ok(get_task(canvas_id, task_id, caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
