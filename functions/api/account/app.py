"""GET /v1/account: the caller's credits, this month's usage and limits (an extension of the contract)."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.accounts import get_account
from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.models.accounts import AccountView
from canvas_core.observability import correlation_paths, logger, metrics, tracer

app = create_app()


@app.get(
    "/v1/account",
    summary="Get the account's credits, usage and limits (extension)",
    tags=["Account"],
    responses=answers(AccountView, 401),
)
def get_caller_account() -> SuccessBody[AccountView]:
    return ok(get_account(caller_account(app)))


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
