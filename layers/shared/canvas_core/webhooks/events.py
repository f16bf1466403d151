"""The events a webhook carries: `{id, type, created, livemode, api_version, data: {object}}`, serialised once
when the event is made (those bytes are what every attempt signs and sends)."""

from __future__ import annotations

import json
import uuid
from typing import Any

from canvas_core.models.catalog import RunStatus
from canvas_core.models.webhooks import WebhookEventType
from canvas_core.settings import webhook_settings
from canvas_core.webhooks.settings import API_VERSION

RUN_EVENT_TYPES = {
    RunStatus.RUNNING.value: WebhookEventType.RUN_STARTED,
    RunStatus.COMPLETED.value: WebhookEventType.RUN_COMPLETED,
    RunStatus.PARTIAL.value: WebhookEventType.RUN_PARTIAL,
    RunStatus.FAILED.value: WebhookEventType.RUN_FAILED,
}
# Event ids of run events derive from the run and the status it reached (a run reaches each at most once), so a
# status change queued twice is the same event to receivers.
_RUN_EVENTS = uuid.UUID("0b7f4c52-4a2c-4d4e-9a57-3f2f4c1f8e11")


def new_event_id() -> str:
    return f"evt_{uuid.uuid4()}"


def run_event_id(run_id: str, status: str) -> str:
    return f"evt_{uuid.uuid5(_RUN_EVENTS, f'{run_id}:{status}')}"


def envelope(event_id: str, event_type: WebhookEventType, created: int, obj: dict[str, Any]) -> str:
    return json.dumps(
        {
            "id": event_id,
            "type": event_type.value,
            "created": created,
            "livemode": webhook_settings().livemode,
            "api_version": API_VERSION,
            "data": {"object": obj},
        },
        separators=(",", ":"),
        ensure_ascii=False,
    )
