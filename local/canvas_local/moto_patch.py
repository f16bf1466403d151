"""Everything the embedded stack does to moto beyond its public API, in one place.

moto's Step Functions interpreter invokes Lambda tasks through boto3 against moto's own Lambda, which runs
code in Docker. We replace the one function every Lambda Task form goes through (`arn:aws:lambda:...`,
`arn:aws:states:::lambda:invoke` and its `.waitForTaskToken`) so that tasks run our handlers in this
process. tests/unit/test_moto_patch.py fails when a moto upgrade moves or reshapes that seam.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from botocore.exceptions import ClientError
from moto.stepfunctions.parser.asl.component.state.exec.state_task import lambda_eval_utils

from canvas_local.lambda_runtime import LocalFunction, function_name_of

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
    invocation = function.invoke(_parse_payload(parameters.get("Payload")))
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
    # Shaped like boto3's error so moto reports `Lambda.ResourceNotFoundException`, as AWS would.
    message = f"Function not found: {function_name}"
    return ClientError(
        {
            "Error": {"Code": "ResourceNotFoundException", "Message": message},
            "ResponseMetadata": {"HTTPStatusCode": 404, "RequestId": str(uuid.uuid4())},
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
    response = httpx.post(f"{endpoint_url}/moto-api/{action}", json=body, timeout=10)
    response.raise_for_status()
