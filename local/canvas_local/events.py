"""Stands in for EventBridge: the template's rules on "Step Functions Execution Status Change" events.

On AWS, Step Functions emits that event whenever an execution ends, and the rules in template.yaml deliver
the matching ones to their function (FailRunFunction marks a run failed when its execution failed, timed
out or was aborted outside the state machine's own Catch). moto emits no events, so moto_patch reports each
ending and the watcher delivers, for each, the event Step Functions would have sent.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from canvas_local.lambda_runtime import ACCOUNT_ID, REGION

LOG = logging.getLogger(__name__)

STATUS_CHANGE = "Step Functions Execution Status Change"


@dataclass(frozen=True)
class EventRule:
    function: str  # logical id of the target
    pattern: dict[str, Any]


def matches(pattern: dict[str, Any], event: dict[str, Any]) -> bool:
    """EventBridge pattern matching for the forms the template uses: lists of exact values, nested objects."""
    for key, expected in pattern.items():
        if key not in event:
            return False
        value = event[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict) or not matches(expected, value):
                return False
        elif isinstance(expected, list):
            if value not in expected:
                return False
        elif value != expected:
            return False
    return True


def status_change_event(execution: dict[str, Any]) -> dict[str, Any]:
    def millis(moment: Any) -> int | None:
        return int(moment.timestamp() * 1000) if isinstance(moment, datetime) else None

    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": STATUS_CHANGE,
        "source": "aws.states",
        "account": ACCOUNT_ID,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": [execution["executionArn"]],
        "detail": {
            "executionArn": execution["executionArn"],
            "stateMachineArn": execution["stateMachineArn"],
            "name": execution["name"],
            "status": execution["status"],
            "startDate": millis(execution.get("startDate")),
            "stopDate": millis(execution.get("stopDate")),
            "input": execution.get("input"),
            "output": execution.get("output"),
        },
    }


class ExecutionWatcher:
    """Delivers each execution's ending to the rules that match it, one at a time on a thread of its own
    (as EventBridge calls targets apart from the execution). `notify(arn)` is called when one ends."""

    def __init__(
        self,
        sfn: Any,
        state_machine_arns: list[str],
        rules: list[EventRule],
        deliver: Callable[[str, dict[str, Any]], object],
        after_each: Callable[[], None] | None = None,
        on_ended: Callable[[dict[str, Any]], None] | None = None,
    ):
        self.sfn = sfn
        self.state_machine_arns = set(state_machine_arns)
        self.rules = rules
        self.deliver = deliver
        self.after_each = after_each
        self.on_ended = on_ended  # each ended execution of the stack's state machines, once its rules have run
        self._endings: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self._pending = 0
        self._pending_lock = threading.Lock()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="execution-watcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5) -> None:
        if self._thread is not None:
            self._endings.put(None)
            self._thread.join(timeout=timeout)
            self._thread = None

    def notify(self, execution_arn: str) -> None:
        with self._pending_lock:
            self._pending += 1
        self._endings.put(execution_arn)

    def undelivered(self) -> int:
        """Endings notified whose delivery has not finished."""
        with self._pending_lock:
            return self._pending

    def wait_until_idle(self, timeout: float) -> bool:
        """True once every ending reported so far has been delivered; False if that takes over `timeout`."""
        deadline = time.monotonic() + timeout
        while self._pending and time.monotonic() < deadline:
            time.sleep(0.02)
        return not self._pending

    def deliver_ending(self, execution_arn: str) -> dict[str, Any] | None:
        """Send the status change event of one ended execution to every rule that matches it; the execution, or
        None when it is not one of the stack's state machines'."""
        execution: dict[str, Any] = self.sfn.describe_execution(executionArn=execution_arn)
        if execution["stateMachineArn"] not in self.state_machine_arns:
            return None
        event = status_change_event(execution)
        for rule in self.rules:
            if matches(rule.pattern, event):
                self.deliver(rule.function, event)
        return execution

    def _run(self) -> None:
        while (execution_arn := self._endings.get()) is not None:
            try:
                execution = self.deliver_ending(execution_arn)
                if execution is not None and self.on_ended is not None:
                    self.on_ended(execution)
                if self.after_each is not None:
                    self.after_each()
            except Exception:  # the watcher must outlive a failed delivery, as EventBridge outlives a failed target
                LOG.exception("Delivering the end of %s failed", execution_arn)
            finally:
                with self._pending_lock:
                    self._pending -= 1
