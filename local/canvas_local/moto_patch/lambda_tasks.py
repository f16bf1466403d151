"""Correctness: Lambda tasks run the template's handlers in this process.

moto's Step Functions interpreter invokes Lambda tasks through boto3 against moto's own Lambda, which runs code in
Docker. The one function every Lambda Task form goes through (`arn:aws:lambda:...`, `arn:aws:states:::lambda:invoke`
and its `.waitForTaskToken`), `lambda_eval_utils._invoke_lambda_function`, is replaced so that tasks run the
stack's handlers in this process, with faults injected when asked (canvas_local.faults)."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

from canvas_local.lambda_runtime import LocalFunction, Throttled, function_name_of

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
