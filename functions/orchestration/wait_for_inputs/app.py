"""Wait For Inputs: park a block's iteration (its task token) until all of its input blocks have ended."""

from typing import Any

from aws_lambda_powertools.utilities.typing import LambdaContext

from canvas_core.dataflow import register_wait
from canvas_core.observability import EXECUTION_CORRELATION_ID, logger, metrics, tracer
from canvas_core.settings import orchestration_settings

orchestration_settings()  # read when the function starts: a bad setting fails it there, not a step


@logger.inject_lambda_context(correlation_id_path=EXECUTION_CORRELATION_ID, clear_state=True)
@tracer.capture_lambda_handler
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return register_wait(event["canvas_id"], event["block_id"], event["task_token"])
