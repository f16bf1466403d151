"""Webhook endpoints, their deliveries, and the messages the delivery function passes itself (extensions of the
contract: docs/webhooks.md)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import Field

from canvas_core.models.base import Model


class WebhookEventType(StrEnum):
    RUN_STARTED = "run.started"
    RUN_COMPLETED = "run.completed"
    RUN_PARTIAL = "run.partial"
    RUN_FAILED = "run.failed"
    WEBHOOK_PING = "webhook.ping"


class EndpointStatus(StrEnum):
    ENABLED = "enabled"
    DISABLED = "disabled"


class WebhookEndpoint(Model):
    """An endpoint as its account sees it: never its secret."""

    id: str = Field(description="UUID of the endpoint")
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
    status_code: int | None = Field(description="The endpoint's HTTP status; null when no answer came")
    error: str | None = Field(default=None, description="Why the attempt did not count, if it did not")
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
