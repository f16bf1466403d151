"""GET /v1/runs: the caller's runs, newest first, a page at a time (an extension of the contract)."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.models.api import ListRunsResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.runs import list_runs

app = create_app()


@app.get(
    "/v1/runs",
    summary="List the caller's runs, newest first (extension)",
    tags=["Runs"],
    responses=answers(ListRunsResponse, 400, 401),
)
def get_runs(
    limit: Annotated[int, Query(ge=1, le=100, description="Runs per page")] = 20,
    cursor: Annotated[
        str | None,
        Query(
            description="The previous page's next_cursor, unchanged; any other value is refused (400, Invalid cursor)"
        ),
    ] = None,
) -> SuccessBody[ListRunsResponse]:
    account_id = caller_account(app)
    return ok(list_runs(account_id, limit, cursor), exclude_none=False)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
