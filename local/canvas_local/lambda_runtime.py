"""What the Lambda service and runtime do around a handler, done in-process: execution environments (each
with the handler's module and the function's environment variables to itself, one invocation at a time, up to a
concurrency per function), a context object, JSON marshalling, the limits Lambda holds an invocation to (the
function's timeout, 6 MB of response) and the error payload (`errorType`, `errorMessage`, `stackTrace`) of an
invocation.

Python cannot stop a thread, so a handler that runs past its timeout runs to its end; what it returned or raised
is then lost, as on Lambda: the caller gets Lambda's timeout error and the environment is discarded."""

from __future__ import annotations

import contextlib
import json
import logging
import math
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from canvas_local import environments as isolated

REGION = "us-east-1"
# moto's default account: every ARN moto mints uses it, so ours do too.
ACCOUNT_ID = "123456789012"

Handler = Callable[[Any, Any], Any]

# Environments per function (Lambda's account default is 1000). As many as the state machine's Map runs blocks
# at once (MaxConcurrency 40), so that a canvas of 40 blocks of one type is never queued behind ten: a block
# spends most of its time waiting on a model, not holding the interpreter. Each environment holds a module.
DEFAULT_CONCURRENCY = 40
# What a synchronous invocation may answer: 6 MB, and the 100 bytes over it Lambda lets through.
MAX_RESPONSE_BYTES = 6 * 1024 * 1024 + 100

LOG = logging.getLogger(__name__)
# Lambda's START/REPORT lines, at DEBUG: one per invocation would drown the service's own log.
REPORT_LOG = logging.getLogger("canvas_local.lambda")

# The function whose environment runs on this thread (its init or an invocation): who makes an AWS call
# (canvas_local.iam_calls). A thread the handler starts sees it if started with the handler's context.
_running_function: ContextVar[str | None] = ContextVar("canvas_local_running_function", default=None)


def running_function() -> str | None:
    """The logical id of the function in charge of this thread, or None outside every function."""
    return _running_function.get()


@contextlib.contextmanager
def _running(function: str) -> Iterator[None]:
    token = _running_function.set(function)
    try:
        yield
    finally:
        _running_function.reset(token)


def isolation(variables: Mapping[str, str] | None) -> isolated.Environment:
    """What an environment keeps to itself besides its module: `variables`, the function's environment (None: the
    process's), and what Powertools keeps once per process (canvas_local.environments)."""
    return isolated.Environment(variables)


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


def _mark_cold_start() -> None:
    """Powertools reports `cold_start` from one flag per process, which a new environment sets again (two
    environments starting in the same instant may swap it; the REPORT line's Init Duration is exact)."""
    try:
        from aws_lambda_powertools.logging import logger as powertools_logger
    except ImportError:
        return
    powertools_logger.is_cold_start = True


class FunctionError(Exception):
    """An invocation Lambda failed itself, whatever the handler did: it ran past the function's timeout, or its
    response cannot be returned. `payload` is what Lambda answers with."""

    def __init__(self, error_type: str, message: str, *, discards_environment: bool):
        super().__init__(message)
        self.payload = {"errorType": error_type, "errorMessage": message}
        self.discards_environment = discards_environment


def timed_out(request_id: str, timeout_seconds: int) -> FunctionError:
    return FunctionError(
        "Sandbox.Timedout",
        f"RequestId: {request_id} Error: Task timed out after {timeout_seconds:.2f} seconds",
        discards_environment=True,
    )


def marshal(result: Any) -> Any:
    """The response as Lambda returns it: JSON (a tuple becomes a list), 6 MB at most. Lambda's runtime exits on a
    response it cannot deliver, which discards the environment."""
    try:
        text = json.dumps(result)
    except (TypeError, ValueError) as exc:
        raise FunctionError(
            "Runtime.MarshalError", f"Unable to marshal response: {exc}", discards_environment=False
        ) from None
    size = len(text.encode())
    if size > MAX_RESPONSE_BYTES:
        raise FunctionError(
            "Function.ResponseSizeTooLarge",
            f"Response payload size ({size} bytes) exceeded maximum allowed payload size ({MAX_RESPONSE_BYTES} bytes).",
            discards_environment=True,
        )
    return json.loads(text)


class Throttled(Exception):
    """Every execution environment of the function stayed busy for as long as the caller would wait: what
    Lambda answers with `TooManyRequestsException` when a function is at its concurrency."""

    def __init__(self, function_name: str, concurrency: int):
        super().__init__(f"Rate exceeded: {function_name} is at its concurrency of {concurrency}")
        self.function_name = function_name


class ExecutionEnvironment:
    """One execution environment: the handler's module imported for it alone (its own resolver, globals and
    logger state), serving one invocation at a time, as Lambda runs one per environment."""

    def __init__(self, function: LocalFunction, index: int):
        self.function = function
        self.index = index
        self.name = f"{function.name}/{index}"
        self.invocations = 0
        self.init_ms: float | None = None
        self._handler: Handler | None = None
        self._own = isolation(function.environment)

    def invoke(self, event: Any, context: LambdaContext) -> Any:
        """Runs the handler; the first invocation pays the init (the module import), as a cold start does.
        FunctionError (Sandbox.Timedout) when the handler ran past the function's timeout."""
        init_ms = None
        with self._own.scope(), _running(self.function.name):
            if self._handler is None:
                started = time.perf_counter()
                self._handler = self.function.load()
                init_ms = self.init_ms = (time.perf_counter() - started) * 1000
                _mark_cold_start()
            self.invocations += 1
            started = time.perf_counter()
            try:
                return self._handler(event, context)
            finally:
                duration_ms = (time.perf_counter() - started) * 1000
                self._report(context, duration_ms, init_ms)
                if duration_ms > self.function.timeout_seconds * 1000:
                    # Lambda would have stopped it at its timeout: what it returned or raised never arrives.
                    raise timed_out(context.aws_request_id, self.function.timeout_seconds)

    def start(self) -> None:
        """The init alone (the module import), in the environment's scope: what a cold start runs first."""
        with self._own.scope(), _running(self.function.name):
            self._handler = self.function.load()

    def _report(self, context: LambdaContext, duration_ms: float, init_ms: float | None) -> None:
        """The REPORT line Lambda writes after each invocation; `Init Duration` marks a cold start."""
        if not REPORT_LOG.isEnabledFor(logging.DEBUG):
            return
        line = (
            f"REPORT RequestId: {context.aws_request_id} Duration: {duration_ms:.2f} ms "
            f"Billed Duration: {max(1, math.ceil(duration_ms))} ms Memory Size: {context.memory_limit_in_mb} MB"
        )
        if init_ms is not None:
            line += f" Init Duration: {init_ms:.2f} ms"
        REPORT_LOG.debug("%s %s", self.name, line)


class LocalFunction:
    """One function run in this process as Lambda runs it: a pool of execution environments created on
    demand up to `concurrency`, each serving one invocation at a time; an idle one is reused (a warm start)
    before another is created (a cold start). `environment` holds the function's variables, which its settings are
    read from (None: the process's environment)."""

    def __init__(
        self,
        name: str,
        load: Callable[[], Handler],
        timeout_seconds: int = 3,
        memory_mb: int = 128,
        concurrency: int = DEFAULT_CONCURRENCY,
        environment: Mapping[str, str] | None = None,
    ):
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.name = name
        self.arn = function_arn(name)
        self.timeout_seconds = timeout_seconds
        self.memory_mb = memory_mb
        self.concurrency = concurrency
        self.environment = None if environment is None else dict(environment)
        self.load = load
        # Errors a state machine's Catch names for this function: a branch of the workflow, logged at INFO.
        self.caught_by_name: frozenset[str] = frozenset()
        self.cold_starts = 0
        self._idle: list[ExecutionEnvironment] = []
        self._size = 0
        self._indexes: set[int] = set()
        self._closed = False
        self._changed = threading.Condition()

    @classmethod
    def of(cls, name: str, handler: Handler, **kwargs: Any) -> LocalFunction:
        return cls(name, lambda: handler, **kwargs)

    @property
    def environments(self) -> int:
        """How many execution environments exist (busy or idle)."""
        with self._changed:
            return self._size

    def new_context(self) -> LambdaContext:
        return LambdaContext(
            function_name=self.name,
            invoked_function_arn=self.arn,
            memory_limit_in_mb=self.memory_mb,
            timeout_seconds=self.timeout_seconds,
        )

    def call(self, event: Any, wait: float | None = None) -> Any:
        """The handler's return value, as JSON; its exceptions propagate (API Gateway turns them into a 500), and
        FunctionError when Lambda fails the invocation itself (a timeout, a response too large).
        Throttled when no environment is free within `wait` seconds (None waits as long as it takes)."""
        environment = self._acquire(wait)
        healthy = False
        try:
            result = marshal(environment.invoke(event, self.new_context()))
            healthy = True
            return result
        except FunctionError as exc:
            healthy = not exc.discards_environment
            raise
        except Exception:
            # An environment whose init failed is discarded, as Lambda does; one whose handler raised is kept.
            healthy = environment.init_ms is not None
            raise
        finally:
            self._release(environment, healthy)

    def invoke(self, event: Any, wait: float | None = None) -> Invocation:
        """Like Lambda's Invoke: a raised exception becomes an "Unhandled" error payload, never propagates."""
        environment = self._acquire(wait)
        context = self.new_context()
        healthy = True
        try:
            result = marshal(environment.invoke(event, context))
        except FunctionError as exc:
            healthy = not exc.discards_environment
            LOG.error("%s: %s", self.name, exc)
            return Invocation(exc.payload, function_error="Unhandled")
        except Exception as exc:
            healthy = environment.init_ms is not None
            if type(exc).__name__ in self.caught_by_name:
                LOG.info("%s ended with %s, which its state machine catches by name", self.name, type(exc).__name__)
            else:
                LOG.exception("%s raised %s", self.name, type(exc).__name__)
            return Invocation(error_payload(exc, context.aws_request_id), function_error="Unhandled")
        finally:
            self._release(environment, healthy)
        return Invocation(result)

    def check_start(self) -> None:
        """Starts an environment apart from the pool, then drops it: a function that cannot start (a setting its
        environment lacks or holds badly) raises here, before any invocation, what its cold start would raise."""
        ExecutionEnvironment(self, 0).start()

    def close(self) -> None:
        """No new invocations: callers waiting for an environment are throttled, idle environments dropped."""
        with self._changed:
            self._closed = True
            self._size -= len(self._idle)
            self._idle.clear()
            self._changed.notify_all()

    def _acquire(self, wait: float | None) -> ExecutionEnvironment:
        deadline = None if wait is None else time.monotonic() + wait
        with self._changed:
            while not self._closed:
                if self._idle:
                    return self._idle.pop()  # the most recently used: the warmest
                if self._size < self.concurrency:
                    self._size += 1
                    self.cold_starts += 1
                    index = self._free_index()
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise Throttled(self.name, self.concurrency)
                self._changed.wait(remaining)
            else:
                raise Throttled(self.name, self.concurrency)
        try:
            return ExecutionEnvironment(self, index)
        except BaseException:
            with self._changed:  # give the place back, or the function would stay throttled
                self._size -= 1
                self._indexes.discard(index)
                self._changed.notify()
            raise

    def _release(self, environment: ExecutionEnvironment, healthy: bool) -> None:
        with self._changed:
            if healthy and not self._closed:
                self._idle.append(environment)
            else:
                self._size -= 1
                self._indexes.discard(environment.index)
            self._changed.notify()

    def _free_index(self) -> int:
        # Indexes are reused, so an environment's logger name is one of at most `concurrency` per function.
        index = next(i for i in range(1, self.concurrency + 2) if i not in self._indexes)
        self._indexes.add(index)
        return index


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
