"""The embedded stack's stand-in for SQS event sources: what it reads from template.yaml, and what one poll
deletes (the messages the function did not report as failed)."""

from __future__ import annotations

import json

import pytest

from canvas_local.lambda_runtime import LocalFunction
from canvas_local.queues import QueuePollers, QueueSource, TemplateQueues, queue_arn
from canvas_local.template import Template
from tests.support import ROOT

pytestmark = pytest.mark.unit


def test_the_template_s_queues_rule_and_event_source_are_read_with_local_arns():
    spec = TemplateQueues(Template(ROOT / "template.yaml"))

    queues = spec.queues()
    assert {"WebhookQueue", "WebhookDeadLetterQueue"} <= set(queues)
    assert json.loads(queues["WebhookQueue"]["RedrivePolicy"]) == {
        "deadLetterTargetArn": queue_arn("WebhookDeadLetterQueue"),
        "maxReceiveCount": 5,
    }
    (rule,) = spec.rules()
    assert rule["Targets"] == [{"Id": "WebhookQueue", "Arn": queue_arn("WebhookQueue")}]
    assert json.loads(rule["EventPattern"])["detail-type"] == ["Run Status Changed"]
    assert spec.sources() == [QueueSource("DeliverWebhooksFunction", "WebhookQueue", 10, True)]


class FakeSqs:
    def __init__(self, count: int):
        self.messages = [
            {"MessageId": f"m{i}", "ReceiptHandle": f"r{i}", "Body": json.dumps({"n": i})} for i in range(count)
        ]
        self.deleted: list[str] = []

    def receive_message(self, **_):
        return {"Messages": self.messages}

    def delete_message_batch(self, QueueUrl, Entries):
        self.deleted += [e["ReceiptHandle"] for e in Entries]


def poll(handler, partial: bool = True) -> list[str]:
    sqs = FakeSqs(3)
    function = LocalFunction.of("DeliverWebhooksFunction", handler)
    pollers = QueuePollers.__new__(QueuePollers)
    pollers.functions = {"DeliverWebhooksFunction": function}
    source = QueueSource("DeliverWebhooksFunction", "WebhookQueue", 10, partial)
    pollers.handle(sqs, "http://queue", source, sqs.receive_message()["Messages"])
    return sqs.deleted


def test_a_poll_deletes_what_succeeded_and_leaves_the_reported_failures():
    def handler(event, context):
        assert [r["eventSource"] for r in event["Records"]] == ["aws:sqs"] * 3
        return {"batchItemFailures": [{"itemIdentifier": "m1"}]}

    assert poll(handler) == ["r0", "r2"]


def test_a_function_that_raised_leaves_the_whole_batch():
    def handler(event, context):
        raise RuntimeError("broken")

    assert poll(handler) == []
