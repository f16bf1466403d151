"""An account's webhook endpoints: add (the signing secret shown once), list, delete, rotate the secret, ping,
and read the recent delivery attempts. Another account's endpoint is answered as an unknown one."""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from canvas_core.adapters.queues import Queue
from canvas_core.adapters.webhook_store import WebhookStore
from canvas_core.clock import new_id, now_ms, parse_uuid
from canvas_core.errors import (
    BadRequestError,
    ConflictError,
    TooManyWebhookEndpointsError,
    WebhookEndpointNotFoundError,
)
from canvas_core.models.webhooks import (
    DeliveryMessage,
    EndpointItem,
    EndpointStatus,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEndpointCreated,
    WebhookEventType,
)
from canvas_core.observability import logger
from canvas_core.settings import webhook_queue_settings, webhook_settings
from canvas_core.webhooks.events import envelope, new_event_id
from canvas_core.webhooks.settings import MAX_ENDPOINTS_PER_ACCOUNT
from canvas_core.webhooks.signing import new_secret

if TYPE_CHECKING:
    from canvas_core.gather.fetch import Connector, Fetcher, Resolver

MAX_URL_CHARS = 2048
DEFAULT_EVENTS = list(WebhookEventType)


def create_endpoint(
    account_id: str, url: str, events: list[str] | None = None, store: WebhookStore | None = None
) -> WebhookEndpointCreated:
    store = store or WebhookStore()
    endpoint = EndpointItem(
        endpoint_id=new_id(),
        account_id=account_id,
        url=check_url(url),
        events=parse_events(events),
        secret=new_secret(),
        created_at=now_ms() // 1000,
    )
    if not store.add_endpoint(endpoint, MAX_ENDPOINTS_PER_ACCOUNT):
        raise TooManyWebhookEndpointsError(MAX_ENDPOINTS_PER_ACCOUNT)
    logger.info("Webhook endpoint added", extra={"endpoint_id": endpoint.endpoint_id})
    return _created(endpoint)


def list_endpoints(account_id: str, store: WebhookStore | None = None) -> list[WebhookEndpoint]:
    return [e.view() for e in (store or WebhookStore()).list_endpoints(account_id)]


def delete_endpoint(account_id: str, endpoint_id: str, store: WebhookStore | None = None) -> None:
    endpoint_id = parse_uuid("endpoint_id", endpoint_id)
    if not (store or WebhookStore()).remove_endpoint(endpoint_id, account_id):
        raise WebhookEndpointNotFoundError(endpoint_id)
    logger.info("Webhook endpoint deleted", extra={"endpoint_id": endpoint_id})


def rotate_secret(account_id: str, endpoint_id: str, store: WebhookStore | None = None) -> WebhookEndpointCreated:
    """A new secret for the endpoint, in force at once: attempts from now on are signed with it."""
    endpoint_id = parse_uuid("endpoint_id", endpoint_id)
    endpoint = (store or WebhookStore()).set_secret(endpoint_id, account_id, new_secret())
    if endpoint is None:
        raise WebhookEndpointNotFoundError(endpoint_id)
    return _created(endpoint)


def ping(account_id: str, endpoint_id: str, store: WebhookStore | None = None, queue: Queue | None = None) -> str:
    """Queue a `webhook.ping` event for the endpoint (its object: the endpoint); its event id."""
    endpoint = get_endpoint(account_id, endpoint_id, store)
    if endpoint.status == EndpointStatus.DISABLED:
        raise ConflictError(
            f"Webhook endpoint {endpoint.endpoint_id} is disabled ({endpoint.disabled_reason}); add it again to resume"
        )
    event_id = new_event_id()
    body = envelope(
        event_id,
        WebhookEventType.WEBHOOK_PING,
        now_ms() // 1000,
        endpoint.view().model_dump(mode="json", exclude_none=True),
    )
    message = DeliveryMessage(
        endpoint_id=endpoint.endpoint_id, event_id=event_id, type=WebhookEventType.WEBHOOK_PING, body=body
    )
    (queue or Queue(webhook_queue_settings().queue_url)).send(message.model_dump(mode="json"))
    return event_id


def list_deliveries(
    account_id: str, endpoint_id: str, limit: int = 50, store: WebhookStore | None = None
) -> list[WebhookDelivery]:
    store = store or WebhookStore()
    endpoint = get_endpoint(account_id, endpoint_id, store)
    return store.list_deliveries(endpoint.endpoint_id, max(1, min(limit, 100)))


def get_endpoint(account_id: str, endpoint_id: str, store: WebhookStore | None = None) -> EndpointItem:
    endpoint_id = parse_uuid("endpoint_id", endpoint_id)
    endpoint = (store or WebhookStore()).get_endpoint(endpoint_id)
    if endpoint is None or endpoint.account_id != account_id:
        raise WebhookEndpointNotFoundError(endpoint_id)
    return endpoint


def check_url(url: str) -> str:
    """The URL, once it is an http(s) URL whose host resolves only to addresses deliveries may reach."""
    from canvas_core.gather.fetch import FetchError

    url = (url or "").strip()
    if not url:
        raise BadRequestError("Invalid url: a URL is required")
    if len(url) > MAX_URL_CHARS:
        raise BadRequestError(f"Invalid url: longer than {MAX_URL_CHARS} characters")
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        raise BadRequestError(f"Invalid url: {url!r} is not a valid URL") from None
    if scheme not in ("http", "https"):
        raise BadRequestError(f"Invalid url: {url!r} is not an http or https URL")
    try:
        delivery_fetcher().check_url(url)
    except FetchError as exc:
        raise BadRequestError(f"Invalid url: {exc}") from None
    return url


# Named in the refusal of a private address, so that an operator knows which switch lets it through.
PRIVATE_OPT_IN = (
    "canvas serve --webhook-allow-private-addresses on the embedded stack, "
    "the WebhookAllowPrivateAddresses template parameter on AWS"
)


def delivery_fetcher(resolver: Resolver | None = None, connector: Connector | None = None) -> Fetcher:
    """The web fetcher and its SSRF guard, with the webhook opt-in for private addresses (cloud metadata and
    link-local addresses stay refused even then). Imported here: only the webhook paths need it."""
    from canvas_core.gather.fetch import Fetcher

    allow = webhook_settings().allow_private_addresses
    return Fetcher(resolver=resolver, connector=connector, allow_private=allow, private_opt_in=PRIVATE_OPT_IN)


def parse_events(events: list[str] | None) -> list[WebhookEventType]:
    if not events:
        return DEFAULT_EVENTS
    valid = {e.value: e for e in WebhookEventType}
    unknown = [e for e in events if e not in valid]
    if unknown:
        raise BadRequestError(f"Unknown event type: {', '.join(unknown)}. Valid types: {', '.join(valid)}")
    chosen = set(events)
    return [e for e in WebhookEventType if e.value in chosen]


def _created(endpoint: EndpointItem) -> WebhookEndpointCreated:
    return WebhookEndpointCreated(**endpoint.view().model_dump(), secret=endpoint.secret)
