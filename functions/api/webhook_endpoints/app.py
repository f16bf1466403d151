"""/v1/webhook_endpoints: the caller's webhook endpoints and their deliveries (an extension of the contract,
docs/webhooks.md)."""

from typing import Annotated, Any
from uuid import UUID

from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.api import SuccessBody, answers, caller_account, create_app, handle, ok
from canvas_core.api.forms import FormBody
from canvas_core.models.webhooks import (
    MAX_ENDPOINT_REQUEST_BYTES,
    WebhookDeliveryList,
    WebhookEndpointCreated,
    WebhookEndpointDeleted,
    WebhookEndpointList,
    WebhookEndpointRequest,
    WebhookPingSent,
)
from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.settings import WebhookQueueSettings
from canvas_core.webhooks import endpoints

app = create_app(WebhookQueueSettings)

EndpointId = Annotated[UUID, Path(description="The endpoint's id")]
TAGS = ["Webhook endpoints"]


@app.post(
    "/v1/webhook_endpoints",
    summary="Add a webhook endpoint; its signing secret is shown once (extension)",
    tags=TAGS,
    responses=answers(WebhookEndpointCreated, 400, 401, 409, 413, 415),
)
def post_endpoint(
    request: Annotated[WebhookEndpointRequest, FormBody(max_bytes=MAX_ENDPOINT_REQUEST_BYTES, accepts_json=True)],
) -> SuccessBody[WebhookEndpointCreated]:
    return ok(endpoints.create_endpoint(caller_account(app), request.url, request.events))


@app.get(
    "/v1/webhook_endpoints",
    summary="List the account's webhook endpoints (extension)",
    tags=TAGS,
    responses=answers(WebhookEndpointList, 401),
)
def get_endpoints() -> SuccessBody[WebhookEndpointList]:
    return ok(WebhookEndpointList(endpoints=endpoints.list_endpoints(caller_account(app))))


@app.delete(
    "/v1/webhook_endpoints/<endpoint_id>",
    summary="Delete a webhook endpoint (extension)",
    tags=TAGS,
    responses=answers(WebhookEndpointDeleted, 400, 401, 404),
)
def delete_endpoint(endpoint_id: EndpointId) -> SuccessBody[WebhookEndpointDeleted]:
    endpoints.delete_endpoint(caller_account(app), str(endpoint_id))
    return ok(WebhookEndpointDeleted(id=str(endpoint_id)))


@app.post(
    "/v1/webhook_endpoints/<endpoint_id>/rotate_secret",
    summary="Replace a webhook endpoint's signing secret, shown once (extension)",
    tags=TAGS,
    responses=answers(WebhookEndpointCreated, 400, 401, 404),
)
def post_rotate_secret(endpoint_id: EndpointId) -> SuccessBody[WebhookEndpointCreated]:
    return ok(endpoints.rotate_secret(caller_account(app), str(endpoint_id)))


@app.post(
    "/v1/webhook_endpoints/<endpoint_id>/ping",
    summary="Send a webhook.ping event to an endpoint (extension)",
    tags=TAGS,
    responses=answers(WebhookPingSent, 400, 401, 404, 409),
)
def post_ping(endpoint_id: EndpointId) -> SuccessBody[WebhookPingSent]:
    return ok(WebhookPingSent(event_id=endpoints.ping(caller_account(app), str(endpoint_id))))


@app.get(
    "/v1/webhook_endpoints/<endpoint_id>/deliveries",
    summary="List an endpoint's recent delivery attempts, newest first (extension)",
    tags=TAGS,
    responses=answers(WebhookDeliveryList, 400, 401, 404),
)
def get_deliveries(
    endpoint_id: EndpointId,
    limit: Annotated[int, Query(ge=1, le=100, description="Attempts to list, newest first")] = 50,
) -> SuccessBody[WebhookDeliveryList]:
    deliveries = endpoints.list_deliveries(caller_account(app), str(endpoint_id), limit)
    return ok(WebhookDeliveryList(deliveries=deliveries), exclude_none=False)


@logger.inject_lambda_context(correlation_id_path=correlation_paths.API_GATEWAY_REST, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(app, event, context)
