"""The seams canvas_local.moto_patch replaces or wraps in moto (the Lambda task seam, per-service request locks,
the execution-end hook, the interpreter's thread list, partition-only queries, the ASL parse and routing caches):
these tests fail loudly when a moto upgrade moves or reshapes one, and show what each patch does through moto."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import json
import queue
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from types import SimpleNamespace
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from moto import mock_aws
from moto.dynamodb.responses import DynamoHandler
from moto.s3.responses import S3Response
from moto.stepfunctions.parser import utils as sfn_utils
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_lambda import (
    StateTaskServiceLambda,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_task.state_task_lambda import StateTaskLambda
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication

from canvas_local import moto_patch
from canvas_local.lambda_runtime import LocalFunction, function_arn
from canvas_local.moto_patch import (
    lambda_tasks,
    locks,
    memory,
    packed_items,
    speed_interpreter,
    speed_server,
    step_functions,
    transactions,
)

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
    original = lambda_tasks._ORIGINAL_SEAM

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


# ---------------------------------------------------------------- Step Functions' 256 KB

OVER_QUOTA = 262_144  # characters of a string that, with its quotes, is over the 262,144 bytes of a state's data


@pytest.fixture
def payload_limits() -> Iterator[None]:
    moto_patch.install_payload_limits()
    try:
        yield
    finally:
        moto_patch.uninstall_payload_limits()


def test_the_payload_limit_seams_keep_the_shapes_the_patches_implement():
    from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
    from moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service import (
        StateTaskService,
    )

    before = ["self", "env", "resource_runtime_part", "raw_parameters", "state_credentials"]
    assert list(inspect.signature(step_functions._ORIGINAL_BEFORE_TASK).parameters) == before
    assert StateTaskService.__dict__["_before_eval_execution"] is step_functions._ORIGINAL_BEFORE_TASK
    assert list(inspect.signature(step_functions._ORIGINAL_ERROR_EQUALS).parameters) == ["self", "env"]
    assert ErrorEqualsDecl.__dict__["_eval_body"] is step_functions._ORIGINAL_ERROR_EQUALS


@pytest.mark.parametrize("too_large", ["result", "input"])
def test_a_task_result_or_input_over_256_kb_fails_the_execution_past_a_catch_of_states_all(
    sfn, functions, payload_limits, too_large
):
    # Given a task that answers, or is sent, more than Step Functions holds, and a Catch of States.ALL
    calls: list[Any] = []

    def answer(event: Any, context: Any) -> str:
        calls.append(event)
        return "x" * OVER_QUOTA if too_large == "result" else "small"

    register(functions, "LargeFunction", answer)
    payload = {"blob": "y" * OVER_QUOTA} if too_large == "input" else {}
    task = lambda_task("LargeFunction", "service-integration", End=True)
    task["Parameters"]["Payload"] = payload
    del task["Parameters"]["Payload.$"]
    task["Catch"] = [{"ErrorEquals": ["States.ALL"], "ResultPath": "$.error", "Next": "Caught"}]
    states = {"Run": task, "Caught": {"Type": "Pass", "End": True}}

    # When an execution runs it
    described = execute(sfn, states, "Run", {})

    # Then the execution fails with States.DataLimitExceeded, a terminal error States.ALL does not catch
    assert described["status"] == "FAILED", described
    assert described["error"] == "States.DataLimitExceeded"
    assert "with a size exceeding the maximum number of bytes service limit" in described["cause"]
    # And a task whose input is too large never reaches its function
    assert len(calls) == (1 if too_large == "result" else 0)


def test_a_catch_that_names_data_limit_exceeded_catches_it(sfn, functions, payload_limits):
    register(functions, "LargeFunction", lambda event, context: "x" * OVER_QUOTA)
    catch = [{"ErrorEquals": ["States.DataLimitExceeded"], "ResultPath": "$.error", "Next": "Caught"}]
    states = {
        "Run": lambda_task("LargeFunction", "service-integration", End=True, Catch=catch),
        "Caught": {"Type": "Pass", "End": True},
    }
    assert output_of(execute(sfn, states, "Run", {}))["error"]["Error"] == "States.DataLimitExceeded"


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

    assert list(inspect.signature(transactions._ORIGINAL_TRANSACT).parameters) == ["self", "transact_items"]
    assert DynamoDBBackend.transact_write_items is transactions._ORIGINAL_TRANSACT


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


# ---------------------------------------------------------------- the other seams, and what the patches do there


def test_the_seams_of_the_locks_caches_and_hooks_keep_the_shapes_the_patches_implement():
    # Given the moto functions and objects moto_patch replaces, wraps or mutates
    # When their shapes are read
    # Then every request to a locked service still goes through BaseResponse.call_action (DynamoDB's override
    # calls it through super()) or one of S3's three entry points, called by attribute from S3's dispatchers
    assert parameters_of(locks._ORIGINAL_CALL_ACTION) == ["self"]
    assert "call_action" in DynamoHandler.call_action.__wrapped__.__code__.co_names
    for name in locks._S3_ENTRY_POINTS:
        assert parameters_of(locks._ORIGINAL_S3[name]) == ["self", "request", "full_url", "headers"]
    assert "bucket_response" in S3Response.bucket_dispatch.__func__.__code__.co_names
    assert "key_response" in S3Response.key_dispatch.__func__.__code__.co_names
    assert "ambiguous_response" in S3Response.ambiguous_dispatch.__func__.__code__.co_names
    # And the interpreter reports every ending through one method of the execution's worker communication
    assert parameters_of(step_functions._ORIGINAL_TERMINATED) == ["self"]
    assert BaseExecutionWorkerCommunication.__dict__.get("terminated") in (
        step_functions._ORIGINAL_TERMINATED,
        step_functions._terminated,
    )
    # And the interpreter's threads go to one list that every module appending to it shares
    assert isinstance(sfn_utils.TMP_THREADS, list)
    for module in THREAD_STARTING_MODULES:
        assert importlib.import_module(module).TMP_THREADS is sfn_utils.TMP_THREADS, module
    # And a query on a table's own key filters `all_items()` by hash key
    query = parameters_of(packed_items._ORIGINAL_QUERY)
    assert query[:2] == ["self", "hash_key"] and "index_name" in query
    assert "all_items" in packed_items._ORIGINAL_QUERY.__code__.co_names
    # And the parser is a static method of one argument, the server's routing a method of the host
    assert isinstance(speed_interpreter._ORIGINAL_PARSE, staticmethod)
    assert parameters_of(speed_interpreter._ORIGINAL_PARSE.__func__) == ["definition"]
    assert parameters_of(speed_server._ORIGINAL_BACKEND_FOR_HOST) == ["self", "host"]


def parameters_of(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)


THREAD_STARTING_MODULES = [
    "moto.stepfunctions.parser.asl.component.program.program",
    "moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component",
    "moto.stepfunctions.parser.asl.component.state.exec.state_task.service.state_task_service_callback",
    "moto.stepfunctions.parser.asl.component.state.exec.state_parallel.branch_worker",
]
TABLE = "seams"
KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}, {"AttributeName": "sk", "KeyType": "RANGE"}]
ATTRIBUTES = [{"AttributeName": name, "AttributeType": "S"} for name in ("pk", "sk", "kind")]


@pytest.fixture
def backend_locks() -> Iterator[None]:
    with moto_patch.backend_locks():
        yield


@pytest.fixture
def aws() -> Iterator[SimpleNamespace]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        yield SimpleNamespace(**{service: aws_client(service) for service in ("dynamodb", "s3", "stepfunctions")})


def aws_client(service: str) -> Any:
    return boto3.client(service, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def create_table(dynamodb: Any, name: str = TABLE) -> None:
    dynamodb.create_table(
        TableName=name,
        KeySchema=KEY_SCHEMA,
        AttributeDefinitions=ATTRIBUTES,
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by-kind",
                "KeySchema": [
                    {"AttributeName": "kind", "KeyType": "HASH"},
                    {"AttributeName": "sk", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            }
        ],
        BillingMode="PAY_PER_REQUEST",
    )


# ---------------------------------------------------------------- one request at a time per service


@pytest.mark.parametrize(
    ("service", "call"),
    [
        ("dynamodb", lambda aws: aws.dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "p"}, "sk": {"S": "s"}})),
        ("s3", lambda aws: aws.s3.put_object(Bucket="locked", Key="a/b.txt", Body=b"x")),
        ("s3", lambda aws: aws.s3.list_objects_v2(Bucket="locked")),
        ("s3", lambda aws: aws.s3.head_bucket(Bucket="locked")),
        ("stepfunctions", lambda aws: aws.stepfunctions.list_state_machines()),
    ],
    ids=["dynamodb-put", "s3-key", "s3-bucket", "s3-head-bucket", "stepfunctions"],
)
def test_a_request_waits_while_its_services_lock_is_held(aws, backend_locks, service, call):
    # Given the service's lock held by this thread
    create_table(aws.dynamodb)
    aws.s3.create_bucket(Bucket="locked")
    lock = moto_patch.service_lock(service)

    with ThreadPoolExecutor(max_workers=1) as pool:
        with lock:
            # When another thread makes a request to the service
            request = pool.submit(call, aws)
            # Then it is not served while the lock is held
            with pytest.raises(FutureTimeout):
                request.result(timeout=0.3)
        # And it is served once the lock is released
        request.result(timeout=10)


ROUNDS = 200
THREADS = 8


@pytest.mark.timeout(180)  # 4,800 requests to moto: about 20 s on a busy two-core machine
def test_eight_threads_writing_and_querying_one_table_at_once_all_succeed_with_the_right_counts(
    aws, backend_locks, caches
):
    # Given one table, served under the DynamoDB lock with partition-only queries, as the embedded stack does
    caches(True)
    create_table(aws.dynamodb)
    clients = [aws_client("dynamodb") for _ in range(THREADS)]
    start = threading.Barrier(THREADS)

    def work(thread: int) -> list[str]:
        dynamodb, partition, problems = clients[thread], f"thread-{thread}", []
        start.wait()
        for i in range(ROUNDS):
            dynamodb.put_item(
                TableName=TABLE, Item={"pk": {"S": partition}, "sk": {"S": f"{i:04d}"}, "kind": {"S": "row"}}
            )
            dynamodb.update_item(
                TableName=TABLE,
                Key={"pk": {"S": "shared"}, "sk": {"S": "counter"}},
                UpdateExpression="ADD n :one",
                ExpressionAttributeValues={":one": {"N": "1"}},
            )
            count = dynamodb.query(
                TableName=TABLE,
                KeyConditionExpression="pk = :p",
                ExpressionAttributeValues={":p": {"S": partition}},
                Select="COUNT",
            )["Count"]
            if count != i + 1:
                problems.append(f"{partition} round {i}: query counted {count}")
        return problems

    # When eight threads each put, update a shared counter and query their partition, 200 times, at once
    with ThreadPoolExecutor(max_workers=THREADS) as pool:
        problems = [p for future in [pool.submit(work, t) for t in range(THREADS)] for p in future.result(timeout=120)]

    # Then no call failed, every query counted what its thread had written, and nothing was lost
    assert problems == []
    counter = aws.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "shared"}, "sk": {"S": "counter"}})["Item"]
    assert counter["n"] == {"N": str(THREADS * ROUNDS)}
    assert aws.dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"] == THREADS * ROUNDS + 1
    for thread in range(THREADS):
        assert query_count(aws.dynamodb, f"thread-{thread}") == ROUNDS


def query_count(dynamodb: Any, partition: str) -> int:
    return dynamodb.query(
        TableName=TABLE,
        KeyConditionExpression="pk = :p",
        ExpressionAttributeValues={":p": {"S": partition}},
        Select="COUNT",
    )["Count"]


# ---------------------------------------------------------------- the interpreter's threads and endings


@pytest.fixture
def interpreter_threads() -> Iterator[list[threading.Thread]]:
    """Threads a test puts in moto's TMP_THREADS; whatever is left of them is taken out afterwards."""
    added: list[threading.Thread] = []
    yield added
    for thread in added:
        with contextlib.suppress(ValueError):
            sfn_utils.TMP_THREADS.remove(thread)


def test_release_finished_threads_forgets_finished_threads_only(interpreter_threads):
    # Given finished threads, a running one and one not yet started in the interpreter's list
    stop = threading.Event()
    finished = [threading.Thread(target=lambda: None) for _ in range(3)]
    for thread in finished:
        thread.start()
        thread.join()
    running = threading.Thread(target=stop.wait, args=(10,))
    running.start()
    unstarted = threading.Thread(target=lambda: None)
    interpreter_threads.extend([*finished, running, unstarted])
    sfn_utils.TMP_THREADS.extend(interpreter_threads)

    try:
        # When finished threads are released
        released = moto_patch.release_finished_threads()

        # Then the finished ones are gone, the running and the unstarted ones kept
        assert released >= len(finished)
        assert not any(thread in sfn_utils.TMP_THREADS for thread in finished)
        assert running in sfn_utils.TMP_THREADS
        assert unstarted in sfn_utils.TMP_THREADS
    finally:
        stop.set()
        running.join()


PASS_MACHINE = {"StartAt": "Done", "States": {"Done": {"Type": "Pass", "End": True}}}
FAIL_MACHINE = {"StartAt": "Fail", "States": {"Fail": {"Type": "Fail", "Error": "Boom", "Cause": "test"}}}


@pytest.mark.parametrize("definition", [PASS_MACHINE, FAIL_MACHINE], ids=["succeeded", "failed"])
def test_each_ending_reaches_the_execution_listeners(aws, definition):
    # Given a listener of execution endings
    ended: queue.SimpleQueue[str] = queue.SimpleQueue()
    moto_patch.on_execution_end(ended.put)
    try:
        # When an execution runs to its end
        arn = aws.stepfunctions.create_state_machine(
            name="ends", definition=json.dumps(definition), roleArn="arn:aws:iam::123456789012:role/test"
        )["stateMachineArn"]
        execution_arn = aws.stepfunctions.start_execution(stateMachineArn=arn)["executionArn"]

        # Then the listener is told its ARN, once it has ended
        assert ended.get(timeout=10) == execution_arn
        status = aws.stepfunctions.describe_execution(executionArn=execution_arn)["status"]
        assert status == ("SUCCEEDED" if definition is PASS_MACHINE else "FAILED")
    finally:
        moto_patch.remove_execution_listener(ended.put)
    # And without listeners, moto's own method is back
    assert BaseExecutionWorkerCommunication.terminated is step_functions._ORIGINAL_TERMINATED


# ---------------------------------------------------------------- partition-only queries


PARTITIONS = 40
ITEMS_PER_PARTITION = 15


def seed_partitions(dynamodb: Any) -> None:
    create_table(dynamodb)
    for p in range(PARTITIONS):
        for i in range(ITEMS_PER_PARTITION):
            item = {"pk": {"S": f"run-{p:02d}"}, "sk": {"S": f"block-{i:02d}"}, "n": {"N": str(i)}}
            if i % 3 == 0:
                item["kind"] = {"S": f"kind-{p % 4}"}
            dynamodb.put_item(TableName=TABLE, Item=item)


QUERIES: dict[str, dict[str, Any]] = {
    "partition": {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "run-07"}}},
    "backward": {
        "KeyConditionExpression": "pk = :p",
        "ExpressionAttributeValues": {":p": {"S": "run-07"}},
        "ScanIndexForward": False,
    },
    "range": {
        "KeyConditionExpression": "pk = :p AND sk BETWEEN :a AND :b",
        "ExpressionAttributeValues": {":p": {"S": "run-12"}, ":a": {"S": "block-03"}, ":b": {"S": "block-09"}},
    },
    "prefix": {
        "KeyConditionExpression": "pk = :p AND begins_with(sk, :s)",
        "ExpressionAttributeValues": {":p": {"S": "run-30"}, ":s": {"S": "block-1"}},
    },
    "filtered": {
        "KeyConditionExpression": "pk = :p",
        "FilterExpression": "n > :five",
        "ExpressionAttributeValues": {":p": {"S": "run-21"}, ":five": {"N": "5"}},
    },
    "projected": {
        "KeyConditionExpression": "pk = :p",
        "ProjectionExpression": "sk",
        "ExpressionAttributeValues": {":p": {"S": "run-21"}},
    },
    "count": {
        "KeyConditionExpression": "pk = :p",
        "Select": "COUNT",
        "ExpressionAttributeValues": {":p": {"S": "run-39"}},
    },
    "missing partition": {"KeyConditionExpression": "pk = :p", "ExpressionAttributeValues": {":p": {"S": "none"}}},
    "index": {
        "IndexName": "by-kind",
        "KeyConditionExpression": "kind = :k",
        "ExpressionAttributeValues": {":k": {"S": "kind-2"}},
    },
}


def all_pages(dynamodb: Any, limit: int | None = None, **query: Any) -> list[dict[str, Any]]:
    """Every page of a query, as a client paginating with Limit and ExclusiveStartKey reads them."""
    pages, start = [], None
    while True:
        arguments = {"TableName": TABLE, **query}
        if limit is not None:
            arguments["Limit"] = limit
        if start is not None:
            arguments["ExclusiveStartKey"] = start
        page = dynamodb.query(**arguments)
        page.pop("ResponseMetadata")
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if start is None or len(pages) > 50:
            return pages


def answers(dynamodb: Any) -> dict[str, list[dict[str, Any]]]:
    results = {name: all_pages(dynamodb, **query) for name, query in QUERIES.items()}
    for name in ("partition", "backward", "filtered", "index"):
        results[f"{name}, 4 a page"] = all_pages(dynamodb, limit=4, **QUERIES[name])
    return results


def test_a_partition_only_query_answers_what_motos_query_answers(aws, caches):
    # Given a table of many partitions (and an index across them)
    seed_partitions(aws.dynamodb)

    # When the same queries are made with moto's query and with the partition-only one
    caches(False)
    expected = answers(aws.dynamodb)
    caches(True)
    actual = answers(aws.dynamodb)

    # Then every page of every query is the same, item for item, with the same position to resume from
    assert actual == expected
    # And the queries were worth comparing: pages were resumed, in both directions, and items found
    assert len(expected["partition, 4 a page"]) == 4
    assert expected["backward"][0]["Items"][0]["sk"] == {"S": f"block-{ITEMS_PER_PARTITION - 1:02d}"}
    assert expected["backward, 4 a page"][1]["Items"][0]["sk"] == {"S": f"block-{ITEMS_PER_PARTITION - 5:02d}"}
    assert expected["missing partition"][0]["Items"] == []


def test_the_asl_parse_is_done_once_per_definition(caches):
    # Given the caches installed
    caches(True)
    definition = json.dumps(PASS_MACHINE)

    # When the same definition is parsed twice, and another once
    first = AmazonStateLanguageParser.parse(definition)
    second = AmazonStateLanguageParser.parse(definition)
    other = AmazonStateLanguageParser.parse(json.dumps(FAIL_MACHINE))

    # Then the program is shared, and only by the same definition
    assert first is second
    assert other is not first


def test_executions_sharing_one_parsed_program_at_once_keep_their_own_state(aws, functions, caches):
    # Given a machine with a Map, a Parallel and a retried task, its parse cached, and a task that waits until
    # both executions are inside it
    caches(True)
    both_inside = threading.Barrier(2, timeout=10)
    attempts: dict[str, int] = {}
    lock = threading.Lock()

    def task(event: dict[str, Any], context: Any) -> dict[str, Any]:
        key = f"{event['run']}-{event['item']}"
        with lock:
            attempts[key] = attempts.get(key, 0) + 1
            attempt = attempts[key]
        if event["item"] == 0 and attempt == 1:
            with contextlib.suppress(threading.BrokenBarrierError):
                both_inside.wait()
            raise BlockRetryableError("first attempt fails")
        return {"run": event["run"], "item": event["item"], "attempt": attempt}

    register(functions, "TaskFunction", task)
    machine = {
        "StartAt": "Each",
        "States": {
            "Each": {
                "Type": "Map",
                "ItemsPath": "$.items",
                "ItemSelector": {"run.$": "$.run", "item.$": "$$.Map.Item.Value"},
                "ItemProcessor": {
                    "StartAt": "Task",
                    "States": {
                        "Task": lambda_task(
                            "TaskFunction",
                            "service-integration",
                            End=True,
                            Retry=[{"ErrorEquals": ["BlockRetryableError"], "IntervalSeconds": 1, "MaxAttempts": 2}],
                        )
                    },
                },
                "ResultPath": "$.mapped",
                "Next": "Both",
            },
            "Both": {
                "Type": "Parallel",
                "Branches": [
                    {
                        "StartAt": "Left",
                        "States": {"Left": {"Type": "Pass", "Parameters": {"side.$": "$.run"}, "End": True}},
                    },
                    {"StartAt": "Right", "States": {"Right": {"Type": "Pass", "Result": "right", "End": True}}},
                ],
                "ResultPath": "$.branches",
                "End": True,
            },
        },
    }
    arn = aws.stepfunctions.create_state_machine(
        name="shared-program", definition=json.dumps(machine), roleArn="arn:aws:iam::123456789012:role/test"
    )["stateMachineArn"]

    # When two executions with different inputs run at once
    runs = {"a": [0, 1, 2], "b": [0, 3]}
    executions = {
        run: aws.stepfunctions.start_execution(
            stateMachineArn=arn, name=f"run-{run}", input=json.dumps({"run": run, "items": items})
        )["executionArn"]
        for run, items in runs.items()
    }
    outputs = {run: output_of(wait_for(aws.stepfunctions, arn_)) for run, arn_ in executions.items()}

    # Then each ended with its own items, its own retries and its own branches
    for run, items in runs.items():
        assert outputs[run]["mapped"] == [
            {"run": run, "item": item, "attempt": 2 if item == 0 else 1} for item in items
        ]
        assert outputs[run]["branches"] == [{"side": run}, "right"]


def wait_for(sfn: Any, execution_arn: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (described := sfn.describe_execution(executionArn=execution_arn))["status"] == "RUNNING":
        assert time.monotonic() < deadline, "execution still RUNNING after 30s"
        time.sleep(0.05)
    return described


class StartingThread(threading.Thread):
    """A thread held at the point of its start where it has an ident but is not yet marked started (between
    `_set_ident` and `_started.set()` in threading's bootstrap), as any thread moto starts passes through."""

    def __init__(self) -> None:
        super().__init__(target=lambda: None)
        self.has_ident = threading.Event()
        self.proceed = threading.Event()

    def _set_native_id(self) -> None:
        self.has_ident.set()
        self.proceed.wait(timeout=5)
        super()._set_native_id()


def test_release_finished_threads_leaves_a_thread_that_is_still_starting(interpreter_threads):
    # Given a thread the interpreter appended and is starting right now
    starting = StartingThread()
    interpreter_threads.append(starting)
    sfn_utils.TMP_THREADS.append(starting)
    starter = threading.Thread(target=starting.start)
    starter.start()
    assert starting.has_ident.wait(timeout=5)

    try:
        # When finished threads are released meanwhile (the watcher does so after every execution's end)
        released = moto_patch.release_finished_threads()

        # Then the starting thread is neither released nor an error
        assert starting in sfn_utils.TMP_THREADS
        assert released >= 0
    finally:
        starting.proceed.set()
        starter.join(timeout=5)
        starting.join(timeout=5)


def test_a_task_whose_function_takes_no_more_invocations_fails_as_lambda_throttling():
    # Given a function that takes no more invocations (its stack is stopping)
    closed = LocalFunction.of("Closed", lambda event, context: {})
    closed.close()

    # When a Lambda task invokes it through the seam
    with moto_patch.lambdas_in_process({"Closed": closed}.get), pytest.raises(ClientError) as raised:
        lambda_eval_utils._invoke_lambda_function({"FunctionName": function_arn("Closed")}, "us-east-1", None)

    # Then moto sees Lambda's throttling error, which the state machine's Retry on Lambda errors matches
    assert raised.value.response["Error"]["Code"] == "TooManyRequestsException"
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 429


# ---------------------------------------------------------------- what a run leaves in memory


def test_model_objects_moto_makes_are_tracked_by_the_constructor_the_patch_replaces():
    # Given moto's BaseModel
    from moto.core.common_models import BaseModel
    from moto.dynamodb.models.dynamo_type import Item

    # When its constructor's code is read
    # Then it still appends every object to its class's `instances_tracked`, which the patch leaves out
    assert isinstance(memory._ORIGINAL_MODEL_NEW, staticmethod)
    assert "instances_tracked" in memory._ORIGINAL_MODEL_NEW.__func__.__code__.co_names
    assert isinstance(Item.instances_tracked, list)
    assert BaseModel.__dict__["__new__"] is memory._ORIGINAL_MODEL_NEW


def test_items_written_over_are_freed_once_untracked(transactions_table):
    # Given untracked model objects
    import gc
    import weakref

    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodb.models.dynamo_type import DynamoType

    moto_patch.install_untracked_models()
    try:
        table = dynamodb_backends["123456789012"]["us-east-1"].get_table("t")
        transactions_table.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "0"}})
        first = weakref.ref(table.items[DynamoType({"S": "a"})])
        # When the item is written over, and over again through updates
        for n in range(1, 20):
            transactions_table.update_item(
                TableName="t",
                Key={"k": {"S": "a"}},
                UpdateExpression="SET n = :n",
                ExpressionAttributeValues={":n": {"N": str(n)}},
            )
        transactions_table.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "20"}})
        gc.collect()
        # Then the first version is gone, and the table answers the last
        assert first() is None
        assert _items(transactions_table)["a"]["n"] == {"N": "20"}
    finally:
        moto_patch.uninstall_untracked_models()


def test_a_repeated_transaction_token_answers_success_once_and_a_different_request_a_mismatch(
    transactions_table,
):
    # Given transaction tokens honoured
    moto_patch.install_transaction_tokens()
    try:
        put = [{"Put": {"TableName": "t", "Item": {"k": {"S": "a"}, "n": {"N": "1"}}}}]
        transactions_table.transact_write_items(TransactItems=put, ClientRequestToken="token-1")
        transactions_table.put_item(TableName="t", Item={"k": {"S": "a"}, "n": {"N": "2"}})
        # When the same request comes again with its token
        transactions_table.transact_write_items(TransactItems=put, ClientRequestToken="token-1")
        # Then it is answered without being applied again
        assert _items(transactions_table)["a"]["n"] == {"N": "2"}
        # And a different request with that token is refused
        other = [{"Put": {"TableName": "t", "Item": {"k": {"S": "b"}}}}]
        with pytest.raises(ClientError) as refused:
            transactions_table.transact_write_items(TransactItems=other, ClientRequestToken="token-1")
        assert refused.value.response["Error"]["Code"] == "IdempotentParameterMismatchException"
        # And what is kept per token is a hash, whatever the request's size
        assert {len(digest) for digest, _ in transactions._applied_tokens.values()} == {64}
    finally:
        moto_patch.uninstall_transaction_tokens()


def test_a_transaction_token_is_forgotten_after_its_window_oldest_first(transactions_table, monkeypatch):
    # Given tokens honoured, and a clock to move
    now = [1000.0]
    monkeypatch.setattr(transactions.time, "monotonic", lambda: now[0])
    moto_patch.install_transaction_tokens()
    try:
        put = [{"Put": {"TableName": "t", "Item": {"k": {"S": "a"}, "n": {"N": "1"}}}}]
        transactions_table.transact_write_items(TransactItems=put, ClientRequestToken="old")
        now[0] += transactions.TOKEN_WINDOW_SECONDS / 2
        transactions_table.transact_write_items(TransactItems=put, ClientRequestToken="recent")
        # When the first token's window has passed and another transaction comes
        now[0] += transactions.TOKEN_WINDOW_SECONDS / 2 + 1
        transactions_table.transact_write_items(TransactItems=put, ClientRequestToken="new")
        # Then only the expired token is forgotten, as DynamoDB forgets a token after ten minutes
        assert list(transactions._applied_tokens) == ["recent", "new"]
    finally:
        moto_patch.uninstall_transaction_tokens()


# ---------------------------------------------------------------- S3 bodies in files, writes journaled


def test_the_s3_body_buffer_seam_keeps_the_shape_disk_bodies_implement():
    # moto's FakeKey keeps an object's bytes in `tempfile.SpooledTemporaryFile` (in memory up to 5 MB), built from
    # the `tempfile` of moto.s3.models, and uses no more of that buffer than DiskBody implements.
    import re

    from moto.s3 import models as s3_models

    source = inspect.getsource(s3_models)
    assert set(re.findall(r"\btempfile\.(\w+)", source)) == {"SpooledTemporaryFile"}
    used = set(re.findall(r"_value_buffer\.(\w+)", inspect.getsource(s3_models.FakeKey)))
    assert used <= {"seek", "read", "write", "truncate", "close"}, used - {"seek", "read", "write", "truncate", "close"}
    assert {name for name in used} <= set(dir(moto_patch.DiskBody))


def test_object_bodies_live_in_files_while_their_objects_do(aws, tmp_path):
    # Given S3 bodies kept on disk
    import gc

    moto_patch.install_disk_bodies(tmp_path)
    try:
        aws.s3.create_bucket(Bucket="bodies")
        big = bytes(range(256)) * 24_000  # 6 MB: past moto's 5 MB in-memory buffer too
        # When objects are written, one over another, and read
        aws.s3.put_object(Bucket="bodies", Key="big", Body=big)
        aws.s3.put_object(Bucket="bodies", Key="small", Body=b"first")
        aws.s3.put_object(Bucket="bodies", Key="small", Body=b"second")
        aws.s3.put_object(Bucket="bodies", Key="empty", Body=b"")
        copied = aws.s3.copy_object(Bucket="bodies", Key="copy", CopySource={"Bucket": "bodies", "Key": "big"})
        gc.collect()
        # Then each reads back whole, with moto's ETag, from one file per non-empty object
        assert aws.s3.get_object(Bucket="bodies", Key="big")["Body"].read() == big
        assert aws.s3.get_object(Bucket="bodies", Key="big", Range="bytes=256-511")["Body"].read() == bytes(range(256))
        assert aws.s3.get_object(Bucket="bodies", Key="small")["Body"].read() == b"second"
        assert aws.s3.get_object(Bucket="bodies", Key="empty")["Body"].read() == b""
        assert copied["CopyObjectResult"]["ETag"] == aws.s3.head_object(Bucket="bodies", Key="big")["ETag"]
        assert sorted(f.stat().st_size for f in tmp_path.iterdir()) == [6, len(big), len(big)]
        # And a deleted object's file goes with it
        aws.s3.delete_object(Bucket="bodies", Key="big")
        gc.collect()
        assert sorted(f.stat().st_size for f in tmp_path.iterdir()) == [6, len(big)]
    finally:
        moto_patch.uninstall_disk_bodies()


def test_the_journal_seams_keep_the_shapes_the_patches_implement():
    # The S3 writes are noted where moto's backend puts and deletes a key (the response sets the metadata after
    # put_object, so the request's end is when they are journaled); a DynamoDB write is read back through
    # get_item, with the body DynamoHandler.call_action parsed.
    from moto.dynamodb.models import DynamoDBBackend
    from moto.s3.models import S3Backend

    assert list(inspect.signature(S3Backend.put_object).parameters)[:4] == ["self", "bucket_name", "key_name", "value"]
    assert list(inspect.signature(S3Backend.delete_object).parameters)[:3] == ["self", "bucket_name", "key_name"]
    assert "new_key.set_metadata(metadata)" in inspect.getsource(S3Response.put_object)
    assert list(inspect.signature(DynamoDBBackend.get_item).parameters)[:3] == ["self", "table_name", "keys"]
    assert "self.body = " in inspect.getsource(DynamoHandler.call_action)
    for name in locks._S3_ENTRY_POINTS:
        assert callable(getattr(S3Response, name))


class RecordingJournal:
    def __init__(self) -> None:
        self.items: list[list[moto_patch.ItemChange]] = []
        self.objects: list[list[moto_patch.ObjectChange]] = []

    def items_written(self, changes: list[moto_patch.ItemChange]) -> None:
        self.items.append(changes)

    def objects_written(self, changes: list[moto_patch.ObjectChange]) -> None:
        self.objects.append(changes)


def test_each_acknowledged_write_reaches_the_journal_once_with_what_the_backend_holds(aws, backend_locks):
    # Given a journal
    create_table(aws.dynamodb)
    aws.s3.create_bucket(Bucket="bodies")
    journal = RecordingJournal()
    moto_patch.install_write_journal(journal)
    try:
        # When items are written in a transaction, one fails its condition, one is read, and an object is written
        aws.dynamodb.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "1"}}}},
                {"Put": {"TableName": TABLE, "Item": {"pk": {"S": "a"}, "sk": {"S": "2"}, "blob": {"B": b"\x00"}}}},
            ]
        )
        with pytest.raises(ClientError):
            aws.dynamodb.put_item(
                TableName=TABLE,
                Item={"pk": {"S": "a"}, "sk": {"S": "1"}},
                ConditionExpression="attribute_not_exists(pk)",
            )
        aws.dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "a"}, "sk": {"S": "1"}})
        aws.dynamodb.update_item(
            TableName=TABLE,
            Key={"pk": {"S": "a"}, "sk": {"S": "1"}},
            UpdateExpression="SET n = n + :one",
            ExpressionAttributeValues={":one": {"N": "1"}},
        )
        aws.s3.put_object(Bucket="bodies", Key="k/1.txt", Body=b"x", ContentType="text/csv", Metadata={"Run-Id": "r"})
        aws.s3.get_object(Bucket="bodies", Key="k/1.txt")
        aws.s3.delete_object(Bucket="bodies", Key="k/1.txt")
    finally:
        moto_patch.uninstall_write_journal()

    # Then the transaction is one change of two items, the refused write and the read none, the update what it left
    assert [[(c.table, json.loads(c.key)) for c in changes] for changes in journal.items] == [
        [(TABLE, {"pk": {"S": "a"}, "sk": {"S": "1"}}), (TABLE, {"pk": {"S": "a"}, "sk": {"S": "2"}})],
        [(TABLE, {"pk": {"S": "a"}, "sk": {"S": "1"}})],
    ]
    assert journal.items[0][1].item == {"pk": {"S": "a"}, "sk": {"S": "2"}, "blob": {"B": "AA=="}}
    assert journal.items[1][0].item == {"pk": {"S": "a"}, "sk": {"S": "1"}, "n": {"N": "2"}}
    assert journal.objects == [
        [moto_patch.ObjectChange("bodies", "k/1.txt", b"x", "text/csv", {"run-id": "r"})],
        [moto_patch.ObjectChange("bodies", "k/1.txt", None)],
    ]


# ---------------------------------------------------------------- stored items kept packed


def test_the_item_storage_seams_keep_the_shapes_packed_items_implement():
    # moto's Table keeps its items in `self.items`, a defaultdict(dict) by hash key (then range key), read and
    # written only through get, set, pop, `in`, len and values; update_item changes the item get_item gave it.
    from moto.dynamodb.models import DynamoDBBackend
    from moto.dynamodb.models.table import Table

    assert "self.items = defaultdict(dict)" in inspect.getsource(Table.__init__)
    assert "self.items[hash_value][range_value] = item" in inspect.getsource(Table.put_item)
    assert "result = self.items[hash_key][range_key]" in inspect.getsource(Table.get_item)
    assert "self.items[hash_key].pop(range_key)" in inspect.getsource(Table.delete_item)
    update = inspect.getsource(DynamoDBBackend.update_item)
    assert "item = table.get_item(hash_value, range_value)" in update
    assert "UpdateExpressionExecutor(" in update


def run_table_operations(dynamodb: Any) -> list[Any]:
    """Writes of every kind and the reads that see them, on a table with a range key and one without."""
    create_table(dynamodb)
    dynamodb.create_table(
        TableName="plain",
        KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    rich = {
        "n": {"N": "1"},
        "blob": {"B": b"\x00\xff"},
        "tags": {"SS": ["a", "b"]},
        "nums": {"NS": ["1", "2.5"]},
        "flag": {"BOOL": True},
        "nothing": {"NULL": True},
        "deep": {"M": {"list": {"L": [{"S": "x"}, {"M": {"y": {"N": "2"}}}, {"L": []}]}, "empty": {"M": {}}}},
    }
    answers: list[Any] = []
    for i in range(6):
        key = {"pk": {"S": f"p{i % 2}"}, "sk": {"S": f"{i:02}"}}
        dynamodb.put_item(TableName=TABLE, Item={**key, "kind": {"S": "k"}, **rich})
        dynamodb.put_item(TableName="plain", Item={"id": {"S": f"i{i}"}, **rich})
    dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": "p0"}, "sk": {"S": "00"}},
        UpdateExpression="SET n = n + :one, deep.#list[1].y = :z, added = :a REMOVE flag ADD tags :t",
        ExpressionAttributeNames={"#list": "list"},
        ExpressionAttributeValues={":one": {"N": "1"}, ":z": {"N": "9"}, ":a": {"S": "new"}, ":t": {"SS": ["c"]}},
    )
    dynamodb.update_item(
        TableName="plain",
        Key={"id": {"S": "new-one"}},
        UpdateExpression="SET n = :n",
        ExpressionAttributeValues={":n": {"N": "5"}},
    )
    with pytest.raises(ClientError):
        dynamodb.update_item(
            TableName="plain",
            Key={"id": {"S": "i1"}},
            UpdateExpression="SET n = :n",
            ConditionExpression="n > :big",
            ExpressionAttributeValues={":n": {"N": "0"}, ":big": {"N": "100"}},
        )
    dynamodb.delete_item(TableName=TABLE, Key={"pk": {"S": "p1"}, "sk": {"S": "03"}})
    dynamodb.delete_item(TableName="plain", Key={"id": {"S": "i2"}})
    dynamodb.transact_write_items(
        TransactItems=[
            {
                "Update": {
                    "TableName": TABLE,
                    "Key": {"pk": {"S": "p1"}, "sk": {"S": "01"}},
                    "UpdateExpression": "SET n = :n",
                    "ExpressionAttributeValues": {":n": {"N": "7"}},
                }
            },
            {"Put": {"TableName": "plain", "Item": {"id": {"S": "t"}, "kind": {"S": "t"}}}},
        ]
    )
    answers.append(dynamodb.get_item(TableName=TABLE, Key={"pk": {"S": "p0"}, "sk": {"S": "00"}})["Item"])
    answers.append(dynamodb.get_item(TableName="plain", Key={"id": {"S": "missing"}}).get("Item"))
    answers.append(
        dynamodb.query(
            TableName=TABLE,
            KeyConditionExpression="pk = :p AND sk > :s",
            ExpressionAttributeValues={":p": {"S": "p1"}, ":s": {"S": "00"}},
        )["Items"]
    )
    answers.append(
        dynamodb.query(
            TableName=TABLE,
            IndexName="by-kind",
            KeyConditionExpression="kind = :k",
            ExpressionAttributeValues={":k": {"S": "k"}},
        )["Items"]
    )
    answers.append(
        dynamodb.scan(TableName=TABLE, FilterExpression="n > :one", ExpressionAttributeValues={":one": {"N": "1"}})[
            "Items"
        ]
    )
    answers.append(dynamodb.scan(TableName="plain", Limit=3)["Items"])
    answers.append(dynamodb.scan(TableName="plain")["Items"])
    answers.append(dynamodb.describe_table(TableName="plain")["Table"]["ItemCount"])
    return answers


def test_packed_items_answer_every_read_as_motos_own_storage(backend_locks):
    # Given the same operations on moto's own storage and on packed items
    from moto.dynamodb.models import dynamodb_backends

    answers, storage = [], []
    for packed in (False, True):
        with mock_aws():
            if packed:
                moto_patch.install_packed_items()
            moto_patch.install_item_level_transactions()
            try:
                answers.append(run_table_operations(aws_client("dynamodb")))
                storage.append(dynamodb_backends["123456789012"]["us-east-1"].get_table(TABLE).items)
            finally:
                moto_patch.uninstall_item_level_transactions()
                moto_patch.uninstall_packed_items()

    # Then every answer is the same, and the items were kept packed
    assert answers[1] == answers[0]
    assert not isinstance(storage[0], moto_patch.PackedPartitions)
    assert isinstance(storage[1], moto_patch.PackedPartitions)
    assert storage[1].packed_bytes() > 0


def scan_pages(dynamodb: Any, table: str, **options: Any) -> list[dict[str, Any]]:
    pages, start = [], None
    while True:
        page = dynamodb.scan(TableName=table, **options, **({"ExclusiveStartKey": start} if start else {}))
        pages.append(page)
        start = page.get("LastEvaluatedKey")
        if not start:
            return pages


@pytest.mark.parametrize("table", [TABLE, "plain"])
def test_a_scan_with_a_limit_on_packed_items_builds_only_the_items_it_evaluates(backend_locks, table, monkeypatch):
    # Given a table with a range key and one without, 23 items each, 3 of them expired, on packed items
    from moto.dynamodb.models import dynamodb_backends

    built = []
    unpack = moto_patch.PackedItems._unpack
    monkeypatch.setattr(moto_patch.PackedItems, "_unpack", lambda self, *a: built.append(1) or unpack(self, *a))
    with mock_aws():
        moto_patch.install_packed_items()
        try:
            dynamodb = aws_client("dynamodb")
            create_table(dynamodb)
            dynamodb.create_table(
                TableName="plain",
                KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
                AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "S"}],
                BillingMode="PAY_PER_REQUEST",
            )
            for i in range(23):
                key = (
                    {"pk": {"S": f"p{i % 4}"}, "sk": {"S": f"{i:02}"}} if table == TABLE else {"id": {"S": f"i{i:02}"}}
                )
                dynamodb.put_item(TableName=table, Item={**key, "ttl": {"N": "5" if i in (3, 11, 20) else "99"}})
            expired = {"FilterExpression": "#t <= :now", "ExpressionAttributeNames": {"#t": "ttl"}}
            expired["ExpressionAttributeValues"] = {":now": {"N": "10"}}

            # When it is scanned for the expired ones 5 items at a time, and whole
            built.clear()
            pages = scan_pages(dynamodb, table, Limit=5, **expired)
            built_for_pages = len(built)
            whole = dynamodb.scan(TableName=table, **expired)["Items"]
            every = [item for page in scan_pages(dynamodb, table, Limit=5) for item in page["Items"]]
            storage = dynamodb_backends["123456789012"]["us-east-1"].get_table(table).items
            assert isinstance(storage, moto_patch.PackedItems | moto_patch.PackedPartitions)
        finally:
            moto_patch.uninstall_packed_items()

    # Then each page evaluated 5 items (the last what was left), building only those, and the pages found what one
    # scan finds
    assert [page["ScannedCount"] for page in pages] == [5, 5, 5, 5, 3]
    assert built_for_pages == 23
    assert sorted(str(item) for page in pages for item in page["Items"]) == sorted(str(item) for item in whole)
    assert len(whole) == 3
    # And a scan without a filter, page after page, reads every item once
    assert len(every) == 23
    assert len({str(item) for item in every}) == 23


def run_index_operations(dynamodb: Any) -> list[Any]:
    """Writes that move items in and out of two indexes (put, overwrite, update, remove the attribute, delete),
    then queries of each: both directions, pages of two, a filter, a value no item holds, a number written
    another way."""
    dynamodb.create_table(
        TableName="runs",
        KeySchema=[{"AttributeName": "run_id", "KeyType": "HASH"}],
        AttributeDefinitions=[
            {"AttributeName": "run_id", "AttributeType": "S"},
            {"AttributeName": "account", "AttributeType": "S"},
            {"AttributeName": "created", "AttributeType": "N"},
            {"AttributeName": "slot", "AttributeType": "N"},
        ],
        GlobalSecondaryIndexes=[
            {
                "IndexName": "by_account",
                "KeySchema": [
                    {"AttributeName": "account", "KeyType": "HASH"},
                    {"AttributeName": "created", "KeyType": "RANGE"},
                ],
                "Projection": {"ProjectionType": "ALL"},
            },
            {
                "IndexName": "by_slot",
                "KeySchema": [{"AttributeName": "slot", "KeyType": "HASH"}],
                "Projection": {"ProjectionType": "KEYS_ONLY"},
            },
        ],
        BillingMode="PAY_PER_REQUEST",
    )
    for i in range(14):
        item = {"run_id": {"S": f"r{i:02}"}, "created": {"N": str(100 - i)}, "slot": {"N": str(i % 3)}}
        if i % 5:
            item["account"] = {"S": "ab"[i % 2]}
        dynamodb.put_item(TableName="runs", Item=item)
    dynamodb.put_item(TableName="runs", Item={"run_id": {"S": "r03"}, "account": {"S": "c"}, "created": {"N": "7"}})
    dynamodb.update_item(
        TableName="runs",
        Key={"run_id": {"S": "r04"}},
        UpdateExpression="SET account = :a",
        ExpressionAttributeValues={":a": {"S": "b"}},
    )
    dynamodb.update_item(TableName="runs", Key={"run_id": {"S": "r06"}}, UpdateExpression="REMOVE account")
    dynamodb.delete_item(TableName="runs", Key={"run_id": {"S": "r07"}})

    def pages(**query: Any) -> list[Any]:
        found, start = [], None
        while True:
            page = dynamodb.query(TableName="runs", **query, **({"ExclusiveStartKey": start} if start else {}))
            found.append((page["Items"], page.get("LastEvaluatedKey")))
            start = page.get("LastEvaluatedKey")
            if not start:
                return found

    answers = []
    for account in ("a", "b", "c", "z"):
        for forward in (True, False):
            answers.append(
                pages(
                    IndexName="by_account",
                    KeyConditionExpression="account = :a",
                    ExpressionAttributeValues={":a": {"S": account}},
                    ScanIndexForward=forward,
                    Limit=2,
                )
            )
    answers.append(
        pages(
            IndexName="by_account",
            KeyConditionExpression="account = :a AND created > :c",
            FilterExpression="slot <> :s",
            ExpressionAttributeValues={":a": {"S": "b"}, ":c": {"N": "90"}, ":s": {"N": "1"}},
        )
    )
    for slot in ("0", "1.0", "2", "5"):
        answers.append(
            pages(
                IndexName="by_slot",
                KeyConditionExpression="slot = :s",
                ExpressionAttributeValues={":s": {"N": slot}},
            )
        )
    return answers


def test_a_query_of_an_index_on_packed_items_answers_as_motos_own_and_builds_only_the_matching_items(
    backend_locks, monkeypatch
):
    # Given the same writes and index queries on moto's own storage and on packed items
    built = []
    unpack = moto_patch.PackedItems._unpack
    monkeypatch.setattr(moto_patch.PackedItems, "_unpack", lambda self, *a: built.append(1) or unpack(self, *a))
    answers = []
    for packed in (False, True):
        with mock_aws():
            if packed:
                moto_patch.install_packed_items()
                moto_patch.install_caches()
            try:
                dynamodb = aws_client("dynamodb")
                answers.append(run_index_operations(dynamodb))
                if packed:
                    # When one account's index is queried
                    built.clear()
                    dynamodb.query(
                        TableName="runs",
                        IndexName="by_account",
                        KeyConditionExpression="account = :a",
                        ExpressionAttributeValues={":a": {"S": "c"}},
                    )
            finally:
                moto_patch.uninstall_caches()
                moto_patch.uninstall_packed_items()

    # Then every answer is the same, and the query built only the one item holding that account, not all 13
    assert answers[1] == answers[0]
    assert any(items for page in answers[0] for items, _ in page)
    assert len(built) == 1
