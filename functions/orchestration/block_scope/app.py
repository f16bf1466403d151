"""Scope Block, before each block: vend the block credentials that reach only its own run (and, after a block's
ReservationShortError, top its run's reservation up first): canvas_core/isolation.py."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.isolation import ScopeRequest, scope_block
from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer
from canvas_core.settings import orchestration_settings, scope_settings

orchestration_settings()  # read when the function starts: a bad setting fails it there, not a step
scope_settings()


@logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return scope_block(ScopeRequest.model_validate(event)).model_dump()
