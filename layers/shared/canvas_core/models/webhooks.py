"""Webhook endpoints, their deliveries, and the messages the delivery function passes itself (extensions of the
contract: docs/webhooks.md)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, field_validator, model_validator

from canvas_core.errors import BadRequestError
from canvas_core.models.base import Model, RequestRefused, Uuid


class WebhookEventType(StrEnum):
    RUN_STARTED = "run.started"
    RUN_COMPLETED = "run.completed"
    RUN_PARTIAL = "run.partial"
    RUN_FAILED = "run.failed"
    WEBHOOK_PING = "webhook.ping"


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


# A webhook endpoint's request is a URL and a few event types: nothing larger is read.
MAX_ENDPOINT_REQUEST_BYTES = 16 * 1024


class WebhookEndpointRequest(Model):
    """The body of POST /v1/webhook_endpoints: a JSON object, or a form (urlencoded or multipart) whose `events`
    is a comma-separated list."""

    url: str = Field(
        json_schema_extra={"format": "uri"},
        description="An http(s) URL of at most 2,048 characters that resolves to a public address",
    )
    events: list[str] | None = Field(
        default=None, description="Event types to deliver (default all): a list, or a comma-separated string"
    )

    @model_validator(mode="before")
    @classmethod
    def _url_given(cls, data: Any) -> Any:
        url = data.get("url") if isinstance(data, dict) else None
        if not isinstance(url, str) or not url.strip():
            raise RequestRefused(BadRequestError("url is required"))
        return data

    @field_validator("events", mode="before", json_schema_input_type=list[WebhookEventType] | str | None)
    @classmethod
    def _event_list(cls, events: object) -> list[str] | None:
        if events is None:
            return None
        if isinstance(events, str):
            events = [events]
        if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
            raise RequestRefused(BadRequestError("events must be a list of event types or a comma-separated string"))
        split = [part.strip() for e in events for part in e.split(",") if part.strip()]
        return split or None


class WebhookEndpoint(Model):
    """An endpoint as its account sees it: never its secret."""

    id: Uuid = Field(description="UUID of the endpoint")
    url: str
    events: list[WebhookEventType] = Field(description="Event types delivered to it")
    created: int = Field(description="Unix seconds")
    status: EndpointStatus = EndpointStatus.ENABLED
    disabled_reason: str | None = Field(default=None, description="Why delivery stopped (e.g. it answered 410)")


class WebhookEndpointCreated(WebhookEndpoint):
    secret: str = Field(description="The whsec_ signing secret, shown this once")


class WebhookEndpointList(Model):
    endpoints: list[WebhookEndpoint]


class WebhookEndpointDeleted(Model):
    id: str
    deleted: bool = True


class WebhookPingSent(Model):
    event_id: str = Field(description="Id of the webhook.ping event queued for delivery (evt_<uuid>)")


class WebhookDelivery(Model):
    """One attempt to deliver one event to one endpoint."""

    event_id: str
    type: WebhookEventType
    attempt: int = Field(description="1 for the first attempt")
    status_code: int | None = Field(
        default=None, description="The endpoint's HTTP status; null when no answer came (a timeout, a refusal)"
    )
    error: str | None = Field(
        default=None, description="Why the attempt did not count, if it did not (when no answer came, why not)"
    )
    duration_ms: int
    attempted: int = Field(description="Unix seconds")
    next_retry: int | None = Field(default=None, description="Unix seconds of the next attempt; null if none")


class WebhookDeliveryList(Model):
    deliveries: list[WebhookDelivery]


class EndpointItem(Model):
    """An endpoint as stored (WebhookEndpointsTable)."""

    endpoint_id: str
    account_id: str
    url: str
    events: list[WebhookEventType]
    secret: str
    created_at: int
    status: EndpointStatus = EndpointStatus.ENABLED
    disabled_reason: str | None = None

    def view(self) -> WebhookEndpoint:
        return WebhookEndpoint(
            id=self.endpoint_id,
            url=self.url,
            events=self.events,
            created=self.created_at,
            status=self.status,
            disabled_reason=self.disabled_reason,
        )


class DeliveryMessage(Model):
    """One event on its way to one endpoint: the queue message of each attempt. `body` is the exact bytes
    signed and sent, fixed when the event was made, or, when too large for a queue message, `body_key` names
    them in the artifacts bucket; `not_before_ms` is when the attempt is due."""

    endpoint_id: str
    event_id: str
    type: WebhookEventType
    body: str = ""
    body_key: str | None = None
    attempt: int = 1
    not_before_ms: int = 0
