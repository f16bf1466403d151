"""Everything the embedded stack does to moto beyond its public API, in one place.

moto's Step Functions interpreter invokes Lambda tasks through boto3 against moto's own Lambda, which runs
code in Docker. We replace the one function every Lambda Task form goes through (`arn:aws:lambda:...`,
`arn:aws:states:::lambda:invoke` and its `.waitForTaskToken`) so that tasks run our handlers in this
process.

moto's TransactWriteItems copies every table it touches before writing, to roll back on failure: its cost
grows with everything stored, so a long-lived local stack slows down run after run. We replace it with the
same semantics (all conditions hold, or nothing is written) that checks every condition first and keeps
only the touched items for the rollback.

moto's backends are plain dicts and lists that its server's threads, its interpreter's threads and our
handlers touch at once ("dictionary changed size during iteration"). Every request to DynamoDB, S3 and Step
Functions is served under that service's lock, serialisation of the answer included; SQS and EventBridge share
one (EventBridge writes to SQS's backend itself).

moto's interpreter keeps every thread it ever starts in `TMP_THREADS` and every execution (with its whole
interpreter state) in its state machine. On Python 3.13 a finished thread whose object is still referenced
keeps its stack mapped, so a long-lived stack ran out of address space; we drop finished threads and all but
the newest ended executions, once each ending has been delivered. The ending itself is reported by a hook on
the interpreter's one "terminated" callback, so nothing has to poll.

Costs moto pays on every request or execution are paid once instead: its server lists moto's own package
folders and tries every service's URL pattern to route each request (under one lock for all requests), its
interpreter parses the ASL definition with ANTLR for every execution (the parsed program holds no
execution state: that lives in each execution's environment) and builds a new JSONPath parser for every path it
evaluates, its DynamoDB writes tokenize and parse the same UpdateExpression two or three times each, and its
DynamoDB answers walk every attribute value of every item against the service model (they are stored in the
wire form already, so they are copied as they are). A DynamoDB query on a table's own key reads
only its partition, where moto sorts every item of the table, so a stack that has stored many runs stays
as fast as a new one.

tests/unit/test_moto_patch.py fails when a moto upgrade moves or reshapes any of these seams.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import json
import threading
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError
from moto import backends as moto_backends
from moto.core.responses import BaseResponse
from moto.core.serialize import JSONSerializer
from moto.dynamodb.comparisons import get_filter_expression
from moto.dynamodb.exceptions import (
    MultipleTransactionsException,
    TooManyTransactionsException,
    TransactionCanceledException,
    TransactWriteSingleOpException,
)
from moto.dynamodb.models import DynamoDBBackend
from moto.dynamodb.models.table import Table
from moto.dynamodb.parsing.expressions import UpdateExpressionParser
from moto.moto_server.werkzeug_app import DomainDispatcherApplication
from moto.s3.responses import S3Response
from moto.stepfunctions.parser import utils as sfn_utils
from moto.stepfunctions.parser.api import ExecutionStatus
from moto.stepfunctions.parser.asl.component.common.path import result_path as sfn_result_path
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils
from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser
from moto.stepfunctions.parser.asl.utils import json_path as sfn_json_path
from moto.stepfunctions.parser.backend.execution import BaseExecutionWorkerCommunication, Execution
from moto.stepfunctions.parser.models import stepfunctions_parser_backends

from canvas_local import priority
from canvas_local.lambda_runtime import LocalFunction, Throttled, function_name_of
from canvas_local.priority import PriorityLock

SEAM_NAME = "_invoke_lambda_function"

FunctionResolver = Callable[[str], LocalFunction | None]

_ORIGINAL_SEAM = getattr(lambda_eval_utils, SEAM_NAME)
_lock = threading.Lock()
_resolvers: list[FunctionResolver] = []


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


def _invoke_in_process(parameters: dict, region: str, state_credentials: Any) -> dict:
    """Same contract as the seam it replaces: an Invoke response with `Payload` already parsed."""
    name = function_name_of(parameters["FunctionName"])
    function = _resolve(name)
    if function is None:
        raise _function_not_found(parameters["FunctionName"])
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


def enable_state_machine_execution(endpoint_url: str) -> None:
    """Make moto's server run executions through its ASL interpreter (moto's documented server config).

    The setting is process-wide (moto.core.config.default_user_config), so it also reaches `mock_aws`.
    """
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": True}})


def disable_state_machine_execution(endpoint_url: str) -> None:
    _moto_api(endpoint_url, "config", {"stepfunctions": {"execute_state_machine": False}})


def reset_backends(endpoint_url: str) -> None:
    """Forget every resource: moto's backends are process-wide, shared by each server started here."""
    _moto_api(endpoint_url, "reset", None)


def _moto_api(endpoint_url: str, action: str, body: dict | None) -> None:
    request = urllib.request.Request(
        f"{endpoint_url}/moto-api/{action}",
        data=json.dumps(body).encode("utf-8"),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:  # raises on a status other than 2xx
        response.read()


# ---------------------------------------------------------------- DynamoDB transactions

_ORIGINAL_TRANSACT = DynamoDBBackend.transact_write_items


def install_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _transact_write_items


def uninstall_item_level_transactions() -> None:
    DynamoDBBackend.transact_write_items = _ORIGINAL_TRANSACT


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
        return _ORIGINAL_CALL_ACTION(self)


def _locked_s3(original: Callable[..., Any]) -> Callable[..., Any]:
    def locked(self: S3Response, request: Any, *args: Any, **kwargs: Any) -> Any:
        with _service_locks["s3"].held(_is_priority(getattr(request, "headers", None))):
            return original(self, request, *args, **kwargs)

    locked.__wrapped__ = original  # type: ignore[attr-defined]
    return locked


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
            executions: list[Execution] = machine.executions
            ended = [e for e in executions if e.exec_status != ExecutionStatus.RUNNING]
            if len(ended) <= keep:
                continue
            ended.sort(key=lambda e: e.stop_date or e.start_date)
            gone = {id(e) for e in ended[: len(ended) - keep]}
            executions[:] = [e for e in executions if id(e) not in gone]
            dropped += len(gone)
    return dropped


# ---------------------------------------------------------------- work done once, not per request

_ORIGINAL_LIST_MODULES = moto_backends.list_of_moto_modules
_ORIGINAL_BACKEND_FOR_HOST = DomainDispatcherApplication.get_backend_for_host
_ORIGINAL_PARSE = AmazonStateLanguageParser.__dict__["parse"]


_ORIGINAL_QUERY = Table.query
_QUERY_SIGNATURE = inspect.signature(_ORIGINAL_QUERY)
_ORIGINAL_JSON_PATH_PARSE = sfn_json_path.parse
_ORIGINAL_RESULT_PATH_PARSE = sfn_result_path.parse
_ORIGINAL_JSON_STRUCTURE = JSONSerializer._serialize_type_structure
_ORIGINAL_UPDATE_EXPRESSION_MAKE = UpdateExpressionParser.make


def install_caches() -> None:
    """Process-wide and idempotent: route lookups, ASL parses and JSONPath parses remembered, queries by
    partition, DynamoDB attribute values answered as they are stored."""
    modules = tuple(_ORIGINAL_LIST_MODULES())
    moto_backends.list_of_moto_modules = lambda: modules
    DomainDispatcherApplication.get_backend_for_host = _backend_for_host  # type: ignore[method-assign]
    AmazonStateLanguageParser.parse = staticmethod(_parse_once)  # type: ignore[method-assign]
    Table.query = _query_partition  # type: ignore[method-assign]
    sfn_json_path.parse = _json_path_once
    sfn_result_path.parse = _result_path_once
    JSONSerializer._serialize_type_structure = _serialize_structure  # type: ignore[method-assign]
    UpdateExpressionParser.make = classmethod(_update_expression_once)  # type: ignore[method-assign]


def uninstall_caches() -> None:
    moto_backends.list_of_moto_modules = _ORIGINAL_LIST_MODULES
    DomainDispatcherApplication.get_backend_for_host = _ORIGINAL_BACKEND_FOR_HOST  # type: ignore[method-assign]
    AmazonStateLanguageParser.parse = _ORIGINAL_PARSE  # type: ignore[method-assign]
    Table.query = _ORIGINAL_QUERY  # type: ignore[method-assign]
    sfn_json_path.parse = _ORIGINAL_JSON_PATH_PARSE
    sfn_result_path.parse = _ORIGINAL_RESULT_PATH_PARSE
    JSONSerializer._serialize_type_structure = _ORIGINAL_JSON_STRUCTURE  # type: ignore[method-assign]
    UpdateExpressionParser.make = classmethod(_ORIGINAL_UPDATE_EXPRESSION_MAKE.__func__)  # type: ignore[method-assign]


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
    if arguments.get("index_name") or not self.range_key_attr or hash_key is None:
        return _ORIGINAL_QUERY(self, *args, **kwargs)
    # moto's query filters `all_items()` by hash key; for one call, that is this partition. The DynamoDB lock
    # (reentrant: a request holds it already when the locks are installed) keeps the instance attribute from
    # any other thread.
    with _service_locks["dynamodb"]:
        partition = self.items.get(hash_key)  # .get: `items` is a defaultdict
        candidates = list(partition.values()) if partition else []
        self.all_items = lambda: candidates  # type: ignore[method-assign]
        try:
            return _ORIGINAL_QUERY(self, *args, **kwargs)
        finally:
            del self.all_items


_backends_by_host: dict[str | None, Any] = {}


def _backend_for_host(self: DomainDispatcherApplication, host: str | None) -> Any:
    if host not in _backends_by_host:
        _backends_by_host[host] = _ORIGINAL_BACKEND_FOR_HOST(self, host)
    return _backends_by_host[host]


@functools.lru_cache(maxsize=32)
def _parse_once(definition: str) -> Any:
    return _ORIGINAL_PARSE.__func__(definition)
