"""The one Logger, Tracer and Metrics trio every function uses (service name from POWERTOOLS_SERVICE_NAME).

The X-Ray SDK builds a botocore client when it is imported (~150 ms of cold start), so the Tracer is only
built where tracing is on; the API functions turn it off (POWERTOOLS_TRACE_DISABLED in template.yaml) and
keep the segments Lambda and API Gateway record without the SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics

logger = Logger()
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
