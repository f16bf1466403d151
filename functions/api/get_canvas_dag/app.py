"""GET /v1/canvas/{canvas_id}/dag: the canvas's blocks and the edges between them."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.canvas import get_canvas_dag
from canvas_core.models.api import CanvasDagResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer

app = create_app()


@app.get(
    "/v1/canvas/<canvas_id>/dag",
    summary="Get the canvas DAG",
    tags=["Canvases"],
    responses=answers(CanvasDagResponse, 400, 401, 404),
)
def get_dag(
    canvas_id: Annotated[UUID, Path(description="The run's canvas_id")],
    node: Annotated[
        str | None,
        Query(max_length=100, description="Extension: one node's id, to read its whole content a page at a time"),
    ] = None,
    offset: Annotated[
        int, Query(ge=0, description="Extension, with node: the first character of the page (the characters read)")
    ] = 0,
) -> SuccessBody[CanvasDagResponse]:
    return ok(get_canvas_dag(str(canvas_id), caller_account(app), node=node, offset=offset))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
