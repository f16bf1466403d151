"""Stands in for EventBridge: the template's rules on "Step Functions Execution Status Change" events.

On AWS, Step Functions emits that event whenever an execution ends, and the rules in template.yaml deliver
the matching ones to their function (FailRunFunction marks a run failed when its execution failed, timed
out or was aborted outside the state machine's own Catch). moto emits no events, so a watcher polls the
executions and delivers, for each ending it sees, the event Step Functions would have sent.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from canvas_local.lambda_runtime import ACCOUNT_ID, REGION

LOG = logging.getLogger(__name__)

STATUS_CHANGE = "Step Functions Execution Status Change"
POLL_SECONDS = 0.2


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
    """Polls the state machines' executions and delivers each ending to the rules that match it."""

    def __init__(
        self,
        sfn: Any,
        state_machine_arns: list[str],
        rules: list[EventRule],
        deliver: Callable[[str, dict[str, Any]], None],
    ):
        self.sfn = sfn
        self.state_machine_arns = state_machine_arns
        self.rules = rules
        self.deliver = deliver
        self._ended: set[str] = set()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if not self.rules:
            return
        self._thread = threading.Thread(target=self._run, name="execution-watcher", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def poll(self) -> None:
        """One pass: deliver the events of executions that ended since the last pass."""
        for arn in self.state_machine_arns:
            for summary in self._executions(arn):
                if summary["status"] == "RUNNING" or summary["executionArn"] in self._ended:
                    continue
                self._ended.add(summary["executionArn"])
                execution = self.sfn.describe_execution(executionArn=summary["executionArn"])
                event = status_change_event(execution)
                for rule in self.rules:
                    if matches(rule.pattern, event):
                        self.deliver(rule.function, event)

    def _executions(self, arn: str) -> list[dict[str, Any]]:
        found, token = [], None
        while True:
            page = self.sfn.list_executions(stateMachineArn=arn, **({"nextToken": token} if token else {}))
            found += page["executions"]
            token = page.get("nextToken")
            if not token:
                return found

    def _run(self) -> None:
        while not self._stopping.wait(POLL_SECONDS):
            try:
                self.poll()
            except Exception:  # the watcher must outlive a failed poll, as EventBridge outlives a failed target
                LOG.exception("Execution watcher pass failed")
