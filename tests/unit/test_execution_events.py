"""The EventBridge stand-in: pattern matching and the event Step Functions sends when an execution ends."""

import threading
from datetime import UTC, datetime

import pytest

from canvas_local.events import EventRule, ExecutionWatcher, matches, status_change_event
from canvas_local.template import Template
from tests.support import ROOT

pytestmark = pytest.mark.unit

EXECUTION = {
    "executionArn": "arn:aws:states:us-east-1:123456789012:execution:RunCanvasStateMachine:run-1",
    "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:RunCanvasStateMachine",
    "name": "run-1",
    "status": "ABORTED",
    "startDate": datetime(2026, 1, 1, tzinfo=UTC),
    "stopDate": datetime(2026, 1, 1, 0, 5, tzinfo=UTC),
    "input": '{"run_id": "run-1"}',
}


def test_the_templates_rule_matches_failed_timed_out_and_aborted_executions_only():
    [rule] = Template(ROOT / "template.yaml").event_rules()
    assert rule.function == "FailRunFunction"
    for status, expected in [("ABORTED", True), ("TIMED_OUT", True), ("FAILED", True), ("SUCCEEDED", False)]:
        assert matches(rule.pattern, status_change_event({**EXECUTION, "status": status})) is expected
    other_machine = {**EXECUTION, "stateMachineArn": EXECUTION["stateMachineArn"] + "Other"}
    assert matches(rule.pattern, status_change_event(other_machine)) is False


def test_the_event_has_the_shape_step_functions_sends():
    event = status_change_event(EXECUTION)
    assert event["source"] == "aws.states"
    assert event["detail-type"] == "Step Functions Execution Status Change"
    assert event["detail"]["name"] == "run-1" and event["detail"]["input"] == '{"run_id": "run-1"}'
    assert event["detail"]["stopDate"] - event["detail"]["startDate"] == 300_000


def test_each_reported_ending_is_delivered_to_the_matching_rules_on_the_watchers_thread():
    # Given a watcher with one rule on aborted executions
    class FakeSfn:
        def describe_execution(self, executionArn):
            return {**EXECUTION, "executionArn": executionArn}

    delivered: list[tuple[str, str, str]] = []
    tidied = threading.Event()
    rule = EventRule("FailRunFunction", {"detail": {"status": ["ABORTED"]}})
    watcher = ExecutionWatcher(
        FakeSfn(),
        [EXECUTION["stateMachineArn"]],
        [rule],
        lambda function, event: delivered.append(
            (function, event["detail"]["executionArn"], threading.current_thread().name)
        ),
        after_each=tidied.set,
    )
    watcher.start()
    try:
        # When one execution's ending is reported
        watcher.notify("arn:run-1")
        assert tidied.wait(5)
    finally:
        watcher.stop()

    # Then the rule's function gets its event once, away from the caller's thread
    assert delivered == [("FailRunFunction", "arn:run-1", "execution-watcher")]


def test_an_ending_of_another_state_machine_is_not_delivered():
    class FakeSfn:
        def describe_execution(self, executionArn):
            return {**EXECUTION, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:Other"}

    delivered = []
    rule = EventRule("FailRunFunction", {"detail": {"status": ["ABORTED"]}})
    watcher = ExecutionWatcher(FakeSfn(), [EXECUTION["stateMachineArn"]], [rule], lambda f, e: delivered.append(f))
    watcher.deliver_ending("arn:other")
    assert delivered == []


def test_undelivered_counts_endings_notified_until_delivered():
    # Given a watcher whose delivery is held
    from canvas_local.events import ExecutionWatcher

    release = threading.Event()
    watcher = ExecutionWatcher(None, [], [], lambda function, event: None)
    watcher.deliver_ending = lambda arn: release.wait(5)  # type: ignore[method-assign]
    watcher.start()
    try:
        # When two endings are notified
        watcher.notify("arn:1")
        watcher.notify("arn:2")
        # Then both count as undelivered until delivered
        assert watcher.undelivered() == 2
        release.set()
        assert watcher.wait_until_idle(5)
        assert watcher.undelivered() == 0
    finally:
        watcher.stop()
