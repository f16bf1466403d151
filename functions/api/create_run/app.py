"""POST /v1/run: validate the request, store the run and its canvas, start its execution."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import caller_account, create_app, handle, ok
from canvas_core.api.forms import body_bytes, parse_form
from canvas_core.config import get_settings
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.runs import create_run_once
from canvas_core.validation import validate_create_request

app = create_app()


@app.post("/v1/run")
def post_run() -> dict:
    account_id = caller_account(app)
    event, settings = app.current_event, get_settings()
    body = body_bytes(event.body, event.is_base64_encoded)
    form = parse_form(event.headers.get("content-type"), body, settings.max_upload_bytes + 1024 * 1024)
    request = validate_create_request(form, settings)
    return ok(create_run_once(request, account_id, event.headers.get("idempotency-key"), app.lambda_context))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
