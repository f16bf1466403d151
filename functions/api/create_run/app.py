"""POST /v1/run: validate the request, store the run and its canvas, start its execution."""

from typing import Annotated, Any

from aws_lambda_powertools.event_handler.openapi.params import Header
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.api.forms import FormBody
from canvas_core.models.api import CreateRunResponse
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.runs import create_run_once
from canvas_core.settings import GatherSettings, ProviderSettings, StateMachineSettings
from canvas_core.validation import CreateRunForm, max_body_bytes

# It estimates what a run will spend: the providers' and the research budgets' settings are read at its start too.
app = create_app(StateMachineSettings, ProviderSettings, GatherSettings)


@app.post(
    "/v1/run",
    summary="Create a run",
    description="A run answers at once with its ids; poll GET /v1/run/{run_id} until it is no longer running.",
    tags=["Runs"],
    responses=answers(CreateRunResponse, 400, 401, 402, 409, 413, 415, 429),
)
def post_run(
    request: Annotated[CreateRunForm, FormBody(max_bytes=max_body_bytes)],
    idempotency_key: Annotated[
        str | None,
        Header(
            description="Makes creation safe to retry: for 24 hours, the same key from the same account gets the "
            "first request's answer and starts no second run",
        ),
    ] = None,
) -> SuccessBody[CreateRunResponse]:
    return ok(create_run_once(request, caller_account(app), idempotency_key, app.lambda_context))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
