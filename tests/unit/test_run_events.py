"""Run status changes published to EventBridge: a refused publish is tried again after a backoff; one still refused
is counted (RunEventsNotPublished, which raises an alarm) and never fails the run."""

from __future__ import annotations

from typing import Any

import pytest

from canvas_core.adapters import events as events_module
from canvas_core.adapters.events import PUBLISH_ATTEMPTS, Events

pytestmark = pytest.mark.unit


class Refusing:
    """EventBridge answering FailedEntryCount for the first `refusals` calls."""

    def __init__(self, refusals: int) -> None:
        self.refusals, self.calls = refusals, 0

    def put_events(self, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        if self.calls <= self.refusals:
            return {"FailedEntryCount": 1, "Entries": [{"ErrorCode": "ThrottlingException"}]}
        return {"FailedEntryCount": 0, "Entries": [{"EventId": "1"}]}


def test_a_refused_publish_is_tried_again_and_goes_through(monkeypatch):
    counted: list[str] = []
    monkeypatch.setattr(events_module, "count", lambda name, *a, **k: counted.append(name))
    bridge, waits = Refusing(refusals=PUBLISH_ATTEMPTS - 1), []
    assert Events("bus", eventbridge=bridge, sleep=waits.append).publish_run_status("a", "r", "completed", 1)
    assert bridge.calls == PUBLISH_ATTEMPTS and len(waits) == PUBLISH_ATTEMPTS - 1 and counted == []


def test_a_publish_refused_every_time_is_counted_and_never_raises(monkeypatch):
    counted: list[str] = []
    monkeypatch.setattr(events_module, "count", lambda name, *a, **k: counted.append(name))
    bridge = Refusing(refusals=PUBLISH_ATTEMPTS)
    assert not Events("bus", eventbridge=bridge, sleep=lambda _: None).publish_run_status("a", "r", "failed", 1)
    assert bridge.calls == PUBLISH_ATTEMPTS and counted == ["RunEventsNotPublished"]
