"""Fail Run: end a run whose execution broke (state machine Catch, or the EventBridge rule on executions that
failed, timed out or were aborted), keeping whatever its blocks finished."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.observability import correlation_paths, logger, metrics, tracer
from canvas_core.orchestration import fail_run
from canvas_core.settings import orchestration_settings

orchestration_settings()  # read when the function starts: a bad setting fails it there, not a step


@logger.inject_lambda_context(correlation_id_path=correlation_paths.EVENT_BRIDGE, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return fail_run(event)
