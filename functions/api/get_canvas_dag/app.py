"""GET /v1/canvas/{canvas_id}/dag: the canvas's blocks and the edges between them."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import caller_account, create_app, handle, ok
from canvas_core.canvas import get_canvas_dag
from canvas_core.observability import correlation_paths, logger, tracer

app = create_app()


@app.get("/v1/canvas/<canvas_id>/dag")
def get_dag(canvas_id: str) -> dict:
    return ok(get_canvas_dag(canvas_id, caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
