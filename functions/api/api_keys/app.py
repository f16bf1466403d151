"""/v1/api_keys: the caller's account's keys; create one (shown once), revoke one (an extension of the contract)."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.keys import create_key, list_keys, revoke_key
from canvas_core.models.accounts import ApiKeyList, ApiKeyView, CreatedApiKey
from canvas_core.observability import correlation_paths, logger, metrics, tracer

app = create_app()


@app.get(
    "/v1/api_keys",
    summary="List the account's API keys (extension)",
    tags=["API keys"],
    responses=answers(ApiKeyList, 401),
)
def get_api_keys() -> SuccessBody[ApiKeyList]:
    return ok(list_keys(caller_account(app)), exclude_none=False)


@app.post(
    "/v1/api_keys",
    summary="Create an API key, shown once (extension)",
    tags=["API keys"],
    responses=answers(CreatedApiKey, 401),
)
def post_api_key() -> SuccessBody[CreatedApiKey]:
    return ok(create_key(caller_account(app)), exclude_none=False)


@app.delete(
    "/v1/api_keys/<key_id>",
    summary="Revoke an API key (extension)",
    tags=["API keys"],
    responses=answers(ApiKeyView, 400, 401, 404),
)
def delete_api_key(
    key_id: Annotated[UUID, Path(description="The key's id, as GET /v1/api_keys lists it")],
) -> SuccessBody[ApiKeyView]:
    return ok(revoke_key(caller_account(app), str(key_id)), exclude_none=False)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
