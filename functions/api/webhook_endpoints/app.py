"""/v1/webhook_endpoints: the caller's webhook endpoints and their deliveries (an extension of the contract,
docs/webhooks.md)."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import caller_account, create_app, handle, ok
from canvas_core.api.forms import body_bytes
from canvas_core.models.webhooks import (
    WebhookDeliveryList,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookPingSent,
)
from canvas_core.observability import correlation_paths, logger, tracer
from canvas_core.webhooks import endpoints
from canvas_core.webhooks.requests import parse_endpoint_request

app = create_app()


@app.post("/v1/webhook_endpoints")
def post_endpoint() -> dict:
    account_id = caller_account(app)
    event = app.current_event
    url, events = parse_endpoint_request(
        event.headers.get("content-type"), body_bytes(event.body, event.is_base64_encoded)
    )
    return ok(endpoints.create_endpoint(account_id, url, events))


@app.get("/v1/webhook_endpoints")
def get_endpoints() -> dict:
    return ok(WebhookEndpointList(endpoints=endpoints.list_endpoints(caller_account(app))))


@app.delete("/v1/webhook_endpoints/<endpoint_id>")
def delete_endpoint(endpoint_id: str) -> dict:
    endpoints.delete_endpoint(caller_account(app), endpoint_id)
    return ok(WebhookEndpointDeleted(id=endpoint_id))


@app.post("/v1/webhook_endpoints/<endpoint_id>/rotate_secret")
def post_rotate_secret(endpoint_id: str) -> dict:
    return ok(endpoints.rotate_secret(caller_account(app), endpoint_id))


@app.post("/v1/webhook_endpoints/<endpoint_id>/ping")
def post_ping(endpoint_id: str) -> dict:
    return ok(WebhookPingSent(event_id=endpoints.ping(caller_account(app), endpoint_id)))


@app.get("/v1/webhook_endpoints/<endpoint_id>/deliveries")
def get_deliveries(
    endpoint_id: str,
    limit: Annotated[int, Query(ge=1, le=100, description="Attempts to list, newest first")] = 50,
) -> dict:
    deliveries = endpoints.list_deliveries(caller_account(app), endpoint_id, limit)
    return ok(WebhookDeliveryList(deliveries=deliveries), exclude_none=False)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
def handler(event: dict, context: LambdaContext) -> dict:
    return handle(app, event, context)
