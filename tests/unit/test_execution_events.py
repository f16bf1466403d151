"""The EventBridge stand-in: pattern matching and the event Step Functions sends when an execution ends."""

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


def test_each_ending_is_delivered_once():
    class FakeSfn:
        def list_executions(self, stateMachineArn):
            return {"executions": [EXECUTION, {**EXECUTION, "executionArn": "running", "status": "RUNNING"}]}

        def describe_execution(self, executionArn):
            return EXECUTION

    delivered = []
    rule = EventRule("FailRunFunction", {"detail": {"status": ["ABORTED"]}})
    watcher = ExecutionWatcher(FakeSfn(), [EXECUTION["stateMachineArn"]], [rule], lambda f, e: delivered.append(f))
    watcher.poll()
    watcher.poll()
    assert delivered == ["FailRunFunction"]
