"""What the Lambda runtime does around a handler, done in-process: a context object, lazy loading,
JSON marshalling and the error payload (`errorType`, `errorMessage`, `stackTrace`) of an invocation."""

from __future__ import annotations

import json
import logging
import threading
import time
import traceback
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

REGION = "us-east-1"
# moto's default account: every ARN moto mints uses it, so ours do too.
ACCOUNT_ID = "123456789012"

Handler = Callable[[Any, Any], Any]

LOG = logging.getLogger(__name__)


def function_arn(name: str, region: str = REGION, account_id: str = ACCOUNT_ID) -> str:
    return f"arn:aws:lambda:{region}:{account_id}:function:{name}"


def function_name_of(name_or_arn: str) -> str:
    """The bare name from any form Lambda accepts: name, `name:qualifier`, partial or full ARN."""
    parts = name_or_arn.split(":")
    if "function" in parts:
        return parts[parts.index("function") + 1]
    return parts[0]


@dataclass
class LambdaContext:
    """The attributes and method of the Lambda runtime's context object that handlers and Powertools use."""

    function_name: str
    invoked_function_arn: str
    memory_limit_in_mb: int
    timeout_seconds: int
    function_version: str = "$LATEST"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    log_group_name: str = ""
    log_stream_name: str = ""
    _deadline: float = 0.0

    def __post_init__(self) -> None:
        self.log_group_name = self.log_group_name or f"/aws/lambda/{self.function_name}"
        self.log_stream_name = self.log_stream_name or f"local/[$LATEST]{uuid.uuid4().hex}"
        self._deadline = time.monotonic() + self.timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


@dataclass
class Invocation:
    """What Lambda's Invoke answers: the payload, and `function_error` ("Unhandled") when the handler raised."""

    payload: Any
    function_error: str | None = None


class LocalFunction:
    """One function run in this process; its handler is loaded on first use so startup stays fast."""

    def __init__(
        self,
        name: str,
        load: Callable[[], Handler],
        timeout_seconds: int = 3,
        memory_mb: int = 128,
    ):
        self.name = name
        self.arn = function_arn(name)
        self.timeout_seconds = timeout_seconds
        self.memory_mb = memory_mb
        self._load = load
        self._handler: Handler | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, name: str, handler: Handler, **kwargs: Any) -> LocalFunction:
        return cls(name, lambda: handler, **kwargs)

    @property
    def handler(self) -> Handler:
        # Executions and HTTP requests arrive on many threads; a module must be imported once.
        with self._lock:
            if self._handler is None:
                self._handler = self._load()
            return self._handler

    def new_context(self) -> LambdaContext:
        return LambdaContext(
            function_name=self.name,
            invoked_function_arn=self.arn,
            memory_limit_in_mb=self.memory_mb,
            timeout_seconds=self.timeout_seconds,
        )

    def call(self, event: Any) -> Any:
        """The handler's return value; its exceptions propagate (API Gateway turns them into a 500)."""
        return self.handler(event, self.new_context())

    def invoke(self, event: Any) -> Invocation:
        """Like Lambda's Invoke: a raised exception becomes an "Unhandled" error payload, never propagates."""
        context = self.new_context()
        try:
            result = self.handler(event, context)
        except Exception as exc:
            LOG.exception("%s raised %s", self.name, type(exc).__name__)
            return Invocation(error_payload(exc, context.aws_request_id), function_error="Unhandled")
        try:
            # Lambda returns JSON: a tuple becomes a list, a non-serialisable value is an error.
            return Invocation(json.loads(json.dumps(result)))
        except (TypeError, ValueError) as exc:
            payload = {"errorType": "Runtime.MarshalError", "errorMessage": f"Unable to marshal response: {exc}"}
            return Invocation(payload, function_error="Unhandled")


def error_payload(exc: BaseException, request_id: str = "") -> dict[str, Any]:
    """The payload Lambda's Python runtime reports for an unhandled exception."""
    return {
        "errorType": type(exc).__name__,
        "errorMessage": str(exc),
        "requestId": request_id,
        # From the handler down, as Lambda shows it: the frames of this module are the runtime's.
        "stackTrace": traceback.format_list(
            [frame for frame in traceback.extract_tb(exc.__traceback__) if frame.filename != __file__]
        ),
    }
