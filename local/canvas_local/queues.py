"""Stands in for the parts of AWS around the webhook queue: the SQS queues and EventBridge rules of
template.yaml, created in moto (whose EventBridge delivers a matching PutEvents to an SQS target), and Lambda's
SQS event source mapping: one poller per `Type: SQS` function event, which receives batches, invokes the
function with each (a few batches at once), and deletes the messages it did not report as failed (those come
back after their visibility timeout, as on AWS; moto moves them to the dead-letter queue after the redrive
policy's receive count).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

from canvas_local.lambda_runtime import ACCOUNT_ID, REGION, LocalFunction
from canvas_local.template import Template, TemplateError

LOG = logging.getLogger(__name__)

# How long a poller waits after an empty receive. moto's long polling would hold its SQS lock while it waits.
POLL_SECONDS = 0.2
# Batches of one source handled at once (Lambda's event source runs several pollers): a slow endpoint holds up
# one of them, not every delivery.
CONCURRENT_BATCHES = 4
QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "DelaySeconds", "ReceiveMessageWaitTimeSeconds")


def queue_arn(name: str) -> str:
    return f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:{name}"


@dataclass(frozen=True)
class QueueSource:
    """A function's `Type: SQS` event: the queue it polls and how."""

    function: str
    queue: str  # the queue's logical id, which is its local name
    batch_size: int
    partial_failures: bool


class TemplateQueues:
    """What template.yaml says about queues, rules with queue targets, and SQS event sources."""

    def __init__(self, template: Template):
        self.template = template

    def queues(self) -> dict[str, dict[str, str]]:
        """Queue name (its logical id) -> CreateQueue attributes."""
        found = {}
        for lid in self.template.of_type("AWS::SQS::Queue"):
            props = self.template.properties(lid)
            attributes = {name: str(self.template.resolve(props[name])) for name in QUEUE_ATTRIBUTES if name in props}
            if "RedrivePolicy" in props:
                redrive = props["RedrivePolicy"]
                attributes["RedrivePolicy"] = json.dumps(
                    {
                        "deadLetterTargetArn": self.arn_of(redrive["deadLetterTargetArn"]),
                        "maxReceiveCount": int(self.template.resolve(redrive["maxReceiveCount"])),
                    }
                )
            found[lid] = attributes
        return found

    def rules(self) -> list[dict[str, Any]]:
        """PutRule and PutTargets arguments of each rule with queue targets (its other targets left out: the
        stack delivers to functions itself, canvas_local/events.py)."""
        rules = []
        for lid in self.template.of_type("AWS::Events::Rule"):
            props = self.template.properties(lid)
            targets = [
                {"Id": t["Id"], "Arn": queue_arn(queue)}
                for t in props.get("Targets") or []
                if (queue := self._queue_id(t["Arn"])) is not None
            ]
            if not targets:
                continue
            bus = str(self.template.resolve(props.get("EventBusName", "default")))
            rules.append(
                {
                    "Name": lid,
                    "EventBusName": bus,
                    "EventPattern": json.dumps(self.template.resolve(props["EventPattern"])),
                    "Targets": targets,
                }
            )
        return rules

    def sources(self) -> list[QueueSource]:
        found = []
        for lid in self.template.of_type("AWS::Serverless::Function"):
            for event in (self.template.properties(lid).get("Events") or {}).values():
                if event.get("Type") != "SQS":
                    continue
                props = event["Properties"]
                queue = self._queue_id(props["Queue"])
                if queue is None:
                    raise TemplateError(f"{lid}: an SQS event's Queue must be !GetAtt <Queue>.Arn")
                found.append(
                    QueueSource(
                        function=lid,
                        queue=queue,
                        batch_size=int(self.template.resolve(props.get("BatchSize", 10))),
                        partial_failures="ReportBatchItemFailures" in (props.get("FunctionResponseTypes") or []),
                    )
                )
        return found

    def arn_of(self, value: Any) -> str:
        queue = self._queue_id(value)
        if queue is None:
            raise TemplateError(f"a queue must be named with !GetAtt <Queue>.Arn, not {value!r}")
        return queue_arn(queue)

    def _queue_id(self, value: Any) -> str | None:
        """The logical id of a queue named by `!GetAtt Queue.Arn` (the form the embedded stack reads); None for
        anything else."""
        if isinstance(value, dict) and "Fn::GetAtt" in value:
            lid, attribute = cast("list[str]", value["Fn::GetAtt"])
            if attribute == "Arn" and self.template.resources.get(lid, {}).get("Type") == "AWS::SQS::Queue":
                return lid
        return None


class QueuePollers:
    """Creates the template's queues and rules in moto, then polls each SQS event source on a thread of its own
    until `stop()`."""

    def __init__(
        self,
        template: Template,
        client: Callable[[str], Any],
        functions: dict[str, LocalFunction],
        poll_seconds: float = POLL_SECONDS,
    ):
        self.spec = TemplateQueues(template)
        self.client = client
        self.functions = functions
        self.poll_seconds = poll_seconds
        self.queue_urls: dict[str, str] = {}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []

    def provision(self) -> None:
        sqs, events = self.client("sqs"), self.client("events")
        queues = self.spec.queues()
        # Dead-letter queues first: a redrive policy names a queue that exists.
        for name in sorted(queues, key=lambda n: "RedrivePolicy" in queues[n]):
            self.queue_urls[name] = sqs.create_queue(QueueName=name, Attributes=queues[name])["QueueUrl"]
        for rule in self.spec.rules():
            targets = rule.pop("Targets")
            events.put_rule(State="ENABLED", **rule)
            events.put_targets(Rule=rule["Name"], EventBusName=rule["EventBusName"], Targets=targets)

    def start(self) -> None:
        for source in self.spec.sources():
            thread = threading.Thread(
                target=self._poll, args=(source,), name=f"sqs-poller-{source.function}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def drain(self, timeout: float) -> bool:
        """Wait until the polled queues hold no message that is due or being handled (a delayed retry is not
        waited for); False if that takes over `timeout`. The stack drains before stopping, so that the endings
        of the runs it stopped are delivered."""
        sqs = self.client("sqs")
        urls = {self.queue_urls[source.queue] for source in self.spec.sources()}
        names = ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        deadline = time.monotonic() + timeout
        while True:
            counts = [sqs.get_queue_attributes(QueueUrl=url, AttributeNames=names)["Attributes"] for url in urls]
            if not any(int(count[name]) for count in counts for name in names):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)

    def stop(self, timeout: float = 10) -> None:
        self._stopping.set()
        for thread in self._threads:
            thread.join(timeout=timeout)
        self._threads = []

    def _poll(self, source: QueueSource) -> None:
        """Receive batches while a worker is free; each batch is handled on a worker of a bounded pool."""
        sqs = self.client("sqs")
        url = self.queue_urls[source.queue]
        free = threading.BoundedSemaphore(CONCURRENT_BATCHES)
        with ThreadPoolExecutor(CONCURRENT_BATCHES, thread_name_prefix=f"sqs-batch-{source.function}") as pool:
            while not self._stopping.is_set():
                if not free.acquire(timeout=self.poll_seconds):
                    continue
                try:
                    messages = self._receive(sqs, url, source)
                except Exception:  # the poller outlives a failed receive, as the event source mapping does
                    LOG.exception("Polling %s for %s failed", source.queue, source.function)
                    messages = []
                if not messages:
                    free.release()
                    self._stopping.wait(self.poll_seconds)
                    continue
                pool.submit(self._handle_batch, sqs, url, source, messages, free)

    def _handle_batch(
        self, sqs: Any, url: str, source: QueueSource, messages: list[dict[str, Any]], free: threading.Semaphore
    ) -> None:
        try:
            self.handle(sqs, url, source, messages)
        except Exception:
            LOG.exception("Handling a batch of %s for %s failed", source.queue, source.function)
        finally:
            free.release()

    @staticmethod
    def _receive(sqs: Any, url: str, source: QueueSource) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=min(10, source.batch_size), WaitTimeSeconds=0, AttributeNames=["All"]
        ).get("Messages", [])
        return messages

    def handle(self, sqs: Any, url: str, source: QueueSource, messages: list[dict[str, Any]]) -> None:
        """Invoke the function with the batch and delete the messages it did not report as failed (all of them
        stay when it raised); those left come back after their visibility timeout."""
        arn = queue_arn(source.queue)
        invocation = self.functions[source.function].invoke({"Records": [_record(m, arn) for m in messages]})
        if invocation.function_error is not None:
            failed = {m["MessageId"] for m in messages}
        elif source.partial_failures and isinstance(invocation.payload, dict):
            failed = {f["itemIdentifier"] for f in invocation.payload.get("batchItemFailures") or []}
        else:
            failed = set()
        done = [m for m in messages if m["MessageId"] not in failed]
        if done:
            sqs.delete_message_batch(
                QueueUrl=url,
                Entries=[{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(done)],
            )


def _record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """A message as Lambda's SQS event source hands it to the function."""
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": message.get("Attributes", {}),
        "messageAttributes": message.get("MessageAttributes", {}),
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }
