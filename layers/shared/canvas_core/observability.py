"""The one Logger, Tracer and Metrics trio every function uses (service name from POWERTOOLS_SERVICE_NAME).

The X-Ray SDK builds a botocore client when it is imported (150-300 ms of cold start), and Powertools' Tracer
imports it in its constructor even when tracing is disabled (it resolves its provider first). So the Tracer is
only built where tracing is on; the API functions turn it off (POWERTOOLS_TRACE_DISABLED in template.yaml),
keep the segments Lambda and API Gateway record without the SDK, and get a stand-in whose decorators return
the function unchanged.

`metrics` carries the service's business figures (block outcomes, credits, model tokens, latency, ...) as
CloudWatch embedded metrics: `count` adds one, the handler's `@metrics.log_metrics` flushes them. Dimensions
are closed sets (a block type, a status, a template), never ids: those are trace annotations and log keys.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from aws_lambda_powertools import Logger, Metrics
from aws_lambda_powertools.logging import correlation_paths
from aws_lambda_powertools.metrics import MetricUnit
from aws_lambda_powertools.metrics.functions import is_metrics_disabled

from canvas_core.settings import TracingSettings

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

# Where a task's event carries the id of the API request that started its run (see run_canvas.asl.json).
EXECUTION_CORRELATION_ID = "correlation_id"

logger = Logger()
metrics = Metrics()
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
    "logger",
    "metrics",
    "tracer",
]
