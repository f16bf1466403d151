"""EventBridge: a run's status change, published for the webhook deliveries (the bus's rule queues it). A publish
EventBridge refuses is tried again a few times; one that still fails never fails the run (the run's own record is
what clients read), but it is logged and counted (`RunEventsNotPublished`, which raises an alarm): a webhook
receiver will not hear of that change."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

from canvas_core.adapters.aws import client
from canvas_core.clock import now_ms
from canvas_core.observability import count, logger
from canvas_core.settings import service_settings

SOURCE = "canvas-run-service"
RUN_STATUS_CHANGED = "Run Status Changed"
# A refused publish (throttling, a passing fault) is tried this often in all, after a growing random wait.
PUBLISH_ATTEMPTS = 3
PUBLISH_BACKOFF_SECONDS = 0.1


class Events:
    def __init__(
        self, bus_name: str | None = None, eventbridge: Any = None, sleep: Callable[[float], None] = time.sleep
    ):
        self._bus_name = bus_name
        self._events = eventbridge
        self._sleep = sleep

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
        entry = {"Source": SOURCE, "DetailType": RUN_STATUS_CHANGED, "Detail": json.dumps(detail)}
        for attempt in range(1, PUBLISH_ATTEMPTS + 1):
            try:
                events = self._events or client("events")
                answer = events.put_events(Entries=[{**entry, "EventBusName": self.bus_name}])
                if answer.get("FailedEntryCount"):
                    raise RuntimeError(str(answer.get("Entries")))
                return True
            except Exception:
                if attempt == PUBLISH_ATTEMPTS:
                    logger.exception("Publishing a run status change failed", extra=detail)
                    count("RunEventsNotPublished")
                    return False
                self._sleep(random.uniform(0, PUBLISH_BACKOFF_SECONDS * 2**attempt))
        return False
