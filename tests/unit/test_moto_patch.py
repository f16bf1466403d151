"""The seam canvas_local.moto_patch replaces in moto's Step Functions interpreter: these tests fail loudly
when a moto upgrade moves it, reshapes it, or stops routing a Lambda Task form through it."""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_lambda import (
    StateTaskServiceLambda,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import StateTaskLambda

from canvas_local import moto_patch
from canvas_local.lambda_runtime import LocalFunction, function_arn

pytestmark = [pytest.mark.unit, pytest.mark.timeout(60)]

SERVICE_INTEGRATION = "arn:aws:states:::lambda:invoke"
TASK_FORMS = ["service-integration", "direct-arn"]


class BlockRetryableError(Exception):
    """Named like the project's error: ASL matches on the class name only."""


# ---------------------------------------------------------------- helpers


def lambda_task(function: str, form: str, **fields: Any) -> dict[str, Any]:
    """A Task state invoking `function` in one of the two forms the project's ASL may use."""
    if form == "service-integration":
        state = {
            "Resource": SERVICE_INTEGRATION,
            "Parameters": {"FunctionName": function_arn(function), "Payload.$": "$"},
            "OutputPath": "$.Payload",
        }
    else:
        state = {"Resource": function_arn(function)}
    return {"Type": "Task", **state, **fields}


@pytest.fixture
def sfn() -> Iterator[Any]:
    # In-process moto: the interpreter is the same one moto's server runs, without a socket.
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield boto3.client(
            "stepfunctions", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )


@pytest.fixture
def functions() -> Iterator[dict[str, LocalFunction]]:
    registry: dict[str, LocalFunction] = {}
    with moto_patch.lambdas_in_process(registry.get):
        yield registry


def register(registry: dict[str, LocalFunction], name: str, handler: Any) -> None:
    registry[name] = LocalFunction.of(name, handler)


def execute(sfn: Any, states: dict[str, Any], start_at: str, execution_input: Any) -> dict[str, Any]:
    arn = sfn.create_state_machine(
        name=f"machine-{time.monotonic_ns()}",
        definition=json.dumps({"StartAt": start_at, "States": states}),
        roleArn="arn:aws:iam::123456789012:role/test",
    )["stateMachineArn"]
    execution = sfn.start_execution(stateMachineArn=arn, name="run-1", input=json.dumps(execution_input))
    deadline = time.monotonic() + 30
    while (described := sfn.describe_execution(executionArn=execution["executionArn"]))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "execution still RUNNING after 30s"
        time.sleep(0.05)
    return described


def output_of(described: dict[str, Any]) -> Any:
    assert described["status"] == "SUCCEEDED", described
    return json.loads(described["output"])


# ---------------------------------------------------------------- the seam's shape


def test_the_seam_keeps_the_signature_the_patch_implements():
    # Given moto's function the patch replaces
    original = moto_patch._ORIGINAL_SEAM

    # When its signature and its callers are read
    parameters = list(inspect.signature(original).parameters)
    integration_calls = lambda_eval_utils.execute_lambda_function_integration.__code__.co_names

    # Then it still takes (parameters, region, state_credentials), and is looked up as a module global
    assert original.__name__ == moto_patch.SEAM_NAME
    assert parameters == ["parameters", "region", "state_credentials"]
    assert moto_patch.SEAM_NAME in integration_calls
    # ... by the function both Task forms call
    assert "execute_lambda_function_integration" in StateTaskLambda._eval_execution.__code__.co_names
    assert "execute_lambda_function_integration" in StateTaskServiceLambda._eval_service_task.__code__.co_names


def test_install_replaces_the_seam_and_uninstall_restores_it():
    # Given no dispatch installed
    original = getattr(lambda_eval_utils, moto_patch.SEAM_NAME)
    resolve: dict[str, LocalFunction] = {}

    # When a resolver is installed, then removed
    with moto_patch.lambdas_in_process(resolve.get):
        patched = getattr(lambda_eval_utils, moto_patch.SEAM_NAME)
    restored = getattr(lambda_eval_utils, moto_patch.SEAM_NAME)

    # Then moto's own function was replaced only meanwhile
    assert patched is not original
    assert restored is original


# ---------------------------------------------------------------- behaviour through the interpreter


@pytest.mark.parametrize("form", TASK_FORMS)
def test_each_task_form_runs_the_handler_in_process(sfn, functions, form):
    # Given a handler that echoes its event and the name its context carries
    register(
        functions,
        "EchoFunction",
        lambda event, context: {
            "event": event,
            "function_name": context.function_name,
            "arn": context.invoked_function_arn,
            "remaining_ms": context.get_remaining_time_in_millis(),
        },
    )
    states = {"Echo": lambda_task("EchoFunction", form, End=True)}

    # When an execution runs it
    result = output_of(execute(sfn, states, "Echo", {"run_id": "r-1"}))

    # Then the handler received the state input and a Lambda-like context
    assert result["event"] == {"run_id": "r-1"}
    assert result["function_name"] == "EchoFunction"
    assert result["arn"] == function_arn("EchoFunction")
    assert 0 < result["remaining_ms"] <= 3000


@pytest.mark.parametrize("form", TASK_FORMS)
def test_a_raised_exception_is_caught_by_its_class_name(sfn, functions, form):
    # Given a handler that raises the project's retryable error, and a Catch naming only that class
    def fail(event, context):
        raise BlockRetryableError("model throttled")

    register(functions, "FailingFunction", fail)
    states = {
        "Run": lambda_task(
            "FailingFunction",
            form,
            End=True,
            Catch=[
                {"ErrorEquals": ["BlockRetryableError"], "ResultPath": "$.error", "Next": "Caught"},
            ],
        ),
        "Caught": {"Type": "Pass", "End": True},
    }

    # When an execution runs it
    result = output_of(execute(sfn, states, "Run", {"block_id": "b-1"}))

    # Then the Catch matched, with Lambda's error payload as the cause
    assert result["error"]["Error"] == "BlockRetryableError"
    cause = json.loads(result["error"]["Cause"])
    assert cause["errorType"] == "BlockRetryableError"
    assert cause["errorMessage"] == "model throttled"
    assert isinstance(cause["stackTrace"], list)


def test_retry_matches_the_exception_class_name(sfn, functions):
    # Given a handler that fails once with a retryable error, then succeeds
    attempts: list[int] = []

    def flaky(event, context):
        attempts.append(1)
        if len(attempts) == 1:
            raise BlockRetryableError("try again")
        return {"attempt": len(attempts)}

    register(functions, "FlakyFunction", flaky)
    retry = [{"ErrorEquals": ["BlockRetryableError"], "IntervalSeconds": 1, "MaxAttempts": 2}]
    states = {"Run": lambda_task("FlakyFunction", "service-integration", End=True, Retry=retry)}

    # When an execution runs it
    result = output_of(execute(sfn, states, "Run", {}))

    # Then the second attempt's result is the output
    assert result == {"attempt": 2}


def test_wait_for_task_token_resumes_with_the_output_the_handler_sends(sfn, functions):
    # Given a handler that completes its own task token on the same Step Functions endpoint
    def complete(event, context):
        boto3.client("stepfunctions", region_name="us-east-1").send_task_success(
            taskToken=event["token"], output=json.dumps({"approved": event["item"]})
        )

    register(functions, "CallbackFunction", complete)
    states = {
        "Wait": {
            "Type": "Task",
            "Resource": f"{SERVICE_INTEGRATION}.waitForTaskToken",
            "Parameters": {
                "FunctionName": function_arn("CallbackFunction"),
                "Payload": {"token.$": "$$.Task.Token", "item.$": "$.item"},
            },
            "TimeoutSeconds": 20,
            "End": True,
        }
    }

    # When an execution runs it
    result = output_of(execute(sfn, states, "Wait", {"item": "memo"}))

    # Then the task's output is what SendTaskSuccess carried
    assert result == {"approved": "memo"}


def test_an_unknown_function_fails_like_lambda_resource_not_found(sfn, functions):
    # Given no function registered under the name the state invokes
    states = {
        "Run": lambda_task(
            "MissingFunction",
            "service-integration",
            End=True,
            Catch=[
                {"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"},
            ],
        ),
        "Caught": {"Type": "Pass", "End": True},
    }

    # When an execution runs it
    result = output_of(execute(sfn, states, "Run", {}))

    # Then the error is the one AWS reports for a missing function
    assert result["error"]["Error"] == "Lambda.ResourceNotFoundException"
    assert "MissingFunction" in result["error"]["Cause"]


# ---------------------------------------------------------------- item-level DynamoDB transactions


@pytest.fixture
def transactions_table():
    from moto import mock_aws

    with mock_aws():
        moto_patch.install_item_level_transactions()
        ddb = boto3.client("dynamodb", region_name="us-east-1")
        ddb.create_table(
            TableName="t",
            KeySchema=[{"AttributeName": "k", "KeyType": "HASH"}],
            AttributeDefinitions=[{"AttributeName": "k", "AttributeType": "S"}],
            BillingMode="PAY_PER_REQUEST",
        )
        try:
            yield ddb
        finally:
            moto_patch.uninstall_item_level_transactions()


def _items(ddb):
    return {i["k"]["S"]: i for i in ddb.scan(TableName="t")["Items"]}


def test_the_transaction_seam_is_where_the_patch_expects_it():
    from moto.dynamodb.models import DynamoDBBackend

    assert list(inspect.signature(moto_patch._ORIGINAL_TRANSACT).parameters) == ["self", "transact_items"]
    assert DynamoDBBackend.transact_write_items is moto_patch._ORIGINAL_TRANSACT


def test_a_transaction_writes_all_its_items(transactions_table):
    ddb = transactions_table
    ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "5"}})
    ddb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": "t",
                    "Key": {"k": {"S": "a"}},
                    "UpdateExpression": "SET n = n - :one",
                    "ConditionExpression": "n >= :one",
                    "ExpressionAttributeValues": {":one": {"N": "1"}},
                }
            },
            {"Put": {"TableName": "t", "Item": {"k": {"S": "b"}}}},
        ]
    )
    assert _items(ddb)["a"]["n"] == {"N": "4"} and "b" in _items(ddb)


def test_a_failed_condition_writes_nothing_and_names_the_reason(transactions_table):
    ddb = transactions_table
    ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "0"}})
    with pytest.raises(ClientError) as caught:
        ddb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "t", "Item": {"k": {"S": "b"}}}},
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"k": {"S": "a"}},
                        "UpdateExpression": "SET n = n - :one",
                        "ConditionExpression": "n >= :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ]
        )
    assert caught.value.response["Error"]["Code"] == "TransactionCanceledException"
    reasons = [r["Code"] for r in caught.value.response["CancellationReasons"]]
    assert reasons == ["None", "ConditionalCheckFailed"]
    assert set(_items(ddb)) == {"a"} and _items(ddb)["a"]["n"] == {"N": "0"}


def test_a_failure_while_writing_rolls_back_the_items_already_written(transactions_table):
    ddb = transactions_table
    ddb.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "1"}})
    with pytest.raises(ClientError):
        ddb.transact_write_items(
            TransactItems=[
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"k": {"S": "a"}},
                        "UpdateExpression": "SET n = :two",
                        "ExpressionAttributeValues": {":two": {"N": "2"}},
                    }
                },
                {"Put": {"TableName": "t", "Item": {"k": {"S": "c"}}}},
                # Adding a number to a string fails only when applied.
                {
                    "Update": {
                        "TableName": "t",
                        "Key": {"k": {"S": "c"}},
                        "UpdateExpression": "ADD k :one",
                        "ExpressionAttributeValues": {":one": {"N": "1"}},
                    }
                },
            ]
        )
    assert set(_items(ddb)) == {"a"} and _items(ddb)["a"]["n"] == {"N": "1"}
