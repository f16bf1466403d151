"""The body of POST /v1/webhook_endpoints: JSON (`{"url": ..., "events": [...]}`) or a form, urlencoded or
multipart (`url`, and `events` as a comma-separated list)."""

from __future__ import annotations

import json

from canvas_core.api.forms import parse_form
from canvas_core.errors import BadRequestError, PayloadTooLargeError

MAX_BODY_BYTES = 16 * 1024


def parse_endpoint_request(content_type: str | None, body: bytes) -> tuple[str, list[str] | None]:
    if len(body) > MAX_BODY_BYTES:
        raise PayloadTooLargeError(f"Request body too large: {len(body)} bytes (maximum {MAX_BODY_BYTES})")
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media == "application/json":
        try:
            data = json.loads(body or b"{}")
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise BadRequestError("Request body is not valid JSON") from None
        if not isinstance(data, dict):
            raise BadRequestError("Request body must be a JSON object")
        url, events = data.get("url"), data.get("events")
    else:
        form = parse_form(content_type, body, MAX_BODY_BYTES).fields
        url, events = form.get("url"), form.get("events")
    if not isinstance(url, str) or not url.strip():
        raise BadRequestError("url is required")
    return url, _event_list(events)


def _event_list(events: object) -> list[str] | None:
    if events is None:
        return None
    if isinstance(events, str):
        events = [events]
    if not isinstance(events, list) or not all(isinstance(e, str) for e in events):
        raise BadRequestError("events must be a list of event types or a comma-separated string")
    split = [part.strip() for e in events for part in e.split(",") if part.strip()]
    return split or None
