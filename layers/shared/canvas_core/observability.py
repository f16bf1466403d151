"""The one Logger, Tracer and Metrics trio every function uses (service name from POWERTOOLS_SERVICE_NAME).

The X-Ray SDK builds a botocore client when it is imported (~150 ms of cold start), so the Tracer is only
built where tracing is on; the API functions turn it off (POWERTOOLS_TRACE_DISABLED in template.yaml) and
keep the segments Lambda and API Gateway record without the SDK.

`logger` is the logger of the execution environment in charge. On Lambda that is one per process. A runtime
that hosts several environments in one process (the embedded stack) gives each a logger of its own with
`environment_logger` and runs each invocation inside `logger_scope`, so keys one request appends (run id,
Lambda context, correlation id) never reach another's lines.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths

# Where a task's event carries the id of the API request that started its run (see run_canvas.asl.json).
EXECUTION_CORRELATION_ID = "correlation_id"

_process_logger = Logger()
_environment_logger: ContextVar[Logger | None] = ContextVar("canvas_environment_logger", default=None)


class _CurrentLogger:
    """Stands for the Logger of the environment in charge; every attribute is looked up on it when used."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_environment_logger.get() or _process_logger, name)


class _EnvironmentLogger(Logger):
    """A Logger over a `logging.Logger` of its own (Powertools shares one per service name, with its keys)."""

    def __init__(self, name: str):
        self._environment_name = name
        super().__init__()

    def _get_logger(self) -> logging.Logger:
        # Outside logging's registry: a name another environment used before starts clean (no handler or keys
        # of the one before), and nothing global is touched while other threads log.
        own = logging.Logger(f"{self.service}@{self._environment_name}")
        own.propagate = False  # its handler writes the line; the root's would repeat it
        return own


def environment_logger(name: str) -> Logger:
    """A Logger for one execution environment, with state (keys, Lambda context) of its own."""
    return _EnvironmentLogger(name)


@contextmanager
def logger_scope(environment: Logger) -> Iterator[Logger]:
    """Make `logger` mean `environment` in this thread (and what it starts with its context) until exit."""
    token = _environment_logger.set(environment)
    try:
        yield environment
    finally:
        _environment_logger.reset(token)


logger = cast(Logger, _CurrentLogger())
metrics = Metrics()


class _NoTracer:
    """Stands in for Tracer where tracing is off: its decorators return the function unchanged."""

    def capture_lambda_handler(self, handler: Callable | None = None, **_: Any) -> Callable:
        return handler if handler is not None else (lambda fn: fn)

    def capture_method(self, method: Callable | None = None, **_: Any) -> Callable:
        return method if method is not None else (lambda fn: fn)

    def put_annotation(self, key: str, value: Any) -> None:
        pass


def _tracer() -> Any:
    if os.environ.get("POWERTOOLS_TRACE_DISABLED", "").lower() in ("1", "true"):
        return _NoTracer()
    from aws_lambda_powertools import Tracer

    return Tracer()


tracer = _tracer()

__all__ = [
    "EXECUTION_CORRELATION_ID",
    "correlation_paths",
    "environment_logger",
    "logger",
    "logger_scope",
    "metrics",
    "tracer",
]
