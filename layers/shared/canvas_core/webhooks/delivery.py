"""Delivery, run by the delivery function on the webhook queue's messages. A message is either a run's status
change (from EventBridge): it is fanned out, one delivery message per subscribed endpoint, the event's bytes
fixed once; or one delivery: attempted when due (the SSRF guard checks fresh DNS each time), recorded, and on
failure queued again by the retry schedule, or after the last attempt sent to the dead-letter queue.

A 2xx answer within the timeout counts; 410 disables the endpoint; anything else, a redirect, a timeout or a
refused address is tried again. Every retry carries the same event id and bytes, signed anew."""

from __future__ import annotations

import time
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from canvas_core.adapters.queues import Queue
from canvas_core.adapters.webhook_store import WebhookStore
from canvas_core.clock import now_ms
from canvas_core.errors import RunNotFoundError
from canvas_core.models.webhooks import DeliveryMessage, EndpointStatus, WebhookDelivery
from canvas_core.observability import logger
from canvas_core.settings import delivery_settings
from canvas_core.webhooks.endpoints import delivery_fetcher
from canvas_core.webhooks.events import RUN_EVENT_TYPES, envelope, run_event_id
from canvas_core.webhooks.schedule import retry_delay_seconds
from canvas_core.webhooks.signing import signature_header

if TYPE_CHECKING:
    from canvas_core.adapters.artifacts import ArtifactStore
    from canvas_core.adapters.store import Store
    from canvas_core.gather.fetch import Fetcher

USER_AGENT = "CanvasRunService-Webhooks/1.0"
# SQS takes messages of up to 256 KiB; a body larger than this (the JSON of the message escapes it further) is
# kept in S3 and the messages name it.
MAX_INLINE_BODY_BYTES = 96 * 1024
GONE_REASON = "The endpoint answered 410 Gone"


class Outcome(StrEnum):
    FANNED_OUT = "fanned_out"
    DELIVERED = "delivered"
    RETRYING = "retrying"
    WAITING = "waiting"  # not due yet: queued again for the rest of its delay
    DEAD_LETTERED = "dead_lettered"
    DISABLED = "disabled"
    DROPPED = "dropped"  # the endpoint was deleted or disabled meanwhile


class Deliveries:
    """The delivery function's logic over its adapters (each replaceable by a test)."""

    def __init__(
        self,
        store: WebhookStore | None = None,
        queue: Queue | None = None,
        dead_letters: Queue | None = None,
        fetcher: Fetcher | None = None,
        runs: Store | None = None,
        files: ArtifactStore | None = None,
    ):
        settings = delivery_settings()
        self.settings = settings
        self.store = store or WebhookStore()
        self.queue = queue or Queue(settings.queue_url)
        self.dead_letters = dead_letters or Queue(settings.dead_letter_queue_url)
        self.fetcher = fetcher
        self.runs = runs
        self.files = files

    def handle(self, message: dict[str, Any]) -> Outcome:
        if "detail-type" in message:
            return self.fan_out(message["detail"])
        return self.deliver(DeliveryMessage.model_validate(message))

    def fan_out(self, detail: dict[str, Any]) -> Outcome:
        """One delivery message per enabled endpoint of the account subscribed to the event's type."""
        from canvas_core.runs import get_run_status

        account_id, run_id, status = detail["account_id"], detail["run_id"], detail["status"]
        event_type = RUN_EVENT_TYPES.get(status)
        logger.append_keys(run_id=run_id)
        if event_type is None:
            logger.warning("A status change to an unknown status", extra={"status": status})
            return Outcome.DROPPED
        endpoints = [
            e
            for e in self.store.list_endpoints(account_id)
            if e.status == EndpointStatus.ENABLED and event_type in e.events
        ]
        if not endpoints:
            return Outcome.FANNED_OUT
        try:
            # Exactly the data GET /v1/run/{run_id} answers with (dumped as canvas_core.api.ok dumps it), download
            # URLs included; tests/component/test_webhook_endpoints.py compares the two.
            view = get_run_status(run_id, account_id, store=self.runs, files=self.files)
            run = view.model_dump(mode="json", exclude_none=True)
        except RunNotFoundError:
            logger.warning("A status change of an unknown run", extra={"status": status})
            return Outcome.DROPPED
        event_id = run_event_id(run_id, status)
        body = envelope(event_id, event_type, int(detail["changed_at_ms"]) // 1000, run)
        carried: dict[str, Any] = {"body": body}
        if len(body.encode()) > MAX_INLINE_BODY_BYTES:
            key = f"webhooks/{account_id}/{event_id}.json"
            self._files().put(key, body.encode(), "application/json")
            carried = {"body_key": key}
        for endpoint in endpoints:
            message = DeliveryMessage(endpoint_id=endpoint.endpoint_id, event_id=event_id, type=event_type, **carried)
            self.queue.send(message.model_dump(mode="json", exclude_none=True))
        logger.info("Run event fanned out", extra={"event_id": event_id, "endpoints": len(endpoints)})
        return Outcome.FANNED_OUT

    def deliver(self, message: DeliveryMessage) -> Outcome:
        """Attempt the delivery if it is due, record the attempt, and schedule what follows."""
        logger.append_keys(endpoint_id=message.endpoint_id, event_id=message.event_id)
        waited = message.not_before_ms - now_ms()
        if waited > 0:
            # SQS holds a message back 15 minutes at most: a longer wait is several hops.
            self.queue.send(message.model_dump(mode="json"), delay_seconds=waited / 1000)
            return Outcome.WAITING
        endpoint = self.store.get_endpoint(message.endpoint_id)
        if endpoint is None or endpoint.status != EndpointStatus.ENABLED:
            logger.info("Delivery dropped: the endpoint was deleted or disabled")
            return Outcome.DROPPED

        attempted_ms, started = now_ms(), time.monotonic()
        status_code, error = self._post(endpoint.url, endpoint.secret, message)
        duration_ms = int((time.monotonic() - started) * 1000)

        next_retry: int | None = None
        if status_code is not None and 200 <= status_code < 300:
            outcome = Outcome.DELIVERED
        elif status_code == 410:
            outcome, error = Outcome.DISABLED, GONE_REASON
        else:
            error = error or f"The endpoint answered HTTP {status_code}"
            delay = retry_delay_seconds(message.attempt, self.settings.retry_time_scale)
            if delay is None:
                outcome = Outcome.DEAD_LETTERED
            else:
                outcome = Outcome.RETRYING
                next_retry = attempted_ms + int(delay * 1000)
        self.store.record_delivery(
            endpoint.endpoint_id,
            WebhookDelivery(
                event_id=message.event_id,
                type=message.type,
                attempt=message.attempt,
                status_code=status_code,
                error=error if outcome != Outcome.DELIVERED else None,
                duration_ms=duration_ms,
                attempted=attempted_ms // 1000,
                next_retry=next_retry // 1000 if next_retry is not None else None,
            ),
            attempted_ms,
        )
        if outcome == Outcome.DISABLED:
            self.store.disable_endpoint(endpoint.endpoint_id, GONE_REASON)
        elif outcome == Outcome.RETRYING and next_retry is not None:
            again = message.model_copy(update={"attempt": message.attempt + 1, "not_before_ms": next_retry})
            self.queue.send(again.model_dump(mode="json"), delay_seconds=(next_retry - now_ms()) / 1000)
        elif outcome == Outcome.DEAD_LETTERED:
            self.dead_letters.send(message.model_dump(mode="json"))
        logger.info(
            "Webhook attempt",
            extra={"attempt": message.attempt, "status_code": status_code, "outcome": outcome.value, "error": error},
        )
        return outcome

    def _post(self, url: str, secret: str, message: DeliveryMessage) -> tuple[int | None, str | None]:
        """The endpoint's status code, or None and why no answer came (a refused address is never contacted)."""
        from canvas_core.gather.fetch import FetchError

        body = self._files().get(message.body_key) if message.body_key else message.body.encode()
        signature = signature_header(secret, body)
        headers = {
            "Content-Type": "application/json",
            "User-Agent": USER_AGENT,
            "Accept": "*/*",
            "Spine-Signature": signature,
            "Canvas-Signature": signature,
            "Canvas-Event-Id": message.event_id,
            "Canvas-Event-Type": message.type.value,
        }
        fetcher = self.fetcher or delivery_fetcher()
        try:
            page = fetcher.send(url, body=body, headers=headers, timeout=self.settings.timeout_seconds)
        except FetchError as exc:
            return None, str(exc)
        return page.status, None

    def _files(self) -> ArtifactStore:
        if self.files is None:
            from canvas_core.adapters.artifacts import ArtifactStore

            self.files = ArtifactStore()
        return self.files
