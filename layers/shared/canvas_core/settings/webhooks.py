"""The webhooks' settings (docs/webhooks.md): read by the delivery function and by the API functions that manage
endpoints. Their fixed values are canvas_core.webhooks.settings."""

from __future__ import annotations

from canvas_core.settings.base import EnvSettings, ResourceName, ServiceSettings, env, required
from canvas_core.settings.gather import FetchSettings


class WebhookSettings(ServiceSettings, FetchSettings):
    """With the fetcher's settings: deliveries go through it, and it checks an endpoint's URL when it is set."""

    endpoints_table: ResourceName = required("WEBHOOK_ENDPOINTS_TABLE_NAME")
    deliveries_table: ResourceName = required("WEBHOOK_DELIVERIES_TABLE_NAME")
    # Every retry delay is multiplied by this: 1.0 in production, a small fraction to test the schedule fast.
    retry_time_scale: float = env("WEBHOOK_RETRY_TIME_SCALE", 1.0, gt=0, le=1)
    allow_private_addresses: bool = env("WEBHOOK_ALLOW_PRIVATE_ADDRESSES", False)
    livemode: bool = env("WEBHOOK_LIVEMODE", True)
    timeout_seconds: float = env("WEBHOOK_TIMEOUT_SECONDS", 10.0, gt=0)


class WebhookQueueSettings(EnvSettings):
    """The queue of run status changes and delivery attempts: the functions that queue a ping (the endpoints' API
    and the portal) and the delivery function."""

    queue_url: ResourceName = required("WEBHOOK_QUEUE_URL")  # a URL, or (the embedded stack) a queue name


class DeliverySettings(WebhookSettings, WebhookQueueSettings):
    """The delivery function's: it re-queues retries and sends a last failure to the dead-letter queue."""

    dead_letter_queue_url: ResourceName = required("WEBHOOK_DEAD_LETTER_QUEUE_URL")
