"""Everything the embedded stack does to moto beyond its public API, in one place.

moto's Step Functions interpreter invokes Lambda tasks through boto3 against moto's own Lambda, which runs
code in Docker. We replace the one function every Lambda Task form goes through (`arn:aws:lambda:...`,
`arn:aws:states:::lambda:invoke` and its `.waitForTaskToken`) so that tasks run our handlers in this
process.

moto's TransactWriteItems copies every table it touches before writing, to roll back on failure: its cost
grows with everything stored, so a long-lived local stack slows down run after run. We replace it with the
same semantics (all conditions hold, or nothing is written) that checks every condition first and keeps
only the touched items for the rollback.

moto ignores TransactWriteItems' `ClientRequestToken`; DynamoDB applies a transaction with a given token once in ten
minutes and answers a repeat with success (or `IdempotentParameterMismatchException` when its items differ), which is
what makes a retry after an unknown outcome safe. The handler keeps the tokens it applied for those ten minutes, each
with a hash of its request.

moto keeps every model object it ever makes (each DynamoDB item version, S3 key, SQS message) in a class-wide list
for its dashboard, so memory grew with every write; objects live as long as the backend holds them instead.

moto's S3 keeps each object's bytes in a `SpooledTemporaryFile` held in memory up to 5 MB, so every artifact a
run wrote stayed in the process's memory. Each body lives in a file of the stack's data folder instead, opened only
while it is read or written (a descriptor held per object would run a long-lived stack out of them).

moto keeps every stored DynamoDB item as an object graph (an `Item`, a `DynamoType` per attribute and nested value,
their dicts), about six times the item's JSON. A table's items are kept packed instead (marshal bytes of their
attributes) and built again on each read; an update, which moto applies to the item it read, is stored again after.

With `--state-dir`, every DynamoDB and S3 write is handed to a journal (state_dir.py) before its answer leaves moto:
the items a request changed, read back from the backend once it has written them (a transaction's items together),
and the objects it put or deleted with their content type and metadata.

Step Functions holds a state's data to 256 KB. moto fails a task whose result is larger, or a state whose output is,
with `States.DataLimitExceeded`, but lets a task whose input (after Parameters) is larger run, and its `States.ALL`
catches the error, which on AWS is terminal: `States.ALL` does not match it, so the execution fails.

moto's backends are plain dicts and lists that its server's threads, its interpreter's threads and our
handlers touch at once ("dictionary changed size during iteration"). Every request to DynamoDB, S3 and Step
Functions is served under that service's lock, serialisation of the answer included; SQS and EventBridge share
one (EventBridge writes to SQS's backend itself).

moto's interpreter keeps every thread it ever starts in `TMP_THREADS` and every execution (with its whole
interpreter state) in its state machine. On Python 3.13 a finished thread whose object is still referenced
keeps its stack mapped, so a long-lived stack ran out of address space; we drop finished threads and all but
the newest ended executions, once each ending has been delivered. The ending itself is reported by a hook on
the interpreter's one "terminated" callback, so nothing has to poll.

Costs moto pays on every request or execution are paid once instead: its server lists moto's own package folders and
tries every service's URL pattern to route each request (under one lock for all requests), and lists a handler's
methods to find each request's action; its interpreter parses the ASL definition with ANTLR for every execution (the
parsed program holds no execution state: that lives in each execution's environment), builds a new JSONPath parser
for every path it evaluates, copies state data with deepcopy's generic protocol, starts MaxConcurrency workers for a
Map of fewer items and a new thread for the work of every task state; its DynamoDB writes tokenize and parse the
same UpdateExpression and ConditionExpression two or three times each, validate an UpdateExpression with ten walks
over a deep copy of its tree (some that cannot change it) and copy items through `copy.deepcopy` value by value, and
its DynamoDB answers walk every attribute value of every item against the service model (they are stored in the wire
form already, so they are copied as they are). A DynamoDB query on a table's own key reads only its partition, where
moto sorts every item of the table, so a stack that has stored many runs stays as fast as a new one.

tests/unit/test_moto_patch.py, test_moto_fast_paths.py and test_moto_expression_paths.py fail when a moto
upgrade moves or reshapes any of these seams, and compare what each shortcut answers with moto's own code.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import copyreg
import functools
import hashlib
import inspect
import json
import marshal
import os
import queue
import threading
import time
import urllib.request
import uuid
import weakref
import zlib
from collections.abc import Callable, Iterator, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials
from botocore.exceptions import ClientError
from moto import backends as moto_backends
from moto.core import responses as moto_responses
from moto.core.common_models import BaseModel
from moto.core.exceptions import JsonRESTError
from moto.core.responses import ActionResult, BaseResponse
from moto.core.serialize import JSONSerializer
from moto.dynamodb.comparisons import ConditionExpressionParser, get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.dynamo_type import DDBType, DynamoType, Item, LimitedSizeDict
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing import validators as ddb_validators
from moto.dynamodb.parsing.ast_nodes import (
    DepthFirstTraverser,
    Node,
    UpdateExpressionAddAction,
    UpdateExpressionDeleteAction,
    UpdateExpressionFunction,
    UpdateExpressionPath,
    UpdateExpressionRemoveAction,
    UpdateExpressionSetAction,
)
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.dynamodb.responses import DynamoHandler
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3 import models as s3_models
from moto.s3.models import FakeKey, S3Backend
from moto.s3.responses import S3Response
from moto.stepfunctions.parser import utils as sfn_utils
from moto.stepfunctions.parser.api import (
    ExecutionFailedEventDetails,
    ExecutionStatus,
    HistoryEventType,
    TaskFailedEventDetails,
)
from moto.stepfunctions.parser.asl.component.common.error_name.custom_error_name import CustomErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.error_equals_decl import ErrorEqualsDecl
from moto.stepfunctions.parser.asl.component.common.error_name.error_name import ErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.failure_event import (
    FailureEvent,
    FailureEventException,
)
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name import StatesErrorName
from moto.stepfunctions.parser.asl.component.common.error_name.states_error_name_type import StatesErrorNameType
from moto.stepfunctions.parser.asl.component.common.path import result_path as sfn_result_path
from moto.stepfunctions.parser.asl.component.common.string import string_expression as sfn_string_expression
from moto.stepfunctions.parser.asl.component.state.exec import execute_state as sfn_execute_state
from moto.stepfunctions.parser.asl.component.state.exec.state_map import state_map as sfn_state_map
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration import job as sfn_job
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.distributed_iteration_component import (
    DistributedIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.inline_iteration_component import (
    InlineIterationComponent,
    InlineIterationComponentEvalInput,
)
from moto.stepfunctions.parser.asl.component.state.exec.state_map.iteration.job import JobPool
from moto.stepfunctions.parser.asl.component.state.exec.state_parallel import branches_decl as sfn_branches_decl
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.component.state.exec.state_task.service import (
    state_task_service as sfn_state_task_service,
)
from moto.stepfunctions.parser.asl.eval import environment as sfn_environment
from moto.stepfunctions.parser.asl.eval import states as sfn_states
from moto.stepfunctions.parser.asl.eval.environment import Environment as SfnEnvironment
from moto.stepfunctions.parser.asl.eval.event import event_manager as sfn_event_manager
from moto.stepfunctions.parser.asl.eval.event.event_detail import EventDetails
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils import json_path as sfn_json_path
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution
from moto.stepfunctions.parser.models import stepfunctions_parser_backends
from moto.stepfunctions.parser.quotas import is_within_size_quota

from canvas_local import priority
from canvas_local.lambda_runtime import REGION, LocalFunction, Throttled, function_name_of
from canvas_local.priority import PriorityLock

SEAM_NAME = "_invoke_lambda_function"

FunctionResolver = Callable[[str], LocalFunction | None]

_ORIGINAL_SEAM = getattr(lambda_eval_utils, SEAM_NAME)
_lock = threading.Lock()
_resolvers: list[FunctionResolver] = []
# Whether the next Lambda task fails before its function runs (canvas_local.faults), when faults are injected.
_lambda_fault: Callable[[str], bool] | None = None


def inject_lambda_faults(fault: Callable[[str], bool] | None) -> None:
    """Fail Lambda tasks with `Lambda.ServiceException` whenever `fault(function_name)` says so (None: never)."""
    global _lambda_fault
    _lambda_fault = fault


def install(resolve: FunctionResolver) -> None:
    """Dispatch Lambda tasks to `resolve(function_name)`; the latest install wins until uninstalled."""
    with _lock:
        _resolvers.append(resolve)
        setattr(lambda_eval_utils, SEAM_NAME, _invoke_in_process)


def uninstall(resolve: FunctionResolver) -> None:
    with _lock:
        if resolve in _resolvers:
            _resolvers.remove(resolve)
        if not _resolvers:
            setattr(lambda_eval_utils, SEAM_NAME, _ORIGINAL_SEAM)


@contextmanager
def lambdas_in_process(resolve: FunctionResolver) -> Iterator[None]:
    install(resolve)
    try:
        yield
    finally:
        uninstall(resolve)


def _invoke_in_process(parameters: dict[str, Any], region: str, state_credentials: Any) -> dict[str, Any]:
    """Same contract as the seam it replaces: an Invoke response with `Payload` already parsed."""
    name = function_name_of(parameters["FunctionName"])
    function = _resolve(name)
    if function is None:
        raise _function_not_found(parameters["FunctionName"])
    fault = _lambda_fault
    if fault is not None and fault(name):
        raise _lambda_error("ServiceException", "The Lambda service encountered an internal error", 500)
    try:
        # A task waits for a free execution environment (Step Functions would retry Lambda's throttling).
        invocation = function.invoke(_parse_payload(parameters.get("Payload")))
    except Throttled as exc:
        raise _lambda_error("TooManyRequestsException", str(exc), 429) from None
    response: dict[str, Any] = {
        "StatusCode": 200,
        "ExecutedVersion": "$LATEST",
        "Payload": invocation.payload,
    }
    if invocation.function_error:
        response["FunctionError"] = invocation.function_error
    return response


def _resolve(name: str) -> LocalFunction | None:
    with _lock:
        resolve = _resolvers[-1] if _resolvers else None
    return resolve(name) if resolve else None


def _parse_payload(payload: bytes | str | None) -> Any:
    if payload is None or payload in (b"", ""):
        return {}
    try:
        return json.loads(payload)
    except ValueError:
        return payload.decode("utf-8") if isinstance(payload, bytes) else payload


def _function_not_found(function_name: str) -> ClientError:
    return _lambda_error("ResourceNotFoundException", f"Function not found: {function_name}", 404)


def _lambda_error(code: str, message: str, status: int) -> ClientError:
    # Shaped like boto3's error so moto reports `Lambda.<code>`, as AWS would.
    return ClientError(
        {
            "Error": {"Code": code, "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": status, "RequestId": str(uuid.uuid4())},
        },
        "Invoke",
    )


def enable_state_machine_execution(endpoint_url: str, credentials: Credentials | None = None) -> None:
    """Make moto's server run executions through its ASL interpreter (moto's documented server config).

    The setting is process-wide (moto.core.config.default_user_config), so it also reaches `mock_aws`. The
    request is signed with `credentials` (a server that checks its callers, moto_server.CallerCheck, wants them).
    """
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": True}}, credentials)


def disable_state_machine_execution(endpoint_url: str, credentials: Credentials | None = None) -> None:
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": False}}, credentials)


def reset_backends(endpoint_url: str, credentials: Credentials | None = None) -> None:
    """Forget every resource: moto's backends are process-wide, shared by each server started here."""
    _moto_api(endpoint_url, "reset", None, credentials)


def _moto_api(endpoint_url: str, action: str, body: dict[str, Any] | None, credentials: Credentials | None) -> None:
    url = f"{endpoint_url}/moto-api/{action}"
    data = json.dumps(body).encode("utf-8")
    headers = {"Content-Type": "application/json"}
    if credentials is not None:
        signed = AWSRequest(method="POST", url=url, data=data, headers=headers)
        SigV4Auth(credentials, "moto", REGION).add_auth(signed)
        headers = dict(signed.headers.items())
    request = urllib.request.Request(url, data=data, headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=10) as response:  # raises on a status other than 2xx
        response.read()


# ---------------------------------------------------------------- Step Functions' payload limit

_ORIGINAL_BEFORE_TASK = sfn_state_task_service.StateTaskService._before_eval_execution
_ORIGINAL_ERROR_EQUALS = ErrorEqualsDecl._eval_body
DATA_LIMIT_EXCEEDED = StatesErrorNameType.StatesStatesDataLimitExceeded


def install_payload_limits() -> None:
    """A task's input over 256 KB fails it, and `States.ALL` no longer catches `States.DataLimitExceeded`."""
    sfn_state_task_service.StateTaskService._before_eval_execution = _before_task  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _error_equals  # type: ignore[method-assign]


def uninstall_payload_limits() -> None:
    sfn_state_task_service.StateTaskService._before_eval_execution = _ORIGINAL_BEFORE_TASK  # type: ignore[method-assign]
    ErrorEqualsDecl._eval_body = _ORIGINAL_ERROR_EQUALS  # type: ignore[method-assign]


def _before_task(
    self: sfn_state_task_service.StateTaskService,
    env: SfnEnvironment,
    resource_runtime_part: Any,
    raw_parameters: dict[str, Any],
    state_credentials: Any,
) -> None:
    """The input a task sends (its Parameters evaluated) checked against the quota moto checks its result with."""
    if not is_within_size_quota(raw_parameters):
        resource_type = self._get_sfn_resource_type()
        failure = FailureEvent(
            env=env,
            error_name=StatesErrorName(typ=DATA_LIMIT_EXCEEDED),
            event_type=HistoryEventType.TaskFailed,
            # moto declares EventDetails with every key required; an event, moto's own included, has one
            event_details=cast(
                EventDetails,
                {
                    "taskFailedEventDetails": TaskFailedEventDetails(
                        error=DATA_LIMIT_EXCEEDED.to_name(),
                        cause=f"The state/task '{resource_type}' has an input with a size exceeding the maximum "
                        "number of bytes service limit.",
                        resourceType=resource_type,
                        resource=self._get_sfn_resource(),
                    )
                },
            ),
        )
        raise FailureEventException(failure_event=failure)
    _ORIGINAL_BEFORE_TASK(self, env, resource_runtime_part, raw_parameters, state_credentials)


def _error_equals(self: ErrorEqualsDecl, env: SfnEnvironment) -> None:
    """moto's match of a Retry's or Catch's ErrorEquals, except that only naming it matches the terminal error."""
    error_name = env.stack[-1]
    if error_name == StatesErrorName(typ=DATA_LIMIT_EXCEEDED) and error_name not in self.error_names:
        env.stack.pop()
        env.stack.append(False)
        return
    _ORIGINAL_ERROR_EQUALS(self, env)


# ---------------------------------------------------------------- Step Functions' StopExecution

_ORIGINAL_SET_STOP = SfnEnvironment.set_stop


def install_quiet_stops() -> None:
    """StopExecution of an execution inside a Map ends it with no error logged. moto's Map iteration reads a
    stopped frame's error as a failure's details (a dict, `iteration_worker`), but a frame holds the stop's error
    string, so a Map whose Catch matched the aborted iteration failed with AttributeError ("'str' object has no
    attribute 'get'"), which became `States.Runtime`; the Parallel state around it then named that error with
    `CustomErrorName`, which refuses a `States.` name ("Custom Error Names MUST NOT begin with the prefix
    'States.'"). A stopped frame now holds the stop as failure details, and a branch's `States.` error keeps its
    name, as Step Functions reports it."""
    SfnEnvironment.set_stop = _set_stop  # type: ignore[method-assign]
    sfn_branches_decl.CustomErrorName = _branch_error_name  # type: ignore[misc, assignment]


def uninstall_quiet_stops() -> None:
    SfnEnvironment.set_stop = _ORIGINAL_SET_STOP  # type: ignore[method-assign]
    sfn_branches_decl.CustomErrorName = CustomErrorName  # type: ignore[misc]


def _set_stop(self: SfnEnvironment, stop_date: Any, cause: str | None, error: Any) -> None:
    if self.is_frame() and not isinstance(error, dict):
        error = ExecutionFailedEventDetails(error=error or "", cause=cause or "")
    _ORIGINAL_SET_STOP(self, stop_date=stop_date, cause=cause, error=error)


def _branch_error_name(error_name: str | None) -> ErrorName:
    if error_name is not None and error_name.startswith("States."):
        with contextlib.suppress(ValueError):  # a name Step Functions does not define stays custom-like
            return StatesErrorName.from_name(error_name)
        return ErrorName(error_name=error_name)
    return CustomErrorName(error_name=error_name)


# ---------------------------------------------------------------- DynamoDB transactions

_ORIGINAL_TRANSACT = DynamoDBBackend.transact_write_items
_ORIGINAL_TRANSACT_HANDLER = DynamoHandler.transact_write_items
TOKEN_WINDOW_SECONDS = 600
_tokens_lock = threading.Lock()
# ClientRequestToken -> (the digest of the request it came with, when it was applied).
_applied_tokens: dict[str, tuple[str, float]] = {}


def install_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _transact_write_items  # type: ignore[method-assign]
    install_transaction_tokens()


def uninstall_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _ORIGINAL_TRANSACT  # type: ignore[method-assign]
    uninstall_transaction_tokens()


def install_transaction_tokens() -> None:
    DynamoHandler.transact_write_items = _idempotent_transact_write_items  # type: ignore[method-assign]


def uninstall_transaction_tokens() -> None:
    DynamoHandler.transact_write_items = _ORIGINAL_TRANSACT_HANDLER  # type: ignore[method-assign]
    with _tokens_lock:
        _applied_tokens.clear()


def _idempotent_transact_write_items(self: DynamoHandler) -> Any:
    token = self.body.get("ClientRequestToken")
    if not token:
        return _ORIGINAL_TRANSACT_HANDLER(self)
    # Kept as a hash: the request's text, held for ten minutes per transaction, was a run's largest share of memory.
    request = json.dumps({k: v for k, v in self.body.items() if k != "ClientRequestToken"}, sort_keys=True)
    digest = hashlib.sha256(request.encode("utf-8")).hexdigest()
    now = time.monotonic()
    with _tokens_lock:
        # Tokens are kept in the order they were applied: the expired ones are the oldest, at the front.
        while _applied_tokens:
            oldest = next(iter(_applied_tokens))
            if now - _applied_tokens[oldest][1] <= TOKEN_WINDOW_SECONDS:
                break
            del _applied_tokens[oldest]
        applied = _applied_tokens.get(token)
    if applied is not None:
        if applied[0] != digest:
            raise JsonRESTError(
                "com.amazonaws.dynamodb.v20120810#IdempotentParameterMismatchException",
                "DynamoDB rejected the request because you retried a request with a different payload but with "
                "an idempotent token that was already used.",
            )
        return ActionResult({"ConsumedCapacity": [], "ItemCollectionMetrics": {}})
    answer = _ORIGINAL_TRANSACT_HANDLER(self)
    with _tokens_lock:
        _applied_tokens[token] = (digest, now)
    return answer


def _transact_write_items(self: DynamoDBBackend, transact_items: list[dict[str, Any]]) -> None:
    if len(transact_items) > 100:
        raise TooManyTransactionsException()
    operations, seen, errors = [], set(), []
    for entry in transact_items:
        if len(entry) > 1:
            raise TransactWriteSingleOpException
        op_type, op = next(iter(entry.items()))
        table_name = op["TableName"]
        table = self.get_table(table_name)
        if op_type == "Put":
            key = {table.hash_key_attr: op["Item"][table.hash_key_attr]}
            if table.range_key_attr is not None:
                key[table.range_key_attr] = op["Item"][table.range_key_attr]
        else:
            key = op["Key"]
        identity = (table_name, json.dumps(key, sort_keys=True))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        current = self.get_item(table_name, key)
        failed = None
        if op.get("ConditionExpression") is not None:
            condition = get_filter_expression(
                op["ConditionExpression"], op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            )
            if not condition.expr(current):
                old = current.to_json()["Attributes"] if current is not None else None
                wants_old = op.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
                failed = ("ConditionalCheckFailed", "The conditional request failed", old if wants_old else None)
        errors.append(failed or (None, None, None))
        operations.append((op_type, op, table_name, key, copy.deepcopy(current)))
    if any(code is not None for code, _, _ in errors):
        raise TransactionCanceledException(errors)
    done = []
    try:
        for op_type, op, table_name, key, before in operations:
            names, values = op.get("ExpressionAttributeNames"), op.get("ExpressionAttributeValues")
            if op_type == "Put":
                self.put_item(
                    table_name, op["Item"], expression_attribute_names=names, expression_attribute_values=values
                )
            elif op_type == "Delete":
                self.delete_item(table_name, key)
            elif op_type == "Update":
                self.update_item(
                    table_name,
                    key,
                    update_expression=op["UpdateExpression"],
                    expression_attribute_names=names,
                    expression_attribute_values=values,
                )
            done.append((table_name, key, before))
    except Exception:
        for table_name, key, before in reversed(done):
            if before is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, before.to_json()["Attributes"])
        raise


# ---------------------------------------------------------------- one request at a time per service

LOCKED_SERVICES = ("dynamodb", "s3", "stepfunctions", "sqs")
_service_locks = {service: PriorityLock() for service in LOCKED_SERVICES}
# EventBridge writes to SQS's backend itself (a rule's queue target): both are served under one lock.
_service_locks["events"] = _service_locks["sqs"]
_ORIGINAL_CALL_ACTION = BaseResponse.call_action
_S3_ENTRY_POINTS = ("bucket_response", "key_response", "ambiguous_response")
_ORIGINAL_S3 = {name: getattr(S3Response, name) for name in _S3_ENTRY_POINTS}


def service_lock(service: str) -> PriorityLock:
    """The lock every request to `service` is served under; hold it to read or change its backend directly."""
    return _service_locks[service]


def install_backend_locks() -> None:
    """Serve each service's requests one at a time (process-wide, idempotent; mock_aws goes through it too);
    a request made for an API call (see priority.py) goes before waiting requests made by runs."""
    BaseResponse.call_action = _locked_call_action  # type: ignore[method-assign]
    for name in _S3_ENTRY_POINTS:
        setattr(S3Response, name, _locked_s3(_ORIGINAL_S3[name]))


def uninstall_backend_locks() -> None:
    BaseResponse.call_action = _ORIGINAL_CALL_ACTION  # type: ignore[method-assign]
    for name, original in _ORIGINAL_S3.items():
        setattr(S3Response, name, original)


@contextmanager
def backend_locks() -> Iterator[None]:
    """The locks installed for a block of code (a test's `mock_aws`, say), and removed after it."""
    install_backend_locks()
    try:
        yield
    finally:
        uninstall_backend_locks()


def _is_priority(headers: Any) -> bool:
    try:
        return bool(headers and headers.get(priority.HEADER))
    except AttributeError:
        return False


def _locked_call_action(self: BaseResponse) -> Any:
    lock = _service_locks.get(self.service_name or "")
    if lock is None:
        return _ORIGINAL_CALL_ACTION(self)
    with lock.held(_is_priority(getattr(self, "headers", None))):
        answer = _ORIGINAL_CALL_ACTION(self)
        journal = _journal
        if journal is not None and self.service_name == "dynamodb" and int(answer[0]) < 300:
            # Before the answer leaves: a write the caller sees acknowledged is in the journal.
            changes = _items_changed(self)
            if changes:
                journal.items_written(changes)
        return answer


def _locked_s3(original: Callable[..., Any]) -> Callable[..., Any]:
    def locked(self: S3Response, request: Any, *args: Any, **kwargs: Any) -> Any:
        with _service_locks["s3"].held(_is_priority(getattr(request, "headers", None))):
            try:
                return original(self, request, *args, **kwargs)
            finally:
                _journal_objects(self.backend)

    locked.__wrapped__ = original  # type: ignore[attr-defined]
    return locked


# ---------------------------------------------------------------- stored DynamoDB items kept packed

_ORIGINAL_TABLE_INIT = Table.__init__
_ORIGINAL_UPDATE_ITEM = DynamoDBBackend.update_item


class PackedItems(MutableMapping[DynamoType, Item]):
    """A table's items by hash key (a table without a range key), or one partition's by range key: each kept as
    marshal bytes of its attributes, compressed (about half the size, for some 25 µs an item more: docs/benchmarks.md),
    an `Item` built again on each read. What moto reads and writes through `Table.items` (get, set, pop, `in`, len,
    values) works as on its dicts; an `Item` read is a copy, so a change made to it is stored only when it is set
    again (`_update_and_store`)."""

    __slots__ = ("_entries", "_hash_key", "_indexed", "_packed", "_posted", "_postings")

    def __init__(self, hash_key: DynamoType | None = None, indexed: tuple[str, ...] = ()) -> None:
        self._hash_key = hash_key  # a partition's; None: each key is the item's hash key
        self._packed: dict[DynamoType, bytes] = {}
        # The attributes that are an index's only hash key: for each of their values, the keys of the items that
        # hold it, so that a query of the index builds those items and not the table's (`_query_index`).
        self._indexed = indexed
        self._postings: dict[tuple[str, Any], dict[DynamoType, None]] = {}
        self._posted: dict[DynamoType, tuple[tuple[str, Any], ...]] = {}
        self._entries: dict[tuple[str, Any], tuple[str, Any]] = {}  # one copy of each (attribute, value)

    def __getitem__(self, key: DynamoType) -> Item:
        return self._unpack(key, self._packed[key])

    def __setitem__(self, key: DynamoType, item: Item) -> None:
        packed = marshal.dumps(tuple((name, *_plain(value)) for name, value in item.attrs.items()))
        self._packed[key] = zlib.compress(packed, 1)
        if self._indexed:
            self._unpost(key)
            entries = tuple(
                self._entries.setdefault(entry, entry)
                for entry in ((name, _index_value(item.attrs[name])) for name in self._indexed if name in item.attrs)
            )
            if entries:
                self._posted[key] = entries
                for entry in entries:
                    self._postings.setdefault(entry, {})[key] = None

    def __delitem__(self, key: DynamoType) -> None:
        del self._packed[key]
        if self._indexed:
            self._unpost(key)

    def indexed(self, name: str, value: DynamoType) -> list[Item] | None:
        """The items whose attribute `name` is `value`, when `name` is an indexed attribute; None when it is not."""
        if name not in self._indexed:
            return None
        return [self[key] for key in self._postings.get((name, _index_value(value)), ())]

    def _unpost(self, key: DynamoType) -> None:
        for entry in self._posted.pop(key, ()):
            keys = self._postings.get(entry)
            if keys is not None:
                keys.pop(key, None)
                if not keys:
                    del self._postings[entry]
                    self._entries.pop(entry, None)

    def __contains__(self, key: object) -> bool:
        return key in self._packed

    def __iter__(self) -> Iterator[DynamoType]:
        return iter(list(self._packed))

    def __len__(self) -> int:
        return len(self._packed)

    def packed_bytes(self) -> int:
        return sum(len(packed) for packed in self._packed.values())

    def _unpack(self, key: DynamoType, packed: bytes) -> Item:
        item = object.__new__(Item)  # what moto's BaseModel.__new__ makes, untracked
        item.hash_key, item.range_key = (key, None) if self._hash_key is None else (self._hash_key, key)
        attributes = LimitedSizeDict.__new__(LimitedSizeDict)
        dict.__init__(attributes)
        for name, kind, value in marshal.loads(zlib.decompress(packed)):
            dict.__setitem__(attributes, name, _built(kind, value))
        item.attrs = attributes
        return item


class PackedPartitions(dict[DynamoType, PackedItems]):
    """A table with a range key: its partitions by hash key, each made on first use as moto's `defaultdict` does."""

    def __missing__(self, hash_key: DynamoType) -> PackedItems:
        partition = self[hash_key] = PackedItems(hash_key)
        return partition

    def packed_bytes(self) -> int:
        return sum(partition.packed_bytes() for partition in self.values())


def _index_value(value: DynamoType) -> tuple[str, Any]:
    """A key attribute's value as moto compares it (numbers by value: 1 and 1.0 are one key)."""
    try:
        return value.type, value.cast_value
    except (TypeError, ValueError, ArithmeticError):
        return value.type, repr(value.value)


def _plain(value: DynamoType) -> tuple[str, Any]:
    """A value as (type, what marshal stores): a list's and a map's members as such pairs, the rest as moto holds it."""
    inner = value.value
    if type(inner) is list:
        inner = [_plain(member) if type(member) is DynamoType else member for member in inner]
    elif type(inner) is dict:
        inner = {name: _plain(member) if type(member) is DynamoType else member for name, member in inner.items()}
    return value.type, inner


def _built(kind: str, inner: Any) -> DynamoType:
    value = DynamoType.__new__(DynamoType)
    if kind == DDBType.LIST:
        inner = [_built(*member) if type(member) is tuple else member for member in inner]
    elif kind == DDBType.MAP:
        inner = {name: _built(*member) if type(member) is tuple else member for name, member in inner.items()}
    value.type, value.value = kind, inner
    return value


def install_packed_items() -> None:
    """Tables created from now on keep their items packed (process-wide, idempotent)."""
    Table.__init__ = _packed_table_init  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _update_and_store  # type: ignore[method-assign]
    Table.scan = _scan_evaluating_limit  # type: ignore[method-assign]


def uninstall_packed_items() -> None:
    Table.__init__ = _ORIGINAL_TABLE_INIT  # type: ignore[method-assign]
    DynamoDBBackend.update_item = _ORIGINAL_UPDATE_ITEM  # type: ignore[method-assign]
    Table.scan = _ORIGINAL_SCAN  # type: ignore[method-assign]


_ORIGINAL_SCAN = Table.scan
_SCAN_SIGNATURE = inspect.signature(_ORIGINAL_SCAN)


def _scan_evaluating_limit(self: Table, *args: Any, **kwargs: Any) -> Any:
    """moto's scan stops after `Limit` items, but first sorts every item of the table (`all_items`), which on a packed
    table builds each of them from its bytes: the retention sweep (500 items a minute, retention.py) built the whole
    table each time, 0.64 s for 16,000 items. On a packed table (no index, no segments) the keys are sorted instead, in
    moto's order, and only the `Limit` items after the start key are built and handed to moto's scan; the last of them
    is where the next page starts, as moto says it."""
    arguments = _SCAN_SIGNATURE.bind(self, *args, **kwargs).arguments
    limit = arguments.get("limit")
    if (
        not limit
        or arguments.get("index_name")
        or tuple(arguments.get("segments") or (None, None)) != (None, None)
        or not isinstance(self.items, PackedItems | PackedPartitions)
    ):
        return _ORIGINAL_SCAN(self, *args, **kwargs)
    # Sorted by the keys' values (moto compares DynamoTypes by `cast_value`), compared in C rather than through
    # DynamoType's own methods: a scan of 150,000 keys took 0.42 s and takes 0.33 s, the sweep holding the DynamoDB
    # lock meanwhile (docs/benchmarks.md).
    if isinstance(self.items, PackedPartitions):
        keys = sorted(
            ((hash_key, range_key) for hash_key, partition in self.items.items() for range_key in partition),
            key=_key_order,
        )
    else:
        keys = sorted(((hash_key, None) for hash_key in self.items), key=_key_order)
    position = 0
    start = arguments.get("exclusive_start_key")
    if start:
        after = DynamoType(start[self.hash_key_attr])
        ranged = self.range_key_attr is not None
        position = bisect.bisect_right(
            keys, _key_order((after, DynamoType(start[self.range_key_attr]) if ranged else None)), key=_key_order
        )
    window = keys[position : position + limit]
    candidates = [item for item in (self.get_item(h, r) for h, r in window) if item is not None]
    arguments.update(limit=None, exclusive_start_key=None)
    with _all_items_being(self, candidates):
        results, scanned, last = _ORIGINAL_SCAN(**arguments)
    if last is None and candidates and position + limit < len(keys):
        last = self._get_last_evaluated_key(candidates[-1], None)
    return results, scanned, last


def _key_order(key: tuple[DynamoType, DynamoType | None]) -> tuple[Any, Any]:
    hash_key, range_key = key
    return hash_key.cast_value, None if range_key is None else range_key.cast_value


def _packed_table_init(self: Table, *args: Any, **kwargs: Any) -> None:
    _ORIGINAL_TABLE_INIT(self, *args, **kwargs)
    if self.range_key_attr:
        self.items = PackedPartitions()  # type: ignore[assignment]
        return
    indexed = []
    for index in [*self.global_indexes, *self.indexes]:
        hash_keys = [key["AttributeName"] for key in index.schema if key["KeyType"] == "HASH"]
        if len(hash_keys) == 1 and hash_keys[0] not in indexed:
            indexed.append(hash_keys[0])
    self.items = PackedItems(indexed=tuple(indexed))  # type: ignore[assignment]


def _update_and_store(self: DynamoDBBackend, table_name: str, *args: Any, **kwargs: Any) -> Item:
    """moto's update_item changes the item `Table.get_item` gave it in place: a packed table gave a copy, which is
    stored again (an update that fails midway stores nothing, as on DynamoDB)."""
    item = _ORIGINAL_UPDATE_ITEM(self, table_name, *args, **kwargs)
    table = self.get_table(table_name)
    if isinstance(table.items, PackedPartitions):
        table.items[item.hash_key][item.range_key] = item
    elif isinstance(table.items, PackedItems):
        table.items[item.hash_key] = item
    return item


# ---------------------------------------------------------------- writes journaled as they are acknowledged


@dataclass(frozen=True)
class ItemChange:
    """An item as a write left it: `item` in DynamoDB JSON (binary as base64), None when it was deleted. `key` is
    the item's key attributes as sorted JSON, the same for every write of the item."""

    table: str
    key: str
    item: dict[str, Any] | None


@dataclass(frozen=True)
class ObjectChange:
    """An object as a write left it: its bytes, content type and user metadata, or `body` None when deleted."""

    bucket: str
    key: str
    body: bytes | None
    content_type: str = "binary/octet-stream"
    metadata: dict[str, str] = field(default_factory=dict)


class WriteJournal(Protocol):
    def items_written(self, changes: list[ItemChange]) -> None: ...

    def objects_written(self, changes: list[ObjectChange]) -> None: ...


_journal: WriteJournal | None = None
_ORIGINAL_S3_PUT = S3Backend.put_object
_ORIGINAL_S3_DELETE = S3Backend.delete_object
# The (bucket, key) pairs the S3 request being served in this thread wrote: journaled once it has set their metadata.
_s3_written = threading.local()
_USER_METADATA = "x-amz-meta-"


def install_write_journal(journal: WriteJournal) -> None:
    """From here on every acknowledged DynamoDB and S3 write reaches `journal` first (needs the backend locks)."""
    global _journal
    _journal = journal
    S3Backend.put_object = _journaled_put_object  # type: ignore[method-assign]
    S3Backend.delete_object = _journaled_delete_object  # type: ignore[method-assign]


def uninstall_write_journal() -> None:
    global _journal
    S3Backend.put_object = _ORIGINAL_S3_PUT  # type: ignore[method-assign]
    S3Backend.delete_object = _ORIGINAL_S3_DELETE  # type: ignore[method-assign]
    _journal = None


def _items_changed(handler: BaseResponse) -> list[ItemChange]:
    """Every item a successful DynamoDB write request named, as the backend now holds it."""
    body: dict[str, Any] = getattr(handler, "body", None) or {}
    named: list[tuple[str, dict[str, Any]]] = []  # (table, the item or its key)
    match handler._get_action():
        case "PutItem":
            named.append((body["TableName"], body["Item"]))
        case "UpdateItem" | "DeleteItem":
            named.append((body["TableName"], body["Key"]))
        case "BatchWriteItem":
            for table, requests in body["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        named.append((table, request["PutRequest"]["Item"]))
                    elif "DeleteRequest" in request:
                        named.append((table, request["DeleteRequest"]["Key"]))
        case "TransactWriteItems":
            for entry in body["TransactItems"]:
                for kind, op in entry.items():
                    if kind in ("Put", "Update", "Delete"):
                        named.append((op["TableName"], op["Item"] if kind == "Put" else op["Key"]))
        case _:
            return []
    backend: DynamoDBBackend = handler.dynamodb_backend  # type: ignore[attr-defined]
    changes = []
    for table_name, attributes in named:
        table = backend.get_table(table_name)
        key = {name: attributes[name] for name in (table.hash_key_attr, table.range_key_attr) if name}
        item = backend.get_item(table_name, key)
        changes.append(
            ItemChange(
                table_name,
                _json_text({name: DynamoType(value).to_json() for name, value in key.items()}),
                json.loads(_json_text(item.to_json()["Attributes"])) if item is not None else None,
            )
        )
    return changes


def _json_text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=_base64_bytes)


def _base64_bytes(value: Any) -> str:
    if isinstance(value, bytes):  # a binary value nested in a map or list: DynamoDB JSON holds it as base64
        return base64.b64encode(value).decode("ascii")
    raise TypeError(f"{type(value).__name__} is not DynamoDB JSON")


def _journaled_put_object(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> FakeKey:
    key = _ORIGINAL_S3_PUT(self, bucket_name, key_name, *args, **kwargs)
    _note_s3_write(bucket_name, key_name)
    return key


def _journaled_delete_object(self: S3Backend, bucket_name: str, key_name: str, *args: Any, **kwargs: Any) -> Any:
    answer = _ORIGINAL_S3_DELETE(self, bucket_name, key_name, *args, **kwargs)
    _note_s3_write(bucket_name, key_name)
    return answer


def _note_s3_write(bucket: str, key: str) -> None:
    written: dict[tuple[str, str], None] | None = getattr(_s3_written, "keys", None)
    if written is None:
        written = _s3_written.keys = {}
    written[(bucket, key)] = None


def _journal_objects(backend: S3Backend) -> None:
    written: dict[tuple[str, str], None] | None = getattr(_s3_written, "keys", None)
    journal = _journal
    if not written:
        return
    _s3_written.keys = None
    if journal is None:
        return
    changes = []
    for bucket, key in written:
        obj = backend.get_object(bucket, key)
        if obj is None:
            changes.append(ObjectChange(bucket, key, None))
            continue
        metadata = obj.metadata  # case-insensitive: moto keeps its names lowercased
        changes.append(
            ObjectChange(
                bucket,
                key,
                obj.value,
                str(metadata.get("Content-Type") or "binary/octet-stream"),
                {
                    name[len(_USER_METADATA) :]: str(value)
                    for name, value in metadata.items()
                    if name.lower().startswith(_USER_METADATA)
                },
            )
        )
    journal.objects_written(changes)


# ---------------------------------------------------------------- S3 bodies in files rather than in memory

_ORIGINAL_S3_TEMPFILE = s3_models.tempfile
_bodies_folder: Path | None = None


class DiskBody:
    """What FakeKey keeps an object's bytes in, in place of `tempfile.SpooledTemporaryFile`: a file in the data
    folder, opened only for each read or write, removed when moto closes the buffer (the key deleted, replaced or
    collected). FakeKey seeks, reads, writes, truncates and closes its buffer, nothing else."""

    def __init__(self, max_size: int = 0, *_: Any, **__: Any) -> None:
        if _bodies_folder is None:
            raise RuntimeError("install_disk_bodies was not called")
        self._path = _bodies_folder / uuid.uuid4().hex
        self._position = 0
        self._size = 0
        self.closed = False

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._position, os.SEEK_END: self._size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def truncate(self, size: int | None = None) -> int:
        size = self._position if size is None else size
        if size == 0:
            self._path.unlink(missing_ok=True)
        elif size < self._size:
            os.truncate(self._path, size)
        self._size = min(self._size, size)
        return size

    def write(self, data: bytes) -> int:
        if not data:
            return 0
        descriptor = os.open(self._path, os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            view = memoryview(data)
            while view:
                written = os.pwrite(descriptor, view, self._position)
                view = view[written:]
                self._position += written
        finally:
            os.close(descriptor)
        self._size = max(self._size, self._position)
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if self._position >= self._size:
            return b""
        with self._path.open("rb") as body:
            body.seek(self._position)
            data = body.read(size if size >= 0 else -1)
        self._position += len(data)
        return data

    def close(self) -> None:
        self.closed = True
        self._path.unlink(missing_ok=True)


class _DiskTempfile:
    """moto.s3.models' `tempfile`, of which it uses `SpooledTemporaryFile` alone."""

    SpooledTemporaryFile = DiskBody


def install_disk_bodies(folder: Path) -> None:
    """S3 objects created from now on keep their bytes in files under `folder` (process-wide)."""
    global _bodies_folder
    folder.mkdir(parents=True, exist_ok=True)
    _bodies_folder = folder
    s3_models.tempfile = _DiskTempfile  # type: ignore[assignment]


def uninstall_disk_bodies() -> None:
    global _bodies_folder
    s3_models.tempfile = _ORIGINAL_S3_TEMPFILE
    _bodies_folder = None


# ---------------------------------------------------------------- executions that end, and what they leave

ExecutionListener = Callable[[str], None]
_ORIGINAL_TERMINATED = BaseExecutionWorkerCommunication.terminated
_listeners: list[ExecutionListener] = []


def on_execution_end(listener: ExecutionListener) -> None:
    """Call `listener(execution_arn)` on the interpreter's thread each time an execution ends, however it ends
    (succeeded, failed, timed out, stopped)."""
    with _lock:
        _listeners.append(listener)
        BaseExecutionWorkerCommunication.terminated = _terminated  # type: ignore[method-assign]


def remove_execution_listener(listener: ExecutionListener) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)
        if not _listeners:
            BaseExecutionWorkerCommunication.terminated = _ORIGINAL_TERMINATED  # type: ignore[method-assign]


def _terminated(self: BaseExecutionWorkerCommunication) -> None:
    _ORIGINAL_TERMINATED(self)
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        listener(self.execution.exec_arn)


def release_finished_threads() -> int:
    """Forget the interpreter's finished threads (their stacks are freed with them); returns how many."""
    threads = sfn_utils.TMP_THREADS
    # A thread appended but not yet started has no ident: not finished, only early.
    finished = [thread for thread in list(threads) if thread.ident is not None and not thread.is_alive()]
    released = 0
    for thread in finished:
        try:
            thread.join()
        except RuntimeError:  # it has an ident but is not marked started yet: starting, not finished
            continue
        with contextlib.suppress(ValueError):
            threads.remove(thread)
        released += 1
    return released


def forget_ended_executions(keep: int, account_id: str, region: str) -> int:
    """Keep every running execution and the newest `keep` ended ones; returns how many were dropped.

    Step Functions keeps history for 90 days; a process that holds every execution's interpreter state in
    memory cannot, so the embedded stack keeps a window (what the API reads of an ended run is in DynamoDB).
    """
    backend = stepfunctions_parser_backends[account_id][region]
    dropped = 0
    with _service_locks["stepfunctions"]:
        for machine in backend.state_machines:
            # moto types a machine's executions as its older backend's; the parser backend's machines hold its own
            executions = cast(list[Execution], machine.executions)
            ended = [e for e in executions if e.exec_status != ExecutionStatus.RUNNING]
            if len(ended) <= keep:
                continue
            ended.sort(key=lambda e: e.stop_date or e.start_date)
            gone = {id(e) for e in ended[: len(ended) - keep]}
            executions[:] = [e for e in executions if id(e) not in gone]
            dropped += len(gone)
    return dropped


# ---------------------------------------------------------------- model objects moto keeps forever

_ORIGINAL_MODEL_NEW = BaseModel.__dict__["__new__"]


def install_untracked_models() -> None:
    """moto's `BaseModel.__new__` appends every model object it ever makes to its class's `instances_tracked`
    (read only by moto's /moto-api/data dashboard and, for S3 keys, by a reset), so every DynamoDB `Item`
    (a copy per write, its old versions, a transaction's rollback copies), S3 key and SQS message stays in memory
    for the life of the process, stored or not: most of what a run left behind. Objects are made untracked
    instead, and live as long as the backend holds them. Process-wide and idempotent."""
    BaseModel.__new__ = staticmethod(_untracked_new)  # type: ignore[method-assign]


def uninstall_untracked_models() -> None:
    BaseModel.__new__ = _ORIGINAL_MODEL_NEW  # type: ignore[method-assign]


def _untracked_new(cls: type[BaseModel], *args: Any, **kwargs: Any) -> Any:
    return super(BaseModel, cls).__new__(cls)  # what moto's makes, without the append


# ---------------------------------------------------------------- work done once, not per request

_ORIGINAL_LIST_MODULES = moto_backends.list_of_moto_modules
_ORIGINAL_BACKEND_FOR_HOST = DomainDispatcherApplication.get_backend_for_host
_ORIGINAL_PARSE = AmazonStateLanguageParser.__dict__["parse"]


_ORIGINAL_QUERY = Table.query
_QUERY_SIGNATURE = inspect.signature(_ORIGINAL_QUERY)
_ORIGINAL_JSON_PATH_PARSE = sfn_json_path.parse
_ORIGINAL_RESULT_PATH_PARSE = sfn_result_path.parse
_ORIGINAL_JSON_STRUCTURE = JSONSerializer._serialize_type_structure
_ORIGINAL_JSON_MAP = JSONSerializer._serialize_type_map
_ORIGINAL_UPDATE_EXPRESSION_MAKE = UpdateExpressionParser.make
_ORIGINAL_VALIDATOR_INIT = ddb_validators.Validator.__init__
_ORIGINAL_VALIDATE = ddb_validators.Validator.validate
_ORIGINAL_NODES_TO_BE_PROCESSED = DepthFirstTraverser.nodes_to_be_processed
_ORIGINAL_METHOD_NAMES = moto_responses.method_names_from_class
_ORIGINAL_TRAVERSE = DepthFirstTraverser.traverse_node_recursively
_ORIGINAL_CONDITION_PARSE = ConditionExpressionParser.parse
_ORIGINAL_ITEM_DEEPCOPY = Item.__deepcopy__
_ORIGINAL_LAUNCH_WORKER = InlineIterationComponent._launch_worker
_ORIGINAL_TASK_THREAD = sfn_execute_state.Thread
# The interpreter's modules that copy state data (inputs, results, the stack, values picked by a path) with deepcopy.
INTERPRETER_COPYING_MODULES = (
    sfn_states,
    sfn_environment,
    sfn_execute_state,
    sfn_string_expression,
    sfn_result_path,
    sfn_state_map,
    sfn_job,
    sfn_state_task_service,
    sfn_event_manager,
)


def install_caches() -> None:
    """Process-wide and idempotent: route lookups, handler methods, ASL, JSONPath, update and condition expression
    parses remembered, update expressions validated without needless walks, state data copied as JSON, queries by
    partition, DynamoDB attribute values answered as they are stored."""
    modules = tuple(_ORIGINAL_LIST_MODULES())
    moto_backends.list_of_moto_modules = lambda: modules
    for owner, name, _, patch in _cache_patches():
        setattr(owner, name, patch)


def uninstall_caches() -> None:
    moto_backends.list_of_moto_modules = _ORIGINAL_LIST_MODULES
    for owner, name, original, _ in _cache_patches():
        setattr(owner, name, original)


def _cache_patches() -> list[tuple[Any, str, Any, Any]]:
    """Every attribute `install_caches` replaces: (its owner, its name, moto's own, the patch)."""
    return [
        (DomainDispatcherApplication, "get_backend_for_host", _ORIGINAL_BACKEND_FOR_HOST, _backend_for_host),
        (AmazonStateLanguageParser, "parse", _ORIGINAL_PARSE, staticmethod(_parse_once)),
        (Table, "query", _ORIGINAL_QUERY, _query_partition),
        (sfn_json_path, "parse", _ORIGINAL_JSON_PATH_PARSE, _json_path_once),
        (sfn_result_path, "parse", _ORIGINAL_RESULT_PATH_PARSE, _result_path_once),
        (JSONSerializer, "_serialize_type_structure", _ORIGINAL_JSON_STRUCTURE, _serialize_structure),
        (JSONSerializer, "_serialize_type_map", _ORIGINAL_JSON_MAP, _serialize_map),
        (
            UpdateExpressionParser,
            "make",
            classmethod(_ORIGINAL_UPDATE_EXPRESSION_MAKE.__func__),
            classmethod(_update_expression_once),
        ),
        (ddb_validators.Validator, "__init__", _ORIGINAL_VALIDATOR_INIT, _validator_init),
        (ddb_validators.Validator, "validate", _ORIGINAL_VALIDATE, _validate),
        (DepthFirstTraverser, "nodes_to_be_processed", _ORIGINAL_NODES_TO_BE_PROCESSED, _nodes_to_be_processed),
        (DepthFirstTraverser, "traverse_node_recursively", _ORIGINAL_TRAVERSE, _traverse),
        (ConditionExpressionParser, "parse", _ORIGINAL_CONDITION_PARSE, _parse_condition),
        (moto_responses, "method_names_from_class", _ORIGINAL_METHOD_NAMES, _method_names),
        (Item, "__deepcopy__", _ORIGINAL_ITEM_DEEPCOPY, _copy_item),
        (InlineIterationComponent, "_launch_worker", _ORIGINAL_LAUNCH_WORKER, _launch_worker_with_work),
        (sfn_execute_state, "Thread", _ORIGINAL_TASK_THREAD, TaskThread),
        *((module, "copy", copy, _JSON_COPY) for module in INTERPRETER_COPYING_MODULES),
    ]


# jsonpath_ng builds a new yacc parser for every parse; a parsed path holds no data, so one serves all.
@functools.lru_cache(maxsize=1024)
def _json_path_once(path: str) -> Any:
    return _ORIGINAL_JSON_PATH_PARSE(path)


@functools.lru_cache(maxsize=1024)
def _result_path_once(path: str) -> Any:
    return _ORIGINAL_RESULT_PATH_PARSE(path)


# moto tokenizes and parses an UpdateExpression two or three times per write (the request's validation, the
# backend, a transaction's check). The parsed tree is only read: the validator works on its own deep copy.
@functools.lru_cache(maxsize=1024)
def _parsed_update_expression(expression: str) -> Any:
    return _ORIGINAL_UPDATE_EXPRESSION_MAKE(expression)


def _update_expression_once(cls: type, expression: str) -> Any:
    return _parsed_update_expression(expression)


# moto's UpdateExpression validator deep-copies the parsed tree (its processors replace nodes in place), then walks
# the copy once per processor, ten walks per write. The copy is made node by node here, as deepcopy would make it.
# Walks that cannot change the tree or raise for this expression are left out, each for a reason that holds for
# every write with it:
# - the first processors check the expression alone (one SET, ADD or REMOVE clause each; no path twice; no key
#   attribute updated): they depend on the tree, the attribute names and the table's keys, and raise or pass the
#   same way every time, so a tree that passed them with the same names and keys skips them (two of them searched
#   the whole tree again at every clause node: most of a write's cost);
# - the function evaluator works on if_not_exists and list_append, which a tree without functions lacks;
# - the check for paths missing from the item looks at what resolving the values' paths left; a tree whose
#   values hold no path (nor function) leaves nothing to look at;
# - the checks of SET against the table's key attributes (type, empty value) compare the first name of each SET
#   path with the table's attributes; when none of those names is one, neither can raise.
_EXPRESSION_ONLY = (
    ddb_validators.ActionCountValidator,
    ddb_validators.OverlappingPathsValidator,
    ddb_validators.UpdateHashRangeKeyValidator,
)
_ACTIONS = (
    UpdateExpressionSetAction,
    UpdateExpressionAddAction,
    UpdateExpressionRemoveAction,
    UpdateExpressionDeleteAction,
)


@dataclass
class _ExpressionFacts:
    has_function: bool
    has_value_path: bool
    set_names: frozenset[str] | None  # None: a SET path of a shape the facts do not cover
    passed: set[tuple[Any, ...]] = field(default_factory=set)


_expression_facts: weakref.WeakKeyDictionary[Node, _ExpressionFacts] = weakref.WeakKeyDictionary()


def _facts_of(expression: Node) -> _ExpressionFacts:
    facts = _expression_facts.get(expression)
    if facts is None:
        facts = _expression_facts[expression] = _read_facts(expression)
    return facts


def _read_facts(expression: Node) -> _ExpressionFacts:
    has_function = has_value_path = False
    set_names: set[str] | None = set()
    pending: list[tuple[Any, Any, int]] = [(expression, None, -1)]
    while pending:
        node, parent, index = pending.pop()
        if not isinstance(node, Node):
            continue
        if isinstance(node, UpdateExpressionFunction):
            has_function = True
        elif isinstance(node, UpdateExpressionPath) and not (isinstance(parent, _ACTIONS) and index == 0):
            has_value_path = True
        if isinstance(node, UpdateExpressionSetAction) and set_names is not None:
            try:
                name = node.children[0].children[0].children[0]
            except (AttributeError, IndexError, TypeError):
                name = None
            if isinstance(name, str):
                set_names.add(name)
            else:
                set_names = None
        pending.extend((child, node, i) for i, child in enumerate(node.children or ()))
    return _ExpressionFacts(has_function, has_value_path, frozenset(set_names) if set_names is not None else None)


def _needless(processor: DepthFirstTraverser, facts: _ExpressionFacts) -> bool:
    kind = type(processor)
    if kind is ddb_validators.UpdateExpressionFunctionEvaluator:
        return not facts.has_function
    if kind is ddb_validators.NoneExistingPathChecker:
        return not facts.has_function and not facts.has_value_path
    if kind is ddb_validators.TypeMismatchValidator and facts.set_names is not None:
        return facts.set_names.isdisjoint(d["AttributeName"] for d in processor.key_attributes_type)
    if kind is ddb_validators.EmptyStringKeyValueValidator and facts.set_names is not None:
        return facts.set_names.isdisjoint(processor.key_attributes)
    return False


def _validator_init(
    self: ddb_validators.Validator,
    expression: Node,
    expression_attribute_names: dict[str, str],
    expression_attribute_values: dict[str, dict[str, Any]],
    item: Any,
    table: Table,
) -> None:
    self.expression_attribute_names = expression_attribute_names
    self.expression_attribute_values = expression_attribute_values
    self.item = item
    self.table = table
    self.processors = self.get_ast_processors()
    self.node_to_validate = _copy_tree(expression)
    self._expression = expression  # type: ignore[attr-defined]


def _validate(self: ddb_validators.Validator) -> Node:
    expression = getattr(self, "_expression", None)
    if type(self) is not ddb_validators.UpdateExpressionValidator or expression is None:
        return _ORIGINAL_VALIDATE(self)
    facts = _facts_of(expression)
    names = self.expression_attribute_names
    key = (tuple(names.items()) if names else (), tuple(self.table.table_key_attrs))
    processors = self.processors
    leading = 0
    while leading < len(processors) and type(processors[leading]) in _EXPRESSION_ONLY:
        leading += 1
    node = self.node_to_validate
    if key not in facts.passed:
        for processor in processors[:leading]:
            node = processor.traverse(node)
        facts.passed.add(key)
    for processor in processors[leading:]:
        if not _needless(processor, facts):
            node = processor.traverse(node)
    return node


def _copy_tree(expression: Any) -> Any:
    """What `copy.deepcopy` makes of a parsed expression, without its generic per-object protocol: every node
    copied with its attributes, leaves (text, numbers) shared as deepcopy shares them. Anything else (a node with
    other attributes, a parent outside the tree) goes to deepcopy."""
    if not isinstance(expression, Node) or expression.parent is not None:
        return copy.deepcopy(expression)
    copies: dict[int, Node] = {}
    try:
        return _copy_node(expression, None, copies)
    except _NotPlain:
        return copy.deepcopy(expression)


class _NotPlain(Exception):
    pass


_NODE_ATTRIBUTES = frozenset({"type", "children", "parent"})
_LEAVES = frozenset({str, int, float, bool, type(None)})


def _copy_node(node: Node, parent: Node | None, copies: dict[int, Node]) -> Node:
    attributes = node.__dict__
    if attributes.keys() != _NODE_ATTRIBUTES or id(node) in copies:
        raise _NotPlain
    copied = object.__new__(type(node))
    copies[id(node)] = copied
    children = attributes["children"]
    copied.__dict__ = {"type": attributes["type"], "children": children, "parent": parent}
    if children is not None:
        copied_children = []
        for child in children:
            kind = type(child)
            if kind in _LEAVES:
                copied_children.append(child)
            elif _is_node_type(kind) and child.parent is node:
                copied_children.append(_copy_node(child, copied, copies))
            else:
                raise _NotPlain
        copied.__dict__["children"] = copied_children
    return copied


_processed_kinds: dict[type, tuple[type, ...]] = {}


def _nodes_to_be_processed(self: DepthFirstTraverser) -> tuple[type, ...]:
    # moto builds a processor's map of node kinds (bound methods and all) again at every node it visits; the kinds
    # are the keys of a literal in each processor class.
    kinds = _processed_kinds.get(type(self))
    if kinds is None:
        kinds = _processed_kinds[type(self)] = _ORIGINAL_NODES_TO_BE_PROCESSED(self)
    return kinds


# Whether an object of a type is a Node, and whether a processor processes nodes of a type: moto asks with
# isinstance on abstract classes (a Python-level check each time) at every node of every walk. No class is
# registered as a virtual subclass of these, so the answer is one per type.
_node_types: dict[type, bool] = {}
_processed_types: dict[tuple[type, type], bool] = {}


def _is_node_type(kind: type) -> bool:
    is_node = _node_types.get(kind)
    if is_node is None:
        is_node = _node_types[kind] = issubclass(kind, Node)
    return is_node


def _traverse(self: DepthFirstTraverser, node: Any, child_id: int = -1) -> Any:
    """moto's `DepthFirstTraverser.traverse_node_recursively`, with its type checks answered once per type."""
    kind = type(node)
    if _is_node_type(kind):
        parent_node = node.parent
        if node.children is not None:
            for i, child_node in enumerate(node.children):
                self.pre_processing_of_child(node, i)
                self.traverse_node_recursively(child_node, i)
        processed = _processed_types.get((type(self), kind))
        if processed is None:
            processed = _processed_types[(type(self), kind)] = isinstance(node, self.nodes_to_be_processed())
        if processed:
            node = self.process(node)
            node.parent = parent_node
            if parent_node:
                parent_node.children[child_id] = node
    return node


# A conditional write's ConditionExpression is parsed two or three times in one request (the request's
# validation, a transaction's check, the write), and the same conditions come back request after request. A parse
# depends on the expression, the attribute names and the values it names (a value's placeholder is in its text),
# so it is remembered under those; its result, which evaluation only reads, is shared. No names or values at all
# (None, or an empty dict moto makes up) are the same to an expression that parsed without them.
_CONDITION_PARSES = 1024
_condition_parses: dict[tuple[Any, ...], tuple[Any, ...]] = {}


def _parse_condition(self: ConditionExpressionParser) -> Any:
    expression: Any = self.condition_expression  # text, or what the except below hands to moto's own parse
    names, values = self.expression_attribute_names, self.expression_attribute_values
    try:
        key = (
            expression,
            tuple(names.items()) if names else (),
            tuple((name, repr(value)) for name, value in values.items() if name in expression) if values else (),
        )
        parsed = _condition_parses.get(key)
    except (AttributeError, TypeError):  # not text, or not dicts: moto's own parse says what it makes of them
        return _ORIGINAL_CONDITION_PARSE(self)
    if parsed is not None:
        op, names_found, values_found = parsed
        self.expr_attr_names_found.extend(names_found)
        self.expr_attr_values_found.extend(values_found)
        return op
    op = _ORIGINAL_CONDITION_PARSE(self)
    while len(_condition_parses) >= _CONDITION_PARSES:
        with contextlib.suppress(StopIteration, KeyError, RuntimeError):
            del _condition_parses[next(iter(_condition_parses))]
    _condition_parses[key] = (op, tuple(self.expr_attr_names_found), tuple(self.expr_attr_values_found))
    return op


def copy_json(value: Any) -> Any:
    """What `copy.deepcopy` makes of JSON-shaped data (dicts with text keys, lists, text, numbers, booleans,
    None), built directly: moto's interpreter copies every state's input, result and picked values this way, and
    deepcopy's generic protocol was most of that cost. Anything else, and data holding one container twice (which
    deepcopy copies once), goes to deepcopy."""
    kind = type(value)
    if kind in _JSON_ATOMS:
        return value
    if kind is dict or kind is list:
        try:
            return _copy_container(value, set())
        except _NotPlain:
            pass
    elif _is_plain_class(kind):
        attributes = getattr(value, "__dict__", None)
        if attributes is not None and all(type(v) in _JSON_ATOMS for v in attributes.values()):
            # An object of a class without copy customisations, holding only text, numbers and the like (the
            # interpreter's program state): deepcopy makes a new one with the same attributes.
            copied = object.__new__(kind)
            copied.__dict__.update(attributes)
            return copied
    return copy.deepcopy(value)


_JSON_ATOMS = frozenset({str, int, float, bool, type(None)})
_plain_classes: dict[type, bool] = {}


def _is_plain_class(kind: type[object]) -> bool:
    plain = _plain_classes.get(kind)
    if plain is None:
        plain = _plain_classes[kind] = (
            kind.__new__ is object.__new__
            and kind.__reduce_ex__ is object.__reduce_ex__
            and kind.__reduce__ is object.__reduce__
            and kind.__getstate__ is object.__getstate__
            and not hasattr(kind, "__deepcopy__")
            and not hasattr(kind, "__setstate__")
            and kind not in copyreg.dispatch_table
            and not any(vars(base).get("__slots__") for base in kind.__mro__)  # abc.ABC's are empty
        )
    return plain


def _copy_container(value: Any, seen: set[int]) -> Any:
    if id(value) in seen:
        raise _NotPlain
    seen.add(id(value))
    if type(value) is dict:
        copied: dict[str, Any] = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            kind = type(item)
            if kind in _JSON_ATOMS:
                copied[key] = item
            elif kind is dict or kind is list:
                copied[key] = _copy_container(item, seen)
            else:
                raise _NotPlain
        return copied
    items = []
    for item in value:
        kind = type(item)
        if kind in _JSON_ATOMS:
            items.append(item)
        elif kind is dict or kind is list:
            items.append(_copy_container(item, seen))
        else:
            raise _NotPlain
    return items


class _JsonCopy:
    """The `copy` module as the interpreter's modules see it once patched: `deepcopy` is `copy_json`."""

    @staticmethod
    def deepcopy(value: Any, memo: Any = None) -> Any:
        return copy.deepcopy(value, memo) if memo is not None else copy_json(value)

    def __getattr__(self, name: str) -> Any:
        return getattr(copy, name)


_JSON_COPY = _JsonCopy()


# An inline Map starts MaxConcurrency workers (a thread and an environment frame each) whatever its number of
# items: 40 for a canvas of three blocks, twice (one Map for the blocks without inputs, one for the others). A
# worker takes items until none is left; one started when every item is taken ends at once, so the workers past
# the number of items are not started. Items are taken and run as before: at most MaxConcurrency at once.
_workers_started: weakref.WeakKeyDictionary[JobPool, int] = weakref.WeakKeyDictionary()


def _launch_worker_with_work(self: InlineIterationComponent, env: Any, eval_input: Any, job_pool: JobPool) -> Any:
    inline = isinstance(eval_input, InlineIterationComponentEvalInput)
    if inline and not isinstance(eval_input, DistributedIterationComponentEvalInput):
        started = _workers_started.get(job_pool, 0)
        if started >= len(eval_input.input_items):
            return None
        _workers_started[job_pool] = started + 1
    return _ORIGINAL_LAUNCH_WORKER(self, env=env, eval_input=eval_input, job_pool=job_pool)


# Every Task state runs its work on a thread of its own (`ExecutionState._evaluate_with_timeout`), so that the state
# can time out while the work goes on: a new thread per task, two per block, each start a round trip between two
# threads for the interpreter lock. The work runs on a thread kept from an earlier task instead, as Lambda runs
# every invocation of an environment on one thread; one idle for IDLE_TASK_THREAD_SECONDS ends.
IDLE_TASK_THREAD_SECONDS = 1.0


class TaskThread:
    """What `_evaluate_with_timeout` uses of `threading.Thread` (a target, `start`), and what `TMP_THREADS`' readers
    use (`ident`, `is_alive`, `join`), with the target run by an idle task thread, or a new one when none is."""

    _idle: list[_TaskRunner] = []
    _lock = threading.Lock()

    def __init__(self, target: Callable[[], None], daemon: bool | None = None, name: str | None = None):
        self._target = target
        self._done = threading.Event()
        self.ident: int | None = None

    def start(self) -> None:
        with TaskThread._lock:
            runner = TaskThread._idle.pop() if TaskThread._idle else None
        if runner is None:
            runner = _TaskRunner()
        self.ident = runner.ident
        runner.run(self)

    def is_alive(self) -> bool:
        return self.ident is not None and not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        if self.ident is None:
            raise RuntimeError("cannot join thread before it is started")
        self._done.wait(timeout)

    def _run(self) -> None:
        try:
            self._target()
        finally:
            self._done.set()


class _TaskRunner:
    """One thread that runs the targets of task states, one at a time, and ends once idle long enough."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[TaskThread] = queue.SimpleQueue()
        thread = threading.Thread(target=self._serve, name="sfn-task", daemon=True)
        thread.start()
        self.ident = thread.ident

    def run(self, task: TaskThread) -> None:
        self._work.put(task)

    def _serve(self) -> None:
        while True:
            try:
                task = self._work.get(timeout=IDLE_TASK_THREAD_SECONDS)
            except queue.Empty:
                with TaskThread._lock:
                    if self in TaskThread._idle:
                        TaskThread._idle.remove(self)
                        return
                task = self._work.get()  # taken from the idle list just now: its task is on the way
            task._run()
            with TaskThread._lock:
                TaskThread._idle.append(self)


def _copy_item(self: Item, memo: dict[int, Any]) -> Item:
    """moto's `Item.__deepcopy__` (a write copies the item it changes once or twice), with each value copied as
    moto's `DynamoType.__deepcopy__` copies it but without going through `copy.deepcopy` for every one of them."""
    if id(self) in memo:
        return memo[id(self)]  # type: ignore[no-any-return]
    result = cast(Item, self.__class__.__new__(self.__class__))  # moto's BaseModel.__new__ says BaseModel
    memo[id(self)] = result
    result.hash_key = _copy_value(self.hash_key, memo)
    result.range_key = _copy_value(self.range_key, memo)
    attributes = LimitedSizeDict.__new__(LimitedSizeDict)
    dict.__init__(attributes)
    for key, value in self.attrs.items():
        dict.__setitem__(attributes, key, _copy_value(value, memo))
    result.attrs = attributes
    return result


_SETS = frozenset({DDBType.STRING_SET, DDBType.NUMBER_SET, DDBType.BINARY_SET})


def _copy_value(value: Any, memo: dict[int, Any]) -> Any:
    if type(value) is not DynamoType:
        return copy.deepcopy(value, memo)
    copied = memo.get(id(value))
    if copied is not None:
        return copied
    copied = DynamoType.__new__(DynamoType)
    memo[id(value)] = copied
    kind, inner = value.type, value.value
    copied.type = kind
    if kind == DDBType.LIST:
        copied.value = [_copy_value(v, memo) for v in inner]
    elif kind == DDBType.MAP:
        copied.value = {k: _copy_value(v, memo) for k, v in inner.items()}
    elif kind in _SETS:
        copied.value = list(inner)
    else:
        copied.value = inner
    return copied


# moto lists the methods of a request's handler class (inspect.getmembers) on every request to find the action.
@functools.lru_cache(maxsize=256)
def _method_names(clazz: object) -> list[str]:
    return _ORIGINAL_METHOD_NAMES(clazz)


_ATTRIBUTE_VALUE = "AttributeValue"
_STRINGS = ("S", "N")
_STRING_LISTS = ("SS", "NS")
_BOOLEANS = ("NULL", "BOOL")
_ATTRIBUTE_TYPES = frozenset({*_STRINGS, *_STRING_LISTS, *_BOOLEANS, "B", "BS", "M", "L"})


def _serialize_structure(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    # moto serializes DynamoDB's attribute values member by member against the service model, which is most of
    # the cost of answering a read or a write that returns an item; they are stored in the wire form already.
    if key and shape.name == _ATTRIBUTE_VALUE and self.service_model.service_name == "dynamodb":
        plain = _attribute_value(self, value)
        if plain is not None:
            serialized[self.get_serialized_name(shape, key)] = plain
            return
    _ORIGINAL_JSON_STRUCTURE(self, serialized, value, shape, key)


def _serialize_map(self: JSONSerializer, serialized: Any, value: Any, shape: Any, key: str) -> None:
    # An item is a map of attribute values: each is answered as stored (see above) without going through moto's
    # serializer per entry; a map holding anything else goes to moto's serializer whole.
    value_shape = shape.value
    is_item = value_shape.name == _ATTRIBUTE_VALUE and self.service_model.service_name == "dynamodb"
    if is_item and isinstance(value, dict):
        entries = {}
        for name, entry in value.items():
            plain = _attribute_value(self, entry) if name else None  # moto's serializer treats "" its own way
            if plain is None:
                break
            entries[self.get_serialized_name(value_shape, name)] = plain
        else:
            self._default_serialize(serialized, entries, shape, key)
            return
    _ORIGINAL_JSON_MAP(self, serialized, value, shape, key)


def _attribute_value(serializer: JSONSerializer, value: Any) -> dict[str, Any] | None:
    """What moto's serializer makes of one stored attribute value, or None for anything it would read otherwise."""
    if not isinstance(value, dict) or not value.keys() <= _ATTRIBUTE_TYPES:
        return None
    plain: dict[str, Any] = {}
    for kind, member in value.items():
        if member is None:
            continue
        if kind in _STRINGS:
            plain[kind] = member if isinstance(member, str) else str(member)
        elif kind in _STRING_LISTS:
            plain[kind] = [m if isinstance(m, str) else str(m) for m in member]
        elif kind in _BOOLEANS:
            plain[kind] = member in (True, "True", "true")
        elif kind == "B":
            plain[kind] = serializer._base64(member)
        elif kind == "BS":
            plain[kind] = [serializer._base64(m) for m in member]
        elif kind == "M":
            if not isinstance(member, dict):
                return None
            entries = {}
            for name, entry in member.items():
                converted = _attribute_value(serializer, entry)
                if converted is None:
                    return None
                entries[name] = converted
            plain[kind] = entries
        else:  # "L"
            items = [_attribute_value(serializer, entry) for entry in member]
            if any(item is None for item in items):
                return None
            plain[kind] = items
    # moto emits the members in the order of the service model's shape.
    return {kind: plain[kind] for kind in _MEMBER_ORDER if kind in plain}


_MEMBER_ORDER = ("S", "N", "B", "SS", "NS", "BS", "M", "L", "NULL", "BOOL")


def _query_partition(self: Table, *args: Any, **kwargs: Any) -> Any:
    arguments = _QUERY_SIGNATURE.bind(self, *args, **kwargs).arguments
    hash_key = arguments.get("hash_key")
    if arguments.get("index_name"):
        return _query_index(self, arguments, *args, **kwargs)
    if not self.range_key_attr or hash_key is None:
        return _ORIGINAL_QUERY(self, *args, **kwargs)
    # moto's query filters `all_items()` by hash key; for one call, that is this partition.
    with _service_locks["dynamodb"]:
        partition = self.items.get(hash_key)  # .get: `items` is a defaultdict
        with _all_items_being(self, list(partition.values()) if partition else []):
            return _ORIGINAL_QUERY(self, *args, **kwargs)


def _query_index(self: Table, arguments: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """moto's query of an index filters `all_items()`, every item of the table built from its bytes (a quarter of a
    second for 10,000 runs, under the DynamoDB lock); a packed table knows which items hold the index's hash key
    value, and only those are handed to moto's query, which filters, sorts and pages them as before."""
    conditions = arguments.get("hash_key_conditions") or []
    if not isinstance(self.items, PackedItems) or len(conditions) != 1:
        return _ORIGINAL_QUERY(self, *args, **kwargs)
    name, value = conditions[0]
    with _service_locks["dynamodb"]:
        candidates = self.items.indexed(name, value)
        if candidates is None:
            return _ORIGINAL_QUERY(self, *args, **kwargs)
        with _all_items_being(self, candidates):
            return _ORIGINAL_QUERY(self, *args, **kwargs)


@contextmanager
def _all_items_being(table: Table, candidates: list[Item]) -> Iterator[None]:
    """For one call of moto's query or scan, `table.all_items()` answers `candidates`. The DynamoDB lock (reentrant:
    a request holds it already when the locks are installed) keeps the instance attribute from any other thread."""
    with _service_locks["dynamodb"]:
        table.all_items = lambda: candidates  # type: ignore[method-assign]
        try:
            yield
        finally:
            del table.all_items


_backends_by_host: dict[str | None, Any] = {}


def _backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    if host not in _backends_by_host:
        _backends_by_host[host] = _ORIGINAL_BACKEND_FOR_HOST(self, host)
    return _backends_by_host[host]


@functools.lru_cache(maxsize=32)
def _parse_once(definition: str) -> Any:
    return _ORIGINAL_PARSE.__func__(definition)
