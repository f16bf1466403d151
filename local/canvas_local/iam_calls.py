"""The AWS actions the embedded stack's functions take, as IAM authorizes them, for the record of what each
function's role must grant (tests/iam_observed.yaml, written and checked by the e2e tier).

Who calls is the function whose execution environment runs on the calling thread (`lambda_runtime.running_function`);
calls made outside every function (the stack provisioning, seeding accounts, a test's own client) are not recorded.
A call is recorded as IAM checks it: each item of a DynamoDB transaction as the PutItem, UpdateItem, DeleteItem or
ConditionCheckItem it is, each table of a batch, an S3 multipart upload as PutObject. Its resource is named as
tests/unit/test_iam.py names a policy's: the logical id of the table, bucket, queue or state machine (`RunsTable`,
`RunsTable/index/<index>`, `ArtifactsBucket/content/*` for an S3 key, by its first folder), "*" for task tokens.

A test records the stacks it starts in its own process with `recording`; a `canvas serve` it starts (on
template.yaml) records into the file CANVAS_IAM_CALLS_FILE names, a line per call, as the calls are first made.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from canvas_core.adapters.aws import HANDED_SERVICES, handed_credentials
from canvas_local.defaults import DEFAULT_TEMPLATE
from canvas_local.lambda_runtime import running_function

CALLS_FILE_VARIABLE = "CANVAS_IAM_CALLS_FILE"
# Who the calls a block makes with its vended credentials are recorded as (template.yaml's role).
SESSION_ROLE = "BlockSessionRole"
# boto3's names of the services botocore's service ids name otherwise.
_BOTO3_NAMES = {"sfn": "stepfunctions"}
# How test_iam.py names the default event bus (`!Sub arn:${AWS::Partition}:events:...:event-bus/default`).
DEFAULT_EVENT_BUS = "events:${AWS::Region}:${AWS::AccountId}:event-bus/default"

# IAM's prefix of each service, by botocore's service id.
_IAM_PREFIXES = {
    "sfn": "states",
    "eventbridge": "events",
    "bedrock-runtime": "bedrock",
    "secrets-manager": "secretsmanager",
}
# The items of a DynamoDB transaction, each authorized as the action it is.
_TRANSACTION_ITEMS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}
# S3 operations authorized as another action.
_S3_ACTIONS = {
    "HeadObject": "GetObject",
    "CreateMultipartUpload": "PutObject",
    "UploadPart": "PutObject",
    "CompleteMultipartUpload": "PutObject",
    "ListObjectsV2": "ListBucket",
    "ListObjects": "ListBucket",
    "HeadBucket": "ListBucket",
}
# SQS operations authorized as another action.
_SQS_ACTIONS = {"SendMessageBatch": "SendMessage", "DeleteMessageBatch": "DeleteMessage"}
# Step Functions actions on a task token, which names no resource.
_TASK_TOKEN_ACTIONS = {"SendTaskSuccess", "SendTaskFailure", "SendTaskHeartbeat"}


@dataclass(frozen=True, order=True)
class Call:
    """One action a function took: `<function> <action> <resource>`, as tests/iam_observed.yaml lists it."""

    function: str
    action: str
    resource: str

    def __str__(self) -> str:
        return f"{self.function} {self.action} {self.resource}"

    @classmethod
    def parse(cls, line: str) -> Call:
        function, action, resource = line.split(" ")
        return cls(function, action, resource)


class CallRecorder:
    """The calls of the functions of every stack started on `template` while it records (`recording`), and written
    to `file` as they are first made."""

    def __init__(self, template: Path | str, file: Path | str | None = None):
        self.template = Path(template).resolve()
        self.file = Path(file) if file else None
        self.calls: set[Call] = set()
        self._lock = threading.Lock()

    def add(self, calls: list[Call]) -> None:
        with self._lock:
            new = [call for call in calls if call not in self.calls]
            self.calls.update(new)
            if new and self.file is not None:
                with self.file.open("a", encoding="utf-8") as out:  # appended whole: a line each, short
                    out.write("".join(f"{call}\n" for call in new))


def read_calls(file: Path) -> set[Call]:
    """The calls a process recorded into `file`."""
    if not file.exists():
        return set()
    return {Call.parse(line) for line in file.read_text("utf-8").splitlines() if line}


_recorders: list[CallRecorder] = []


@contextmanager
def recording(template: Path | str) -> Iterator[CallRecorder]:
    """Record the calls of the functions of the stacks started on `template` until exit."""
    recorder = CallRecorder(template)
    _recorders.append(recorder)
    try:
        yield recorder
    finally:
        _recorders.remove(recorder)


class CallHook:
    """botocore handlers, on the session of a stack's clients, that record the calls its functions make.
    `logical_ids` gives the stack's physical names (table and bucket names, queue URLs, state machine ARNs)
    with their logical ids; it is asked at each call, so the stack may provision after the hook is in place."""

    def __init__(self, recorders: list[CallRecorder], logical_ids: Callable[[], Mapping[str, str]]):
        self.recorders = recorders
        self.logical_ids = logical_ids

    def before_parameter_build(self, params: dict[str, Any], model: Any, context: Any = None, **_: Any) -> None:
        function = running_function()
        if function is None:
            return
        service = model.service_model.service_id.hyphenize()
        if handed_credentials() is not None and _BOTO3_NAMES.get(service, service) in HANDED_SERVICES:
            # Made with the credentials Scope Block vended for the block: the session role's right, not the function's.
            function = SESSION_ROLE
        calls = [
            Call(function, action, resource)
            for action, resource in authorized(service, model.name, params, self.logical_ids())
        ]
        if isinstance(context, dict) and service == "s3":
            context["canvas_iam_caller"] = (function, params.get("Bucket"))
        for recorder in self.recorders:
            recorder.add(calls)

    def after_s3_read(self, http_response: Any, context: Any = None, **_: Any) -> None:
        """S3 answers a read of a missing key with 404 only to a caller who may list the bucket (403 to any other):
        a function that reads a key that may be missing (and expects NoSuchKey) needs s3:ListBucket too."""
        caller = context.get("canvas_iam_caller") if isinstance(context, dict) else None
        if caller is None or getattr(http_response, "status_code", None) != 404:
            return
        if caller[0] == SESSION_ROLE:
            return  # a block takes S3's 403 for a key that is not there as its absence (ArtifactStore.find)
        function, bucket = caller
        call = Call(function, "s3:ListBucket", self.logical_ids().get(bucket, bucket))
        for recorder in self.recorders:
            recorder.add([call])


def watch(session: Any, template: Path | str, logical_ids: Callable[[], Mapping[str, str]]) -> CallHook | None:
    """Record, for whoever is recording stacks on `template`, the calls of every client `session` creates from now
    on; None (and nothing registered) when no one is."""
    recorders = [r for r in _recorders if r.template == Path(template).resolve()]
    if os.environ.get(CALLS_FILE_VARIABLE) and Path(template).resolve() == Path(DEFAULT_TEMPLATE).resolve():
        recorders.append(CallRecorder(template, os.environ[CALLS_FILE_VARIABLE]))
    if not recorders:
        return None
    hook = CallHook(recorders, logical_ids)
    session.events.register("before-parameter-build", hook.before_parameter_build)
    session.events.register("after-call.s3.GetObject", hook.after_s3_read)
    session.events.register("after-call.s3.HeadObject", hook.after_s3_read)
    return hook


def unwatch(session: Any, hook: CallHook) -> None:
    session.events.unregister("before-parameter-build", hook.before_parameter_build)
    session.events.unregister("after-call.s3.GetObject", hook.after_s3_read)
    session.events.unregister("after-call.s3.HeadObject", hook.after_s3_read)


# How a policy names a state machine's executions (template.yaml: `...:execution:${Machine.Name}:*`).
EXECUTIONS_OF = "${{AWS::Region}}:${{AWS::AccountId}}:execution:{}:*"


def authorized(
    service: str, operation: str, params: Mapping[str, Any], logical_ids: Mapping[str, str]
) -> list[tuple[str, str]]:
    """The (action, resource) pairs IAM authorizes for one call, its resources named by logical id."""

    def name(physical: str) -> str:
        return logical_ids.get(physical, physical)

    if service == "dynamodb":
        return list(_dynamodb(operation, params, name))
    if service == "s3":
        resource = name(params.get("Bucket", "*"))
        key = params.get("Key")
        if key is not None:
            folder, slash, _ = key.partition("/")
            resource = f"{resource}/{folder}/*" if slash else f"{resource}/{key}"
        return [(f"s3:{_S3_ACTIONS.get(operation, operation)}", resource)]
    if service == "sfn":
        if operation in _TASK_TOKEN_ACTIONS:
            return [(f"states:{operation}", "*")]
        if "executionArn" in params:
            # An execution, as a policy names it: its state machine's executions, `execution:<name>:*`.
            machine = params["executionArn"].replace(":execution:", ":stateMachine:").rsplit(":", 1)[0]
            return [(f"states:{operation}", f"states:{EXECUTIONS_OF.format(name(machine))}")]
        return [(f"states:{operation}", name(params.get("stateMachineArn") or "*"))]
    if service == "sqs":
        if operation == "GetQueueUrl" and params.get("QueueName") in logical_ids:
            # The embedded stack gives a template queue's name where AWS gives its URL (`Ref`), and the function
            # looks the URL up: a call the function does not make on AWS.
            return []
        url = params.get("QueueUrl", "*")
        # A URL's last part is the queue's name (a warm container may hold the URL an earlier stack answered).
        queue = logical_ids.get(url) or logical_ids.get(url.rstrip("/").rsplit("/", 1)[-1], url)
        return [(f"sqs:{_SQS_ACTIONS.get(operation, operation)}", queue)]
    if service == "sts" and operation == "AssumeRole":
        return [("sts:AssumeRole", name(params.get("RoleArn", "*")))]
    if service == "eventbridge" and operation == "PutEvents":
        buses = {entry.get("EventBusName") or "default" for entry in params.get("Entries", [])}
        return [("events:PutEvents", DEFAULT_EVENT_BUS if bus == "default" else name(bus)) for bus in sorted(buses)]
    return [(f"{_IAM_PREFIXES.get(service, service)}:{operation}", "*")]


def _dynamodb(operation: str, params: Mapping[str, Any], name: Callable[[str], str]) -> Iterator[tuple[str, str]]:
    def table(name_or_arn: str) -> str:
        return name(name_or_arn.rsplit(":table/", 1)[-1])

    if operation in ("BatchGetItem", "BatchWriteItem"):
        for table_name in params.get("RequestItems", {}):
            yield f"dynamodb:{operation}", table(table_name)
    elif operation in ("TransactWriteItems", "TransactGetItems"):
        for item in params.get("TransactItems", []):
            for kind, action in _TRANSACTION_ITEMS.items():
                if kind in item:
                    yield f"dynamodb:{action}", table(item[kind]["TableName"])
    else:
        resource = table(params.get("TableName", "*"))
        index = params.get("IndexName")
        yield f"dynamodb:{operation}", f"{resource}/index/{index}" if index else resource
