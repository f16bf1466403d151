"""/v1/api_keys: the caller's account's keys; create one (shown once), revoke one (an extension of the contract)."""

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import caller_account, create_app, handle, ok
from canvas_core.keys import create_key, list_keys, revoke_key
from canvas_core.observability import correlation_paths, logger, tracer

app = create_app()


@app.get("/v1/api_keys")
def get_api_keys() -> dict:
    return ok(list_keys(caller_account(app)), exclude_none=False)


@app.post("/v1/api_keys")
def post_api_key() -> dict:
    return ok(create_key(caller_account(app)), exclude_none=False)


@app.delete("/v1/api_keys/<key_id>")
def delete_api_key(key_id: str) -> dict:
    return ok(revoke_key(caller_account(app), key_id), exclude_none=False)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
