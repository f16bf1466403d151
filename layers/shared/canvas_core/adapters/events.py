"""EventBridge: a run's status change, published for the webhook deliveries (the bus's rule queues it). A
failed publish is logged and never fails the run: the run's own record is what clients read."""

from __future__ import annotations

import json
from typing import Any

from canvas_core.adapters.aws import client
from canvas_core.clock import now_ms
from canvas_core.observability import logger
from canvas_core.settings import service_settings

SOURCE = "canvas-run-service"
RUN_STATUS_CHANGED = "Run Status Changed"


class Events:
    def __init__(self, bus_name: str | None = None, eventbridge: Any = None):
        self._bus_name = bus_name
        self._events = eventbridge

    @property
    def bus_name(self) -> str:
        if self._bus_name is None:
            self._bus_name = service_settings().event_bus_name
        return self._bus_name

    def publish_run_status(self, account_id: str, run_id: str, status: str, changed_at_ms: int | None = None) -> bool:
        """Publish one "Run Status Changed" event; False (logged) when EventBridge did not take it."""
        detail = {
            "account_id": account_id,
            "run_id": run_id,
            "status": status,
            "changed_at_ms": changed_at_ms if changed_at_ms is not None else now_ms(),
        }
        try:
            events = self._events or client("events")
            answer = events.put_events(
                Entries=[
                    {
                        "Source": SOURCE,
                        "DetailType": RUN_STATUS_CHANGED,
                        "Detail": json.dumps(detail),
                        "EventBusName": self.bus_name,
                    }
                ]
            )
            if answer.get("FailedEntryCount"):
                raise RuntimeError(str(answer.get("Entries")))
        except Exception:
            logger.exception("Publishing a run status change failed", extra=detail)
            return False
        return True
