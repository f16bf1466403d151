"""The one Logger, Tracer and Metrics trio every function uses (service name from POWERTOOLS_SERVICE_NAME).

The X-Ray SDK builds a botocore client when it is imported (150-300 ms of cold start), and Powertools' Tracer
imports it in its constructor even when tracing is disabled (it resolves its provider first). So the Tracer is
only built where tracing is on; the API functions turn it off (POWERTOOLS_TRACE_DISABLED in template.yaml),
keep the segments Lambda and API Gateway record without the SDK, and get a stand-in whose decorators return
the function unchanged.

`metrics` carries the service's business figures (block outcomes, credits, model tokens, latency, ...) as
CloudWatch embedded metrics: `count` adds one, the handler's `@metrics.log_metrics` flushes them. Dimensions
are closed sets (a block type, a status, a template), never ids: those are trace annotations and log keys.

`logger` and `metrics` are those of the execution environment in charge. On Lambda that is one per process. A
runtime that hosts several environments in one process (the embedded stack) gives each a logger of its own
with `environment_logger` and runs each invocation inside `logger_scope`, so keys one request appends (run id,
Lambda context, correlation id) never reach another's lines, and figures one invocation adds are flushed by
its own handler (Powertools keeps one metric set per process).
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled
from aws_lambda_powertools.metrics.provider.base import BaseProvider
from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import AmazonCloudWatchEMFProvider

from canvas_core.settings import TracingSettings

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

# Where a task's event carries the id of the API request that started its run (see run_canvas.asl.json).
EXECUTION_CORRELATION_ID = "correlation_id"

_process_logger = Logger()
_environment_logger: ContextVar[Logger | None] = ContextVar("canvas_environment_logger", default=None)
_process_metrics = AmazonCloudWatchEMFProvider()
_environment_metrics: ContextVar[AmazonCloudWatchEMFProvider | None] = ContextVar(
    "canvas_environment_metrics", default=None
)


class _CurrentLogger:
    """Stands for the Logger of the environment in charge; every attribute is looked up on it when used."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_environment_logger.get() or _process_logger, name)


class _EnvironmentLogger(Logger):
    """A Logger over a `logging.Logger` of its own (Powertools shares one per service name, with its keys)."""

    def __init__(self, name: str):
        self._environment_name = name
        self.metrics_provider = AmazonCloudWatchEMFProvider()
        super().__init__()

    def _get_logger(self) -> logging.Logger:
        # Outside logging's registry: a name another environment used before starts clean (no handler or keys
        # of the one before), and nothing global is touched while other threads log.
        own = logging.Logger(f"{self.service}@{self._environment_name}")
        own.propagate = False  # its handler writes the line; the root's would repeat it
        return own


def environment_logger(name: str) -> Logger:
    """A Logger for one execution environment, with state (keys, Lambda context, metrics) of its own."""
    return _EnvironmentLogger(name)


@contextmanager
def logger_scope(environment: Logger) -> Iterator[Logger]:
    """Make `logger` (and `metrics`) mean `environment`'s in this thread (and what it starts with its context)
    until exit."""
    token = _environment_logger.set(environment)
    metrics_token = _environment_metrics.set(getattr(environment, "metrics_provider", None))
    try:
        yield environment
    finally:
        _environment_metrics.reset(metrics_token)
        _environment_logger.reset(token)


class _CurrentMetricsProvider:
    """Stands for the metrics provider of the environment in charge; every attribute is looked up on it when
    used, and Powertools' `log_metrics` flushes the one in charge when the handler returns."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_environment_metrics.get() or _process_metrics, name)

    def log_metrics(self, *args: Any, **kwargs: Any) -> Any:
        return BaseProvider.log_metrics(cast(BaseProvider, self), *args, **kwargs)


logger = cast(Logger, _CurrentLogger())
metrics = Metrics(provider=cast(AmazonCloudWatchEMFProvider, _CurrentMetricsProvider()))
# A handler with nothing to count this time (a retried block found done) flushes nothing, which is no fault.
warnings.filterwarnings("ignore", "No application metrics to publish")


def count(name: str, value: float = 1, unit: MetricUnit = MetricUnit.Count, **dimensions: str) -> None:
    """Add a business figure to this invocation's metrics, under `dimensions` (closed sets only)."""
    if is_metrics_disabled() or not metrics.namespace:
        return  # Powertools would keep it and never flush it (disabled), or fail to (no namespace)
    for key, dimension in dimensions.items():
        metrics.add_dimension(name=key, value=dimension)
    metrics.add_metric(name=name, unit=unit, value=value)


class _NoTracer:
    """Stands in for Tracer where tracing is off: its decorators return the function unchanged."""

    def capture_lambda_handler(self, handler: Callable[..., Any] | None = None, **_: Any) -> Callable[..., Any]:
        return handler if handler is not None else (lambda fn: fn)

    def capture_method(self, method: Callable[..., Any] | None = None, **_: Any) -> Callable[..., Any]:
        return method if method is not None else (lambda fn: fn)

    def put_annotation(self, key: str, value: Any) -> None:
        pass


def _tracer() -> Tracer:
    if TracingSettings.from_environ().trace_disabled:
        return cast("Tracer", _NoTracer())
    from aws_lambda_powertools import Tracer

    return Tracer()


tracer = _tracer()

__all__ = [
    "EXECUTION_CORRELATION_ID",
    "MetricUnit",
    "correlation_paths",
    "count",
    "environment_logger",
    "logger",
    "logger_scope",
    "metrics",
    "tracer",
]
