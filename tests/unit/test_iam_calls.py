"""canvas_local.iam_calls: the AWS calls of the embedded stack's functions, recorded as IAM authorizes them, for
tests/iam_observed.yaml."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from canvas_local import iam_calls
from canvas_local.defaults import DEFAULT_TEMPLATE
from canvas_local.iam_calls import DEFAULT_EVENT_BUS, Call, authorized
from canvas_local.lambda_runtime import LocalFunction

pytestmark = pytest.mark.unit

NAMES = {
    "RunsTable": "RunsTable",
    "CanvasesTable": "CanvasesTable",
    "AccountsTable": "AccountsTable",
    "artifacts-bucket": "ArtifactsBucket",
    "http://127.0.0.1:5000/123456789012/WebhookQueue": "WebhookQueue",
    "WebhookQueue": "WebhookQueue",
    "arn:aws:states:us-east-1:123456789012:stateMachine:RunCanvasStateMachine": "RunCanvasStateMachine",
}


def test_each_item_of_a_transaction_is_the_action_it_is():
    # Given a transaction that updates a node, debits the account and checks the run
    params = {
        "TransactItems": [
            {"Update": {"TableName": "CanvasesTable", "Key": {}}},
            {"Update": {"TableName": "AccountsTable", "Key": {}}},
            {"ConditionCheck": {"TableName": "RunsTable", "Key": {}}},
            {"Put": {"TableName": "arn:aws:dynamodb:us-east-1:123456789012:table/RunsTable", "Item": {}}},
        ]
    }

    # Then each item is authorized on its table as the item's own action
    assert authorized("dynamodb", "TransactWriteItems", params, NAMES) == [
        ("dynamodb:UpdateItem", "CanvasesTable"),
        ("dynamodb:UpdateItem", "AccountsTable"),
        ("dynamodb:ConditionCheckItem", "RunsTable"),
        ("dynamodb:PutItem", "RunsTable"),
    ]


def test_a_batch_is_its_action_on_each_table_and_a_query_names_its_index():
    batch = {"RequestItems": {"CanvasesTable": {"Keys": []}, "AccountsTable": {"Keys": []}}}
    query = {"TableName": "RunsTable", "IndexName": "account_id-created_at_ms-index"}

    assert authorized("dynamodb", "BatchGetItem", batch, NAMES) == [
        ("dynamodb:BatchGetItem", "CanvasesTable"),
        ("dynamodb:BatchGetItem", "AccountsTable"),
    ]
    assert authorized("dynamodb", "Query", query, NAMES) == [
        ("dynamodb:Query", "RunsTable/index/account_id-created_at_ms-index")
    ]


def test_an_s3_key_is_named_by_its_first_folder_and_a_multipart_upload_is_a_put():
    key = {"Bucket": "artifacts-bucket", "Key": "content/account/run/block.json"}

    assert authorized("s3", "GetObject", key, NAMES) == [("s3:GetObject", "ArtifactsBucket/content/*")]
    assert authorized("s3", "HeadObject", key, NAMES) == [("s3:GetObject", "ArtifactsBucket/content/*")]
    assert authorized("s3", "UploadPart", key, NAMES) == [("s3:PutObject", "ArtifactsBucket/content/*")]
    assert authorized("s3", "ListObjectsV2", {"Bucket": "artifacts-bucket"}, NAMES) == [
        ("s3:ListBucket", "ArtifactsBucket")
    ]


def test_task_tokens_name_no_resource_and_executions_name_their_state_machine():
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:RunCanvasStateMachine"

    assert authorized("sfn", "SendTaskSuccess", {"taskToken": "t", "output": "{}"}, NAMES) == [
        ("states:SendTaskSuccess", "*")
    ]
    assert authorized("sfn", "StartExecution", {"stateMachineArn": arn}, NAMES) == [
        ("states:StartExecution", "RunCanvasStateMachine")
    ]
    # An execution is named as a policy names its state machine's executions
    execution = arn.replace(":stateMachine:", ":execution:") + ":0b5e2c1a-run"
    assert authorized("sfn", "StopExecution", {"executionArn": execution}, NAMES) == [
        ("states:StopExecution", "states:${AWS::Region}:${AWS::AccountId}:execution:RunCanvasStateMachine:*")
    ]


def test_queues_and_the_default_event_bus():
    url = "http://127.0.0.1:5000/123456789012/WebhookQueue"

    assert authorized("sqs", "SendMessage", {"QueueUrl": url, "MessageBody": "{}"}, NAMES) == [
        ("sqs:SendMessage", "WebhookQueue")
    ]
    # A URL the stack did not answer (an earlier stack's, still held by a warm container) is named by its queue
    assert authorized("sqs", "SendMessage", {"QueueUrl": "http://127.0.0.1:1/123456789012/WebhookQueue"}, NAMES) == [
        ("sqs:SendMessage", "WebhookQueue")
    ]
    # The embedded stack names a queue where AWS gives its URL: looking the URL up is not the function's call
    assert authorized("sqs", "GetQueueUrl", {"QueueName": "WebhookQueue"}, NAMES) == []
    assert authorized("eventbridge", "PutEvents", {"Entries": [{"Detail": "{}"}]}, NAMES) == [
        ("events:PutEvents", DEFAULT_EVENT_BUS)
    ]


def test_a_name_the_stack_did_not_provision_is_kept_as_it_is():
    assert authorized("dynamodb", "GetItem", {"TableName": "Elsewhere"}, NAMES) == [("dynamodb:GetItem", "Elsewhere")]


@pytest.fixture
def recorded() -> Iterator[tuple[iam_calls.CallRecorder, Any]]:
    """A recorder, and a boto3 session whose clients it watches (as a stack's, on template.yaml)."""
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
    with iam_calls.recording("template.yaml") as recorder:
        hook = iam_calls.watch(session, "template.yaml", lambda: NAMES)
        assert hook is not None
        yield recorder, session
        iam_calls.unwatch(session, hook)


def test_a_call_is_recorded_as_the_function_in_charge_of_its_thread(recorded):
    # Given a function that reads a run, once itself and once on a thread it starts with its context
    recorder, session = recorded
    dynamodb = session.client("dynamodb", region_name="us-east-1")
    stubber = Stubber(dynamodb)
    for _ in range(3):
        stubber.add_response("get_item", {}, {"TableName": "RunsTable", "Key": {"run_id": {"S": "r"}}})

    def read() -> None:
        dynamodb.get_item(TableName="RunsTable", Key={"run_id": {"S": "r"}})

    def handler(event: Any, context: Any) -> None:
        read()
        thread = threading.Thread(target=contextvars.copy_context().run, args=(read,))
        thread.start()
        thread.join()

    # When it runs, and the same call is made outside every function
    with stubber:
        LocalFunction.of("GetRunFunction", handler).call({})
        read()

    # Then the calls the function made are recorded, as its own, and the other is not
    assert recorder.calls == {Call("GetRunFunction", "dynamodb:GetItem", "RunsTable")}


def test_a_read_of_a_missing_key_needs_the_right_to_list_the_bucket(recorded):
    # Given a function that looks for a key that is not there (S3 answers 404 only to who may list the bucket)
    recorder, session = recorded
    s3 = session.client("s3", region_name="us-east-1")
    stubber = Stubber(s3)
    stubber.add_client_error("get_object", "NoSuchKey", http_status_code=404)

    def handler(event: Any, context: Any) -> None:
        with pytest.raises(s3.exceptions.NoSuchKey):
            s3.get_object(Bucket="artifacts-bucket", Key="content/a/r/b.completion.json")

    # When it runs
    with stubber:
        LocalFunction.of("PromptBlockFunction", handler).call({})

    # Then it needed both rights
    assert recorder.calls == {
        Call("PromptBlockFunction", "s3:GetObject", "ArtifactsBucket/content/*"),
        Call("PromptBlockFunction", "s3:ListBucket", "ArtifactsBucket"),
    }


def test_no_one_recording_leaves_the_session_alone():
    session = boto3.session.Session()

    assert iam_calls.watch(session, "template.yaml", lambda: NAMES) is None


def test_a_process_started_to_record_writes_each_call_once_to_its_file(tmp_path, monkeypatch):
    # Given a process told to record into a file (as the e2e tier tells the `canvas serve` it starts)
    calls_file = tmp_path / "calls.txt"
    monkeypatch.setenv(iam_calls.CALLS_FILE_VARIABLE, str(calls_file))
    session = boto3.session.Session(aws_access_key_id="testing", aws_secret_access_key="testing")
    hook = iam_calls.watch(session, DEFAULT_TEMPLATE, lambda: NAMES)
    assert hook is not None
    sqs = session.client("sqs", region_name="us-east-1")
    stubber = Stubber(sqs)
    url = "http://127.0.0.1:5000/123456789012/WebhookQueue"
    for _ in range(2):
        stubber.add_response("send_message", {"MessageId": "m", "MD5OfMessageBody": "x"})

    def handler(event: Any, context: Any) -> None:
        for _ in range(2):
            sqs.send_message(QueueUrl=url, MessageBody="{}")

    # When a function sends twice
    with stubber:
        LocalFunction.of("PortalFunction", handler).call({})
    iam_calls.unwatch(session, hook)

    # Then the file has the call, once
    assert calls_file.read_text() == "PortalFunction sqs:SendMessage WebhookQueue\n"
    assert iam_calls.read_calls(calls_file) == {Call("PortalFunction", "sqs:SendMessage", "WebhookQueue")}
